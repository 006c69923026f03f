// Helpers shared by the tests: where ../shared is, running the CLI, reading files.
#pragma once
#include <gtest/gtest.h>

#include <sys/types.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "mcullm/status.h"

namespace mcullm {
class Decoder;
class Llama2cTokenizer;
}

// A Status that must be ok, its message shown when it is not.
#define ASSERT_OK(expr)                      \
  do {                                       \
    const ::mcullm::Status st_ = (expr);     \
    ASSERT_TRUE(st_.ok()) << st_.message();  \
  } while (0)
#define EXPECT_OK(expr)                      \
  do {                                       \
    const ::mcullm::Status st_ = (expr);     \
    EXPECT_TRUE(st_.ok()) << st_.message();  \
  } while (0)

namespace mcullm::test {

// Batched prefill against one forward per token: `single` runs forward on tokens 0..n-1, `batched`
// (a fresh context of the same model with max_batch() > 1) takes them in chunks of 1, 3, max_batch()
// and the rest; every logits row must have the same bits. A chunk without logits must fill the cache
// alike (the next forward's logits equal). Batches of 0 and max_batch() + 1 tokens and a bad token
// id are refused.
void expect_prefill_matches_forward(Decoder& single, Decoder& batched, const std::vector<int>& tokens);

// A word-free SentencePiece vocabulary of n >= 259 pieces: <unk>, <s>, </s>, the 256 byte tokens, then
// " w259", " w260", ... (for tiny model layouts).
Llama2cTokenizer small_vocab(int n);

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

// An optional part that is missing here (a CPU's SIMD table, a tool): the test is skipped with the
// reason, unless the environment sets MCULLM_REQUIRE_<requirement>=1 (CI does for what its machine
// has), when it fails instead. tools/check_skips.py counts the skips; tests/allowed_skips.txt lists
// those CI accepts. `reason` may be a stream chain: MCULLM_SKIP_OR_FAIL("AVX2", "no " << name).
// Inline: tests/cross builds the NEON and LUT kernel tests without test_support.cpp.
inline std::string requirement_variable(std::string requirement) {  // "avx512" -> MCULLM_REQUIRE_AVX512
  for (char& ch : requirement) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return "MCULLM_REQUIRE_" + requirement;
}
inline bool required(const std::string& requirement) {
  const char* v = std::getenv(requirement_variable(requirement).c_str());
  return v != nullptr && std::string(v) == "1";
}
#define MCULLM_SKIP_OR_FAIL(requirement, reason)                                                          \
  do {                                                                                                    \
    if (::mcullm::test::required(requirement))                                                            \
      FAIL() << reason << " (" << ::mcullm::test::requirement_variable(requirement) << "=1: a failure)"; \
    else                                                                                                  \
      GTEST_SKIP() << reason;                                                                             \
  } while (0)

std::string cli_path();
// A fresh empty directory for this test's outputs.
std::string temp_dir();

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Starts the mcullm CLI with `args` (argv[0] is "mcullm"); the child's stdin, stdout and stderr
// become in_fd, out_fd and err_fd (-1 keeps this process's). Everything is prepared before fork():
// the child only calls dup2 and execv, because another thread may hold the heap's lock at the fork
// (under ASan a child that allocates can then deadlock). Returns the pid, or -1.
pid_t spawn_cli(const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd);
// spawn_cli with stderr written to the file `log` (created or truncated).
pid_t spawn_cli_logging(const std::vector<std::string>& args, const std::string& log);
// Runs the mcullm CLI with the given arguments (each passed as one argv entry). A hang guard: a run
// that has not finished after kCliLimitSeconds is killed and fails the test (exit_code -1).
constexpr int kCliLimitSeconds = 480;
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
