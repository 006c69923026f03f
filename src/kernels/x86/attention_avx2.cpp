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
    // Eight positions at a time: their key rows transposed so that lane j of column i is position
    // t + j's element i; then each position's lanes take the fold8 steps below lane-wise (the same
    // adds in the same order), and eight divisions at once.
    alignas(32) float qv[8] = {};
    _mm256_store_ps(qv, q0);
    int t = 0;
    for (; t + 8 <= n; t += 8) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_maskload_ps(keys + static_cast<size_t>(t + j) * stride, m0);
      const __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
      const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
      const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
      const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
      const __m256 col[8] = {_mm256_permute2f128_ps(b0, b4, 0x20), _mm256_permute2f128_ps(b1, b5, 0x20),
                             _mm256_permute2f128_ps(b2, b6, 0x20), _mm256_permute2f128_ps(b3, b7, 0x20),
                             _mm256_permute2f128_ps(b0, b4, 0x31), _mm256_permute2f128_ps(b1, b5, 0x31),
                             _mm256_permute2f128_ps(b2, b6, 0x31), _mm256_permute2f128_ps(b3, b7, 0x31)};
      __m256 v[8];  // lane i of the contract's accumulator, for eight positions
      for (int i = 0; i < 8; ++i) v[i] = _mm256_add_ps(zero, _mm256_mul_ps(_mm256_set1_ps(qv[i]), col[i]));
      const __m256 s0 = _mm256_add_ps(v[0], v[4]), s1 = _mm256_add_ps(v[1], v[5]);  // acc[i] += acc[i+4]
      const __m256 s2 = _mm256_add_ps(v[2], v[6]), s3 = _mm256_add_ps(v[3], v[7]);
      const __m256 u0 = _mm256_add_ps(s0, s2), u1 = _mm256_add_ps(s1, s3);            // acc[i] += acc[i+2]
      _mm256_storeu_ps(scores + t, _mm256_div_ps(_mm256_add_ps(u0, u1), _mm256_set1_ps(scale)));  // acc[0] += acc[1]
    }
    for (; t < n; ++t) {
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
