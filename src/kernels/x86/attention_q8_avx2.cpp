// AVX2 attention over an int8 KV cache, bit-exact with the reference (kernels.h): the integer dot
// products are exact in any order; the float steps are the reference's, lane for lane.
#include "kernels/x86/avx2_kernels.h"

namespace mcullm::avx2 {

namespace {

int32_t hsum4(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

// Exact int32 dot product of n int8 pairs: 16 at a time, then 8, then one by one (no over-read).
int32_t dot_i8(const int8_t* a, const int8_t* b, int n) {
  __m256i acc = _mm256_setzero_si256();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256i b16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(a16, b16));
  }
  __m128i acc4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  for (; i + 8 <= n; i += 8) {
    const __m128i a8 = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i)));
    const __m128i b8 = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + i)));
    acc4 = _mm_add_epi32(acc4, _mm_madd_epi16(a8, b8));
  }
  int32_t sum = hsum4(acc4);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void attn_scores_q8(const int8_t* q, float qs, const int8_t* keys, const float* kscales, size_t stride, size_t s_stride,
                    int n, int hs, float scale, float* scores) {
  for (int t = 0; t < n; ++t) {
    const int32_t isum = dot_i8(q, keys + static_cast<size_t>(t) * stride, hs);
    scores[t] = static_cast<float>(isum) * (qs * kscales[static_cast<size_t>(t) * s_stride]) / scale;
  }
}

void attn_values_q8(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride, int n,
                    int hs, float* out) {
  int i = 0;
  for (; i + 8 <= hs; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int t = 0; t < n; ++t) {
      const float w = att[t] * vscales[static_cast<size_t>(t) * s_stride];
      const __m128i v8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(values + static_cast<size_t>(t) * stride + i));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v8))));
    }
    _mm256_storeu_ps(out + i, acc);
  }
  for (; i < hs; ++i) {
    float acc = 0.0f;
    for (int t = 0; t < n; ++t)
      acc += att[t] * vscales[static_cast<size_t>(t) * s_stride] * static_cast<float>(values[static_cast<size_t>(t) * stride + i]);
    out[i] = acc;
  }
}

}  // namespace mcullm::avx2
