// NEON TL1 LUT matmul (aarch64): vqtbl1q_s8 lookups of 16 rows at a time into the low and high byte
// planes of each pair's int16 table, int16 sums inside a K block (exact: the tilings bound them),
// int32 per tile row. TL2 (an x86 layout) takes the reference kernel.
#include <arm_neon.h>

#include "kernels/arm/neon_kernels.h"
#include "kernels/tl_layout.h"

namespace mcullm {

namespace {

// A pair block of a bm-row block is four 16-row units ("slots"): slot u covers rows 16 * (u / quads)
// and pairs 2 * (u % quads) (high nibble), + 1 (low nibble), quads = by / 4 (quant/ternary.h).
inline void lookup16(const uint8_t* table, uint8x16_t nib, int16x8_t* lo, int16x8_t* hi) {
  const int8x16_t vl = vqtbl1q_s8(vld1q_s8(reinterpret_cast<const int8_t*>(table)), nib);
  const int8x16_t vh = vqtbl1q_s8(vld1q_s8(reinterpret_cast<const int8_t*>(table + 16)), nib);
  *lo = vaddq_s16(*lo, vreinterpretq_s16_s8(vzip1q_s8(vl, vh)));  // rows 0-7 (little-endian int16)
  *hi = vaddq_s16(*hi, vreinterpretq_s16_s8(vzip2q_s8(vl, vh)));  // rows 8-15
}

void tl1_tile(const TlTensor& w, int tile, const uint8_t* lut, int32_t* acc) {
  const int BK = w.tiling.BK, bm = w.tiling.bm, by = 256 / bm, quads = by / 4;
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  const uint8_t* ip = w.index + tile * tl::tile_index_bytes(w);
  for (int kb = 0; kb < w.cols / BK; ++kb)
    for (int rb = 0; rb < w.tiling.BM / bm; ++rb) {
      int16x8_t lo[4], hi[4];
      for (int u = 0; u < 4; ++u) lo[u] = hi[u] = vdupq_n_s16(0);
      for (int yb = 0; yb < BK / by; ++yb) {
        const uint8_t* t = lut + static_cast<size_t>(kb * (BK / 2) + yb * (by / 2)) * tl::kLutGroupBytes;
        for (int u = 0; u < 4; ++u, ip += 16) {
          const uint8x16_t idx = vld1q_u8(ip);
          const uint8_t* tu = t + static_cast<size_t>(2 * (u % quads)) * tl::kLutGroupBytes;
          lookup16(tu, vshrq_n_u8(idx, 4), &lo[u], &hi[u]);
          lookup16(tu + tl::kLutGroupBytes, vandq_u8(idx, m4), &lo[u], &hi[u]);
        }
      }
      for (int u = 0; u < 4; ++u) {
        int32_t* rows = acc + rb * bm + 16 * (u / quads);
        vst1q_s32(rows, vaddq_s32(vld1q_s32(rows), vmovl_s16(vget_low_s16(lo[u]))));
        vst1q_s32(rows + 4, vaddq_s32(vld1q_s32(rows + 4), vmovl_high_s16(lo[u])));
        vst1q_s32(rows + 8, vaddq_s32(vld1q_s32(rows + 8), vmovl_s16(vget_low_s16(hi[u]))));
        vst1q_s32(rows + 12, vaddq_s32(vld1q_s32(rows + 12), vmovl_high_s16(hi[u])));
      }
    }
}

void tl2_unused(const TlTensor&, int, const uint8_t*, int32_t*) {}

}  // namespace

void neon::tl_matmul(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens,
                     float* y, size_t y_stride, int tile0, int tile1) {
  if (w.type != TlType::kTL1) {
    tl_matmul_ref(w, lut, lut_stride, inv_scales, n_tokens, y, y_stride, tile0, tile1);
    return;
  }
  tl::matmul_tiles<tl1_tile, tl2_unused>(w, lut, lut_stride, inv_scales, n_tokens, y, y_stride, tile0, tile1);
}

}  // namespace mcullm
