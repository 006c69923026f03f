// The mcullm command line: each subcommand registers itself on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "mcullm/status.h"

namespace mcullm::cli {

// Each add_* registers a subcommand whose callback stores its exit code in *exit_code.
void add_run_command(CLI::App& app, int* exit_code);
void add_dummy_command(CLI::App& app, int* exit_code);
void add_convert_command(CLI::App& app, int* exit_code);
void add_eval_command(CLI::App& app, int* exit_code);
void add_tokenize_commands(CLI::App& app, int* exit_code);  // tokenize and detokenize
void add_serve_command(CLI::App& app, int* exit_code);
void add_bench_command(CLI::App& app, int* exit_code);
void add_head_command(CLI::App& app, int* exit_code);   // two-stage / pruned vocabulary heads

// Prints "mcullm: error: <message>" to stderr and returns the exit code for a failed status.
int report(const Status& st);

}  // namespace mcullm::cli
