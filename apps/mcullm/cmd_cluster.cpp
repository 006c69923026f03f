// `mcullm cluster`: the master of a cluster (cluster/master_host.h). It keeps the tokenizer, the
// embedding, the final norm, the head and sampling, and runs the layers on nodes: N local node
// processes it starts itself (--local N, over TCP on 127.0.0.1 or over pseudo-terminals with
// --link pty), or nodes already listening (--nodes host:port,...). --streams K generates K
// sequences at once (seeds seed, seed + 1, ...) so that every node works while the others do.
// --simulate computes the same thing in one process without links (cluster/rounded_chain_host.h).
// --topology ring wires the nodes as the boards are (master -> node 1 -> ... -> node N -> master) and
// runs the firmware's master and node logic (cluster/ring_master_host.h, `mcullm node --ring`).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>

#include "progress.h"
#include "cluster/master_host.h"
#include "cluster/ring_master_host.h"
#include "cluster/rounded_chain_host.h"
#include "cluster/transport_host.h"
#include "model/generate.h"
#include "plan/cluster_plan_host.h"
#include "session.h"

extern char** environ;

namespace mcullm::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct ClusterOptions {
  ModelOptions m;  // -m, -z, -c, -t, --kernels, --kv
  std::string prompt, prompt_ids, nodes, hidden = "f32", link = "tcp", split = "plan", board = "esp32s3-psram80", topology = "star",
              listen;
  std::vector<std::string> node_faults;
  int local = 0, streams = 1, n_predict = 256, node_threads = 1, timeout_ms = 5000,
      heartbeat_ms = 500, max_layers = 0, rejoin_ms = 0, top_k = 40, bench = 0;
  int64_t seed = -1;
  uint64_t rate = 0;
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f;
  bool fingerprint = false, quiet = false, simulate = false, no_bos = false, prompt_ids_given = false, split_given = false;
};

// --split: how the layers are cut over `nodes` nodes, at start and at every re-plan.
//  plan (the default): the partition planner's split for --board (plan/cluster_plan_host.h), the one
//    `mcullm convert --image --nodes N --board B` cuts the board images by, so that a PC cluster runs
//    (and its fingerprint checks) the split the boards will run. The output does not depend on the
//    split (every split is bit-exact), only the work per node does.
//  even: even_plan, the fastest for PC nodes, whose layers all cost the same.
// Without --split given, a split the planner cannot make (a model too big for the board, or a range
// over --max-layers) falls back to even with a note: PC nodes are not boards. --split plan makes it an error.
struct LayerSplitter {
  const ClusterOptions* o = nullptr;
  const LoadedModel* model = nullptr;
  BoardProfile board;
  int n_layers = 0;
  std::function<void(const std::string&)> note;

  // The ranges; *table (if given) gets the planner's table when the planner made the split.
  Status split(int nodes, std::vector<SliceRange>* out, std::string* table = nullptr) const {
    if (o->split == "even") return cluster::even_plan(n_layers, nodes, o->max_layers, out);
    ClusterModel cm;
    ::mcullm::ClusterOptions co;  // the planner's (this file's ClusterOptions are the command's)
    ClusterPlan p;
    // A PC master keeps the tokenizer itself: the master's image extra (the tokenizer image) does not
    // move the split, the master holding no layers; `convert --nodes` counts it.
    Status st = plan_board_split(*model, board, nodes, 0, &cm, &co, &p);
    if (st.ok()) {
      *out = plan_node_ranges(p);
      for (const SliceRange& r : *out)
        if (o->max_layers > 0 && r.end - r.first > o->max_layers && st.ok())
          st = Status::Error(Code::kOutOfRange, "its split gives layers %d:%d to one node, more than --max-layers %d", r.first, r.end,
                             o->max_layers);
    }
    if (st.ok()) {
      if (table) *table = format_cluster_plan(cm, board, board, co, p);
      return st;
    }
    if (o->split_given)
      return Status::Error(st.code(), "--split plan: %d node%s on %s: %s", nodes, nodes == 1 ? "" : "s", board.name.c_str(), st.message());
    note("the planner has no split of " + std::to_string(nodes) + " node" + (nodes == 1 ? "" : "s") + " on " + board.name + " (" +
         st.message() + "): splitting evenly (PC nodes are not boards; --split plan makes this an error)");
    return cluster::even_plan(n_layers, nodes, o->max_layers, out);
  }
};

// Node processes started by --local; killed (if still there) and reaped when this goes away.
struct LocalNodes {
  std::vector<pid_t> pids;  // <= 0: not started
  ~LocalNodes() { stop(); }
  // Stops every node (SIGTERM, SIGKILL after 2 s) and says what became of those that had ended or
  // stopped on their own ("local node 2 (pid 123): killed by signal 9"). Waiting for each one to be
  // reaped makes that race-free: a node killed just now is still reported.
  std::string stop() {
    std::string said;
    std::vector<bool> told(pids.size(), false);
    auto say = [&](size_t i, int status) {
      said += (said.empty() ? "" : "; ") + std::string("local node ") + std::to_string(i + 1) + " (pid " + std::to_string(pids[i]) + "): " +
              (WIFSTOPPED(status)    ? "stopped by signal " + std::to_string(WSTOPSIG(status))
               : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                     : "exited with code " + std::to_string(WEXITSTATUS(status)));
      told[i] = true;
    };
    std::vector<bool> reaped(pids.size(), false);
    for (size_t i = 0; i < pids.size(); ++i) {  // those that ended or stopped before we stop them
      int status = 0;
      if (pids[i] <= 0 || waitpid(pids[i], &status, WNOHANG | WUNTRACED) != pids[i]) continue;
      say(i, status);
      reaped[i] = !WIFSTOPPED(status);
    }
    for (size_t i = 0; i < pids.size(); ++i)
      if (pids[i] > 0 && !reaped[i]) kill(pids[i], SIGTERM), kill(pids[i], SIGCONT);  // a stopped node takes SIGTERM once continued
    for (size_t i = 0; i < pids.size(); ++i) {
      const pid_t p = pids[i];
      if (p <= 0 || reaped[i]) continue;
      const Clock::time_point until = Clock::now() + std::chrono::seconds(2);
      int status = 0;
      pid_t got = 0;
      bool forced = false;
      while ((got = waitpid(p, &status, WNOHANG)) == 0) {
        if (Clock::now() > until) {
          kill(p, SIGKILL);
          got = waitpid(p, &status, 0);
          forced = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      const bool ours = forced || (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
      if (got == p && !told[i] && !ours) say(i, status);
    }
    pids.clear();
    return said;
  }
};

// Starts `argv` with stdout on a pipe (read end returned, close-on-exec) and stdin closed.
Status spawn(const std::vector<std::string>& args, pid_t* pid, int* out_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Error(Code::kIo, "pipe: %s", std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int rc = posix_spawn(pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Status::Error(Code::kIo, "cannot start a node: %s", std::strerror(rc));
  }
  *out_fd = fds[0];
  return Status::Ok();
}

// Reads the node's "listening PORT" line (within timeout_ms).
Status read_port(int fd, int timeout_ms, uint16_t* port) {
  std::string line;
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (line.find('\n') == std::string::npos) {
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) return Status::Error(Code::kIo, "a local node did not start listening within %d ms", timeout_ms);
    char buf[64];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return Status::Error(Code::kIo, "a local node exited before listening (see its messages above)");
    line.append(buf, static_cast<size_t>(n));
  }
  unsigned v = 0;
  if (std::sscanf(line.c_str(), "listening %u", &v) != 1 || v == 0 || v > 65535)
    return Status::Error(Code::kIo, "a local node said '%s', not its port", line.c_str());
  *port = static_cast<uint16_t>(v);
  return Status::Ok();
}

struct FaultSpec {
  int node = 0;
  std::string kind;
  int after = 0;
};

Status parse_fault(const std::string& text, FaultSpec* f) {
  char kind[16] = {};
  if (std::sscanf(text.c_str(), "%d:%15[a-z]:%d", &f->node, kind, &f->after) != 3 || f->node < 1 || f->after < 0)
    return Status::Error(Code::kInvalidArgument, "--node-fault '%s' is not NODE:KIND:AFTER (e.g. 3:kill:5)", text.c_str());
  f->kind = kind;
  return Status::Ok();
}

// Every --node-fault.
Status parse_faults(const ClusterOptions& o, std::vector<FaultSpec>* faults) {
  for (const std::string& t : o.node_faults) {
    faults->emplace_back();
    MC_TRY(parse_fault(t, &faults->back()));
  }
  return Status::Ok();
}

// Starts --local N nodes, node i on layers plan[i] (the master's hello confirms or changes them).
Status local_endpoints(const ClusterOptions& o, const std::vector<SliceRange>& plan, LocalNodes* nodes,
                       std::vector<cluster::NodeEndpoint>* eps) {
  std::vector<FaultSpec> faults;
  MC_TRY(parse_faults(o, &faults));
  Progress progress("starting nodes", o.local, "nodes", o.quiet);
  for (int i = 0; i < o.local; ++i, progress.step()) {
    std::vector<std::string> args = {"mcullm", "node", "-m", o.m.model, "--layers",
                                     std::to_string(plan[i].first) + ":" + std::to_string(plan[i].end), "--once",
                                     "-t", std::to_string(o.node_threads), "--kernels", o.m.kernels,
                                     "--max-streams", std::to_string(o.streams > 16 ? o.streams : 16)};
    if (o.m.kv == KvType::kInt8) args.insert(args.end(), {"--kv", "int8"});
    if (o.max_layers > 0) args.insert(args.end(), {"--max-layers", std::to_string(o.max_layers)});
    for (const FaultSpec& f : faults)
      if (f.node == i + 1) args.insert(args.end(), {"--fault", f.kind, "--fault-after", std::to_string(f.after)});
    const std::string name = "local node " + std::to_string(i + 1);
    if (o.link == "pty") {
      int master_fd = -1;
      std::string slave;
      MC_TRY(cluster::open_pty(&master_fd, &slave));
      args.insert(args.end(), {"--serial", slave, "--rate", std::to_string(o.rate)});
      pid_t pid;
      int out_fd;
      MC_TRY(spawn(args, &pid, &out_fd));
      close(out_fd);
      nodes->pids.push_back(pid);
      auto used = std::make_shared<bool>(false);
      eps->push_back({name + " " + slave, [master_fd, slave, rate = o.rate, used](std::unique_ptr<cluster::Transport>* t) {
                        if (*used) return Status::Error(Code::kIo, "a pseudo-terminal link is not reopened");
                        *used = true;
                        cluster::SerialOptions so;
                        so.rate_bps = rate;
                        return cluster::serial_transport_from_fd(master_fd, slave, so, t);
                      }});
      continue;
    }
    args.insert(args.end(), {"--listen", "127.0.0.1:0"});
    pid_t pid;
    int out_fd;
    MC_TRY(spawn(args, &pid, &out_fd));
    nodes->pids.push_back(pid);
    uint16_t port = 0;
    const Status st = read_port(out_fd, 60000, &port);
    close(out_fd);
    MC_TRY(st);
    eps->push_back({"127.0.0.1:" + std::to_string(port), [port](std::unique_ptr<cluster::Transport>* t) {
                      return cluster::tcp_connect("127.0.0.1", port, 1000, t);
                    }});
  }
  return Status::Ok();
}

// --nodes HOST:PORT,...: each node as written, its host and its port, in order.
struct NodeAddress {
  std::string text, host;
  uint16_t port = 0;
};
Status parse_node_list(const std::string& list, std::vector<NodeAddress>* out) {
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    NodeAddress a{item, "", 0};
    if (!split_host_port(item, &a.host, &a.port).ok() || a.port == 0)
      return Status::Error(Code::kInvalidArgument, "--nodes: '%s' is not HOST:PORT", item.c_str());
    out->push_back(a);
  }
  if (out->empty()) return Status::Error(Code::kInvalidArgument, "--nodes is empty");
  return Status::Ok();
}

Status remote_endpoints(const std::string& list, std::vector<cluster::NodeEndpoint>* eps) {
  std::vector<NodeAddress> nodes;
  MC_TRY(parse_node_list(list, &nodes));
  for (const NodeAddress& a : nodes)
    eps->push_back({a.text, [host = a.host, port = a.port](std::unique_ptr<cluster::Transport>* t) {
                      return cluster::tcp_connect(host, port, 1000, t);
                    }});
  return Status::Ok();
}

// --topology ring --local N: N `mcullm node --ring` processes, each listening on a free port of
// 127.0.0.1; started from the last (its --next: the master's listener) to the first, so that each
// one's next is up when it starts. Rebuilding kills every node of the old ring (a ring cannot tell
// which one failed; this master can only look at its children) and starts a new one, without faults.
struct LocalRing {
  const ClusterOptions* o = nullptr;
  std::vector<SliceRange> plan;
  LocalNodes* nodes = nullptr;
  int built = 0;

  Status wire(std::unique_ptr<cluster::Transport>* to_first, std::unique_ptr<cluster::Transport>* from_last) {
    if (built > 0) {
      const std::string gone = nodes->stop();
      std::fprintf(stderr, "mcullm cluster: the old ring's nodes stopped; %s\n", gone.empty() ? "none had ended on its own" : gone.c_str());
    }
    std::vector<FaultSpec> faults;
    MC_TRY(parse_faults(*o, &faults));
    std::unique_ptr<cluster::TcpListener> listener;  // the last node's TX comes back here
    MC_TRY(cluster::tcp_listen("127.0.0.1", 0, &listener));
    const int n = static_cast<int>(plan.size());
    nodes->pids.assign(static_cast<size_t>(n), -1);
    uint16_t next = listener->port();
    Progress progress(built ? "starting a new ring" : "starting the ring", n, "nodes", o->quiet);
    for (int i = n - 1; i >= 0; --i, progress.step()) {
      std::vector<std::string> args = {"mcullm", "node", "--ring", "-m", o->m.model, "--listen", "127.0.0.1:0", "--next",
                                       "127.0.0.1:" + std::to_string(next), "-t", std::to_string(o->node_threads), "--kernels", o->m.kernels,
                                       "--max-streams", std::to_string(o->streams)};
      if (o->max_layers > 0) args.insert(args.end(), {"--max-layers", std::to_string(o->max_layers)});
      for (const FaultSpec& f : faults)
        if (f.node == i + 1 && built == 0) args.insert(args.end(), {"--fault", f.kind, "--fault-after", std::to_string(f.after)});
      int out_fd = -1;
      MC_TRY(spawn(args, &nodes->pids[static_cast<size_t>(i)], &out_fd));
      const Status st = read_port(out_fd, 60000, &next);
      close(out_fd);
      MC_TRY(st);
    }
    ++built;
    MC_TRY(cluster::tcp_connect("127.0.0.1", next, 10000, to_first));
    cluster::LinkFailure failure = cluster::LinkFailure::kNone;
    return listener->accept(60000, from_last, &failure).prefix("waiting for the last node of the ring: ");
  }
};

// --topology ring --nodes H1:P1,...,HN:PN: ring nodes already running, in ring order; the master
// connects to the first and the last one's --next is the master's --listen.
Status remote_ring(const ClusterOptions& o, int* count, decltype(cluster::RingOptions::wire)* wire) {
  if (o.listen.empty())
    return Status::Error(Code::kInvalidArgument, "--topology ring --nodes: give --listen HOST:PORT, the last node's --next");
  std::vector<NodeAddress> nodes;
  MC_TRY(parse_node_list(o.nodes, &nodes));
  const std::string host = nodes[0].host;
  const uint16_t port = nodes[0].port;
  std::string listen_host;
  uint16_t listen_port = 0;
  MC_TRY(split_host_port(o.listen, &listen_host, &listen_port).prefix("--listen: "));
  std::shared_ptr<cluster::TcpListener> listener;
  {
    std::unique_ptr<cluster::TcpListener> l;
    MC_TRY(cluster::tcp_listen(listen_host, listen_port, &l));
    listener = std::move(l);
  }
  *count = static_cast<int>(nodes.size());
  *wire = [listener, host, port](std::unique_ptr<cluster::Transport>* to_first, std::unique_ptr<cluster::Transport>* from_last) {
    constexpr int kWaitMs = 60000;
    MC_TRY(cluster::tcp_connect(host, port, kWaitMs, to_first).prefix("the ring's first node: "));
    cluster::LinkFailure failure = cluster::LinkFailure::kNone;
    return listener->accept(kWaitMs, from_last, &failure).prefix("waiting for the last node of the ring: ");
  };
  return Status::Ok();
}

struct StreamRun {
  Decoder* decoder = nullptr;
  std::vector<uint8_t> scratch;
  Arena arena;
  Sampler sampler;
  std::vector<int> history;
  std::vector<int> out;  // sampled tokens
  Fingerprint fp;
  GenerateResult result;
  Status status;
};

bool collect(void* user, const GenerateStep& s) {
  if (s.sampled) static_cast<StreamRun*>(user)->out.push_back(s.next);
  return true;
}

// One sequence per decoder, all at once on their own threads (seeds seed, seed + 1, ...): *runs gets
// each one's tokens, fingerprint and status; *ms the wall time.
Status generate_streams(const ClusterOptions& o, const std::vector<int>& prompt, const GenerateOptions& go, int vocab,
                        const std::vector<Decoder*>& decoders, std::vector<StreamRun>* runs, double* ms) {
  *runs = std::vector<StreamRun>(decoders.size());
  for (size_t i = 0; i < runs->size(); ++i) {
    StreamRun& r = (*runs)[i];
    r.decoder = decoders[i];
    r.scratch.resize(16ull * vocab + (64u << 10));
    r.arena.reset(Tier::kHost, r.scratch.data(), r.scratch.size());
    SamplerConfig sc;
    sc.temperature = o.temp;
    sc.top_k = o.top_k;
    sc.top_p = o.top_p;
    sc.min_p = o.min_p;
    sc.seed = static_cast<uint64_t>(o.seed) + i;
    MC_TRY(r.sampler.init(sc, vocab, r.arena));
    r.history.resize(prompt.size() + static_cast<size_t>(o.n_predict) + 1);
  }
  const Clock::time_point t0 = Clock::now();
  auto run_one = [&](StreamRun& r) {
    GenerateHooks hooks{&r, nullptr, collect};
    r.status = generate(*r.decoder, r.sampler, prompt.data(), static_cast<int>(prompt.size()), go, r.history.data(), &r.fp, hooks, &r.result);
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < runs->size(); ++i) threads.emplace_back(run_one, std::ref((*runs)[i]));
  run_one((*runs)[0]);
  for (std::thread& t : threads) t.join();
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return Status::Ok();
}

// Tokens fed through the model by the runs (the prompt but its last token, then one per sample).
int tokens_evaluated(const std::vector<StreamRun>& runs, size_t n_prompt) {
  int n = 0;
  for (const StreamRun& r : runs) n += static_cast<int>(n_prompt) - 1 + r.result.n_sampled;
  return n;
}

// --bench ROUNDS: one process (the whole model in this process, the same bits) against the cluster
// with 1 .. --streams streams, interleaved round by round so that a noisy machine hits all alike;
// the median tokens/s of each and its ratio to one process.
int bench(const ClusterOptions& o, SliceSource& source, cluster::ClusterMaster& master, const std::vector<int>& prompt,
          const GenerateOptions& go, ThreadPool* pool, const KernelSet* kernels, int ctx_len) {
  const LlamaConfig& cfg = source.config();
  cluster::RoundedChain whole;
  if (Status st = whole.init(&source, {{0, cfg.n_layers, false}}, cluster::HiddenEncoding::kF32, ctx_len, pool, kernels); !st.ok())
    return report(st);
  std::vector<std::vector<double>> rates(static_cast<size_t>(o.streams) + 1);  // [0] = one process
  for (int round = 0; round < o.bench; ++round) {
    for (int k = 0; k <= o.streams; ++k) {
      std::vector<std::unique_ptr<cluster::ClusterStream>> streams(static_cast<size_t>(k));
      std::vector<Decoder*> decs;
      if (k == 0) decs.push_back(&whole);
      for (auto& s : streams) {
        if (Status st = master.open_stream(&s); !st.ok()) return report(st);
        decs.push_back(s.get());
      }
      std::vector<StreamRun> runs;
      double ms = 0;
      if (Status st = generate_streams(o, prompt, go, cfg.vocab_size, decs, &runs, &ms); !st.ok()) return report(st);
      for (const StreamRun& r : runs)
        if (!r.status.ok()) return report(r.status);
      rates[static_cast<size_t>(k)].push_back(1000.0 * tokens_evaluated(runs, prompt.size()) / ms);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double base = median(rates[0]);
  std::printf("%-28s %12s %10s\n", "configuration", "tokens/s", "vs 1 proc");
  std::printf("%-28s %12.2f %10.2f\n", "one process", base, 1.0);
  for (int k = 1; k <= o.streams; ++k) {
    const std::string name = "cluster, " + std::to_string(k) + " stream" + (k == 1 ? "" : "s");
    const double r = median(rates[static_cast<size_t>(k)]);
    std::printf("%-28s %12.2f %10.2f\n", name.c_str(), r, r / base);
  }
  std::printf("(medians of %d rounds; plan: %s; hidden %s)\n", o.bench, master.plan_text().c_str(), o.hidden.c_str());
  return 0;
}

int cluster_main(ClusterOptions o) {
  o.seed = resolve_seed(o.seed);
  warn_threads(o.m.threads);
  cluster::HiddenEncoding enc;
  if (!cluster::parse_hidden_encoding(o.hidden.c_str(), &enc)) return report(Status::Error(Code::kInvalidArgument, "--hidden %s", o.hidden.c_str()));
  if (o.simulate ? !o.nodes.empty() : (o.local > 0) == !o.nodes.empty())
    return report(Status::Error(Code::kInvalidArgument, "give one of --local N, --nodes HOST:PORT,... or --simulate (with --local N's cuts)"));
  const bool ring = o.topology == "ring";
  if (ring) {
    const char* bad = o.streams > cluster::RingMaster::kMaxStreams ? "more than 8 --streams (a board node's stream slots)"
                      : o.simulate  ? "--simulate (it has no links)"
                      : o.bench > 0 ? "--bench"
                      : o.link != "tcp" ? "--link pty"
                      : o.m.kv == KvType::kInt8 ? "--kv int8 (board nodes keep f32 caches)"
                      : o.rejoin_ms > 0 ? "--rejoin-ms (a broken ring is rebuilt whole)"
                                        : nullptr;
    if (bad) return report(Status::Error(Code::kInvalidArgument, "--topology ring does not take %s", bad));
  } else if (!o.listen.empty()) {
    return report(Status::Error(Code::kInvalidArgument, "--listen is for --topology ring --nodes (where the last node connects)"));
  }
  const KernelSet* kernels = nullptr;
  if (Status st = find_kernels(o.m.kernels, &kernels); !st.ok()) return report(st);
  std::unique_ptr<SliceSource> source;
  if (Status st = SliceSource::open(o.m.model, o.m.load_options(), &source); !st.ok()) return report(st);
  const LlamaConfig& cfg = source->config();
  const int ctx_len = o.m.ctx > 0 ? o.m.ctx : cfg.seq_len;
  if (ctx_len > cfg.seq_len) return report(Status::Error(Code::kInvalidArgument, "-c %d is longer than the model's context of %d", ctx_len, cfg.seq_len));

  std::unique_ptr<Tokenizer> tok;
  std::string tok_source;
  const Status tok_status = load_tokenizer(source->loaded(), o.m.tokenizer, &tok, &tok_source);
  std::vector<int> prompt;
  if (o.prompt_ids_given) {
    if (Status st = parse_prompt_ids(o.prompt_ids, cfg.vocab_size, &prompt); !st.ok()) return report(st);
  } else {
    if (!tok_status.ok()) return report(tok_status);
    EncodeOptions eo;
    eo.add_bos = !o.no_bos && tok->wants_bos();
    if (Status st = tok->encode(o.prompt, eo, &prompt); !st.ok()) return report(st);
    if (prompt.empty()) return report(Status::Error(Code::kInvalidArgument, "the prompt is empty and --no-bos leaves no token"));
  }

  HostThreadPool pool(o.m.threads, kHostMinParallelWork);
  LayerSplitter splitter;  // before the master, which re-plans with it
  LocalNodes local;
  LocalRing local_ring;
  std::unique_ptr<cluster::RingMaster> ring_master;  // after `local`: its links close before the nodes are stopped
  std::vector<std::unique_ptr<cluster::RingStream>> rstreams;  // after ring_master: closed before it goes
  std::unique_ptr<cluster::ClusterMaster> master;
  std::vector<std::unique_ptr<cluster::ClusterStream>> cstreams;
  std::vector<std::unique_ptr<cluster::RoundedChain>> sims;
  std::vector<StreamRun> runs(static_cast<size_t>(o.streams));
  const Clock::time_point t_start = Clock::now();
  splitter.o = &o;
  splitter.model = &source->loaded();
  splitter.n_layers = cfg.n_layers;
  splitter.note = [](const std::string& m) { std::fprintf(stderr, "mcullm cluster: %s\n", m.c_str()); };
  if (o.split != "even")
    if (Status st = load_board_profile(o.board, &splitter.board); !st.ok()) return report(st);
  // The first split (--local's nodes start on it; --simulate computes with it); the master re-plans with the same splitter.
  std::vector<SliceRange> plan;
  if (o.local > cfg.n_layers)
    return report(Status::Error(Code::kInvalidArgument, "--local %d: the model has only %d layers", o.local, cfg.n_layers));
  cluster::RingOptions ro;
  int ring_nodes = o.local;
  if (ring && o.local == 0)
    if (Status st = remote_ring(o, &ring_nodes, &ro.wire); !st.ok()) return report(st);
  if (o.simulate || o.local > 0 || ring) {
    std::string table;
    if (Status st = splitter.split(ring ? ring_nodes : o.local > 0 ? o.local : 6, &plan, &table); !st.ok()) return report(st);
    if (!o.quiet && !table.empty()) std::fprintf(stderr, "%s", table.c_str());
  }
  if (ring) {
    ro.ranges = plan;
    ro.master.ctx_len = ctx_len;
    ro.master.encoding = enc;
    ro.master.timeout_ms = o.timeout_ms;
    ro.master.streams = o.streams;
    ro.log = [](const std::string& m) { std::fprintf(stderr, "mcullm cluster: %s\n", m.c_str()); };
    if (o.local > 0) {
      local_ring.o = &o;
      local_ring.plan = plan;
      local_ring.nodes = &local;
      ro.wire = [&local_ring](std::unique_ptr<cluster::Transport>* a, std::unique_ptr<cluster::Transport>* b) { return local_ring.wire(a, b); };
      ro.rebuild = true;
    }
    ring_master = std::make_unique<cluster::RingMaster>(&source->loaded().model, &pool, kernels, ro);
    if (Status st = ring_master->start(); !st.ok()) return report(st);
    std::fprintf(stderr, "mcullm cluster: plan: %s\n", ring_master->plan_text().c_str());
    for (StreamRun& r : runs) {
      rstreams.emplace_back();
      if (Status st = ring_master->open_stream(&rstreams.back()); !st.ok()) return report(st);
      r.decoder = rstreams.back().get();
    }
  } else if (o.simulate) {
    for (StreamRun& r : runs) {
      sims.push_back(std::make_unique<cluster::RoundedChain>());
      if (Status st = sims.back()->init(source.get(), plan, enc, ctx_len, &pool, kernels); !st.ok()) return report(st);
      r.decoder = sims.back().get();
    }
  } else {
    std::vector<cluster::NodeEndpoint> eps;
    Status st = o.local > 0 ? local_endpoints(o, plan, &local, &eps) : remote_endpoints(o.nodes, &eps);
    if (!st.ok()) return report(st);
    cluster::MasterOptions mo;
    mo.encoding = enc;
    mo.ctx_len = ctx_len;
    mo.timeout_ms = o.timeout_ms;
    mo.heartbeat_ms = o.heartbeat_ms;
    mo.max_layers = o.max_layers;
    mo.rejoin_ms = o.rejoin_ms;
    mo.split = [&splitter](int nodes, std::vector<SliceRange>* out) { return splitter.split(nodes, out); };
    master = std::make_unique<cluster::ClusterMaster>(source.get(), &pool, kernels, mo);
    if (st = master->start(eps); !st.ok()) return report(st);
    std::fprintf(stderr, "mcullm cluster: plan: %s\n", master->plan_text().c_str());
    for (StreamRun& r : runs) {
      cstreams.emplace_back();
      if (st = master->open_stream(&cstreams.back()); !st.ok()) return report(st);
      r.decoder = cstreams.back().get();
    }
  }
  const double setup_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start).count();

  GenerateOptions go;
  go.n_predict = o.n_predict;
  go.stop_a = tok_status.ok() ? tok->bos_id() : -1;
  go.stop_b = tok_status.ok() ? tok->eos_id() : -1;
  if (o.bench > 0) {
    if (!master) return report(Status::Error(Code::kInvalidArgument, "--bench needs nodes (--local N or --nodes)"));
    return bench(o, *source, *master, prompt, go, &pool, kernels, ctx_len);
  }
  std::vector<Decoder*> decoders;
  for (StreamRun& r : runs) decoders.push_back(r.decoder);
  double gen_ms = 0;
  if (Status st = generate_streams(o, prompt, go, cfg.vocab_size, decoders, &runs, &gen_ms); !st.ok()) return report(st);

  int failed = 0;
  const int tokens = tokens_evaluated(runs, prompt.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    StreamRun& r = runs[i];
    if (!r.status.ok()) {
      std::fprintf(stderr, "mcullm: error: stream %zu: %s\n", i, r.status.message());
      ++failed;
      continue;
    }
    if (!o.quiet && tok_status.ok()) {
      // As `mcullm run` prints it: the prompt's BOS is not text.
      std::string text = prompt[0] == tok->bos_id() ? std::string() : tok->decode_step(-1, prompt[0]);
      int prev = prompt[0];
      for (size_t k = 1; k < prompt.size(); ++k) text += tok->decode_step(prev, prompt[k]), prev = prompt[k];
      for (int id : r.out) text += tok->decode_step(prev, id), prev = id;
      if (runs.size() > 1) std::printf("[stream %zu] ", i);
      std::printf("%s\n", text.c_str());
    }
    if (o.fingerprint) {
      if (runs.size() > 1) std::printf("stream %zu ", i);
      std::printf("fingerprint %016" PRIx64 " tokens %016" PRIx64 " logits %016" PRIx64 "\n", r.fp.combined(), r.fp.tokens(), r.fp.logits());
    }
  }
  std::fflush(stdout);
  std::string replans = master && master->replans() ? ", " + std::to_string(master->replans()) + " re-plan(s)" : "";
  if (ring_master && ring_master->rebuilds()) replans += ", " + std::to_string(ring_master->rebuilds()) + " ring rebuild(s)";
  if (ring_master && ring_master->resends())
    replans += ", " + std::to_string(ring_master->resends()) + " hidden state(s) sent again after a corrupt frame";
  if (failed) {  // no speed: the failed streams' tokens were not all evaluated
    std::fprintf(stderr, "mcullm cluster: %d of %d stream%s failed (seed %lld)%s\n", failed, o.streams, o.streams == 1 ? "" : "s",
                 static_cast<long long>(o.seed), replans.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "mcullm cluster: %d stream%s, %d tokens evaluated in %.1f ms: %.2f tokens/s (setup %.1f ms), seed %lld%s\n",
               o.streams, o.streams == 1 ? "" : "s", tokens, gen_ms, 1000.0 * tokens / gen_ms, setup_ms,
               static_cast<long long>(o.seed), replans.c_str());
  return 0;
}

}  // namespace

void add_cluster_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ClusterOptions>();
  CLI::App* cmd = app.add_subcommand("cluster", "Generate through a cluster of nodes (`mcullm node`), each running some layers");
  add_model_options(cmd, &o->m, kTokenizerFlag | kCtxFlag | kThreadsFlag | kKernelsFlag | kKvFlag,
                    {.model = "Model file (the nodes' slices are checked against it by hash)",
                     .threads = "Threads of the master (embedding, head)"});
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  CLI::Option* prompt_ids = cmd->add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids, e.g. 1,403,407 (no BOS is added)");
  cmd->add_flag("--no-bos", o->no_bos, "Do not put BOS before the encoded prompt");
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate per stream")->check(CLI::Range(0, 1 << 24));
  add_seed_option(cmd, &o->seed, "Sampling seed, stream i uses seed + i");
  cmd->add_option("--temp", o->temp, "Temperature (0 = greedy)")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", o->top_k, "Top-k (0 = off)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", o->top_p, "Top-p (1 = off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", o->min_p, "Min-p (0 = off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--node-threads", o->node_threads, "--local: threads of each node")->check(CLI::Range(1, 256));
  cmd->add_flag("--fingerprint", o->fingerprint, "Print each stream's fingerprint (as `mcullm run --fingerprint`)");
  cmd->add_flag("-q,--quiet", o->quiet, "Do not print the generated text");
  cmd->add_option("--hidden", o->hidden, "Hidden state on the links: f32 (bit-identical to one process), f16 or int8")
      ->check(CLI::IsMember({"f32", "f16", "int8"}));
  cmd->add_option("--local", o->local, "Start N local node processes (layers split as --split says)")->check(CLI::Range(0, 256));
  CLI::Option* split = cmd->add_option("--split", o->split,
                  "How the layers are cut over the nodes, at start and at every re-plan: plan (the partition planner's split for "
                  "--board, as `convert --image --nodes N` cuts board images; the default, falling back to even with a note when "
                  "the planner has no split) or even")
      ->check(CLI::IsMember({"plan", "even"}));
  cmd->add_option("--board", o->board, std::string("--split plan: the board profile the planner splits for (") + board_preset_names() +
                  " or a JSON profile file)");
  cmd->add_option("--link", o->link, "--local: tcp (127.0.0.1) or pty (a pseudo-terminal per node, paced by --rate)")
      ->check(CLI::IsMember({"tcp", "pty"}));
  cmd->add_option("--rate", o->rate, "--link pty: bits per second each way (0: unpaced)");
  cmd->add_option("--nodes", o->nodes, "Nodes already listening: HOST:PORT,... in layer order (ring: in ring order)");
  cmd->add_option("--topology", o->topology,
                  "star (each node on its own link to the master; the default) or ring (master -> node 1 -> ... -> node N -> "
                  "master, as the boards are wired, with the boards' master and node logic: `mcullm node --ring`)")
      ->check(CLI::IsMember({"star", "ring"}));
  cmd->add_option("--listen", o->listen, "--topology ring --nodes: HOST:PORT the last node sends to (its --next)");
  cmd->add_flag("--simulate", o->simulate, "No nodes: the same arithmetic in one process (--local N's cuts, default 6), rounding the hidden state as --hidden");
  cmd->add_option("--streams", o->streams, "Sequences generated at once (seeds seed, seed + 1, ...)")->check(CLI::Range(1, 64));
  cmd->add_option("--timeout-ms", o->timeout_ms, "A node that does not answer within this is failed")->check(CLI::Range(50, 600000));
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, "Heartbeat period")->check(CLI::Range(10, 60000));
  cmd->add_option("--max-layers", o->max_layers, "Layers one node holds at most (re-planning after a failure respects it; 0: any)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--rejoin-ms", o->rejoin_ms, "With no room left after a failure, wait this long for the node to come back")
      ->check(CLI::Range(0, 600000));
  cmd->add_option("--bench", o->bench, "Speed: ROUNDS of one process vs the cluster with 1 .. --streams streams (medians, ratios)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--node-fault", o->node_faults, "Test hook for --local: NODE:KIND:AFTER (kind kill, stop, flip, exit), see `mcullm node --fault`");
  cmd->callback([o, exit_code, prompt_ids, split] {
    o->prompt_ids_given = prompt_ids->count() > 0;
    o->split_given = split->count() > 0;
    *exit_code = cluster_main(*o);
  });
}

}  // namespace mcullm::cli
