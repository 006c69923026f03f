// Walking the TL1 / TL2 layouts (quant/ternary.h) tile by tile: the sizes every LUT kernel variant
// shares, so that the reference and the SIMD kernels step through the bytes identically.
#pragma once
#include "kernels/kernels.h"

namespace mcullm::tl {

constexpr int kPairBK = 32;        // TL2 pair part: K per block (16 pairs)
constexpr int kLutGroupBytes = 32; // one group's table: 16 low bytes, then 16 high bytes

// Weight groups (LUT tables) of one token: TL2 triples then pairs; TL1 pairs.
inline int lut_groups(const TlTensor& w) {
  return w.type == TlType::kTL2 ? w.three_k / 3 + (w.cols - w.three_k) / 2 : w.cols / 2;
}
// Bytes of one BM-row tile in each part.
inline size_t tile_index_bytes(const TlTensor& w) {
  return static_cast<size_t>(w.tiling.BM) * w.three_k / (w.type == TlType::kTL2 ? 6 : 4);
}
inline size_t tile_sign_bytes(const TlTensor& w) { return static_cast<size_t>(w.tiling.BM) * w.three_k / 24; }
inline size_t tile_pair_bytes(const TlTensor& w) { return static_cast<size_t>(w.tiling.BM) * (w.cols - w.three_k) / 4; }

// The int16 entry `idx` of a group's table.
inline int lut_entry(const uint8_t* table, int idx) {
  return static_cast<int16_t>(static_cast<uint16_t>(table[idx] | table[16 + idx] << 8));
}

// Stores the f32 results of one tile: y[r] = (float)acc[r] * (w.scale * inv_scale).
inline void store_tile(const TlTensor& w, const int32_t* acc, float inv_scale, float* y) {
  const float s = w.scale * inv_scale;
  for (int r = 0; r < w.tiling.BM; ++r) y[r] = static_cast<float>(acc[r]) * s;
}

using TileFn = void (*)(const TlTensor& w, int tile, const uint8_t* lut, int32_t* acc);

// The tl_matmul loop every variant shares: per tile and token, the tile's int32 sums (tile_tl1 or
// tile_tl2 add into a zeroed acc), then store_tile.
template <TileFn tile_tl1, TileFn tile_tl2>
inline void matmul_tiles(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales,
                         int n_tokens, float* y, size_t y_stride, int tile0, int tile1) {
  alignas(64) int32_t acc[kTlMaxBM];
  for (int tile = tile0; tile < tile1; ++tile)
    for (int n = 0; n < n_tokens; ++n) {
      for (int r = 0; r < w.tiling.BM; ++r) acc[r] = 0;
      const uint8_t* l = lut + n * lut_stride;
      if (w.type == TlType::kTL2) tile_tl2(w, tile, l, acc);
      else tile_tl1(w, tile, l, acc);
      store_tile(w, acc, inv_scales[n], y + n * y_stride + static_cast<size_t>(tile) * w.tiling.BM);
    }
}

}  // namespace mcullm::tl
