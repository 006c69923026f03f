// Shared by the libFuzzer targets: where ../shared is, and a check that aborts (the fuzzer's crash).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

namespace mcullm::fuzz {

inline std::string shared_path(const std::string& relative) {
  const char* env = std::getenv("MCULLM_SHARED_DIR");
  return std::string(env ? env : MCULLM_DEFAULT_SHARED_DIR) + "/" + relative;
}

#define FUZZ_CHECK(cond)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

}  // namespace mcullm::fuzz
