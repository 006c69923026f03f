// AVX2 attention, softmax exponentials and SwiGLU, bit-exact with the reference: the same float
// operations per element, in the same order (kernels.h, core/fmath.cpp).
#include "core/fmath.h"
#include "kernels/x86/avx2_kernels.h"

namespace mcullm::avx2 {

namespace {

__m256 splat_bits(__m256i e) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23)); }

// mc_expf on eight lanes, operation for operation (see fmath.cpp).
__m256 expf8(__m256 x) {
  const __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f));
  // nearest_int: t >= 0 ? (float)(int)(t + 0.5f) : -(float)(int)(0.5f - t)
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 up = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(_mm256_add_ps(t, half)));
  const __m256 down = _mm256_xor_ps(_mm256_cvtepi32_ps(_mm256_cvttps_epi32(_mm256_sub_ps(half, t))), _mm256_set1_ps(-0.0f));
  const __m256 n = _mm256_blendv_ps(down, up, _mm256_cmp_ps(t, _mm256_setzero_ps(), _CMP_GE_OQ));
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693145751953125f))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(1.428606765330187045e-06f)));
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  const float coef[] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
  for (float c : coef) p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(c));
  // e1 = e / 2 rounded toward zero, e2 = e - e1
  const __m256i e = _mm256_cvttps_epi32(n);
  const __m256i e1 = _mm256_srai_epi32(_mm256_add_epi32(e, _mm256_srli_epi32(e, 31)), 1);
  const __m256i e2 = _mm256_sub_epi32(e, e1);
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, splat_bits(e1)), splat_bits(e2));
  // the scalar's early returns, applied last (they override whatever the lanes computed)
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-103.972084045410f), _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_huge_valf()), _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace

void attn_scores(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores) {
  if (hs > 16) {
    for (int t = 0; t < n; ++t) scores[t] = dot16(q, keys + static_cast<size_t>(t) * stride, hs) / scale;
    return;
  }
  // One chunk of the 16-lane contract: q loaded once, masks hoisted (see dot16 for why masked
  // lanes change nothing). With hs <= 8 the upper lanes are +0 and the first fold step adds +0 to
  // lanes that are never -0, so folding the lower eight alone gives the same bits.
  const __m256i m0 = lane_mask(hs), m1 = lane_mask(hs - 8);
  const __m256 q0 = _mm256_maskload_ps(q, m0), q1 = _mm256_maskload_ps(q + 8, m1);
  const __m256 zero = _mm256_setzero_ps();
  if (hs <= 8) {
    for (int t = 0; t < n; ++t) {
      const float* k = keys + static_cast<size_t>(t) * stride;
      scores[t] = fold8(_mm256_add_ps(zero, _mm256_mul_ps(q0, _mm256_maskload_ps(k, m0)))) / scale;
    }
    return;
  }
  for (int t = 0; t < n; ++t) {
    const float* k = keys + static_cast<size_t>(t) * stride;
    const __m256 lo = _mm256_add_ps(zero, _mm256_mul_ps(q0, _mm256_maskload_ps(k, m0)));
    const __m256 hi = _mm256_add_ps(zero, _mm256_mul_ps(q1, _mm256_maskload_ps(k + 8, m1)));
    scores[t] = fold16(lo, hi) / scale;
  }
}

void attn_values(const float* att, const float* values, size_t stride, int n, int hs, float* out) {
  for (int i = 0; i < hs; i += 8) {
    const __m256i m = lane_mask(hs - i);
    __m256 acc = _mm256_setzero_ps();
    for (int t = 0; t < n; ++t)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(att[t]), _mm256_maskload_ps(values + static_cast<size_t>(t) * stride + i, m)));
    _mm256_maskstore_ps(out + i, m, acc);
  }
}

void softmax(float* x, int n) {
  // The running max per lane picks the same value as the scalar scan (a larger value always wins;
  // NaNs never do unless x[0] is one, and then every lane holds it). Between +0 and -0 the winner
  // may differ, which cannot change exp(x - max).
  __m256 mv = _mm256_set1_ps(x[0]);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    mv = _mm256_blendv_ps(mv, v, _mm256_cmp_ps(v, mv, _CMP_GT_OQ));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mv);
  float max = lanes[0];
  for (int k = 1; k < 8; ++k) max = lanes[k] > max ? lanes[k] : max;
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  // exponentials eight at a time; the sum stays sequential (the contract's order)
  float sum = 0.0f;
  const __m256 vmax = _mm256_set1_ps(max);
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_store_ps(lanes, expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax)));
    _mm256_storeu_ps(x + i, _mm256_load_ps(lanes));
    for (int k = 0; k < 8; ++k) sum += lanes[k];
  }
  for (; i < n; ++i) {
    x[i] = mc_expf(x[i] - max);
    sum += x[i];
  }
  const __m256 vsum = _mm256_set1_ps(sum);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vsum));
  for (; i < n; ++i) x[i] /= sum;
}

void silu_mul(float* gate, const float* up, int n) {
  int i = 0;
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, expf8(_mm256_xor_ps(g, sign))));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = mc_silu(gate[i]) * up[i];
}

}  // namespace mcullm::avx2
