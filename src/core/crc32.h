// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, as zlib's crc32): the one definition used by
// the board image and the cluster link frames.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace mcullm {

// CRC of data[0, n); pass a previous result as `crc` to continue over several pieces.
uint32_t crc32_ieee(const uint8_t* data, size_t n, uint32_t crc = 0);

}  // namespace mcullm
