// `mcullm node`: serves one layer range of a model to a cluster master (cluster/node_server_host.h)
// over TCP (--listen HOST:PORT, masters one after another) or a serial device / pseudo-terminal
// (--serial PATH, with --rate to pace it like an SPI or UART link). With --ring: one board of a ring
// (board/node.h, the firmware's node logic) whose upstream connects to --listen and whose
// downstream is --next (board/transport_spi_link_host.h carries its SPI link over TCP).
#include <signal.h>

#include <cstdio>
#include <memory>

#include "board/node.h"
#include "board/transport_spi_link_host.h"
#include "cluster/node_server_host.h"
#include "cluster/transport_host.h"
#include "session.h"

namespace mcullm::cli {

namespace {

struct NodeCliOptions {
  ModelOptions m;  // -m, -c, -t, --kernels, --kv
  std::string layers, listen, serial, fault, next;
  int max_layers = 0, max_streams = 16, fault_after = 0;
  uint64_t rate = 0;
  bool once = false, ring = false;
  bool max_streams_given = false;  // --ring: else a board node's most slots
};

// --ring: the board node of the firmware (board::Node) with its SPI link over TCP. Order: listen
// (the port on stdout), load the model, connect to the next board (retried while it is not up yet),
// then accept the previous one; so a ring started from its last node to its first, then the master, never waits in
// a circle. It serves that one ring and exits when either link closes (a broken ring is rebuilt
// whole by the master: cluster/ring_master_host.h).
int ring_node(const NodeCliOptions& o) {
  if (o.listen.empty() || o.next.empty())
    return report(Status::Error(Code::kInvalidArgument,
                                "--ring needs --listen HOST:PORT (the previous board connects there) and --next HOST:PORT (the next "
                                "board, or the master for the last node)"));
  if (!o.serial.empty()) return report(Status::Error(Code::kInvalidArgument, "--ring runs over TCP (--listen, --next), not --serial"));
  if (!o.layers.empty())
    return report(Status::Error(Code::kInvalidArgument, "--ring: the master's hello assigns the layers; leave out --layers"));
  if (o.m.kv == KvType::kInt8)
    return report(Status::Error(Code::kInvalidArgument, "--ring: a board node keeps an f32 KV cache; leave out --kv int8"));
  std::string listen_host, next_host;
  uint16_t listen_port = 0, next_port = 0;
  if (Status st = split_host_port(o.listen, &listen_host, &listen_port); !st.ok()) return report(st.prefix("--listen: "));
  if (Status st = split_host_port(o.next, &next_host, &next_port); !st.ok()) return report(st.prefix("--next: "));
  // Listening (and the port on stdout) before the model loads: `cluster --local` starts the next
  // node as soon as it knows this port, so that the nodes load their models at the same time.
  std::unique_ptr<cluster::TcpListener> listener;
  if (Status st = cluster::tcp_listen(listen_host, listen_port, &listener); !st.ok()) return report(st);
  std::printf("listening %u\n", static_cast<unsigned>(listener->port()));  // for `mcullm cluster --local`
  std::fflush(stdout);
  std::fprintf(stderr, "mcullm node: ring node on %s:%u, next %s\n", listen_host.c_str(), static_cast<unsigned>(listener->port()),
               o.next.c_str());
  const KernelSet* kernels = nullptr;
  if (Status st = find_kernels(o.m.kernels, &kernels); !st.ok()) return report(st);
  std::unique_ptr<SliceSource> source;
  if (Status st = SliceSource::open(o.m.model, o.m.load_options(), &source); !st.ok()) return report(st);
  const LlamaModel& model = source->loaded().model;
  const LlamaConfig& cfg = model.cfg;
  const int streams = o.max_streams_given ? o.max_streams : board::kMaxStreamSlots;
  if (streams > board::kMaxStreamSlots)
    return report(Status::Error(Code::kInvalidArgument, "--ring: --max-streams %d, a board node keeps at most %d", streams,
                                board::kMaxStreamSlots));
  // Room for any range the master may assign (every layer, the whole context) in every stream slot,
  // and the frame buffers. Not zeroed: the pages of caches no stream reaches are never touched.
  const size_t bytes = 2 * cluster::kMaxFrameBytes + static_cast<size_t>(cfg.dim) * sizeof(float) + 4096 +
                       static_cast<size_t>(streams) *
                           llama_slice_work_bytes(cfg, SliceRange{0, cfg.n_layers, false}, cfg.seq_len, KvType::kF32);
  std::unique_ptr<uint8_t[]> mem(new uint8_t[bytes]);
  Arena link_arena(Tier::kHost, mem.get(), 2 * cluster::kMaxFrameBytes + 64);
  Arena work(Tier::kHost, mem.get() + 2 * cluster::kMaxFrameBytes + 64, bytes - 2 * cluster::kMaxFrameBytes - 64);

  std::unique_ptr<cluster::Transport> tx, rx;
  constexpr int kWaitForNeighbourMs = 600000;  // the next board may be started by hand
  if (Status st = cluster::tcp_connect(next_host, next_port, kWaitForNeighbourMs, &tx); !st.ok()) return report(st.prefix("--next: "));
  cluster::LinkFailure why = cluster::LinkFailure::kNone;
  if (Status st = listener->accept(kWaitForNeighbourMs, &rx, &why); !st.ok())
    return report(st.prefix("--listen: waiting for the previous board: "));
  listener->close();
  board::TransportSpiLink spi(std::move(tx), std::move(rx));
  board::FrameLink link;
  if (Status st = link.init(spi, link_arena); !st.ok()) return report(st);
  HostThreadPool pool(o.m.threads, kHostMinParallelWork);
  board::NodeOptions no;
  no.ctx_len = o.m.ctx;
  no.max_layers = o.max_layers;
  no.max_streams = streams;
  board::Node node;
  if (Status st = node.init(&model, link, work, &pool, kernels, no); !st.ok()) return report(st);
  std::fprintf(stderr, "mcullm node: ring %s -> this node -> %s\n", spi.describe_rx(), spi.describe_tx());
  bool fault_done = o.fault.empty();
  for (;;) {
    const Status st = node.poll(500);
    if (!st.ok()) {
      if (st.code() != Code::kIo) return report(st);
      // A link closed: the master finished (or rebuilds the ring), or a neighbour died.
      std::fprintf(stderr, "mcullm node: the ring ended (layers %d:%d, %u hidden states served): %s\n", node.range().first,
                   node.range().end, node.hidden_served(), st.message());
      return 0;
    }
    if (!fault_done && node.hidden_served() >= static_cast<uint32_t>(o.fault_after)) {  // test hooks, as the star node's
      fault_done = true;
      if (o.fault == "kill") raise(SIGKILL);
      if (o.fault == "stop") raise(SIGSTOP);
      if (o.fault == "flip") spi.flip_next();
      if (o.fault == "exit") {
        std::fprintf(stderr, "mcullm node: --fault exit: closing the ring's links\n");
        spi.close();
        return 1;
      }
    }
  }
}

int node(const NodeCliOptions& o) {
  warn_threads(o.m.threads);
  if (o.ring) return ring_node(o);
  if (!o.next.empty()) return report(Status::Error(Code::kInvalidArgument, "--next is for a ring node (--ring)"));
  if (o.layers.empty()) return report(Status::Error(Code::kInvalidArgument, "--layers A:B is required (except with --ring)"));
  if (o.listen.empty() == o.serial.empty())
    return report(Status::Error(Code::kInvalidArgument, "give one of --listen HOST:PORT or --serial PATH"));
  cluster::NodeOptions no;
  if (Status st = parse_layer_range(o.layers, "--layers", &no.range); !st.ok()) return report(st);
  no.ctx_len = o.m.ctx;
  no.max_layers = o.max_layers;
  no.max_streams = o.max_streams;
  no.fault = o.fault;
  no.fault_after = o.fault_after;
  const KernelSet* kernels = nullptr;
  if (Status st = find_kernels(o.m.kernels, &kernels); !st.ok()) return report(st);
  std::unique_ptr<SliceSource> source;
  if (Status st = SliceSource::open_node(o.m.model, o.m.load_options(), no.range, &source); !st.ok()) return report(st);
  HostThreadPool pool(o.m.threads, kHostMinParallelWork);
  cluster::NodeServer server(source.get(), no, &pool, kernels);
  if (Status st = server.init(); !st.ok()) return report(st);
  std::fprintf(stderr, "mcullm node: %s layers %d:%d of %d, slice hash %016llx\n", o.m.model.c_str(), server.range().first,
               server.range().end, source->config().n_layers, static_cast<unsigned long long>(server.hash()));

  if (!o.serial.empty()) {
    cluster::SerialOptions so;
    so.rate_bps = o.rate;
    std::unique_ptr<cluster::Transport> link;
    if (Status st = cluster::open_serial_transport(o.serial, so, &link); !st.ok()) return report(st);
    const Status st = server.serve(*link);
    return st.ok() ? 0 : report(st);
  }
  std::string host;
  uint16_t port = 0;
  if (Status st = split_host_port(o.listen, &host, &port); !st.ok()) return report(st);
  std::unique_ptr<cluster::TcpListener> listener;
  if (Status st = cluster::tcp_listen(host, port, &listener); !st.ok()) return report(st);
  // The port on stdout (one line) for whoever started us with port 0 (`mcullm cluster --local`).
  std::printf("listening %u\n", static_cast<unsigned>(listener->port()));
  std::fflush(stdout);
  std::fprintf(stderr, "mcullm node: listening on %s:%u\n", host.c_str(), static_cast<unsigned>(listener->port()));
  for (;;) {
    std::unique_ptr<cluster::Transport> link;
    cluster::LinkFailure why = cluster::LinkFailure::kNone;
    Status st = listener->accept(-1, &link, &why);
    if (!st.ok()) return report(st);
    st = server.serve(*link);
    if (!st.ok()) std::fprintf(stderr, "mcullm node: the master's link failed: %s\n", st.message());
    if (o.once) return st.ok() ? 0 : report(st);
  }
}

}  // namespace

void add_node_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<NodeCliOptions>();
  CLI::App* cmd = app.add_subcommand("node", "Serve a layer range of a model to a cluster master (`mcullm cluster`)");
  add_model_options(cmd, &o->m, kCtxFlag | kThreadsFlag | kKernelsFlag | kKvFlag,
                    {.model = "Model file (the master checks the slice by hash)",
                     .ctx = "Context length (default: the model's; the master's hello sets it)"});
  cmd->add_option("--layers", o->layers, "Layers A:B to load at start (the master may assign others); not with --ring");
  cmd->add_option("--listen", o->listen, "HOST:PORT to accept a master on (port 0: any free port, printed on stdout)");
  cmd->add_option("--serial", o->serial, "Serial device or pseudo-terminal the master is on");
  cmd->add_option("--rate", o->rate, "--serial: pace sending to this many bits per second (0: as fast as it goes)");
  cmd->add_option("--max-layers", o->max_layers, "Refuse to hold more layers than this (0: no limit)")->check(CLI::Range(0, 4096));
  CLI::Option* max_streams =
      cmd->add_option("--max-streams", o->max_streams,
                      "KV caches (streams) kept at once (default 16; --ring: stream slots, 1..8, default 8)")
          ->check(CLI::Range(1, 4096));
  cmd->add_flag("--ring", o->ring,
                "Be one board of a ring (`cluster --topology ring`): frames come from the previous board on --listen and go to "
                "--next; the master's hello assigns the layers");
  cmd->add_option("--next", o->next, "--ring: HOST:PORT of the next board (the master's --listen for the last node)");
  cmd->add_flag("--once", o->once, "--listen: exit after the first master disconnects");
  cmd->add_option("--fault", o->fault, "Test hook: fail on purpose after --fault-after hidden states: kill, stop, flip, exit")
      ->check(CLI::IsMember({"kill", "stop", "flip", "exit"}));
  cmd->add_option("--fault-after", o->fault_after, "Hidden states answered before --fault")->check(CLI::Range(0, 1 << 30));
  cmd->callback([o, exit_code, max_streams] {
    o->max_streams_given = max_streams->count() > 0;
    *exit_code = node(*o);
  });
}

}  // namespace mcullm::cli
