// BitNet ternary matrices between i2_s, tl1 and tl2 (quant/ternary.h) in GGUF files: `mcullm
// dummy --type` and `mcullm convert --type` repack with these, losslessly (same weights, same
// scale; i2_s -> tl2 -> i2_s gives the same bytes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/gguf_writer_host.h"
#include "quant/ternary.h"

namespace mcullm {

// True for i2_s, tl1, tl2.
bool is_ternary_matrix_type(DType type);

// A ternary tensor's weights (rows x cols, row-major, in {-1, 0, 1}) and scale from its GGUF bytes;
// kCorrupt naming `name` for a bad code or tail.
Status ternary_tensor_unpack(const std::string& name, DType type, const uint8_t* data, size_t nbytes, int rows, int cols,
                             std::vector<int8_t>* w, float* scale);

// Packs the weights as `to` (i2_s, tl1 or tl2). TL tilings: tl_tiling_for (the stored tuning under
// --use-pretuned) when it fits the file layout, else the default. A shape no TL layout holds falls
// back to i2_s: *written says which type was written and *note why (empty otherwise).
Status ternary_tensor_pack(DType to, const int8_t* w, int rows, int cols, float scale, std::vector<uint8_t>* out,
                           DType* written, std::string* note);

struct TernaryRetypeReport {
  int repacked = 0;       // ternary matrices written as the asked type
  int fell_back = 0;      // written as i2_s instead (see notes)
  size_t ternary_bytes = 0;
  std::vector<std::string> notes;
};

// Copies every key and tensor of `in` into `out`, with each 2-D ternary tensor repacked as `to`.
Status retype_ternary_gguf(const GgufFile& in, DType to, GgufWriter* out, TernaryRetypeReport* report);

}  // namespace mcullm
