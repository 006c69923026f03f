// AVX2 attention, softmax exponentials and SwiGLU, bit-exact with the reference: the same float
// operations per element, in the same order (kernels.h, core/fmath.cpp).
#include "kernels/x86/avx2_kernels.h"
#include "kernels/x86/transpose8.h"

namespace mcullm::avx2 {

namespace {

__m256 splat_bits(__m256i e) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23)); }

// mc_expf on K vectors of eight lanes, operation for operation (see fmath.cpp). Each step is done
// for the K vectors before the next: one exponential is a chain of some 30 dependent operations, and
// with the vectors one after the other the out-of-order window holds only two or three of them.
template <int K>
__attribute__((always_inline)) inline void expf8(__m256* v) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 x[K], n[K], r[K], p[K];
  for (int k = 0; k < K; ++k) {
    x[k] = v[k];
    const __m256 t = _mm256_mul_ps(x[k], _mm256_set1_ps(1.44269504088896341f));
    // nearest_int: t >= 0 ? (float)(int)(t + 0.5f) : -(float)(int)(0.5f - t), as (float)(int)(|t| +
    // 0.5f) with t's sign (0.5f - t is 0.5f + |t| when t < 0). Only t = -0 (x = -0) differs: n = -0
    // instead of +0, which makes r +0 instead of -0 and leaves p, e and the result as they were. A
    // NaN t (x NaN) is replaced by x at the end.
    const __m256 mag = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(_mm256_add_ps(_mm256_andnot_ps(sign, t), _mm256_set1_ps(0.5f))));
    n[k] = _mm256_xor_ps(mag, _mm256_and_ps(t, sign));
  }
  for (int k = 0; k < K; ++k)
    r[k] = _mm256_sub_ps(_mm256_sub_ps(x[k], _mm256_mul_ps(n[k], _mm256_set1_ps(0.693145751953125f))),
                         _mm256_mul_ps(n[k], _mm256_set1_ps(1.428606765330187045e-06f)));
  for (int k = 0; k < K; ++k) p[k] = _mm256_set1_ps(1.0f / 5040.0f);
  const float coef[] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
  for (float c : coef)
    for (int k = 0; k < K; ++k) p[k] = _mm256_add_ps(_mm256_mul_ps(p[k], r[k]), _mm256_set1_ps(c));
  for (int k = 0; k < K; ++k) {
    // e1 = e / 2 rounded toward zero, e2 = e - e1
    const __m256i e = _mm256_cvttps_epi32(n[k]);
    const __m256i e1 = _mm256_srai_epi32(_mm256_add_epi32(e, _mm256_srli_epi32(e, 31)), 1);
    const __m256i e2 = _mm256_sub_epi32(e, e1);
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p[k], splat_bits(e1)), splat_bits(e2));
    // the scalar's early returns, applied last (they override whatever the lanes computed)
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x[k], _mm256_set1_ps(-103.972084045410f), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_huge_valf()), _mm256_cmp_ps(x[k], _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ));
    v[k] = _mm256_blendv_ps(y, x[k], _mm256_cmp_ps(x[k], x[k], _CMP_UNORD_Q));
  }
}

__attribute__((always_inline)) inline __m256 expf8(__m256 x) {
  expf8<1>(&x);
  return x;
}

// Scores of nq <= 8 queries of hs <= 8 against the same keys (the query heads of one KV head):
// one chunk of the 16-lane contract per position. With hs <= 8 the upper lanes are +0 and the
// first fold step adds +0 to lanes that are never -0, so folding the lower eight alone gives the
// same bits. Eight positions at a time: their key rows transposed once for all queries (lane j of
// column i is position t + j's element i), then each position's fold steps lane-wise (the same adds
// in the same order) and eight divisions at once.
void scores_small(const float* const* q, int nq, const float* keys, size_t stride, int n, int hs, float scale,
                  float* const* scores) {
  const __m256i m0 = lane_mask(hs);
  const __m256 zero = _mm256_setzero_ps(), vscale = _mm256_set1_ps(scale);
  alignas(32) float qv[8][8];  // the queries, lanes from hs on +0 (see dot16)
  __m256 qreg[8];
  for (int h = 0; h < nq; ++h) {
    qreg[h] = _mm256_maskload_ps(q[h], m0);
    _mm256_store_ps(qv[h], qreg[h]);
  }
  int t = 0;
  for (; t + 8 <= n; t += 8) {
    __m256 r[8], col[8];
    for (int j = 0; j < 8; ++j) r[j] = _mm256_maskload_ps(keys + static_cast<size_t>(t + j) * stride, m0);
    transpose8_ps(r, col);
    for (int h = 0; h < nq; ++h) {
      __m256 v[8];  // lane i of the contract's accumulator, for eight positions
      for (int i = 0; i < 8; ++i) v[i] = _mm256_add_ps(zero, _mm256_mul_ps(_mm256_broadcast_ss(&qv[h][i]), col[i]));
      const __m256 s0 = _mm256_add_ps(v[0], v[4]), s1 = _mm256_add_ps(v[1], v[5]);  // acc[i] += acc[i+4]
      const __m256 s2 = _mm256_add_ps(v[2], v[6]), s3 = _mm256_add_ps(v[3], v[7]);
      const __m256 u0 = _mm256_add_ps(s0, s2), u1 = _mm256_add_ps(s1, s3);            // acc[i] += acc[i+2]
      _mm256_storeu_ps(scores[h] + t, _mm256_div_ps(_mm256_add_ps(u0, u1), vscale));  // acc[0] += acc[1]
    }
  }
  for (; t < n; ++t) {
    const __m256 k = _mm256_maskload_ps(keys + static_cast<size_t>(t) * stride, m0);
    for (int h = 0; h < nq; ++h) scores[h][t] = fold8(_mm256_add_ps(zero, _mm256_mul_ps(qreg[h], k))) / scale;
  }
}

float row_max(const float* x, int n) {
  // The running max per lane picks the same value as the scalar scan (a larger value always wins;
  // NaNs never do unless x[0] is one, and then every lane holds it). Between +0 and -0 the winner
  // may differ, which cannot change exp(x - max). So two accumulators change nothing either.
  __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    m0 = _mm256_blendv_ps(m0, v0, _mm256_cmp_ps(v0, m0, _CMP_GT_OQ));
    m1 = _mm256_blendv_ps(m1, v1, _mm256_cmp_ps(v1, m1, _CMP_GT_OQ));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    m0 = _mm256_blendv_ps(m0, v, _mm256_cmp_ps(v, m0, _CMP_GT_OQ));
  }
  m0 = _mm256_blendv_ps(m0, m1, _mm256_cmp_ps(m1, m0, _CMP_GT_OQ));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m0);
  float max = lanes[0];
  for (int k = 1; k < 8; ++k) max = lanes[k] > max ? lanes[k] : max;
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  return max;
}

// x[i] = mc_expf(x[i] - max) for i in [i0, n): four vectors in lockstep, the last 1-7 on masked
// lanes (the others' results are not stored).
void exp_shifted(float* x, int i0, int n, __m256 vmax) {
  int i = i0;
  for (; i + 32 <= n; i += 32) {
    __m256 e[4];
    for (int k = 0; k < 4; ++k) e[k] = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8 * k), vmax);
    expf8<4>(e);
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(x + i + 8 * k, e[k]);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax)));
  if (i < n) {
    const __m256i m = lane_mask(n - i);
    _mm256_maskstore_ps(x + i, m, expf8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vmax)));
  }
}

// Softmax of h rows of n at once (1 <= h <= 8), each row the reference's operations: its max, its
// exponentials, its sum in increasing position, its divisions. The h sums advance together, lane j
// holding row j's: eight positions of every row exponentiated (in lockstep), stored, transposed,
// then added position by position, so that the sums' chain runs beside the next positions'
// exponentials.
void softmax_rows(float* const* rows, int h, int n) {
  alignas(32) float max[8], sum[8] = {};
  for (int j = 0; j < h; ++j) max[j] = row_max(rows[j], n);
  int t = 0;
  if (h > 1) {  // one row is one chain either way: no transposes
    float* r[8];  // rows past h repeat the last one (computed, not stored: their lanes are not read)
    __m256 vmax[8];
    for (int j = 0; j < 8; ++j) {
      r[j] = rows[j < h ? j : h - 1];
      vmax[j] = _mm256_set1_ps(max[j < h ? j : h - 1]);
    }
    __m256 s = _mm256_setzero_ps();
    for (; t + 8 <= n; t += 8) {
      __m256 e[8], col[8];
      for (int j = 0; j < 8; ++j) e[j] = _mm256_sub_ps(_mm256_loadu_ps(r[j] + t), vmax[j]);
      expf8<4>(e);
      expf8<4>(e + 4);
      for (int j = 0; j < h; ++j) _mm256_storeu_ps(r[j] + t, e[j]);
      transpose8_ps(e, col);
      for (int i = 0; i < 8; ++i) s = _mm256_add_ps(s, col[i]);
    }
    _mm256_store_ps(sum, s);
  }
  for (int j = 0; j < h; ++j) {
    float* x = rows[j];
    exp_shifted(x, t, n, _mm256_set1_ps(max[j]));
    float sj = sum[j];
    for (int i = t; i < n; ++i) sj += x[i];
    const __m256 vsum = _mm256_set1_ps(sj);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vsum));
    for (; i < n; ++i) x[i] /= sj;
  }
}

// U output vectors of up to eight lanes side by side: out_u = sum over t < n, in increasing t, of
// att_u[t] * v_u[t * stride + lane] (each product rounded, then added from +0), lanes past the
// mask neither read nor written. Full: every mask is all lanes (plain loads). Pairs: units 2i and
// 2i + 1 read the same values (two query heads of one KV head), loaded once.
template <int U, bool Full, bool Pairs = false>
void values_units(const float* const* att, const float* const* v, float* const* out, const __m256i* mask, int n,
                  size_t stride) {
  __m256 acc[U];
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  for (int t = 0; t < n; ++t) {
    const size_t o = static_cast<size_t>(t) * stride;
    __m256 x = _mm256_setzero_ps();
    for (int u = 0; u < U; ++u) {
      if (!Pairs || u % 2 == 0) x = Full ? _mm256_loadu_ps(v[u] + o) : _mm256_maskload_ps(v[u] + o, mask[u]);
      acc[u] = _mm256_add_ps(acc[u], _mm256_mul_ps(_mm256_broadcast_ss(att[u] + t), x));
    }
  }
  for (int u = 0; u < U; ++u) {
    if (Full) _mm256_storeu_ps(out[u], acc[u]);
    else _mm256_maskstore_ps(out[u], mask[u], acc[u]);
  }
}

template <bool Full>
void values_units(int count, const float* const* att, const float* const* v, float* const* out, const __m256i* mask,
                  int n, size_t stride) {
  bool pairs = Full && count % 2 == 0;
  for (int u = 0; pairs && u < count; u += 2) pairs = v[u] == v[u + 1];
  if (pairs) {
    switch (count) {
      case 2: return values_units<2, true, true>(att, v, out, mask, n, stride);
      case 4: return values_units<4, true, true>(att, v, out, mask, n, stride);
      case 6: return values_units<6, true, true>(att, v, out, mask, n, stride);
      default: return values_units<8, true, true>(att, v, out, mask, n, stride);
    }
  }
  switch (count) {
    case 1: return values_units<1, Full>(att, v, out, mask, n, stride);
    case 2: return values_units<2, Full>(att, v, out, mask, n, stride);
    case 3: return values_units<3, Full>(att, v, out, mask, n, stride);
    case 4: return values_units<4, Full>(att, v, out, mask, n, stride);
    case 5: return values_units<5, Full>(att, v, out, mask, n, stride);
    case 6: return values_units<6, Full>(att, v, out, mask, n, stride);
    case 7: return values_units<7, Full>(att, v, out, mask, n, stride);
    default: return values_units<8, Full>(att, v, out, mask, n, stride);
  }
}

// attn_values of heads h (weights att[h], values v[h], output out[h]) for h < nh: their eight-lane
// slices run eight at a time, so that eight sequential sums are in flight instead of one.
void values_heads(const float* const* att, const float* const* v, float* const* out, int nh, int n, int hs,
                  size_t stride) {
  const float* ua[8];
  const float* uv[8];
  float* uo[8];
  __m256i um[8];
  int count = 0;
  const bool full = hs % 8 == 0;
  for (int h = 0; h < nh; ++h) {
    for (int i = 0; i < hs; i += 8) {
      ua[count] = att[h];
      uv[count] = v[h] + i;
      uo[count] = out[h] + i;
      um[count] = lane_mask(hs - i);
      if (++count == 8) {
        full ? values_units<true>(count, ua, uv, uo, um, n, stride) : values_units<false>(count, ua, uv, uo, um, n, stride);
        count = 0;
      }
    }
  }
  if (count > 0) full ? values_units<true>(count, ua, uv, uo, um, n, stride) : values_units<false>(count, ua, uv, uo, um, n, stride);
}

}  // namespace

void attn_scores(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores) {
  if (hs <= 8) return scores_small(&q, 1, keys, stride, n, hs, scale, &scores);
  if (hs > 16) {
    for (int t = 0; t < n; ++t) scores[t] = dot16(q, keys + static_cast<size_t>(t) * stride, hs) / scale;
    return;
  }
  // One chunk of the 16-lane contract: q loaded once, masks hoisted (see dot16 for why masked
  // lanes change nothing).
  const __m256i m0 = lane_mask(hs), m1 = lane_mask(hs - 8);
  const __m256 q0 = _mm256_maskload_ps(q, m0), q1 = _mm256_maskload_ps(q + 8, m1);
  const __m256 zero = _mm256_setzero_ps();
  for (int t = 0; t < n; ++t) {
    const float* k = keys + static_cast<size_t>(t) * stride;
    const __m256 lo = _mm256_add_ps(zero, _mm256_mul_ps(q0, _mm256_maskload_ps(k, m0)));
    const __m256 hi = _mm256_add_ps(zero, _mm256_mul_ps(q1, _mm256_maskload_ps(k + 8, m1)));
    scores[t] = fold16(lo, hi) / scale;
  }
}

void attn_values(const float* att, const float* values, size_t stride, int n, int hs, float* out) {
  values_heads(&att, &values, &out, 1, n, hs, stride);
}

void softmax(float* x, int n) { softmax_rows(&x, 1, n); }

void attn_heads(const KernelSet&, const AttnHeads& a, int h0, int h1) {
  const size_t hs = static_cast<size_t>(a.hs);
  for (int g0 = h0; g0 < h1; g0 += 8) {  // eight heads at a time
    const int g1 = g0 + 8 < h1 ? g0 + 8 : h1, nh = g1 - g0;
    const float* q[8];
    const float* v[8];
    float* att[8];
    float* out[8];
    for (int j = 0; j < nh; ++j) {
      const int h = g0 + j;
      q[j] = a.q + h * hs;
      v[j] = a.values + static_cast<size_t>(h / a.group) * hs;
      att[j] = a.att + static_cast<size_t>(h) * a.att_stride;
      out[j] = a.out + h * hs;
    }
    for (int j = 0; j < nh;) {  // the heads of one KV head together (small heads: one key transpose)
      const int kv = (g0 + j) / a.group;
      int e = j + 1;
      while (e < nh && (g0 + e) / a.group == kv) ++e;
      const float* keys = a.keys + static_cast<size_t>(kv) * hs;
      if (a.hs <= 8) scores_small(q + j, e - j, keys, a.stride, a.n, a.hs, a.scale, att + j);
      else
        for (int i = j; i < e; ++i) attn_scores(q[i], keys, a.stride, a.n, a.hs, a.scale, att[i]);
      j = e;
    }
    softmax_rows(att, nh, a.n);
    values_heads(att, v, out, nh, a.n, a.hs, a.stride);
  }
}

void silu_mul(float* gate, const float* up, int n) {
  // mc_silu(g) = g / (1 + mc_expf(-g)); four vectors in lockstep, then one, then the last 1-7 on
  // masked lanes (+0 in the others, not stored).
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 g[4], e[4];
    for (int k = 0; k < 4; ++k) {
      g[k] = _mm256_loadu_ps(gate + i + 8 * k);
      e[k] = _mm256_xor_ps(g[k], sign);
    }
    expf8<4>(e);
    for (int k = 0; k < 4; ++k)
      _mm256_storeu_ps(gate + i + 8 * k, _mm256_mul_ps(_mm256_div_ps(g[k], _mm256_add_ps(one, e[k])),
                                                       _mm256_loadu_ps(up + i + 8 * k)));
  }
  for (; i < n; i += 8) {
    const __m256i m = lane_mask(n - i);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, expf8(_mm256_xor_ps(g, sign))));
    _mm256_maskstore_ps(gate + i, m, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, m)));
  }
}

}  // namespace mcullm::avx2
