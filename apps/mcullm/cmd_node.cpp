// `mcullm node`: serves one layer range of a model to a cluster master (cluster/node_server_host.h)
// over TCP (--listen HOST:PORT, masters one after another) or a serial device / pseudo-terminal
// (--serial PATH, with --rate to pace it like an SPI or UART link).
#include <cstdio>
#include <memory>

#include "cluster/node_server_host.h"
#include "cluster/transport_host.h"
#include "session.h"

namespace mcullm::cli {

namespace {

struct NodeCliOptions {
  ModelOptions m;  // -m, -c, -t, --kernels, --kv
  std::string layers, listen, serial, fault;
  int max_layers = 0, max_streams = 16, fault_after = 0;
  uint64_t rate = 0;
  bool once = false;
};

Status split_host_port(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const long p = colon == std::string::npos ? -1 : std::strtol(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || !end || *end != '\0' || end == text.c_str() + colon + 1 || p < 0 || p > 65535)
    return Status::Error(Code::kInvalidArgument, "'%s' is not HOST:PORT", text.c_str());
  *host = text.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(p);
  return Status::Ok();
}

int node(const NodeCliOptions& o) {
  warn_threads(o.m.threads);
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
  cmd->add_option("--layers", o->layers, "Layers A:B to load at start (the master may assign others)")->required();
  cmd->add_option("--listen", o->listen, "HOST:PORT to accept a master on (port 0: any free port, printed on stdout)");
  cmd->add_option("--serial", o->serial, "Serial device or pseudo-terminal the master is on");
  cmd->add_option("--rate", o->rate, "--serial: pace sending to this many bits per second (0: as fast as it goes)");
  cmd->add_option("--max-layers", o->max_layers, "Refuse to hold more layers than this (0: no limit)")->check(CLI::Range(0, 4096));
  cmd->add_option("--max-streams", o->max_streams, "KV caches (streams) kept at once")->check(CLI::Range(1, 4096));
  cmd->add_flag("--once", o->once, "--listen: exit after the first master disconnects");
  cmd->add_option("--fault", o->fault, "Test hook: fail on purpose after --fault-after hidden states: kill, stop, flip, exit")
      ->check(CLI::IsMember({"kill", "stop", "flip", "exit"}));
  cmd->add_option("--fault-after", o->fault_after, "Hidden states answered before --fault")->check(CLI::Range(0, 1 << 30));
  cmd->callback([o, exit_code] { *exit_code = node(*o); });
}

}  // namespace mcullm::cli
