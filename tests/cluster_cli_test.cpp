// `mcullm cluster` and `mcullm node` as processes: 6 nodes + the master on localhost give the
// tokens and fingerprint of `mcullm run`; the same over rate-limited pseudo-terminals and across
// network namespaces (where the machine allows it); a node killed with SIGKILL, stopped, sending a
// flipped bit, or restarted with another slice ends in a recovered identical output or a clear
// error, never a hang.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "cluster_process.h"
#include "plan/board_profile_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

constexpr int kWaitMs = 60000;  // a hang fails the test instead of blocking ctest

class ClusterCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir());
    model_ = new std::string(*dir_ + "/dummy12.gguf");
    other_ = new std::string(*dir_ + "/other12.gguf");
    for (const auto& [path, seed] : {std::pair{*model_, "1234"}, std::pair{*other_, "99"}}) {
      const auto r = test::run_cli({"dummy", "-o", path, "--layers", "12", "--dim", "64", "--heads", "4", "--kv-heads", "2",
                                    "--hidden", "128", "--seq-len", "128", "--seed", seed});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    const auto r = test::run_cli({"run", "-m", *model_, "-p", "the big dog", "-n", "30", "--temp", "1", "--seed", "5", "--fingerprint", "-q"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    want_ = new std::string(fingerprint_line(r.out));
    ASSERT_FALSE(want_->empty()) << r.out;
  }
  // An ASSERT in SetUpTestSuite only ends the set-up: each test stops here instead of reading the
  // null fixture.
  void SetUp() override { ASSERT_NE(want_, nullptr) << "the suite's set-up failed (see its failure above)"; }
  static std::string fingerprint_line(const std::string& out) {
    const size_t at = out.find("fingerprint ");
    if (at == std::string::npos) return "";
    return out.substr(at, out.find('\n', at) - at);
  }
  static std::vector<std::string> gen_args() {
    return {"cluster", "-m", *model_, "-p", "the big dog", "-n", "30", "--temp", "1", "--seed", "5", "--fingerprint", "-q"};
  }
  // Runs the master in the background (so that nothing forks from a test thread) and waits.
  static test::CommandResult master(std::vector<std::string> extra) {
    std::vector<std::string> args = gen_args();
    args.insert(args.end(), extra.begin(), extra.end());
    test::CliProcess p;
    test::CommandResult r;
    if (!p.start(args, test::temp_dir(), "master")) return r;
    r.exit_code = p.wait(kWaitMs);
    r.out = p.out();
    r.err = p.err();
    return r;
  }
  static inline std::string* dir_ = nullptr;
  static inline std::string* model_ = nullptr;
  static inline std::string* other_ = nullptr;
  static inline std::string* want_ = nullptr;
};

TEST_F(ClusterCli, SixLocalNodesAndTheMasterMatchOneProcess) {
  const auto r = master({"--local", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), *want_) << r.err;
  EXPECT_NE(r.err.find("node 6"), std::string::npos) << r.err;
  // A clean run: the nodes, stopped at the end, print no error (issue 15).
  EXPECT_EQ(r.err.find("error:"), std::string::npos) << r.err;
}

TEST_F(ClusterCli, Qwen2ThroughSixNodesMatchesOneProcess) {
  const std::string q = *dir_ + "/qwen2-small.gguf";
  auto r = test::run_cli({"dummy", "--arch", "qwen2", "--layout", "small", "-o", q});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_cli({"run", "-m", q, "--prompt-ids", "1,5,6", "-n", "20", "--temp", "1", "--seed", "3", "--fingerprint", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = fingerprint_line(r.out);
  test::CliProcess p;
  ASSERT_TRUE(p.start({"cluster", "-m", q, "--prompt-ids", "1,5,6", "-n", "20", "--temp", "1", "--seed", "3", "--fingerprint",
                       "-q", "--local", "6", "--hidden", "f32"},
                      test::temp_dir(), "master"));
  ASSERT_EQ(p.wait(kWaitMs), 0) << p.err();
  EXPECT_EQ(fingerprint_line(p.out()), want) << p.err();
  // A qwen2 node reads its range alone from the file: after a kill the others reload wider ranges.
  test::CliProcess k;
  ASSERT_TRUE(k.start({"cluster", "-m", q, "--prompt-ids", "1,5,6", "-n", "20", "--temp", "1", "--seed", "3", "--fingerprint",
                       "-q", "--local", "6", "--node-fault", "2:kill:7"},
                      test::temp_dir(), "master"));
  ASSERT_EQ(k.wait(kWaitMs), 0) << k.err();
  EXPECT_EQ(fingerprint_line(k.out()), want) << k.err();
  EXPECT_NE(k.err().find("re-planning the layers onto 5 nodes"), std::string::npos) << k.err();
}

// --split plan (the default) runs the partition planner's cuts, the ones `mcullm plan --cluster 5`
// prints for the board (uneven here: 2, 2, 2, 3, 3 layers, where an even split gives 3, 3, 2, 2, 2);
// both give `mcullm run`'s fingerprint.
TEST_F(ClusterCli, PlannersUnevenSplitGivesTheFingerprintOfOneProcess) {
  const auto planned = test::run_cli({"plan", "--cluster", "5", "-m", *model_});
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  std::vector<std::string> ranges;  // "[a,b)" rows of the planner's table -> "layers a:b"
  for (size_t at = planned.out.find("\nnode"); at != std::string::npos; at = planned.out.find("\nnode", at + 1)) {
    const size_t open = planned.out.find('[', at), comma = planned.out.find(',', open), close = planned.out.find(')', comma);
    ranges.push_back("layers " + planned.out.substr(open + 1, comma - open - 1) + ":" + planned.out.substr(comma + 1, close - comma - 1));
  }
  ASSERT_EQ(ranges.size(), 5u) << planned.out;
  const auto r = master({"--local", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), *want_) << r.err;
  const size_t plan_line = r.err.find("mcullm cluster: plan: ");
  ASSERT_NE(plan_line, std::string::npos) << r.err;
  const std::string line = r.err.substr(plan_line, r.err.find('\n', plan_line) - plan_line);
  for (const std::string& want : ranges) EXPECT_NE(line.find(want + ")"), std::string::npos) << want << " in " << line;
  const auto even = master({"--local", "5", "--split", "even"});
  ASSERT_EQ(even.exit_code, 0) << even.err;
  EXPECT_EQ(fingerprint_line(even.out), *want_) << even.err;
  EXPECT_NE(even.err.find("layers 0:3)"), std::string::npos) << even.err;
  // The planner weighs the stages (the master's, the links', the bounds): here not the even split.
  bool all_even = true;
  for (const std::string& want : ranges) all_even = all_even && even.err.find(want + ")") != std::string::npos;
  EXPECT_FALSE(all_even) << "the planner's split is the even one: " << line;
  // A board too small for the model (flash for one layer a node): with --split plan an error, by
  // default an even split with a note.
  BoardProfile small;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &small).ok());
  small.name = "one-layer-flash";
  small.tiers[2].capacity_bytes = 200000;
  const std::string board = *dir_ + "/one-layer-flash.json";
  const std::string json = board_profile_to_json(small);
  test::write_file(board, std::vector<uint8_t>(json.begin(), json.end()));
  const auto refused = master({"--local", "5", "--split", "plan", "--board", board});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("--split plan: 5 nodes on one-layer-flash"), std::string::npos) << refused.err;
  EXPECT_EQ(fingerprint_line(refused.out), "");
  const auto fallback = master({"--local", "5", "--board", board});
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_EQ(fingerprint_line(fallback.out), *want_) << fallback.err;
  EXPECT_NE(fallback.err.find("splitting evenly"), std::string::npos) << fallback.err;
  EXPECT_NE(fallback.err.find("layers 0:3)"), std::string::npos) << fallback.err;
}

TEST_F(ClusterCli, RateLimitedPseudoTerminalLinksMatchOneProcess) {
  // 64 f32 values + 44 bytes of frame and chunk head per hop at 4 Mbit/s: ~0.6 ms a hop.
  const auto r = master({"--local", "6", "--link", "pty", "--rate", "4000000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), *want_) << r.err;
}

TEST_F(ClusterCli, SimulateWithF32IsOneProcessAndInt8DiffersButAgreesWithTheCluster) {
  auto sim = master({"--simulate"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(fingerprint_line(sim.out), *want_);
  sim = master({"--simulate", "--local", "3", "--hidden", "int8"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto real = master({"--local", "3", "--hidden", "int8"});
  ASSERT_EQ(real.exit_code, 0) << real.err;
  EXPECT_EQ(fingerprint_line(real.out), fingerprint_line(sim.out));
  EXPECT_NE(fingerprint_line(real.out), *want_);
}

TEST_F(ClusterCli, ThreeStreamsEachMatchTheirOwnRun) {
  const auto r = master({"--local", "3", "--streams", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 3; ++i) {
    const auto one = test::run_cli({"run", "-m", *model_, "-p", "the big dog", "-n", "30", "--temp", "1", "--seed",
                                    std::to_string(5 + i), "--fingerprint", "-q"});
    ASSERT_EQ(one.exit_code, 0);
    EXPECT_NE(r.out.find("stream " + std::to_string(i) + " " + fingerprint_line(one.out)), std::string::npos) << r.out;
  }
}

// A node failing mid-generation (after 10 hidden states): the master names it and why, re-plans
// onto the other five, and the output is the same.
TEST_F(ClusterCli, NodeKilledMidGenerationIsReplannedAround) {
  const auto r = master({"--local", "6", "--node-fault", "3:kill:10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), *want_) << r.err;
  EXPECT_NE(r.err.find("node 3 ("), std::string::npos) << r.err;
  // The kill is seen on whichever side of the link the master touches first: a read ("link closed")
  // or, when it was sending, the socket's reset ("cannot send: ...").
  EXPECT_TRUE(r.err.find("link closed") != std::string::npos || r.err.find("cannot send") != std::string::npos) << r.err;
  EXPECT_NE(r.err.find("re-planning the layers onto 5 nodes"), std::string::npos) << r.err;
}

TEST_F(ClusterCli, KillWithThreeStreamsInFlightReplaysEveryStream) {
  const auto clean = master({"--local", "4", "--streams", "3"});
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const auto r = master({"--local", "4", "--streams", "3", "--node-fault", "2:kill:20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, clean.out) << r.err;  // the three streams' fingerprints
  EXPECT_NE(r.err.find("re-planning the layers onto 3 nodes"), std::string::npos) << r.err;
}

TEST_F(ClusterCli, StoppedNodeTimesOutAndIsReplannedAround) {
  // --timeout-ms is a generous hang guard (a loaded machine under ASan must not trip it for a healthy
  // node sending heartbeats every 50 ms); the stopped node is found after it.
  const auto r = master({"--local", "6", "--node-fault", "2:stop:10", "--timeout-ms", "5000", "--heartbeat-ms", "50"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), *want_) << r.err;
  EXPECT_NE(r.err.find("node 2 ("), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("did not answer") != std::string::npos || r.err.find("no heartbeat") != std::string::npos) << r.err;
}

TEST_F(ClusterCli, FlippedBitIsDetectedAndReplannedAround) {
  const auto r = master({"--local", "6", "--node-fault", "5:flip:10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), *want_) << r.err;
  EXPECT_NE(r.err.find("node 5 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("corrupt"), std::string::npos) << r.err;
  // The generation succeeded: the surviving nodes, whose master left, print no error (issue 15).
  EXPECT_EQ(r.err.find("mcullm: error:"), std::string::npos) << r.err;
}

TEST_F(ClusterCli, NoRoomLeftEndsInAClearError) {
  const auto r = master({"--local", "6", "--max-layers", "2", "--node-fault", "4:kill:10"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(fingerprint_line(r.out), "") << "no output from a failed generation";
  EXPECT_NE(r.err.find("node 4 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("do not fit"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("tokens/s"), std::string::npos) << "no speed for a failed generation: " << r.err;
  EXPECT_NE(r.err.find("1 of 1 stream failed"), std::string::npos) << r.err;
}

// Nodes the test starts itself (--nodes): node 2 dies after 5 hidden states and comes back on its
// port, with the same model (admitted again: same output) or another (refused: a clear error).
void restart_scenario(const std::string& model, const std::string& restart_model, const std::string& dir,
                      test::CommandResult* r) {
  std::vector<std::unique_ptr<test::CliProcess>> nodes;
  std::string list;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<test::CliProcess>());
    std::vector<std::string> args = {"node", "-m", model, "--layers", std::to_string(4 * i) + ":" + std::to_string(4 * i + 4),
                                     "--listen", "127.0.0.1:0", "--max-layers", "4"};
    if (i == 1) args.insert(args.end(), {"--fault", "kill", "--fault-after", "5"});
    ASSERT_TRUE(nodes.back()->start(args, dir, "node" + std::to_string(i)));
    const int port = nodes.back()->port(kWaitMs);
    ASSERT_GT(port, 0) << nodes.back()->err();
    list += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(port);
  }
  const std::string port2 = list.substr(list.find(',') + 1, list.rfind(',') - list.find(',') - 1);
  test::CliProcess m;
  std::vector<std::string> args = {"cluster", "-m", model, "-p", "the big dog", "-n", "30", "--temp", "1", "--seed", "5",
                                   "--fingerprint", "-q", "--nodes", list, "--max-layers", "4", "--rejoin-ms", "20000"};
  ASSERT_TRUE(m.start(args, dir, "master"));
  EXPECT_EQ(nodes[1]->wait(kWaitMs), 128 + SIGKILL);
  test::CliProcess again;
  ASSERT_TRUE(again.start({"node", "-m", restart_model, "--layers", "4:8", "--listen", port2}, dir, "node1b"));
  r->exit_code = m.wait(kWaitMs);
  r->out = m.out();
  r->err = m.err();
}

TEST_F(ClusterCli, NodeRestartedWithTheSameSliceIsAdmittedAgain) {
  test::CommandResult r;
  restart_scenario(*model_, *model_, test::temp_dir(), &r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fingerprint_line(r.out), *want_) << r.err;
  EXPECT_NE(r.err.find("admitted again"), std::string::npos) << r.err;
}

TEST_F(ClusterCli, NodeRestartedWithAnotherSliceIsRefused) {
  test::CommandResult r;
  std::string dir = test::temp_dir();
  // --rejoin-ms bounds the wait: refused, the master gives up with the reasons.
  restart_scenario(*model_, *other_, dir, &r);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(fingerprint_line(r.out), "");
  EXPECT_NE(r.err.find("node 2 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
}

TEST_F(ClusterCli, BenchPrintsOneProcessAndEachStreamCount) {
  const auto r = master({"--local", "2", "--streams", "2", "--bench", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"one process", "cluster, 1 stream ", "cluster, 2 streams", "medians of 1 rounds"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  const auto bad = master({"--simulate", "--bench", "1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--bench needs nodes"), std::string::npos) << bad.err;
}

TEST_F(ClusterCli, BadArgumentsAreClearErrors) {
  auto r = test::run_cli({"cluster", "-m", *model_, "--prompt-ids", "1,2", "-n", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--local"), std::string::npos) << r.err;
  r = test::run_cli({"cluster", "-m", *model_, "--prompt-ids", "1,2", "--nodes", "nohost"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("HOST:PORT"), std::string::npos) << r.err;
  r = test::run_cli({"cluster", "-m", *model_, "--prompt-ids", "1,2", "--nodes", "127.0.0.1:1", "--timeout-ms", "200"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("node 1"), std::string::npos) << r.err;
  r = test::run_cli({"cluster", "-m", *model_, "--prompt-ids", "1,99999", "--local", "2"});
  EXPECT_EQ(r.exit_code, 2);
  r = test::run_cli({"node", "-m", *model_, "--layers", "5:3", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("layer range"), std::string::npos) << r.err;
  r = test::run_cli({"node", "-m", *model_, "--layers", "0:13", "--listen", "127.0.0.1:0"});
  EXPECT_NE(r.exit_code, 0);
  r = test::run_cli({"node", "-m", *model_, "--layers", "0:4"});
  EXPECT_EQ(r.exit_code, 2);
}


// The firmware's model partition (firmware/esp32s3/partitions.csv, the "model" row's size): what a
// board image must fit.
uint64_t model_partition_bytes() {
  const std::vector<uint8_t> csv = test::read_file(std::string(MCULLM_SOURCE_DIR) + "/firmware/esp32s3/partitions.csv");
  std::istringstream in(std::string(csv.begin(), csv.end()));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model,", 0) != 0) continue;
    std::istringstream fields(line);  // Name, Type, SubType, Offset, Size, Flags
    std::string field;
    for (int i = 0; i < 5; ++i) std::getline(fields, field, ',');  // the fifth: Size
    return std::strtoull(field.c_str(), nullptr, 0);
  }
  return 0;
}

// The cluster's model (models/tinystories-qwen2-ternary.gguf, `make train-qwen2`: 12 ternary Qwen2
// layers trained by train/): a story written on 6 local nodes, star and ring, is `mcullm run`'s, token
// for token (same text, same fingerprint); its per-node board images, cut by the planner, each fit the
// firmware's model partition.
TEST(ClusterTrainedQwen2, WritesRunsStoryOnSixNodesStarAndRingAndItsImagesFitTheBoards) {
  const std::string model = std::string(MCULLM_SOURCE_DIR) + "/models/tinystories-qwen2-ternary.gguf";
  const std::vector<std::string> gen = {"-m", model, "-p", "Once upon a time", "-n", "48", "--temp", "0.8", "--seed", "7",
                                        "--fingerprint"};
  std::vector<std::string> args = {"run"};
  args.insert(args.end(), gen.begin(), gen.end());
  const auto one = test::run_cli(args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_NE(one.out.find("fingerprint "), std::string::npos) << one.out;
  for (const char* topology : {"star", "ring"}) {
    args = {"cluster"};
    args.insert(args.end(), gen.begin(), gen.end());
    for (const char* a : {"--local", "6", "--topology", topology}) args.push_back(a);
    test::CliProcess p;
    ASSERT_TRUE(p.start(args, test::temp_dir(), "master"));
    ASSERT_EQ(p.wait(kWaitMs), 0) << topology << ": " << p.err();
    EXPECT_EQ(p.out(), one.out) << topology << ": " << p.err();
  }
  const uint64_t partition = model_partition_bytes();
  ASSERT_GT(partition, 0u) << "no model row in firmware/esp32s3/partitions.csv";
  const std::string dir = test::temp_dir();
  const auto conv = test::run_cli({"convert", model, "--image", dir + "/q.img", "--nodes", "6"});
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  for (const std::string part : {"master", "node1", "node2", "node3", "node4", "node5", "node6"}) {
    const size_t bytes = test::read_file(dir + "/q." + part + ".img").size();
    EXPECT_GT(bytes, 0u) << part;
    EXPECT_LE(bytes, partition) << part;
  }
}

}  // namespace
}  // namespace mcullm
