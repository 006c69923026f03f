// Register-tiled batched products on AVX-512: the block types (kernels/x86/gemm_blocks.h) with the
// AVX-512 VL form of vpdpbusd on 256-bit vectors (32 vector registers hold a 4-row x 3-column
// tile), and f16 rows (the head of bitnet.cpp's files) with 512-bit vectors.
#include "kernels/ref/dot_order.h"
#include "kernels/x86/gemm_blocks.h"
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm::avx512 {

namespace {
struct Dp512 {
  static constexpr bool kFlip = true;  // vpdpbusd: unsigned x + 128 times signed weights
  static constexpr int kGroup = 0;     // dp() below
  static __m256i dp(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(acc, u8, s8); }
};

// The contract's 16 f32 lanes (kernels.h) are one 512-bit register: acc[j % 16] += w[j] * x[j]
// (rounded product, then add), then the tree fold, through memory once per output (GCC 12 warns
// inside its 512 -> 256-bit extraction intrinsics).
inline float fold16(__m512 v) {
  alignas(64) float lanes[kF32Lanes];
  _mm512_store_ps(lanes, v);
  return fold_lanes16(lanes);
}

// An R x C tile of f16 rows times f32 columns: each 16-half chunk of a row is converted once
// (vcvtph2ps, exact) for the C columns. Rows past nr repeat row nr - 1 and columns past nc column
// nc - 1 (computed, not stored). The last partial chunk is loaded masked: a masked lane adds
// +0 * +0 = +0, which leaves it unchanged (see avx2::dot16).
template <int R, int C>
inline void f16_tile(const MatRef& w, int r, int nr, const ActMat& x, int c0, int nc, float* y, size_t y_stride) {
  const int n = w.cols;
  const uint16_t* row[R];
  const float* col[C];
  for (int i = 0; i < R; ++i) row[i] = reinterpret_cast<const uint16_t*>(w.row(r + (i < nr ? i : nr - 1)));
  for (int c = 0; c < C; ++c) col[c] = x.f + static_cast<size_t>(c0 + (c < nc ? c : nc - 1)) * x.f_stride;
  __m512 acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) acc[i][c] = _mm512_setzero_ps();
  for (int j = 0; j < n; j += kF32Lanes) {
    const __mmask16 m = n - j >= kF32Lanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 wv[R];
    for (int i = 0; i < R; ++i) wv[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row[i] + j));
    for (int c = 0; c < C; ++c) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, col[c] + j);
      for (int i = 0; i < R; ++i) acc[i][c] = _mm512_add_ps(acc[i][c], _mm512_mul_ps(wv[i], xv));
    }
  }
  for (int i = 0; i < nr; ++i)
    for (int c = 0; c < nc; ++c) y[static_cast<size_t>(c0 + c) * y_stride + r + i] = fold16(acc[i][c]);
}

// Rows in blocks of about 64 KiB (in L2 while every column tile passes), 4 x 4 tiles.
bool matmat_f16(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) {
  constexpr int R = 4, C = 4;
  if (!x.f) return false;
  const int rb = static_cast<int>(65536 / (w.row_bytes ? w.row_bytes : 1)) / R * R;
  const int block = rb < R ? R : rb;
  for (int b0 = r0; b0 < r1; b0 += block) {
    const int b1 = r1 - b0 < block ? r1 : b0 + block;
    for (int c0 = 0; c0 < n; c0 += C)
      for (int r = b0; r < b1; r += R) f16_tile<R, C>(w, r, b1 - r < R ? b1 - r : R, x, c0, n - c0 < C ? n - c0 : C, y, y_stride);
  }
  return true;
}
}  // namespace

bool matmat_tiled(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) {
  const bool q = x.q && x.scales;
  switch (w.type) {
    case DType::kQ8_0: return q && gemm::matmat<gemm::Q8_0, Dp512, 4, 6, 2>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4_0: return q && gemm::matmat<gemm::Q4_0, Dp512, 4, 6, 2>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4G64: return q && gemm::matmat<gemm::Q4G64, Dp512, 4, 6, 2>(w, x, n, y, y_stride, r0, r1);
    case DType::kF16: return matmat_f16(w, x, n, y, y_stride, r0, r1);
    default: return false;
  }
}

}  // namespace mcullm::avx512
