// Helpers shared by the tests: where ../shared is, running the CLI, reading files.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mcullm::test {

// ../shared beside the source tree (or $MCULLM_SHARED). Empty when missing.
std::string shared_dir();
// Path of a file under ../shared; fails the current test with a clear message when ../shared is missing.
std::string shared_path(const std::string& relative);
#define MC_REQUIRE_SHARED()                                                                  \
  do {                                                                                       \
    if (::mcullm::test::shared_dir().empty())                                                \
      FAIL() << "../shared is missing (looked beside the source tree and at $MCULLM_SHARED): " \
                "this test reads the shared models and data";                                \
  } while (0)

std::string cli_path();
// A fresh empty directory for this test's outputs.
std::string temp_dir();

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs the mcullm CLI with the given arguments (each passed as one argv entry).
CommandResult run_cli(const std::vector<std::string>& args);
// The same with `input` on its stdin (written whole, then closed: keep it under 64 KiB).
CommandResult run_cli(const std::vector<std::string>& args, const std::string& input);

// The raw text of the value of a flat "key": value field in JSON the CLI printed (numbers are
// compared as text so that two runs can be checked bit for bit), or "" when missing.
std::string json_raw(const std::string& json, const std::string& key);

std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
std::string read_text(const std::string& path);

}  // namespace mcullm::test
