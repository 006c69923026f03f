// Little-endian fields and zero checks for the link codec (frame.cpp, hidden_codec.cpp): byte by
// byte, so any alignment and any host byte order give the same wire bytes.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace mcullm::cluster::wire {

inline void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
inline bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

}  // namespace mcullm::cluster::wire
