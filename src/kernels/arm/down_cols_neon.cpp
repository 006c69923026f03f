// The sparse ReLU FFN's down product over live columns (kernels.h DownCols), NEON: the i2_s columns
// (the block types take the reference). Per 64 rows (two 32-row chunks, 16 bytes of a column) and
// live column: its codes (w + 1, 0..3) times the column's int8 activation, vmlal_s8 into int16 row
// sums (|code * q| <= 3 * 128; flushed to int32 every 64 columns), then, as matvec_i2s,
// isum = sum(code * q) - sum(q) and y = (float)isum * (scale * xs[0]).
#include <arm_neon.h>

#include "kernels/arm/neon_kernels.h"

namespace mcullm::neon {

namespace {

// Rows [32 * c0, 32 * (c0 + kChunks)), kChunks 1 or 2.
template <int kChunks>
void i2s_rows(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, int32_t sum_q,
              float* y, int c0) {
  constexpr int kFlushCols = 64;  // 64 * 3 * 128 < 2^15
  int32_t isum[64] = {};
  const uint8x16_t m3 = vdupq_n_u8(3);
  for (int k = 0; k < n_live;) {
    // acc[s][h]: rows 32 * (c0 + h) + 8s .. + 7
    int16x8_t acc[4][2];
    for (int s = 0; s < 4; ++s) acc[s][0] = acc[s][1] = vdupq_n_s16(0);
    for (const int end = k + kFlushCols < n_live ? k + kFlushCols : n_live; k < end; ++k) {
      const uint8_t* col = w.w + static_cast<size_t>(live[k]) * w.col_bytes + 8 * c0;
      const uint8x16_t b = kChunks == 2 ? vld1q_u8(col) : vcombine_u8(vld1_u8(col), vdup_n_u8(0));
      const uint8x16_t codes[4] = {vshrq_n_u8(b, 6), vandq_u8(vshrq_n_u8(b, 4), m3), vandq_u8(vshrq_n_u8(b, 2), m3),
                                   vandq_u8(b, m3)};
      const int8x16_t q = vdupq_n_s8(xq[live[k]]);
      for (int s = 0; s < 4; ++s) {
        const int8x16_t c = vreinterpretq_s8_u8(codes[s]);
        acc[s][0] = vmlal_s8(acc[s][0], vget_low_s8(c), vget_low_s8(q));
        if (kChunks == 2) acc[s][1] = vmlal_high_s8(acc[s][1], c, q);
      }
    }
    for (int h = 0; h < kChunks; ++h)
      for (int s = 0; s < 4; ++s) {
        int32_t* o = isum + 32 * h + 8 * s;
        vst1q_s32(o, vaddw_s16(vld1q_s32(o), vget_low_s16(acc[s][h])));
        vst1q_s32(o + 4, vaddw_high_s16(vld1q_s32(o + 4), acc[s][h]));
      }
  }
  const float scale = w.scales[0] * xs[0];
  for (int r = 0; r < 32 * kChunks; ++r) y[32 * c0 + r] = static_cast<float>(isum[r] - sum_q) * scale;
}

}  // namespace

void matvec_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                      int r0, int r1) {
  if (w.type != DType::kI2_S) {
    matvec_down_cols_ref(w, xq, xs, live, n_live, y, r0, r1);
    return;
  }
  int32_t sum_q = 0;
  for (int k = 0; k < n_live; ++k) sum_q += xq[live[k]];
  int c = r0 / 32;
  const int c1 = r1 / 32;
  for (; c + 2 <= c1; c += 2) i2s_rows<2>(w, xq, xs, live, n_live, sum_q, y, c);
  if (c < c1) i2s_rows<1>(w, xq, xs, live, n_live, sum_q, y, c);
}

}  // namespace mcullm::neon
