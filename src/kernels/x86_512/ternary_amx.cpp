// Batched i2_s (prefill) on AMX-INT8 tiles: tdpbusd multiplies a 16 x 64 tile of unsigned bytes (the
// weight codes w + 1 of 16 rows, 64 columns of K) by a 16 x 64 tile of signed bytes (the int8
// activations of 16 tokens, 64 values of K, laid out four consecutive K values per token per tile
// row) into a 16 x 16 tile of exact int32 sums: 16384 products per instruction. Two row tiles times
// two token tiles (four accumulator tiles) per step, as 32 rows x 32 tokens. Each output is
// (float)(sum(code x) - sum(x)) * (w.scale * xs[c]): matvec_i2s's bits (the integer sums are exact).
// Runs only behind kernels_amx()'s check (CPU AMX-TILE / AMX-INT8 and the OS's permission).
#include <immintrin.h>

#include "kernels/x86_512/avx512_kernels.h"

#define MCULLM_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")))

namespace mcullm::amx {

namespace {

constexpr int kTileRows = 16;  // rows of weights, and tokens, per tile
constexpr int kStepK = 64;     // K values per tdpbusd
constexpr int kBlockRows = 2 * kTileRows;
constexpr int kBlockCols = 2 * kTileRows;

// ldtilecfg's 64-byte operand (palette 1): eight tiles of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tokens [c0, c0 + nc) (nc <= 32) as two B tiles per K step: b[t][k / 4][j][k % 4] = x_{c0 + 16 t + j}[k],
// missing tokens zero. As dwords, b[t] is the transpose of the 16 tokens' K / 4 dwords.
MCULLM_AMX void layout_tokens(const int8_t* xq, size_t xq_stride, int c0, int nc, int K, int32_t* b) {
  const int k4 = K / 4;
  for (int t = 0; t < 2; ++t) {
    int32_t* bt = b + static_cast<size_t>(t) * k4 * kTileRows;
    for (int j = 0; j < kTileRows; ++j) {
      const int c = t * kTileRows + j;
      if (c >= nc) {
        for (int i = 0; i < k4; ++i) bt[i * kTileRows + j] = 0;
        continue;
      }
      const int8_t* src = xq + static_cast<size_t>(c0 + c) * xq_stride;
      for (int i = 0; i < k4; ++i) __builtin_memcpy(&bt[i * kTileRows + j], src + 4 * i, 4);
    }
  }
}

// Codes of rows [r, r + 32) for K group g (128 values) as two K steps of two 16-row A tiles:
// a[s][row][64]; rows at or past r1 are zero (they add nothing and are not stored). The rows' bytes
// a few groups ahead are prefetched: 32 rows read side by side otherwise wait on memory.
MCULLM_AMX inline void unpack_group(const MatRef& w, int r, int r1, int g, uint8_t* a) {
  const __m256i mask = _mm256_set1_epi8(3);
  constexpr int kAhead = 4;  // groups (two cache lines of a row)
  const bool fetch = (g & 1) == 0 && g + kAhead < w.cols / 128;
  for (int i = 0; i < kBlockRows; ++i) {
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
    if (r + i < r1) {
      const uint8_t* src = w.row(r + i) + 32 * g;
      if (fetch) _mm_prefetch(reinterpret_cast<const char*>(src + 32 * kAhead), _MM_HINT_T0);
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
      c0 = _mm256_and_si256(_mm256_srli_epi16(raw, 6), mask);
      c1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      c2 = _mm256_and_si256(_mm256_srli_epi16(raw, 2), mask);
      c3 = _mm256_and_si256(raw, mask);
    }
    uint8_t* s0 = a + i * kStepK;
    uint8_t* s1 = a + (kBlockRows + i) * kStepK;
    _mm256_store_si256(reinterpret_cast<__m256i*>(s0), c0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(s0 + 32), c1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(s1), c2);
    _mm256_store_si256(reinterpret_cast<__m256i*>(s1 + 32), c3);
  }
}

// y[c][r + i] = (float)(acc[i][c] - xsum[c]) * scale[c] for rows i < nr, tokens c < nc: sixteen
// tokens per vector (the same float steps per value), then 8 x 8 transposes into y.
MCULLM_AMX void store_block(const int32_t* acc, const int32_t* xsum, const float* scale, int nr, int nc, float* y,
                            size_t y_stride) {
  alignas(64) float f[kBlockCols * kBlockRows];  // f[c][i]
  for (int i = 0; i < nr; ++i)
    for (int c = 0; c < kBlockCols; c += 16) {
      const __m512 v = _mm512_mul_ps(
          _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(acc + i * kBlockCols + c), _mm512_loadu_si512(xsum + c))),
          _mm512_loadu_ps(scale + c));
      _mm512_i32scatter_ps(f + c * kBlockRows + i, _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                                                         11, 12, 13, 14, 15),
                                                                       _mm512_set1_epi32(kBlockRows)),
                           v, 4);
    }
  for (int c = 0; c < nc; ++c) {
    float* yc = y + static_cast<size_t>(c) * y_stride;
    int i = 0;
    for (; i + 16 <= nr; i += 16) _mm512_storeu_ps(yc + i, _mm512_load_ps(f + c * kBlockRows + i));
    for (; i < nr; ++i) yc[i] = f[c * kBlockRows + i];
  }
}

}  // namespace

// The activations of up to 32 tokens are laid out once per call on the stack (32 * K bytes), so K is
// limited to kMaxK; longer rows go to the VNNI kernel.
constexpr int kMaxK = 8192;

MCULLM_AMX void matmat_i2s(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y,
                           size_t y_stride, int r0, int r1) {
  const int K = w.cols;
  if (K > kMaxK || r1 <= r0 || n <= 0) {
    if (r1 > r0 && n > 0) avx512::matmat_i2s(w, xq, xq_stride, xs, n, y, y_stride, r0, r1);
    return;
  }
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = kTileRows;
  }
  _tile_loadconfig(&cfg);
  alignas(64) int32_t b[2 * (kMaxK / 4) * kTileRows];
  alignas(64) uint8_t a[2 * kBlockRows * kStepK];
  alignas(64) int32_t acc[kBlockRows * kBlockCols];
  for (int c0 = 0; c0 < n; c0 += kBlockCols) {
    const int nc = n - c0 < kBlockCols ? n - c0 : kBlockCols;
    layout_tokens(xq, xq_stride, c0, nc, K, b);
    alignas(64) int32_t xsum[kBlockCols] = {};
    alignas(64) float scale[kBlockCols] = {};
    for (int c = 0; c < nc; ++c) {
      xsum[c] = avx512::sum_i8(xq + static_cast<size_t>(c0 + c) * xq_stride, K);
      scale[c] = w.scale * xs[c0 + c];
    }
    const int32_t* b1 = b + static_cast<size_t>(K / 4) * kTileRows;
    for (int r = r0; r < r1; r += kBlockRows) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int g = 0; g < K / 128; ++g) {
        unpack_group(w, r, r1, g, a);
        for (int s = 0; s < 2; ++s) {
          const uint8_t* as = a + s * kBlockRows * kStepK;
          const size_t bo = static_cast<size_t>(2 * g + s) * kTileRows * kTileRows;  // 16 dword rows per step
          _tile_loadd(4, as, kStepK);
          _tile_loadd(5, as + kTileRows * kStepK, kStepK);
          _tile_loadd(6, b + bo, 64);
          _tile_loadd(7, b1 + bo, 64);
          _tile_dpbusd(0, 4, 6);
          _tile_dpbusd(1, 4, 7);
          _tile_dpbusd(2, 5, 6);
          _tile_dpbusd(3, 5, 7);
        }
      }
      // acc[row][token]: tile 0 rows 0-15 tokens 0-15, 1: tokens 16-31, 2 and 3: rows 16-31.
      _tile_stored(0, acc, kBlockCols * 4);
      _tile_stored(1, acc + kTileRows, kBlockCols * 4);
      _tile_stored(2, acc + kTileRows * kBlockCols, kBlockCols * 4);
      _tile_stored(3, acc + kTileRows * kBlockCols + kTileRows, kBlockCols * 4);
      store_block(acc, xsum, scale, r1 - r < kBlockRows ? r1 - r : kBlockRows, nc,
                  y + static_cast<size_t>(c0) * y_stride + r, y_stride);
    }
  }
  _tile_release();
}

}  // namespace mcullm::amx
