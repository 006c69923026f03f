// BitLinear activation quantization (quantize_i8s, quant/ternary.h) eight floats at a time, with
// the scalar steps in the same float operations so the bits are equal: amax, the scalar scale,
// then per value v = x * s clamped to [-128, 127] (clamping before rounding gives the same integer
// as rounding then clamping: the bounds are integers and rounding is monotone), round half away
// from zero as quant/blocks.h's round_half_away (trunc(|v| + 0.5), minus 1 when |v| < r - 0.5).
#include "kernels/x86/avx2_kernels.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm::avx2 {

namespace {

inline __m256i round_clamp8(__m256 v, float lo = -128.0f) {
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(lo)), _mm256_set1_ps(127.0f));
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, v);
  __m256 r = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(_mm256_add_ps(a, _mm256_set1_ps(0.5f))));
  const __m256 over = _mm256_cmp_ps(a, _mm256_sub_ps(r, _mm256_set1_ps(0.5f)), _CMP_LT_OQ);
  r = _mm256_sub_ps(r, _mm256_and_ps(over, _mm256_set1_ps(1.0f)));
  // v < 0 ? -r : r (a -0.0 input gives +0, as the scalar code)
  r = _mm256_xor_ps(r, _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ), sign));
  return _mm256_cvtps_epi32(r);
}

}  // namespace

void quantize_i8s(const float* x, int n, int8_t* q, float* inv_scale) {
  const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.40282347e38f);
  __m256 vmax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ));  // inf or nan
    vmax = _mm256_max_ps(vmax, a);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  bool finite = _mm256_movemask_ps(bad) == 0;
  float amax = 0.0f;
  for (int l = 0; l < 8; ++l) amax = lanes[l] > amax ? lanes[l] : amax;
  for (; i < n; ++i) {
    const float a = x[i] < 0 ? -x[i] : x[i];
    if (!(a - a == 0.0f)) finite = false;
    if (a > amax) amax = a;
  }
  const float s = finite ? i8s_scale(amax) : 0.0f;
  if (s == 0.0f) {
    for (int j = 0; j < n; ++j) q[j] = 0;
    *inv_scale = 0.0f;
    return;
  }
  *inv_scale = static_cast<float>(1.0 / static_cast<double>(s));
  const __m256 vs = _mm256_set1_ps(s);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m256i a = round_clamp8(_mm256_mul_ps(_mm256_loadu_ps(x + j), vs));
    const __m256i b = round_clamp8(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), vs));
    const __m256i c = round_clamp8(_mm256_mul_ps(_mm256_loadu_ps(x + j + 16), vs));
    const __m256i d = round_clamp8(_mm256_mul_ps(_mm256_loadu_ps(x + j + 24), vs));
    // packs work per 128-bit lane: the dwords end up in order 0 4 1 5 2 6 3 7, undone by the permute
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), _mm256_permutevar8x32_epi32(bytes, order));
  }
  quantize_i8s_with(x + j, n - j, s, q + j);
}

// quantize_activations (quant/blocks.h) for blocks of a multiple of 8 values, the scalar steps in
// the same float operations: amax (max_ps with the new value first returns the old maximum for a
// nan, as the scalar `if (a > m)`; any order of max gives the same value), d = amax / 127,
// id = 1 / d, then round-half-away(x * id) saturated to [-127, 127] with nan -> 0 (zeroed before
// the clamp). Other block sizes and the short last block take the reference.
void quantize_blocks(const float* x, int n, int block, int8_t* q, float* scales) {
  if (block % 8 != 0 || block <= 0) {
    quantize_activations(x, n, block, q, scales);
    return;
  }
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int b = 0;
  for (; (b + 1) * block <= n; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = q + b * block;
    __m256 vmax = _mm256_setzero_ps();
    for (int i = 0; i < block; i += 8) vmax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)), vmax);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vmax);
    float amax = 0.0f;
    for (int l = 0; l < 8; ++l) amax = lanes[l] > amax ? lanes[l] : amax;
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = d;
    const __m256 vid = _mm256_set1_ps(id);
    auto quant8 = [&](int i) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + i), vid);
      return round_clamp8(_mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)), -127.0f);
    };
    int i = 0;
    for (; i + 32 <= block; i += 32) {
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(quant8(i), quant8(i + 8)),
                                               _mm256_packs_epi32(quant8(i + 16), quant8(i + 24)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + i), _mm256_permutevar8x32_epi32(bytes, order));
    }
    for (; i < block; i += 8) {
      alignas(32) int32_t v[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(v), quant8(i));
      for (int l = 0; l < 8; ++l) qb[i + l] = static_cast<int8_t>(v[l]);
    }
  }
  if (b * block < n) quantize_activations(x + b * block, n - b * block, block, q + b * block, scales + b);
}

}  // namespace mcullm::avx2
