// `mcullm cluster --topology ring`: the boards' master and node logic (board/master.h, board/node.h,
// the code the firmware runs) in PC processes wired as the boards are, master -> node 1 -> node 2 ->
// node 3 -> master, over TCP on 127.0.0.1 (`mcullm node --ring`, board/transport_spi_link_host.h).
// The tokens and fingerprint equal `mcullm run`'s (f32 hidden states), also after a ring node is
// killed mid-story (the master rebuilds the ring and replays the story), and bad flags are clear errors.
// No clock is read: the timeouts only guard against a hang.
#include <gtest/gtest.h>

#include <algorithm>

#include "cluster/transport_host.h"
#include "cluster_process.h"
#include "test_support.h"

namespace mcullm {
namespace {

constexpr int kWaitMs = 240000;  // a hang fails the test instead of blocking ctest

std::string fingerprint_line(const std::string& out) {
  const size_t at = out.find("fingerprint ");
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

// Runs `mcullm args...` in the background (nothing forks from a test thread) and waits.
test::CommandResult in_background(const std::vector<std::string>& args) {
  test::CliProcess p;
  test::CommandResult r;
  if (!p.start(args, test::temp_dir(), "ring")) return r;
  r.exit_code = p.wait(kWaitMs);
  r.out = p.out();
  r.err = p.err();
  return r;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class ClusterRing : public ::testing::Test {
 protected:
  void SetUp() override {
    MC_REQUIRE_SHARED();
    gen_ = {"-m", test::shared_path("models/stories260K/stories260K.bin"), "-z", test::shared_path("models/stories260K/tok512.bin"),
            "-p", "Once upon a time", "-n", "40", "--temp", "1", "--seed", "5", "--fingerprint", "-q"};
    const auto r = test::run_cli(with({"run"}, gen_));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    want_ = fingerprint_line(r.out);
    ASSERT_FALSE(want_.empty()) << r.out;
  }
  test::CommandResult ring(const std::vector<std::string>& extra) {
    return in_background(with(with({"cluster"}, gen_), with({"--topology", "ring"}, extra)));
  }
  std::vector<std::string> gen_;
  std::string want_;
};

TEST_F(ClusterRing, ThreeRingNodesGiveTheFingerprintOfOneProcess) {
  const auto r = ring({"--local", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), want_) << r.err;
  EXPECT_NE(r.err.find("plan: ring master -> node 1 (layers 0:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node 3 (layers "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("error:"), std::string::npos) << r.err;
  // stories260K's 5 layers cut evenly: 2, 2, 1 (as the in-process ring of tests/board_hal_test.cpp).
  const auto even = ring({"--local", "3", "--split", "even"});
  ASSERT_EQ(even.exit_code, 0) << even.err;
  EXPECT_EQ(fingerprint_line(even.out), want_) << even.err;
  EXPECT_NE(even.err.find("node 1 (layers 0:2) -> node 2 (layers 2:4) -> node 3 (layers 4:5) -> master"), std::string::npos) << even.err;
}

TEST_F(ClusterRing, Qwen2ThroughARingOfThreeGivesTheFingerprintOfOneProcess) {
  const std::string q = test::temp_dir() + "/qwen2-tiny.gguf";
  auto r = test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", q});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> gen = {"-m", q, "--prompt-ids", "1,5,6", "-n", "20", "--temp", "1", "--seed", "3", "--fingerprint", "-q"};
  r = test::run_cli(with({"run"}, gen));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = fingerprint_line(r.out);
  ASSERT_FALSE(want.empty()) << r.out;
  r = in_background(with(with({"cluster"}, gen), {"--topology", "ring", "--local", "3"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), want) << r.err;
}

// int8 hidden states on the ring's hops (the board codec) are rounded exactly as the star and
// `--simulate` round them at each range boundary: the same fingerprint, not the f32 one.
TEST_F(ClusterRing, Int8HiddenStatesOnTheRingEqualTheSimulatedRounding) {
  const auto sim = in_background(with(with({"cluster"}, gen_), {"--simulate", "--local", "3", "--hidden", "int8"}));
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const std::string want = fingerprint_line(sim.out);
  ASSERT_FALSE(want.empty()) << sim.out;
  EXPECT_NE(want, want_);
  const auto r = ring({"--local", "3", "--hidden", "int8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), want) << r.err;
}

// kill -9 of node 2 after 15 hidden states: the ring breaks; the master says so, starts a new ring,
// replays the story's positions into it and goes on: the fingerprint of an unbroken run.
TEST_F(ClusterRing, KilledRingNodeIsReplacedAndTheStoryContinuesUnchanged) {
  const auto r = ring({"--local", "3", "--node-fault", "2:kill:15"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), want_) << r.err;
  EXPECT_NE(r.err.find("the ring is broken at position"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("local node 2 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the ring was rebuilt (3 nodes)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ring rebuild(s)"), std::string::npos) << r.err;
}

// A bit flipped on the wire between two ring nodes: node 2 gets a corrupt frame and sends an error
// frame on round the ring; the master sends that hidden state again. Nothing is lost, no rebuild.
TEST_F(ClusterRing, FlippedBitOnARingLinkIsSentAgain) {
  const auto r = ring({"--local", "3", "--node-fault", "1:flip:10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), want_) << r.err;
  EXPECT_EQ(r.err.find("the ring is broken"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hidden state(s) sent again after a corrupt frame"), std::string::npos) << r.err;
}

// SIGSTOP of node 3: the ring goes silent (no link closes); after --timeout-ms the master gives up on
// it, stops the old ring's processes and builds a new one. The timeout is no clock assertion: a
// slow machine can only cause an extra rebuild, which gives the same output.
TEST_F(ClusterRing, StoppedRingNodeIsFoundBySilenceAndReplaced) {
  const auto r = ring({"--local", "3", "--node-fault", "3:stop:12", "--timeout-ms", "2000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), want_) << r.err;
  EXPECT_NE(r.err.find("did not answer within 2000 ms"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("local node 3 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stopped by signal 19"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the ring was rebuilt (3 nodes)"), std::string::npos) << r.err;
}

// --streams 3: three stories in flight through the ring at once (each node keeps a cache slot per
// stream), each with the fingerprint of `mcullm run` with its seed (5, 6, 7); also when node 2 is
// killed mid-story (every stream replays its story into the new ring) and when a bit flips on a
// hop (the node cannot tell whose frame it was: every stream waiting sends its hidden state again).
TEST_F(ClusterRing, ThreeStreamsThroughTheRingEachGiveTheFingerprintOfItsSeed) {
  std::vector<std::string> want;
  for (const char* seed : {"5", "6", "7"}) {
    std::vector<std::string> g = gen_;
    g[std::find(g.begin(), g.end(), "--seed") - g.begin() + 1] = seed;
    const auto r = test::run_cli(with({"run"}, g));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    want.push_back(fingerprint_line(r.out));
  }
  EXPECT_EQ(want[0], want_);
  for (const std::vector<std::string>& fault :
       {std::vector<std::string>{}, {"--node-fault", "2:kill:15"}, {"--node-fault", "1:flip:10"}}) {
    const auto r = ring(with({"--local", "3", "--streams", "3"}, fault));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (int i = 0; i < 3; ++i) {
      const std::string tag = "stream " + std::to_string(i) + " ";
      const size_t at = r.out.find(tag + "fingerprint ");
      ASSERT_NE(at, std::string::npos) << r.out;
      EXPECT_EQ(fingerprint_line(r.out.substr(at)), want[static_cast<size_t>(i)]) << (fault.empty() ? "" : fault[1]) << "\n" << r.err;
    }
    if (!fault.empty() && fault[1] == "2:kill:15") {
      EXPECT_NE(r.err.find("the ring was rebuilt (3 nodes)"), std::string::npos) << r.err;
    }
    if (!fault.empty() && fault[1] == "1:flip:10") {
      EXPECT_NE(r.err.find("sent again after a corrupt frame"), std::string::npos) << r.err;
    }
  }
}

// Ring nodes started by hand (--nodes, in ring order; the last one's --next is the master's --listen).
TEST_F(ClusterRing, RingNodesStartedByHandGiveTheFingerprintOfOneProcess) {
  int master_port = 0;
  {  // a free port for the master's --listen (the last node must know it when it starts)
    std::unique_ptr<cluster::TcpListener> l;
    ASSERT_TRUE(cluster::tcp_listen("127.0.0.1", 0, &l).ok());
    master_port = l->port();
  }
  const std::string dir = test::temp_dir();
  test::CliProcess nodes[3];
  std::string next = "127.0.0.1:" + std::to_string(master_port);
  for (int i = 2; i >= 0; --i) {
    ASSERT_TRUE(nodes[i].start({"node", "--ring", "-m", gen_[1], "--listen", "127.0.0.1:0", "--next", next}, dir, "node" + std::to_string(i)));
    const int port = nodes[i].port(kWaitMs);
    ASSERT_GT(port, 0) << nodes[i].err();
    next = "127.0.0.1:" + std::to_string(port);
  }
  const auto r = in_background(with(with({"cluster"}, gen_), {"--topology", "ring", "--nodes", next + ",h2:1,h3:1", "--listen",
                                                              "127.0.0.1:" + std::to_string(master_port)}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), want_) << r.err;
  for (test::CliProcess& n : nodes) EXPECT_EQ(n.wait(kWaitMs), 0) << n.err();  // each leaves when the ring closes
}

TEST_F(ClusterRing, BadFlagsAreClearErrors) {
  auto r = test::run_cli(with(with({"cluster"}, gen_), {"--topology", "foo", "--local", "3"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--topology"), std::string::npos) << r.err;
  r = test::run_cli(with(with({"cluster"}, gen_), {"--topology", "ring", "--local", "3", "--streams", "9"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--topology ring does not take more than 8 --streams"), std::string::npos) << r.err;
  r = test::run_cli(with(with({"cluster"}, gen_), {"--topology", "ring", "--nodes", "127.0.0.1:1"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give --listen HOST:PORT"), std::string::npos) << r.err;
  r = test::run_cli(with(with({"cluster"}, gen_), {"--local", "3", "--listen", "127.0.0.1:0"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--listen is for --topology ring"), std::string::npos) << r.err;
  const std::string model = gen_[1];
  r = test::run_cli({"node", "-m", model, "--ring", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ring needs --listen HOST:PORT"), std::string::npos) << r.err;
  r = test::run_cli({"node", "-m", model, "--ring", "--listen", "127.0.0.1:0", "--next", "nowhere"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--next: 'nowhere' is not HOST:PORT"), std::string::npos) << r.err;
  r = test::run_cli({"node", "-m", model, "--ring", "--listen", "127.0.0.1:0", "--next", "127.0.0.1:1", "--layers", "0:2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("leave out --layers"), std::string::npos) << r.err;
  r = test::run_cli({"node", "-m", model, "--layers", "0:2", "--listen", "127.0.0.1:0", "--next", "127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--next is for a ring node"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mcullm
