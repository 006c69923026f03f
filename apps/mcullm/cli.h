// The mcullm command line: each subcommand registers itself on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "mcullm/status.h"
#include "model/transformer.h"

namespace mcullm::cli {

// Each add_* registers a subcommand whose callback stores its exit code in *exit_code.
void add_run_command(CLI::App& app, int* exit_code);
void add_dummy_command(CLI::App& app, int* exit_code);
void add_convert_command(CLI::App& app, int* exit_code);
void add_eval_command(CLI::App& app, int* exit_code);
void add_tokenize_commands(CLI::App& app, int* exit_code);  // tokenize and detokenize
void add_serve_command(CLI::App& app, int* exit_code);
void add_bench_command(CLI::App& app, int* exit_code);
void add_tune_command(CLI::App& app, int* exit_code);
void add_plan_command(CLI::App& app, int* exit_code);  // board placement and the cost model

// --use-pretuned / --tuning FILE: the LUT-kernel tilings `mcullm tune` stored; dummy / convert pack
// tl1 / tl2 with them, run / bench note the TL matrices a file packed otherwise (host/model_loader.h).
struct PretunedOptions {
  bool use = false;
  std::string file;
};
void add_pretuned_options(CLI::App* cmd, PretunedOptions* o);
// Installs the stored tilings process-wide when asked (kernels/tl_tuning.h tl_tiling_for), else the
// built-in defaults; an error for a missing or malformed file.
Status apply_pretuned(const PretunedOptions& o);

void add_head_command(CLI::App& app, int* exit_code);   // two-stage / pruned vocabulary heads
void add_node_command(CLI::App& app, int* exit_code);     // a cluster node (cmd_node.cpp)
void add_cluster_command(CLI::App& app, int* exit_code);  // the cluster master (cmd_cluster.cpp)

// --kv f32|int8 (run, eval, bench, plan): sets *kv (model/transformer.h KvType) when given.
void add_kv_option(CLI::App* cmd, KvType* kv);

// Prints "mcullm: error: <message>" to stderr and returns the exit code for a failed status.
int report(const Status& st);

}  // namespace mcullm::cli
