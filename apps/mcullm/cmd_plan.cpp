// `mcullm plan`: where a model's weights and buffers go on a board (plan/board_profile_host.h), the bytes
// each token reads per tier, tensor class and stage, and the predicted ms per stage and tokens/s
// (plan/cost_model_host.h); `--calibration` prints the cost model's calibration (docs/cost-model.md);
// `--cluster N` splits the layers over a chain of N nodes and a master (plan/cluster_plan_host.h,
// docs/cluster.md).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "plan/cluster_plan_host.h"
#include "plan/cost_model_host.h"
#include "plan/cost_model_calibration_host.h"
#include "session.h"

namespace mcullm::cli {

namespace {

struct PlanOptions {
  ModelOptions m;  // -m, --f32-activations, --kv; -c and -t are the board's
  std::string board = "esp32s3-psram80";
  int ctx = 0, pos = -1, threads = 1, kv_bytes = 4, head_groups = 0, head_top = 0, ffn_live = 0;
  bool calibration = false, fit = false;
  // --cluster
  int cluster = 0, streams = 1;
  std::string layout, master_board, hidden = "f32", cuts, linear_type = "i2_s", embd_type = "q4_0";
  bool reference = false, master_layers = false, no_ack = false;
  double link_mhz = 10, frame_overhead_us = 50;
};

// "0,0,4,8" -> cut points; false on anything else.
bool parse_cuts(const std::string& text, std::vector<int>* out) {
  out->clear();
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) return false;
    out->push_back(std::stoi(part));
    at = comma + 1;
  }
  return !out->empty();
}

int run_cluster(const PlanOptions& o) {
  if (o.m.model.empty() == o.layout.empty())
    return report(Status::Error(Code::kInvalidArgument, "plan --cluster: give a model (-m) or a qwen2 layout (--layout ref), not both"));
  if (o.kv_bytes != 4 && o.m.kv == KvType::kInt8)
    return report(Status::Error(Code::kInvalidArgument, "plan --cluster: --kv int8 and --kv-bytes say different things"));
  const int kv_bytes = o.m.kv == KvType::kInt8 ? 1 : o.kv_bytes;
  BoardProfile node, master;
  if (Status st = load_board_profile(o.board, &node); !st.ok()) return report(st);
  if (Status st = load_board_profile(o.master_board.empty() ? o.board : o.master_board, &master); !st.ok()) return report(st);
  ClusterModel cm;
  if (!o.layout.empty()) {
    const DTypeInfo* lin = dtype_info_by_name(o.linear_type.c_str());
    const DTypeInfo* emb = dtype_info_by_name(o.embd_type.c_str());
    if (!lin || !emb) return report(Status::Error(Code::kInvalidArgument, "plan --cluster: unknown weight type"));
    if (Status st = cluster_model_from_qwen2_layout(o.layout, lin->type, emb->type, o.ctx, kv_bytes, o.head_groups, o.head_top, &cm); !st.ok())
      return report(st);
  } else {
    std::unique_ptr<LoadedModel> lm;
    if (Status st = load_model(o.m.model, &lm); !st.ok()) return report(st);
    if (Status st = cluster_model_from_loaded(*lm, o.ctx, kv_bytes, o.head_groups, o.head_top, &cm); !st.ok()) return report(st);
  }
  ClusterOptions co;
  co.nodes = o.cluster;
  co.master_layers = o.master_layers;
  co.threads = o.threads;
  co.pos = o.pos;
  co.streams = o.streams;
  co.link.mhz = o.link_mhz;
  co.link.ack = !o.no_ack;
  co.link.frame_overhead_s = o.frame_overhead_us * 1e-6;
  if (!parse_hidden_precision(o.hidden, &co.link.precision))
    return report(Status::Error(Code::kInvalidArgument, "plan --cluster: --hidden %s (f32, f16 or int8)", o.hidden.c_str()));
  ClusterPlan p;
  if (!o.cuts.empty()) {
    std::vector<int> cuts;
    if (!parse_cuts(o.cuts, &cuts))
      return report(Status::Error(Code::kInvalidArgument, "plan --cluster: --cuts '%s' is not a list of layer numbers (e.g. 0,0,4,8)",
                                  o.cuts.c_str()));
    if (Status st = price_partition(cm, master, node, co, cuts, &p); !st.ok()) return report(st);
  } else if (Status st = plan_cluster(cm, master, node, co, &p); !st.ok()) {
    return report(st);
  }
  std::fputs(format_cluster_plan(cm, master, node, co, p).c_str(), stdout);
  for (const StagePlan& st : p.stages)
    if (!st.fits) {
      std::fprintf(stderr, "mcullm: error: %s does not fit: %s\n", st.name.c_str(), st.overflow.c_str());
      return kExitDoesNotFit;
    }
  return 0;
}

int run_calibration(bool fit) {
  Esp32s3Compute c = esp32s3_preset_compute();
  if (fit) {
    c = calibration_fit(c);
    std::printf("fitted (calibration_fit from the presets' figures):\n");
  } else {
    std::printf("the presets' figures:\n");
  }
  std::fputs(format_calibration(c, calibration_points(c)).c_str(), stdout);
  return 0;
}

int run_plan(const PlanOptions& o) {
  if (o.calibration) return run_calibration(o.fit);
  if (o.fit) return report(Status::Error(Code::kInvalidArgument, "plan: --fit reruns the calibration fit: it needs --calibration"));
  if (o.cluster > 0) return run_cluster(o);
  if (!o.layout.empty() || o.master_layers || !o.cuts.empty() || !o.master_board.empty())
    return report(Status::Error(Code::kInvalidArgument, "plan: --layout, --master-layers, --cuts and --master-board need --cluster N"));
  if (o.m.model.empty()) return report(Status::Error(Code::kInvalidArgument, "plan: -m MODEL is required"));
  BoardProfile board;
  if (Status st = load_board_profile(o.board, &board); !st.ok()) return report(st);
  Session s;
  if (Status st = open_session(o.m, 0, &s); !st.ok()) return report(st);
  const LoadedModel* lm = s.lm.get();
  CostOptions co;
  co.ctx_len = o.ctx;
  co.pos = o.pos;
  co.threads = o.threads;
  co.kv_bytes = o.kv_bytes;
  co.head_groups = o.head_groups;
  co.head_top = o.head_top;
  co.ffn_live_permille = o.ffn_live;
  CostReport r;
  if (Status st = cost_model(*lm, board, co, &r); !st.ok()) return report(st);
  std::fputs(format_cost_report(*lm, board, co, r).c_str(), stdout);
  std::string table;
  if (Status st = format_position_table(*lm, board, co, &table); !st.ok()) return report(st);
  std::fputs(table.c_str(), stdout);
  if (!r.fits) std::fprintf(stderr, "mcullm: error: the model does not fit on %s: %s\n", board.name.c_str(), r.overflow.c_str());
  return r.fits ? 0 : kExitDoesNotFit;
}

}  // namespace

void add_plan_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Memory tiers of a model on a board, predicted ms per stage and tokens/s (cost model)");
  add_model_options(cmd, &o->m, kKvFlag | kF32ActivationsFlag, {.model = "Model file (any format run reads)"});
  cmd->get_option("--model")->required(false);
  cmd->add_option("--board", o->board, std::string("Board preset (") + board_preset_names() + ") or a JSON profile file");
  cmd->add_option("-c,--ctx-size,--ctx", o->ctx, "Context length (default 0: the model's)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--pos", o->pos, "Position of the predicted token (default: the context's last)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-t,--threads", o->threads, "Cores: 1 or 2")->check(CLI::Range(1, 2));
  cmd->add_option("--kv-bytes", o->kv_bytes, "Predict a KV cache of this many bytes per element: 4 (f32), 2, or 1 (int8; --kv int8 runs one)")
      ->check(CLI::IsMember({1, 2, 4}));
  cmd->add_option("--head-groups", o->head_groups, "Predict a two-stage head of this many groups (`mcullm head`)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--head-top", o->head_top, "Groups the two-stage head reads (with --head-groups; default 16)")->check(CLI::Range(1, 65536));
  cmd->add_option("--ffn-live", o->ffn_live,
                  "A ReLU model's FFN gate first: live neurons per mille (up rows read; the firmware's default; "
                  "`mcullm eval` prints the dead share). Default 0: dense")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--calibration", o->calibration, "Print the calibration points: published vs predicted (no model needed)");
  cmd->add_flag("--fit", o->fit, "With --calibration: rerun the fit and print the fitted figures");
  cmd->add_option("--cluster", o->cluster, "Split the layers over a chain of N nodes and a master (docs/cluster.md)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--reference", o->reference, "The ESP32-S3 cluster reference design: --cluster 6 --layout ref, SPI 10 MHz, f32 hidden state");
  cmd->add_option("--layout", o->layout, "With --cluster and no model: a qwen2 layout (ref, small, tiny)");
  cmd->add_option("--linear-type", o->linear_type, "With --layout: the linear layers' type")
      ->check(CLI::IsMember({"i2_s", "tl1", "tl2", "f32", "f16", "q8_0", "q4_0", "q4g64"}));
  cmd->add_option("--embd-type", o->embd_type, "With --layout: the (tied) embedding's type")->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4g64"}));
  cmd->add_option("--master-board", o->master_board, "The master's board (default: --board)");
  cmd->add_flag("--master-layers", o->master_layers, "The master may also hold the first layers");
  cmd->add_option("--link-mhz", o->link_mhz, "SPI clock of each hop, MHz")->check(CLI::Range(0.001, 1000.0));
  cmd->add_option("--hidden", o->hidden, "Hidden state on the link: f32, f16 or int8 (one scale)");
  cmd->add_option("--frame-overhead-us", o->frame_overhead_us, "Fixed cost of one frame (DMA setup, handshake), us")->check(CLI::Range(0.0, 100000.0));
  cmd->add_option("--streams", o->streams, "With --cluster: sequences in flight to plan for (each node keeps a KV cache per stream)")
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--no-ack", o->no_ack, "No ack frame per hidden state");
  cmd->add_option("--cuts", o->cuts, "Price this split instead of planning one: master's first layer 0, then each node's first, "
                                     "then the layer count (the reference design: 0,0,4,8,12,16,20,24)");
  cmd->callback([o, exit_code] {
    if (o->reference) {
      if (o->cluster == 0) o->cluster = 6;
      if (o->layout.empty() && o->m.model.empty()) o->layout = "ref";
    }
    if (o->head_top > 0 && o->head_groups == 0) {
      *exit_code = report(Status::Error(Code::kInvalidArgument, "plan: --head-top needs --head-groups"));
      return;
    }
    if (o->head_groups > 0 && o->head_top == 0) o->head_top = 16;
    *exit_code = run_plan(*o);
  });
}

}  // namespace mcullm::cli
