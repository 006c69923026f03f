// `mcullm plan`: where a model's weights and buffers go on a board (host/board_profile.h), the bytes
// each token reads per tier, tensor class and stage, and the predicted ms per stage and tokens/s
// (host/cost_model.h); `--calibration` prints the cost model's calibration (docs/cost-model.md).
#include <cstdio>
#include <memory>

#include "cli.h"
#include "host/cost_model.h"
#include "host/cost_model_calibration.h"

namespace mcullm::cli {

namespace {

struct PlanOptions {
  std::string model, board = "esp32s3-psram80";
  int ctx = 0, pos = -1, threads = 1, kv_bytes = 4, head_groups = 0, head_top = 0;
  bool f32_activations = false, calibration = false, fit = false;
  KvType kv = KvType::kF32;
};

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
  if (o.model.empty()) return report(Status::Error(Code::kInvalidArgument, "plan: -m MODEL is required"));
  BoardProfile board;
  if (Status st = load_board_profile(o.board, &board); !st.ok()) return report(st);
  LoadOptions lo;
  lo.f32_activations = o.f32_activations;
  lo.kv = o.kv;
  std::unique_ptr<LoadedModel> lm;
  if (Status st = load_model(o.model, lo, &lm); !st.ok()) return report(st);
  CostOptions co;
  co.ctx_len = o.ctx;
  co.pos = o.pos;
  co.threads = o.threads;
  co.kv_bytes = o.kv_bytes;
  co.head_groups = o.head_groups;
  co.head_top = o.head_top;
  CostReport r;
  if (Status st = cost_model(*lm, board, co, &r); !st.ok()) return report(st);
  std::fputs(format_cost_report(*lm, board, co, r).c_str(), stdout);
  std::string table;
  if (Status st = format_position_table(*lm, board, co, &table); !st.ok()) return report(st);
  std::fputs(table.c_str(), stdout);
  if (!r.fits) std::fprintf(stderr, "mcullm: error: the model does not fit on %s: %s\n", board.name.c_str(), r.overflow.c_str());
  return r.fits ? 0 : 3;
}

}  // namespace

void add_plan_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Memory tiers of a model on a board, predicted ms per stage and tokens/s (cost model)");
  cmd->add_option("-m,--model", o->model, "Model file (any format run reads)")->check(CLI::ExistingFile);
  cmd->add_option("--board", o->board, std::string("Board preset (") + board_preset_names() + ") or a JSON profile file");
  cmd->add_option("--ctx", o->ctx, "Context length (default: the model's)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--pos", o->pos, "Position of the predicted token (default: the context's last)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-t,--threads", o->threads, "Cores: 1 or 2")->check(CLI::Range(1, 2));
  cmd->add_option("--kv-bytes", o->kv_bytes, "Predict a KV cache of this many bytes per element: 4 (f32), 2, or 1 (int8; --kv int8 runs one)")
      ->check(CLI::IsMember({1, 2, 4}));
  cmd->add_option("--head-groups", o->head_groups, "Predict a two-stage head of this many groups (`mcullm head`)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--head-top", o->head_top, "Groups the two-stage head reads (with --head-groups; default 16)")->check(CLI::Range(1, 65536));
  cmd->add_flag("--f32-activations", o->f32_activations, "PLE models: f32 activations (as esp32-ai's C core)");
  add_kv_option(cmd, &o->kv);
  cmd->add_flag("--calibration", o->calibration, "Print the calibration points: published vs predicted (no model needed)");
  cmd->add_flag("--fit", o->fit, "With --calibration: rerun the fit and print the fitted figures");
  cmd->callback([o, exit_code] {
    if (o->head_top > 0 && o->head_groups == 0) {
      *exit_code = report(Status::Error(Code::kInvalidArgument, "plan: --head-top needs --head-groups"));
      return;
    }
    if (o->head_groups > 0 && o->head_top == 0) o->head_top = 16;
    *exit_code = run_plan(*o);
  });
}

}  // namespace mcullm::cli
