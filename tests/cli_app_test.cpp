// The CLI app built in process (apps/mcullm/app.cpp): `mcullm SUB ...` registers only SUB, and that
// must not change anything a user sees: every subcommand's --help, and its errors and exit codes,
// equal what the app with every subcommand registered prints (the reference: no dispatch at all).
// Only arguments that stop in the parser are used (help, unknown options), so no command runs.
#include <CLI/CLI.hpp>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Outcome {
  bool parse_error = false;
  int exit_code = -1;  // CLI11's exit code for the error (0 for --help)
  std::string out, err;
};

// Parses `args` (argv[0] first) with the app main() builds; `dispatch` = false registers every
// subcommand whatever argv[1] is.
Outcome parse(const std::vector<std::string>& args, bool dispatch) {
  CLI::App app{cli::kAppDescription};
  int exit_code = 0;
  cli::build_app(app, &exit_code, dispatch && args.size() > 1 ? args[1].c_str() : nullptr);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  Outcome r;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    r.parse_error = true;
    r.exit_code = app.exit(e, out, err);
    r.out = out.str();
    r.err = err.str();
  }
  return r;
}

// Every subcommand's name, from the app with all of them registered.
std::vector<std::string> subcommand_names() {
  CLI::App app{cli::kAppDescription};
  int exit_code = 0;
  cli::build_app(app, &exit_code, nullptr);
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

TEST(CliApp, EverySubcommandIsRegisteredAndListedInTopLevelHelp) {
  const std::vector<std::string> names = subcommand_names();
  EXPECT_GE(names.size(), 14u);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  const Outcome help = parse({"mcullm", "--help"}, true);
  ASSERT_TRUE(help.parse_error);
  EXPECT_EQ(help.exit_code, 0);
  for (const std::string& name : names)
    EXPECT_NE(help.out.find("\n  " + name + " "), std::string::npos) << name << " missing from:\n" << help.out;
}

TEST(CliApp, OneSubcommandRegisteredParsesAsAllRegistered) {
  const std::vector<std::vector<std::string>> tails = {
      {"--help"}, {"-h"}, {"--bogus"}, {"--version"}, {"-h", "--bogus"}, {"--bogus", "--help"}, {"-m"},
  };
  for (const std::string& name : subcommand_names()) {
    for (const auto& tail : tails) {
      std::vector<std::string> args = {"mcullm", name};
      args.insert(args.end(), tail.begin(), tail.end());
      std::string joined;
      for (const auto& a : args) joined += a + " ";
      const Outcome one = parse(args, true), all = parse(args, false);
      ASSERT_TRUE(all.parse_error) << joined << "parsed: the case list must stop in the parser";
      EXPECT_TRUE(one.parse_error) << joined;
      EXPECT_EQ(one.exit_code, all.exit_code) << joined;
      EXPECT_EQ(one.out, all.out) << joined;
      EXPECT_EQ(one.err, all.err) << joined;
    }
    // The help lists the subcommand's options (a property of the text, not only of the comparison).
    const Outcome help = parse({"mcullm", name, "--help"}, true);
    EXPECT_EQ(help.exit_code, 0) << name;
    EXPECT_NE(help.out.find("Usage: mcullm " + name + " [OPTIONS]"), std::string::npos) << help.out;
    EXPECT_NE(help.out.find("-h,--help"), std::string::npos) << help.out;
  }
}

TEST(CliApp, UnknownSubcommandsAndTopLevelErrors) {
  // argv[1] names no subcommand: every one is registered, the error is CLI11's usage error.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"mcullm"}, {"mcullm", "rnu"}, {"mcullm", "--bogus"}, {"mcullm", "-x", "run"}}) {
    const Outcome r = parse(args, true);
    EXPECT_TRUE(r.parse_error) << args.back();
    EXPECT_NE(r.exit_code, 0) << args.back();
    EXPECT_FALSE(r.err.empty()) << args.back();
    EXPECT_NE(r.err.find("Run with --help for more information."), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace mcullm
