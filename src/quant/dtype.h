// Every tensor element type the engine knows, with its block geometry.
// GGUF ids are llama.cpp's for the shared types; ours sit at 1024 and up.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace mcullm {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,   // llama.cpp: f16 scale + 16 bytes, 32 weights, value = (nibble - 8) * d
  kQ8_0 = 8,   // llama.cpp: f16 scale + 32 int8, 32 weights
  kQ4G64 = 1024,  // mcullm: f16 scale + 32 bytes, 64 weights, symmetric q in [-7,7], code = q + 8;
                  // byte j holds weight j (low nibble) and weight j + 32 (high nibble); a short last
                  // group of a row is zero-padded, so any column count is allowed
};

struct DTypeInfo {
  DType type;
  const char* name;       // "f32", "q8_0", ...
  int block;              // weights per block
  int block_bytes;        // bytes per block
  bool pads_rows;         // true: a row's last block may be partial (zero-padded)
  int act_block;          // block size of the int8 activations its integer kernels use (0: f32 kernels)
};

// nullptr when the id is unknown.
const DTypeInfo* dtype_info(DType type);
const DTypeInfo* dtype_info_by_id(uint32_t id);
const DTypeInfo* dtype_info_by_name(const char* name);

// True when a row of `cols` weights can be stored in this type.
bool dtype_row_fits(DType type, int64_t cols);
// Bytes of one row of `cols` weights (cols must fit, see dtype_row_fits).
size_t dtype_row_bytes(DType type, int64_t cols);

}  // namespace mcullm
