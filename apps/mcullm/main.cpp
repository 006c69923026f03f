// mcullm: run, convert and make models. See README.md for a tour.
#include <cstring>
#include <string>
#include <vector>

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

}  // namespace mcullm::cli

int main(int argc, char** argv) {
  // The seed's single-dash spellings (-temp, -cnv, -sys) are long options here.
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-temp") a = "--temp";
    if (a == "-cnv") a = "--cnv";
    if (a == "-sys") a = "--sys";
  }
  std::vector<char*> fixed;
  for (std::string& a : args) fixed.push_back(a.data());

  CLI::App app{"mcullm: small language models on microcontrollers and PCs, bit for bit the same"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mcullm ") + mcullm::cli::version_string());
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.footer("Exit codes: 0 ok, 1 failure, 2 usage error, 3 the model does not fit the board, 4 I/O error (docs/cli.md).");
  int exit_code = 0;
  // Registering a subcommand builds all its options, validators and help strings: for all of them
  // that took longer than a small model's whole run. When argv[1] names one, only it is registered
  // (its parse, help and errors are the same); otherwise (--help, a typo) all of them are.
  using Add = void (*)(CLI::App&, int*);
  struct Command {
    const char* names[3];
    Add add;
  };
  static const Command kCommands[] = {
      {{"run"}, mcullm::cli::add_run_command},
      {{"dummy"}, mcullm::cli::add_dummy_command},
      {{"convert"}, mcullm::cli::add_convert_command},
      {{"eval"}, mcullm::cli::add_eval_command},
      {{"tokenize", "detokenize", "convert-tokenizer"}, mcullm::cli::add_tokenize_commands},
      {{"serve"}, mcullm::cli::add_serve_command},
      {{"bench"}, mcullm::cli::add_bench_command},
      {{"tune"}, mcullm::cli::add_tune_command},
      {{"head"}, mcullm::cli::add_head_command},
      {{"plan"}, mcullm::cli::add_plan_command},
      {{"node"}, mcullm::cli::add_node_command},
      {{"cluster"}, mcullm::cli::add_cluster_command},
  };
  Add only = nullptr;
  for (const Command& c : kCommands)
    for (const char* name : c.names)
      if (name && args.size() > 1 && args[1] == name) only = c.add;
  for (const Command& c : kCommands)
    if (!only || c.add == only) c.add(app, &exit_code);
  try {
    app.parse(static_cast<int>(fixed.size()), fixed.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every parse error is a usage error.
    return app.exit(e) == 0 ? mcullm::cli::kExitOk : mcullm::cli::kExitUsage;
  }
  // Whatever a command printed must have reached stdout (a full disk, a closed pipe).
  if (const mcullm::Status st = mcullm::cli::stdout_status(); !st.ok()) {
    const int code = mcullm::cli::report(st);
    if (exit_code == 0) exit_code = code;
  }
  return exit_code;
}
