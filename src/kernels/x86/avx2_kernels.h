// The AVX2 kernel functions, gathered into one KernelSet by table_avx2.cpp. Compiled with -mavx2;
// called only after a runtime CPU check.
#pragma once
#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/matmat_rows.h"
#include "quant/blocks.h"

namespace mcullm::avx2 {

float dot_f32(const float* a, const float* b, int n);
void matvec_f32(const MatRef& w, const float* x, float* y, int r0, int r1);
void matvec_f16(const MatRef& w, const float* x, float* y, int r0, int r1);
void matvec_q8_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4g64(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void attn_scores(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores);
void attn_values(const float* att, const float* values, size_t stride, int n, int hs, float* out);
void attn_scores_q8(const int8_t* q, float qs, const int8_t* keys, const float* kscales, size_t stride, size_t s_stride,
                    int n, int hs, float scale, float* scores);
void attn_values_q8(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride, int n,
                    int hs, float* out);
void softmax(float* x, int n);
// Eight heads at a time: small heads' keys transposed once per KV head, the softmax sums and the
// attn_values sums of the heads side by side (attention_avx2.cpp).
void attn_heads(const KernelSet& k, const AttnHeads& a, int h0, int h1);
void silu_mul(float* gate, const float* up, int n);
void matvec_i2s(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matmat_i2s(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y, size_t y_stride,
                int r0, int r1);
void matvec_i2s_rows(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y);
void tl_lut_build(const TlTensor& w, const int8_t* q, uint8_t* lut);
void tl_matmul(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens, float* y,
               size_t y_stride, int tile0, int tile1);
void matvec_q4e_f32(const MatRef& w, const float* x, float* y, int r0, int r1);
void matvec_q4e_q8(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void quantize_i8s(const float* x, int n, int8_t* q, float* inv_scale);
void quantize_blocks(const float* x, int n, int block, int8_t* q, float* scales);
// The block types' GEMM without VNNI (gemm_avx2.cpp, -mf16c): the avx2 table's matmat_tiled.
bool matmat_tiled(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1);
// The sparse FFN's down product over live columns (down_cols_avx2.cpp).
void matvec_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                      int r0, int r1);

// The AVX2 table under `name` with the given block GEMM (matmat_tiled): table_avx2.cpp (without
// VNNI, avx2::matmat_tiled) and the avxvnni table (gemm_avxvnni.cpp) are it; the AVX-512 tables start from it (x86_512/). AVX2
// replaces every reference kernel.
constexpr KernelSet table(const char* name,
                          bool (*matmat_tiled)(const MatRef&, const ActMat&, int, float*, size_t, int, int)) {
  return {.name = name,
          .dot_f32 = dot_f32,
          .matvec_f32 = matvec_f32,
          .matvec_f16 = matvec_f16,
          .matvec_q8_0 = matvec_q8_0,
          .matvec_q4_0 = matvec_q4_0,
          .matvec_q4g64 = matvec_q4g64,
          .attn_scores = attn_scores,
          .attn_values = attn_values,
          .softmax = softmax,
          .attn_heads = attn_heads,
          .silu_mul = silu_mul,
          .matvec_i2s = matvec_i2s,
          .matmat_i2s = matmat_i2s,
          .matvec_i2s_rows = matvec_i2s_rows,
          .tl_lut_build = tl_lut_build,
          .tl_matmul = tl_matmul,
          .matvec_q4e_f32 = matvec_q4e_f32,
          .matvec_q4e_q8 = matvec_q4e_q8,
          .matvec_q4e_q8_rows = matvec_rows_by_row<matvec_q4e_q8>,
          .attn_scores_q8 = attn_scores_q8,
          .attn_values_q8 = attn_values_q8,
          .quantize_i8s = quantize_i8s,
          .quantize_blocks = quantize_blocks,
          .matmat_tiled = matmat_tiled,
          .matvec_down_cols = matvec_down_cols};
}

// Weights of one block as int8 vectors of 32, in block order (the matvecs and the VNNI GEMM).
static inline __m256i load_q8_0(const BlockQ8_0& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
static inline __m256i unpack_nibbles16(const uint8_t* qs) {  // 16 bytes -> 32 codes - 8: low nibbles, then high
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}
static inline void unpack_q4g64(const BlockQ4G64& b, __m256i* v) {  // v[0]: weights 0..31, v[1]: 32..63
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  const __m256i mask = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  v[0] = _mm256_sub_epi8(_mm256_and_si256(raw, mask), eight);
  v[1] = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(raw, 4), mask), eight);
}
// Matvecs read R rows side by side (the activations loaded once for R) only while the R rows span
// at most 1 KiB: then they are one sequential stream. Longer rows read side by side are R short
// streams a row apart, which the hardware prefetcher does not follow: on an AMD EPYC Zen 4, i2_s
// rows of 3072 weights (768 bytes) streamed from DRAM at 6 GB/s four at a time, 14 GB/s one at a
// time; 768 weights (192 bytes): 17-20 GB/s four at a time, 14.5 one at a time.
static inline bool rows_side_by_side(const MatRef& w, int rows) { return w.row_bytes * static_cast<size_t>(rows) <= 1024; }
// Asks for the bytes of row `rows[i + ahead]` (when listed) before they are read: the sparse FFN's
// live rows are short reads scattered over the matrix, which the hardware prefetcher does not foresee.
static inline void prefetch_listed_row(const MatRef& w, const int32_t* rows, int i, int n, int ahead) {
  if (i + ahead >= n) return;
  const uint8_t* row = w.row(rows[i + ahead]);
  for (size_t o = 0; o < w.row_bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(row + o), _MM_HINT_T0);
}
// The same for the sparse FFN's column-stored down matrix: columns live[k], live[k + 1] (those listed),
// rows [32 * c0, 32 * (c0 + n)).
static inline void prefetch_columns(const DownCols& w, const int32_t* live, int k, int n_live, int c0, int n) {
  for (int i = k; i < k + 2 && i < n_live; ++i) {
    const uint8_t* col = w.w + static_cast<size_t>(live[i]) * w.col_bytes + 8 * c0;
    for (int o = 0; o < 8 * n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(col + o), _MM_HINT_T0);
  }
}
static inline __m256i load_x(const int8_t* x) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)); }

// Lanes [0, n) set, the rest clear (n may be <= 0 or >= 8).
static inline __m256i lane_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Folds lanes lo[0..7], hi[0..7] (= acc[0..15]) in the contract's tree order (kernels.h).
static inline float fold16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);                                                 // acc[i] += acc[i+8]
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));  // acc[i] += acc[i+4]
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                 // acc[i] += acc[i+2]
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));                               // acc[0] += acc[1]
}

static inline float fold8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The 16-lane dot product of the contract. The last partial chunk uses masked loads: a masked lane
// adds +0 * +0 = +0, which never changes an accumulator (it starts at +0 and a round-to-nearest sum
// is -0 only when both terms are -0), so the bits equal the scalar reference's.
static inline float dot16(const float* a, const float* b, int n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8)));
  }
  const int rem = n - j;
  if (rem > 0) {
    const __m256i m0 = lane_mask(rem), m1 = lane_mask(rem - 8);
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_maskload_ps(a + j, m0), _mm256_maskload_ps(b + j, m0)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_maskload_ps(a + j + 8, m1), _mm256_maskload_ps(b + j + 8, m1)));
  }
  return fold16(lo, hi);
}

}  // namespace mcullm::avx2

namespace mcullm::avx512 {

// AVX-512 VNNI (kernels/x86/ternary_avx512.cpp); the rest of the avx512 table is the AVX2 kernels.
void matvec_i2s(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matmat_i2s(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y, size_t y_stride,
                int r0, int r1);
void matvec_i2s_rows(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y);
// Sum of n int8 values (n a multiple of 32).
int32_t sum_i8(const int8_t* x, int n);

}  // namespace mcullm::avx512
