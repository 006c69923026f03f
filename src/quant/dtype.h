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
  kTQ1_0 = 34,  // llama.cpp ternary: 256 weights in 54 bytes (base-3 trits + f16 scale), quant/ternary.h
  kTQ2_0 = 35,  // llama.cpp ternary: 256 weights in 66 bytes (2-bit codes + f16 scale), quant/ternary.h
  kI2_S = 36,   // bitnet.cpp ternary (its llama.cpp fork's id): 128 weights in 32 bytes, one f32 scale
                // per tensor stored after the rows (tensor_tail_bytes), quant/ternary.h
  kQ4G64 = 1024,  // mcullm: f16 scale + 32 bytes, 64 weights, symmetric q in [-7,7], code = q + 8;
                  // byte j holds weight j (low nibble) and weight j + 32 (high nibble); a short last
                  // group of a row is zero-padded, so any column count is allowed
  kQ4E = 1025,    // esp32-ai's int4 (quant/q4e.h): codes q + 8 in [1, 15], two per byte, low nibble =
                  // even column, each row ceil(cols / 2) bytes; the f16 group scales (group size per
                  // tensor) sit apart from the codes (MatRef::scales), so a row here is codes only
  kTL1 = 1026,    // mcullm's file form of bitnet.cpp's TL1 (quant/ternary.h "Our GGUF tensor types"):
                  // tiled 4-bit pair indices, 2 bits a weight, tiling and f32 scale in a 32-byte tail
  kTL2 = 1027,    // the same for TL2: triples (1.67 bits a weight) and a 0-64 column pair part
};

struct DTypeInfo {
  DType type;
  const char* name;       // "f32", "q8_0", ...
  int block;              // weights per block
  int block_bytes;        // bytes per block
  bool pads_rows;         // true: a row's last block may be partial (zero-padded)
  int act_block;          // block size of the int8 activations its integer kernels use (0: f32 kernels)
  int tensor_tail_bytes = 0;  // bytes after a tensor's rows (i2_s: its f32 scale, padded to 32)
};

// nullptr when the id is unknown.
const DTypeInfo* dtype_info(DType type);
const DTypeInfo* dtype_info_by_id(uint32_t id);
const DTypeInfo* dtype_info_by_name(const char* name);

// True when a row of `cols` weights can be stored in this type.
bool dtype_row_fits(DType type, int64_t cols);
// Bytes of one row of `cols` weights (cols must fit, see dtype_row_fits).
size_t dtype_row_bytes(DType type, int64_t cols);
// Bytes of a whole tensor: rows * dtype_row_bytes + the type's tensor_tail_bytes (0 if cols do not fit).
size_t dtype_tensor_bytes(DType type, int64_t rows, int64_t cols);

}  // namespace mcullm
