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
  mcullm::cli::add_run_command(app, &exit_code);
  mcullm::cli::add_dummy_command(app, &exit_code);
  mcullm::cli::add_convert_command(app, &exit_code);
  mcullm::cli::add_eval_command(app, &exit_code);
  mcullm::cli::add_tokenize_commands(app, &exit_code);
  mcullm::cli::add_serve_command(app, &exit_code);
  mcullm::cli::add_bench_command(app, &exit_code);
  mcullm::cli::add_tune_command(app, &exit_code);
  mcullm::cli::add_head_command(app, &exit_code);
  mcullm::cli::add_plan_command(app, &exit_code);
  mcullm::cli::add_node_command(app, &exit_code);
  mcullm::cli::add_cluster_command(app, &exit_code);
  try {
    app.parse(static_cast<int>(fixed.size()), fixed.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
