// mcullm: run, convert and make models. See README.md for a tour.
#include <string>
#include <vector>

#include "cli.h"

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

  // Never destroyed (a static pointer keeps it reachable for leak checkers): freeing every option,
  // validator and help string at exit was ~5% of a short run's instructions (callgrind), and the
  // commands' options own nothing the process's exit does not release.
  static CLI::App* const app = new CLI::App{mcullm::cli::kAppDescription};
  int exit_code = 0;
  mcullm::cli::build_app(*app, &exit_code, args.size() > 1 ? args[1].c_str() : nullptr);
  try {
    app->parse(static_cast<int>(fixed.size()), fixed.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every parse error is a usage error.
    return app->exit(e) == 0 ? mcullm::cli::kExitOk : mcullm::cli::kExitUsage;
  }
  // Whatever a command printed must have reached stdout (a full disk, a closed pipe).
  if (const mcullm::Status st = mcullm::cli::stdout_status(); !st.ok()) {
    const int code = mcullm::cli::report(st);
    if (exit_code == 0) exit_code = code;
  }
  return exit_code;
}
