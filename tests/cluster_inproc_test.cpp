// The cluster in one process: nodes (NodeServer) on threads behind in-process links, the master
// (ClusterMaster) generating through them. Same tokens and fingerprint as one LlamaContext for
// f32 hidden states, as RoundedChain for f16 / int8; faults end in a recovered identical output
// or a clear error, never a hang.
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <thread>
#include <utility>

#include "cluster/master_host.h"
#include "cluster/node_server_host.h"
#include "cluster/rounded_chain_host.h"
#include "cluster/transport_host.h"
#include "core/thread_pool_host.h"
#include "model/generate.h"
#include "test_support.h"

namespace mcullm::cluster {
namespace {

struct Output {
  std::vector<int> tokens;
  uint64_t fingerprint = 0;
  Status status;
};

bool keep(void* user, const GenerateStep& s) {
  static_cast<std::vector<int>*>(user)->push_back(s.next);
  return true;
}

Output generate_with(Decoder& d, int vocab, uint64_t seed, int n) {
  std::vector<uint8_t> scratch(16ull * vocab + 65536);
  Arena arena(Tier::kHost, scratch.data(), scratch.size());
  Sampler sampler;
  SamplerConfig sc;
  sc.temperature = 1.0f;
  sc.seed = seed;
  EXPECT_TRUE(sampler.init(sc, vocab, arena).ok());
  const std::vector<int> prompt = {1, 300, 301, 302};
  std::vector<int> history(prompt.size() + n + 1);
  Output o;
  Fingerprint fp;
  GenerateHooks hooks{&o.tokens, nullptr, keep};
  GenerateOptions go;
  go.n_predict = n;
  GenerateResult r;
  o.status = generate(d, sampler, prompt.data(), static_cast<int>(prompt.size()), go, history.data(), &fp, hooks, &r);
  o.fingerprint = fp.combined();
  return o;
}

// A model with 12 layers written by `mcullm dummy` once for the whole test program.
const std::string& dummy_model() {
  static const std::string path = [] {
    const std::string p = test::temp_dir() + "/cluster12.gguf";
    const auto r = test::run_cli({"dummy", "-o", p, "--layers", "12", "--dim", "64", "--heads", "4", "--kv-heads", "2",
                                  "--hidden", "128", "--seq-len", "128"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
  }();
  return path;
}

struct InprocNode {
  std::unique_ptr<SliceSource> source;
  HostThreadPool pool{1};
  std::unique_ptr<NodeServer> server;
  std::unique_ptr<Transport> node_end, master_end;
  std::mutex end_mu;  // master_end: taken by the master's threads, put back by restart_node
  std::thread thread;
  Status result;
  ~InprocNode() {
    if (server) server->stop();
    if (node_end) node_end->close();
    if (thread.joinable()) thread.join();
  }
};

struct Rig {
  std::unique_ptr<SliceSource> source;
  HostThreadPool pool{1};
  std::vector<std::string> log;
  std::mutex log_mu;
  std::condition_variable log_cv;
  std::vector<std::unique_ptr<InprocNode>> nodes;
  std::unique_ptr<ClusterMaster> master;  // last: gone before the log it writes to

  // Node i serves `model` (default: the master's) from the layers of an even split, with `fault`.
  void add_node(const SliceRange& r, const NodeOptions& extra = {}, const std::string& model = "") {
    auto n = std::make_unique<InprocNode>();
    ASSERT_TRUE(SliceSource::open(model.empty() ? dummy_model() : model, LoadOptions(), &n->source).ok());
    NodeOptions no = extra;
    no.range = r;
    n->server = std::make_unique<NodeServer>(n->source.get(), no, &n->pool, kernels_by_name("auto"));
    ASSERT_TRUE(n->server->init().ok());
    make_inproc_pair(&n->master_end, &n->node_end);
    InprocNode* raw = n.get();
    n->thread = std::thread([raw] { raw->result = raw->server->serve(*raw->node_end); });
    nodes.push_back(std::move(n));
  }
  // Node i, whose serve() ended (its link closed), comes back: a new server (no fault) on its last
  // range behind a new link, which the master's next connect takes.
  void restart_node(size_t i) {
    InprocNode& n = *nodes[i];
    if (n.thread.joinable()) n.thread.join();
    NodeOptions no;
    no.range = n.server->range();
    n.server = std::make_unique<NodeServer>(n.source.get(), no, &n.pool, kernels_by_name("auto"));
    ASSERT_TRUE(n.server->init().ok());
    std::unique_ptr<Transport> master_end;
    make_inproc_pair(&master_end, &n.node_end);
    {
      std::lock_guard<std::mutex> lk(n.end_mu);
      n.master_end = std::move(master_end);
    }
    InprocNode* raw = &n;
    n.thread = std::thread([raw] { raw->result = raw->server->serve(*raw->node_end); });
  }
  // Waits (bounded: a hang fails the test) until the master has logged a line containing `text`.
  bool wait_log(const std::string& text, int timeout_ms = 60000) {
    std::unique_lock<std::mutex> lk(log_mu);
    return log_cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] {
      for (const auto& m : log)
        if (m.find(text) != std::string::npos) return true;
      return false;
    });
  }
  Status start(int count, const MasterOptions& mo_in, const std::vector<NodeOptions>& per_node = {}) {
    EXPECT_TRUE(SliceSource::open(dummy_model(), LoadOptions(), &source).ok());
    std::vector<SliceRange> plan;
    MC_TRY(even_plan(source->config().n_layers, count, 0, &plan));
    for (int i = 0; i < count; ++i) add_node(plan[i], i < static_cast<int>(per_node.size()) ? per_node[i] : NodeOptions());
    std::vector<NodeEndpoint> eps;
    for (size_t i = 0; i < nodes.size(); ++i) {
      InprocNode* n = nodes[i].get();
      eps.push_back({"inproc " + std::to_string(i + 1), [n](std::unique_ptr<Transport>* t) {
                       std::lock_guard<std::mutex> lk(n->end_mu);
                       if (!n->master_end) return Status::Error(Code::kIo, "the in-process node is not back");
                       *t = std::move(n->master_end);
                       return Status::Ok();
                     }});
    }
    MasterOptions mo = mo_in;
    mo.log = [this](const std::string& m) {
      {
        std::lock_guard<std::mutex> lk(log_mu);
        log.push_back(m);
      }
      log_cv.notify_all();
    };
    master = std::make_unique<ClusterMaster>(source.get(), &pool, kernels_by_name("auto"), mo);
    return master->start(eps);
  }
  std::string log_text() {
    std::lock_guard<std::mutex> lk(log_mu);
    std::string s;
    for (const auto& m : log) s += m + "\n";
    return s;
  }
};

Output reference(uint64_t seed, int n, HiddenEncoding e = HiddenEncoding::kF32, int nodes = 6) {
  std::unique_ptr<SliceSource> src;
  EXPECT_TRUE(SliceSource::open(dummy_model(), LoadOptions(), &src).ok());
  HostThreadPool pool(1);
  if (e == HiddenEncoding::kF32) {  // the plain model, no slices at all
    std::unique_ptr<uint8_t[]> mem(new uint8_t[16 << 20]);
    Arena arena(Tier::kHost, mem.get(), 16 << 20);
    LlamaContext ctx;
    EXPECT_TRUE(ctx.init(&src->loaded().model, 0, arena, &pool, kernels_by_name("auto")).ok());
    return generate_with(ctx, src->config().vocab_size, seed, n);
  }
  std::vector<SliceRange> plan;
  EXPECT_TRUE(even_plan(src->config().n_layers, nodes, 0, &plan).ok());
  RoundedChain chain;
  EXPECT_TRUE(chain.init(src.get(), plan, e, 0, &pool, kernels_by_name("auto")).ok());
  return generate_with(chain, src->config().vocab_size, seed, n);
}

Output through(Rig& rig, uint64_t seed, int n) {
  std::unique_ptr<ClusterStream> s;
  EXPECT_TRUE(rig.master->open_stream(&s).ok());
  return generate_with(*s, rig.source->config().vocab_size, seed, n);
}

TEST(ClusterInproc, SixNodesGiveTheTokensAndFingerprintOfOneProcess) {
  Rig rig;
  ASSERT_TRUE(rig.start(6, MasterOptions()).ok());
  const Output want = reference(7, 40);
  ASSERT_TRUE(want.status.ok());
  const Output got = through(rig, 7, 40);
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.fingerprint, want.fingerprint);
}

// MasterOptions::split (what `cluster --split plan` sets) cuts the layers however it likes: a very
// uneven split gives the same tokens and fingerprint; a split over max_layers is no room.
TEST(ClusterInproc, AnUnevenSplitGivesTheTokensAndFingerprintOfOneProcess) {
  Rig rig;
  MasterOptions mo;
  mo.split = [](int nodes, std::vector<SliceRange>* out) {
    *out = {{0, 1, false}, {1, 2, false}, {2, 12, false}};
    return nodes == 3 ? Status::Ok() : Status::Error(Code::kOutOfRange, "three nodes only");
  };
  ASSERT_TRUE(rig.start(3, mo).ok());
  EXPECT_NE(rig.master->plan_text().find("layers 2:12)"), std::string::npos) << rig.master->plan_text();
  const Output want = reference(7, 30);
  const Output got = through(rig, 7, 30);
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.fingerprint, want.fingerprint);

  Rig capped;
  mo.max_layers = 6;
  const Status st = capped.start(3, mo);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("do not fit"), std::string::npos) << st.message();
}

TEST(ClusterInproc, F16AndInt8HiddenStatesEqualTheRoundedOneProcessChain) {
  for (HiddenEncoding e : {HiddenEncoding::kF16, HiddenEncoding::kInt8}) {
    SCOPED_TRACE(hidden_encoding_name(e));
    Rig rig;
    MasterOptions mo;
    mo.encoding = e;
    ASSERT_TRUE(rig.start(4, mo).ok());
    const Output want = reference(3, 30, e, 4);
    const Output got = through(rig, 3, 30);
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.fingerprint, want.fingerprint);
    EXPECT_NE(got.fingerprint, reference(3, 30).fingerprint) << "the rounding should show in the logits";
  }
}

TEST(ClusterInproc, StreamsInFlightEachGiveTheirOwnRun) {
  Rig rig;
  ASSERT_TRUE(rig.start(3, MasterOptions()).ok());
  std::vector<Output> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { got[i] = through(rig, 100 + i, 25); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.message();
    const Output want = reference(100 + i, 25);
    EXPECT_EQ(got[i].tokens, want.tokens) << "stream " << i;
    EXPECT_EQ(got[i].fingerprint, want.fingerprint) << "stream " << i;
  }
}

// A node failing after some hidden states: the master names it, re-plans onto the others and the
// output stays the same (kind: exit = link closed, flip = corrupt frame, hang = silent).
void expect_recovers(const std::string& kind) {
  SCOPED_TRACE(kind);
  Rig rig;
  MasterOptions mo;
  // A hang guard, not a deadline: a healthy node on a loaded 2-core machine under ASan must never
  // miss it (its heartbeats come every 50 ms); the silent node is found after this long.
  mo.timeout_ms = 5000;
  mo.heartbeat_ms = 50;
  NodeOptions bad;
  bad.fault = kind;
  bad.fault_after = 9;
  ASSERT_TRUE(rig.start(4, mo, {NodeOptions(), bad}).ok());
  const Output got = through(rig, 5, 30);
  ASSERT_TRUE(got.status.ok()) << got.status.message() << "\n" << rig.log_text();
  const Output want = reference(5, 30);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.fingerprint, want.fingerprint);
  EXPECT_EQ(rig.master->replans(), 1);
  EXPECT_NE(rig.log_text().find("node 2 (inproc 2"), std::string::npos) << rig.log_text();
}

TEST(ClusterInproc, NodeThatClosesItsLinkIsReplannedAround) { expect_recovers("exit"); }
TEST(ClusterInproc, CorruptFrameIsDetectedAndReplannedAround) {
  expect_recovers("flip");
}
TEST(ClusterInproc, SilentNodeTimesOutAndIsReplannedAround) { expect_recovers("hang"); }

// A Decoder that calls `at` once before the token at position `pos` (the test acts between tokens).
struct PauseAt final : Decoder {
  Decoder* inner = nullptr;
  int pos = 0;
  std::function<void()> at;
  Status forward(int token, int p, const float** logits) override {
    if (p == pos && at) std::exchange(at, nullptr)();
    return inner->forward(token, p, logits);
  }
  int vocab_size() const override { return inner->vocab_size(); }
  int ctx_len() const override { return inner->ctx_len(); }
};

// Node 2 closes its link after 5 hidden states; the master re-plans onto nodes 1 and 3 (room
// enough). Between two tokens the node comes back; the master reconnects it, checks its slice and
// takes it in again at the next token boundary: three nodes again, and the story is the same.
// Every wait is on an event (the master's log), bounded.
TEST(ClusterInproc, ANodeThatComesBackIsReadmittedAtTheNextTokenBoundary) {
  Rig rig;
  MasterOptions mo;
  mo.heartbeat_ms = 20;  // how often the master tries to reconnect (not a deadline)
  NodeOptions bad;
  bad.fault = "exit";
  bad.fault_after = 5;
  ASSERT_TRUE(rig.start(3, mo, {NodeOptions(), bad}).ok());
  std::unique_ptr<ClusterStream> s;
  ASSERT_TRUE(rig.master->open_stream(&s).ok());
  PauseAt d;
  d.inner = s.get();
  d.pos = 12;
  bool back = false;
  int replans_before = -1;
  std::string plan_before;
  d.at = [&] {
    replans_before = rig.master->replans();
    plan_before = rig.master->plan_text();
    rig.restart_node(1);
    back = rig.wait_log("re-admitted at the next token boundary");
  };
  const Output got = generate_with(d, rig.source->config().vocab_size, 5, 30);
  ASSERT_TRUE(got.status.ok()) << got.status.message() << "\n" << rig.log_text();
  ASSERT_TRUE(back) << rig.log_text();
  EXPECT_EQ(replans_before, 1) << rig.log_text();
  EXPECT_EQ(plan_before.find("node 2"), std::string::npos) << plan_before;
  EXPECT_EQ(rig.master->replans(), 2) << rig.log_text();
  const std::string plan = rig.master->plan_text();
  for (const char* want : {"node 1 (inproc 1, layers 0:4)", "node 2 (inproc 2, layers 4:8)", "node 3 (inproc 3, layers 8:12)"})
    EXPECT_NE(plan.find(want), std::string::npos) << want << " in " << plan;
  EXPECT_NE(rig.log_text().find("node 2 (inproc 2, layers 4:8): admitted again"), std::string::npos) << rig.log_text();
  const Output want = reference(5, 30);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.fingerprint, want.fingerprint);
}

// A node busy with a long frame is not failed: its reader thread answers heartbeats while it
// computes. The "slow" hook makes node 2's 4th hidden state take until it has answered 200
// heartbeats (one every 15 ms at most: over 2.9 s), twice the 1.5 s of silence after which the
// master fails a node. Node 4 in the same run goes silent ("hang": no heartbeats either, as a
// stopped process) and is still failed and re-planned around. No clock is read by the test.
TEST(ClusterInproc, ABusyNodeAnswersHeartbeatsAndIsNotFailedASilentOneIs) {
  Rig rig;
  MasterOptions mo;
  mo.timeout_ms = 1500;
  mo.heartbeat_ms = 15;
  NodeOptions slow, silent;
  slow.fault = "slow";
  slow.fault_after = 3;
  slow.slow_beats = 200;
  silent.fault = "hang";
  silent.fault_after = 12;
  ASSERT_TRUE(rig.start(4, mo, {NodeOptions(), slow, NodeOptions(), silent}).ok());
  const Output got = through(rig, 5, 30);
  ASSERT_TRUE(got.status.ok()) << got.status.message() << "\n" << rig.log_text();
  const Output want = reference(5, 30);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.fingerprint, want.fingerprint);
  EXPECT_GE(rig.nodes[1]->server->heartbeats_answered(), 200);
  const std::string log = rig.log_text();
  EXPECT_EQ(rig.master->replans(), 1) << log;
  EXPECT_EQ(log.find("node 2 (inproc 2, layers 3:6):"), std::string::npos) << "the busy node was failed:\n" << log;
  EXPECT_NE(log.find("node 4 (inproc 4, layers 9:12):"), std::string::npos) << log;
  EXPECT_TRUE(log.find("no heartbeat") != std::string::npos || log.find("did not answer") != std::string::npos) << log;
}

TEST(ClusterInproc, NoRoomLeftIsAClearErrorNotAHang) {
  Rig rig;
  MasterOptions mo;  // the default 5 s timeout: the failing node closes its link, no timing involved
  mo.max_layers = 3;  // 12 layers on 4 nodes of 3: no room once one fails
  NodeOptions bad;
  bad.fault = "exit";
  bad.fault_after = 5;
  ASSERT_TRUE(rig.start(4, mo, {NodeOptions(), NodeOptions(), bad}).ok());
  const Output got = through(rig, 5, 30);
  ASSERT_FALSE(got.status.ok());
  const std::string msg = got.status.message();
  EXPECT_NE(msg.find("node 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("do not fit"), std::string::npos) << msg;
}

TEST(ClusterInproc, NodeWithAnotherModelIsRefusedByHash) {
  const std::string other = test::temp_dir() + "/other12.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "-o", other, "--layers", "12", "--dim", "64", "--heads", "4", "--kv-heads", "2",
                           "--hidden", "128", "--seq-len", "128", "--seed", "99"}).exit_code, 0);
  Rig rig;
  ASSERT_TRUE(SliceSource::open(dummy_model(), LoadOptions(), &rig.source).ok());
  rig.add_node({0, 6, false});
  rig.add_node({6, 12, false}, NodeOptions(), other);
  std::vector<NodeEndpoint> eps;
  for (size_t i = 0; i < 2; ++i) {
    InprocNode* n = rig.nodes[i].get();
    eps.push_back({"inproc " + std::to_string(i + 1), [n](std::unique_ptr<Transport>* t) {
                     *t = std::move(n->master_end);
                     return Status::Ok();
                   }});
  }
  MasterOptions mo;
  mo.log = [](const std::string&) {};
  ClusterMaster m(rig.source.get(), &rig.pool, kernels_by_name("auto"), mo);
  const Status st = m.start(eps);
  ASSERT_FALSE(st.ok());
  const std::string msg = st.message();
  EXPECT_NE(msg.find("node 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("slice hash"), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
}

TEST(ClusterInproc, EvenPlanSplitsAndRefusesWhatDoesNotFit) {
  std::vector<SliceRange> p;
  ASSERT_TRUE(even_plan(24, 6, 0, &p).ok());
  ASSERT_EQ(p.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(p[i].first, 4 * i);
    EXPECT_EQ(p[i].end, 4 * i + 4);
  }
  ASSERT_TRUE(even_plan(10, 4, 3, &p).ok());
  EXPECT_EQ(p[0].end - p[0].first, 3);
  EXPECT_EQ(p[3].end, 10);
  ASSERT_TRUE(even_plan(3, 6, 0, &p).ok());
  EXPECT_EQ(p.size(), 3u);
  EXPECT_FALSE(even_plan(24, 5, 4, &p).ok());
  EXPECT_FALSE(even_plan(24, 0, 0, &p).ok());
}

// A node driven by hand over an in-process link: hostile and out-of-place input gets an error
// frame saying what, and the node keeps serving.
struct HandDriven {
  std::unique_ptr<SliceSource> source;
  HostThreadPool pool{1};
  std::unique_ptr<NodeServer> server;
  std::unique_ptr<Transport> mine, theirs;
  std::thread thread;
  uint32_t seq = 0;
  explicit HandDriven(const NodeOptions& o) {
    EXPECT_TRUE(SliceSource::open(dummy_model(), LoadOptions(), &source).ok());
    server = std::make_unique<NodeServer>(source.get(), o, &pool, kernels_by_name("auto"));
    EXPECT_TRUE(server->init().ok());
    make_inproc_pair(&mine, &theirs);
    thread = std::thread([this] { server->serve(*theirs); });
  }
  ~HandDriven() {
    server->stop();
    mine->close();
    thread.join();
  }
  // The next frame's type and (for an error) its text.
  FrameType next(std::string* text = nullptr) {
    Frame f;
    LinkFailure why;
    EXPECT_TRUE(mine->receive(&f, 5000, &why).ok());
    if (f.header.type == FrameType::kError && text) {
      Status remote;
      EXPECT_TRUE(decode_error(f.payload, f.header.payload_len, &remote).ok());
      *text = remote.message();
    }
    return f.header.type;
  }
  void hello(uint32_t first, uint32_t end, uint32_t n_layers = 12, uint32_t dim = 64) {
    Hello h;
    h.role = NodeRole::kMaster;
    h.first_layer = first;
    h.end_layer = end;
    h.n_layers = n_layers;
    h.dim = dim;
    uint8_t buf[kHelloBytes];
    size_t len = 0;
    ASSERT_TRUE(encode_hello(h, buf, sizeof buf, &len).ok());
    ASSERT_TRUE(send_frame(*mine, &seq, FrameType::kHello, 0, 0, buf, len, 1000, nullptr).ok());
  }
};

TEST(ClusterNode, HostileInputGetsErrorFramesAndTheNodeKeepsServing) {
  NodeOptions o;
  o.range = {0, 3, false};
  o.max_layers = 4;
  o.max_streams = 2;
  HandDriven n(o);
  std::string text;
  const uint8_t garbage[12] = {'M', 'C', 'L', 'K', 1, 4, 0, 0, 0xff, 0xff, 0xff, 0xff};
  ASSERT_TRUE(n.mine->send_bytes(garbage, sizeof garbage, 1000, nullptr).ok());
  // A reset, not a heartbeat: the node's reader thread answers heartbeats at once, ahead of the
  // error frame that its serving thread sends for the garbage, so only a queued frame has an order.
  ASSERT_TRUE(send_frame(*n.mine, &n.seq, FrameType::kReset, 0, 0, nullptr, 0, 1000, nullptr).ok());
  EXPECT_EQ(n.next(&text), FrameType::kError);
  EXPECT_NE(text.find("corrupt"), std::string::npos) << text;
  EXPECT_EQ(n.next(), FrameType::kReady) << "the frame after the garbage still gets through";

  n.hello(0, 8);  // more than --max-layers
  EXPECT_EQ(n.next(&text), FrameType::kError);
  EXPECT_NE(text.find("at most 4"), std::string::npos) << text;
  n.hello(0, 3, 24);  // another model
  EXPECT_EQ(n.next(&text), FrameType::kError);
  EXPECT_NE(text.find("24 layers"), std::string::npos) << text;
  n.hello(10, 13);  // outside the model
  EXPECT_EQ(n.next(&text), FrameType::kError);
  n.hello(3, 6);
  EXPECT_EQ(n.next(), FrameType::kHello);
  EXPECT_EQ(n.server->range().first, 3);

  std::vector<float> x(64, 0.25f), wrong(32, 0.25f);
  ASSERT_TRUE(send_hidden(*n.mine, &n.seq, 0, 0, HiddenEncoding::kF32, wrong.data(), 32, 1000, nullptr).ok());
  EXPECT_EQ(n.next(&text), FrameType::kError) << "a hidden state of another width";
  ASSERT_TRUE(send_hidden(*n.mine, &n.seq, 0, 500, HiddenEncoding::kF32, x.data(), 64, 1000, nullptr).ok());
  EXPECT_EQ(n.next(&text), FrameType::kError) << "a position outside the context";
  EXPECT_NE(text.find("500"), std::string::npos) << text;
  for (uint32_t stream = 0; stream < 2; ++stream) {
    ASSERT_TRUE(send_hidden(*n.mine, &n.seq, stream, 0, HiddenEncoding::kInt8, x.data(), 64, 1000, nullptr).ok());
    EXPECT_EQ(n.next(), FrameType::kHidden);
  }
  ASSERT_TRUE(send_hidden(*n.mine, &n.seq, 7, 0, HiddenEncoding::kF32, x.data(), 64, 1000, nullptr).ok());
  EXPECT_EQ(n.next(&text), FrameType::kError) << "a third stream over --max-streams 2";
  EXPECT_NE(text.find("at most 2 streams"), std::string::npos) << text;
  ASSERT_TRUE(send_frame(*n.mine, &n.seq, FrameType::kReset, 0, 0, nullptr, 0, 1000, nullptr).ok());
  EXPECT_EQ(n.next(), FrameType::kReady);
  ASSERT_TRUE(send_hidden(*n.mine, &n.seq, 7, 0, HiddenEncoding::kF32, x.data(), 64, 1000, nullptr).ok());
  EXPECT_EQ(n.next(), FrameType::kHidden) << "room again after the reset";
}

}  // namespace
}  // namespace mcullm::cluster
