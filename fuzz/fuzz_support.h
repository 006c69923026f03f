// Shared by the libFuzzer targets: where ../shared is, and a check that aborts (the fuzzer's crash).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace mcullm::fuzz {

inline std::string shared_path(const std::string& relative) {
  const char* env = std::getenv("MCULLM_SHARED_DIR");
  return std::string(env ? env : MCULLM_DEFAULT_SHARED_DIR) + "/" + relative;
}

// A seed file: one byte that picks the reader (each target documents its kinds), then the file itself.
inline void write_seed(const std::string& path, uint8_t kind, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.put(static_cast<char>(kind));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

#define FUZZ_CHECK(cond)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

}  // namespace mcullm::fuzz
