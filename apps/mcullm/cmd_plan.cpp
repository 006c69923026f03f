// `mcullm plan`: where a model's weights and buffers go on a board (host/board_profile.h), the bytes
// each token reads per tier and tensor class, and the predicted tokens/s (host/cost_model.h).
#include <cstdio>
#include <memory>

#include "cli.h"
#include "host/cost_model.h"

namespace mcullm::cli {

namespace {

struct PlanOptions {
  std::string model, board = "esp32s3-psram80";
  int ctx = 0, pos = -1, threads = 1;
  bool f32_activations = false;
  KvType kv = KvType::kF32;
};

int run_plan(const PlanOptions& o) {
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
  CostReport r;
  if (Status st = cost_model(*lm, board, co, &r); !st.ok()) return report(st);
  std::fputs(format_cost_report(*lm, board, co, r).c_str(), stdout);
  if (!r.fits) std::fprintf(stderr, "mcullm: error: the model does not fit on %s: %s\n", board.name.c_str(), r.overflow.c_str());
  return r.fits ? 0 : 3;
}

}  // namespace

void add_plan_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Memory tiers of a model on a board and its predicted tokens/s (cost model)");
  cmd->add_option("-m,--model", o->model, "Model file (any format run reads)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--board", o->board, std::string("Board preset (") + board_preset_names() + ") or a JSON profile file");
  cmd->add_option("--ctx", o->ctx, "Context length (default: the model's)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--pos", o->pos, "Position of the predicted token (default: the context's last)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-t,--threads", o->threads, "Cores: 1 or 2")->check(CLI::Range(1, 2));
  cmd->add_flag("--f32-activations", o->f32_activations, "PLE models: f32 activations (as esp32-ai's C core)");
  add_kv_option(cmd, &o->kv);
  cmd->callback([o, exit_code] { *exit_code = run_plan(*o); });
}

}  // namespace mcullm::cli
