// mcullm: run, convert and make models. See README.md for a tour.
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"

namespace mcullm::cli {

int report(const Status& st) {
  std::fprintf(stderr, "mcullm: error: %s (%s)\n", st.message(), code_name(st.code()));
  return st.code() == Code::kInvalidArgument ? 2 : 1;
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
    return app.exit(e);
  }
  return exit_code;
}
