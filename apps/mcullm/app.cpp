// The mcullm command line as a CLI11 app: the top-level settings and the subcommands.
#include <cstring>
#include <string>

#include "cli.h"

namespace mcullm::cli {

int report(const Status& st) {
  std::fprintf(stderr, "mcullm: error: %s (%s)\n", st.message(), code_name(st.code()));
  switch (st.code()) {
    case Code::kInvalidArgument:
      return kExitUsage;
    case Code::kIo:
      return kExitIo;
    default:
      return kExitFailure;
  }
}

const char* const kAppDescription = "mcullm: small language models on microcontrollers and PCs, bit for bit the same";

void build_app(CLI::App& app, int* exit_code, const char* first_arg) {
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mcullm ") + version_string());
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.footer("Exit codes: 0 ok, 1 failure, 2 usage error, 3 the model does not fit the board, 4 I/O error (docs/cli.md).");
  // Registering a subcommand builds all its options, validators and help strings: for all of them
  // that took longer than a small model's whole run. When argv[1] names one, only it is registered
  // (its parse, help and errors are the same: tests/cli_app_test.cpp); otherwise (--help, a typo)
  // all of them are.
  using Add = void (*)(CLI::App&, int*);
  struct Command {
    const char* names[3];
    Add add;
  };
  static const Command kCommands[] = {
      {{"run"}, add_run_command},
      {{"dummy"}, add_dummy_command},
      {{"convert"}, add_convert_command},
      {{"eval"}, add_eval_command},
      {{"tokenize", "detokenize", "convert-tokenizer"}, add_tokenize_commands},
      {{"serve"}, add_serve_command},
      {{"bench"}, add_bench_command},
      {{"tune"}, add_tune_command},
      {{"head"}, add_head_command},
      {{"plan"}, add_plan_command},
      {{"node"}, add_node_command},
      {{"cluster"}, add_cluster_command},
  };
  Add only = nullptr;
  for (const Command& c : kCommands)
    for (const char* name : c.names)
      if (name && first_arg && std::strcmp(first_arg, name) == 0) only = c.add;
  for (const Command& c : kCommands)
    if (!only || c.add == only) c.add(app, exit_code);
}

}  // namespace mcullm::cli
