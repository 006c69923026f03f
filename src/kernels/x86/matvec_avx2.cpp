// AVX2 kernels. Same reduction order as the reference (kernels.h): the 16 f32 lanes live in two
// 8-wide registers, the 8 block lanes in one; products are rounded before the add (no FMA).
#include <immintrin.h>

#include "kernels/x86/avx2_kernels.h"
#include "kernels/ref/dot_order.h"
#include "kernels/x86/matvec_q4_0_pairs.h"
#include "quant/blocks.h"
#include "quant/f16.h"

namespace mcullm::avx2 {

float dot_f32(const float* a, const float* b, int n) { return dot16(a, b, n); }

// Four rows at a time so that the eight add chains hide the add latency.
void matvec_f32(const MatRef& w, const float* x, float* y, int r0, int r1) {
  const int n = w.cols;
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const float* row[4];
    __m256 lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      row[k] = reinterpret_cast<const float*>(w.row(r + k));
      lo[k] = _mm256_setzero_ps();
      hi[k] = _mm256_setzero_ps();
    }
    int j = 0;
    for (; j + 16 <= n; j += 16) {
      const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + 8);
      for (int k = 0; k < 4; ++k) {
        lo[k] = _mm256_add_ps(lo[k], _mm256_mul_ps(_mm256_loadu_ps(row[k] + j), x0));
        hi[k] = _mm256_add_ps(hi[k], _mm256_mul_ps(_mm256_loadu_ps(row[k] + j + 8), x1));
      }
    }
    const int rem = n - j;
    if (rem > 0) {  // masked tail: see dot16
      const __m256i m0 = lane_mask(rem), m1 = lane_mask(rem - 8);
      const __m256 x0 = _mm256_maskload_ps(x + j, m0), x1 = _mm256_maskload_ps(x + j + 8, m1);
      for (int k = 0; k < 4; ++k) {
        lo[k] = _mm256_add_ps(lo[k], _mm256_mul_ps(_mm256_maskload_ps(row[k] + j, m0), x0));
        hi[k] = _mm256_add_ps(hi[k], _mm256_mul_ps(_mm256_maskload_ps(row[k] + j + 8, m1), x1));
      }
    }
    for (int k = 0; k < 4; ++k) y[r + k] = fold16(lo[k], hi[k]);
  }
  for (; r < r1; ++r) y[r] = dot16(reinterpret_cast<const float*>(w.row(r)), x, n);
}

namespace {

// 32 int8 x int8 products summed in pairs and quads into 8 int32 lanes (exact: |lane| < 2^17).
inline __m256i prod32_i8(__m256i w, __m256i x) {
  // maddubs needs an unsigned operand: |w| times x carrying w's sign.
  const __m256i prod16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Lane k of the result = the sum of p[k]'s 8 lanes (exact integer sums, any order).
inline __m256i hsum8_i32(const __m256i* p) {
  const __m256i q = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i r = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(q, r, 0x20), _mm256_permute2x128_si256(q, r, 0x31));
}

// prod(block, x): 8 int32 lanes whose sum is the block's exact integer dot product.
struct Q8_0Traits {
  using Block = BlockQ8_0;
  static constexpr int kBlock = 32;
  static __m256i prod(const Block& b, const int8_t* x) { return prod32_i8(load_q8_0(b), load_x(x)); }
};
struct Q4_0Traits {
  using Block = BlockQ4_0;
  static constexpr int kBlock = 32;
  static __m256i prod(const Block& b, const int8_t* x) { return prod32_i8(unpack_nibbles16(b.qs), load_x(x)); }
};
struct Q4G64Traits {
  using Block = BlockQ4G64;
  static constexpr int kBlock = 64;
  static __m256i prod(const Block& b, const int8_t* x) {
    __m256i v[2];
    unpack_q4g64(b, v);
    return _mm256_add_epi32(prod32_i8(v[0], load_x(x)), prod32_i8(v[1], load_x(x + 32)));
  }
};

// Exact half -> float on x86 (no flush-to-zero here): the half's bits shifted into a float's place
// are the value times 2^-112, which one exact multiply by 2^112 undoes, subnormal halves included.
inline float f16_scale(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  if ((h & 0x7C00u) == 0x7C00u) return f16_to_f32(h);  // inf / nan: rare, the portable path
  return f32_from_bits(f32_bits(f32_from_bits(static_cast<uint32_t>(h & 0x7FFFu) << 13) * 0x1p112f) | sign);
}

// Eight blocks per step into the 8 lanes of the contract (kernels.h): their integer sums side by
// side (hsum8_i32), times the f16 weight scales (F16C, exact) times the activation scales.
template <typename T>
__attribute__((target("f16c"))) void matvec_blocks(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0,
                                                   int r1) {
  constexpr int kBlock = T::kBlock;
  const int nb = (w.cols + kBlock - 1) / kBlock;
  const int nb8 = nb / kBlockLanes * kBlockLanes;
  for (int r = r0; r < r1; ++r) {
    const typename T::Block* blocks = reinterpret_cast<const typename T::Block*>(w.row(r));
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nb8; b += kBlockLanes) {
      __m256i p[kBlockLanes];
      alignas(16) uint16_t dw[kBlockLanes];
      for (int k = 0; k < kBlockLanes; ++k) {
        p[k] = T::prod(blocks[b + k], xq + (b + k) * kBlock);
        dw[k] = blocks[b + k].d;
      }
      const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dw))),
                                         _mm256_loadu_ps(xs + b));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(hsum8_i32(p)), scale));
    }
    if (nb8 < nb) {
      // The last chunk: missing blocks add (float)0 * 0 = +0, which leaves an accumulator unchanged
      // (it starts at +0 and never becomes -0).
      alignas(32) int32_t isum[kBlockLanes] = {};
      alignas(32) float dw[kBlockLanes] = {};
      alignas(32) float dx[kBlockLanes] = {};
      for (int k = 0; k < nb - nb8; ++k) {
        isum[k] = hsum_i32(T::prod(blocks[nb8 + k], xq + (nb8 + k) * kBlock));
        dw[k] = f16_scale(blocks[nb8 + k].d);
        dx[k] = xs[nb8 + k];
      }
      const __m256 scale = _mm256_mul_ps(_mm256_load_ps(dw), _mm256_load_ps(dx));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(isum))), scale));
    }
    y[r] = fold8(acc);
  }
}

}  // namespace

// Eight halves to floats with F16C: exact for every half (conversion to a wider format never
// rounds; subnormals are kept since the MXCSR's DAZ bit is clear). A signalling-NaN half comes out
// quietened, which f16_to_f32 does not do, but the product that follows quietens it in both paths.
__attribute__((target("f16c"))) static inline __m256 f16x8_to_f32(const uint16_t* h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}

// One row at a time, front to back (rows_side_by_side): four 1.5 KB rows side by side ran the 47 MB
// F16 head of bitnet.cpp's 125M file 2.7x slower on an AMD EPYC Zen 4 (6.0-6.4 -> 2.3 ms,
// bench/kernels_bench); the two add chains per row keep up with memory. Lanes and fold order as the
// reference (kernels.h).
__attribute__((target("f16c"))) void matvec_f16(const MatRef& w, const float* x, float* y, int r0, int r1) {
  const int n = w.cols;
  const int n16 = n / 16 * 16;
  auto tail = [&](const uint16_t* row, __m256 lo, __m256 hi) {
    if (n16 == n) return fold16(lo, hi);
    alignas(32) float acc[kF32Lanes];
    _mm256_store_ps(acc, lo);
    _mm256_store_ps(acc + 8, hi);
    for (int j = n16; j < n; ++j) acc[j % kF32Lanes] += f16_to_f32(row[j]) * x[j];
    return fold_lanes16(acc);
  };
  for (int r = r0; r < r1; ++r) {
    const uint16_t* row = reinterpret_cast<const uint16_t*>(w.row(r));
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int j = 0; j < n16; j += 16) {
      lo = _mm256_add_ps(lo, _mm256_mul_ps(f16x8_to_f32(row + j), _mm256_loadu_ps(x + j)));
      hi = _mm256_add_ps(hi, _mm256_mul_ps(f16x8_to_f32(row + j + 8), _mm256_loadu_ps(x + j + 8)));
    }
    y[r] = tail(row, lo, hi);
  }
}

void matvec_q8_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks<Q8_0Traits>(w, xq, xs, y, r0, r1);
}
namespace {
struct DpMaddubs {  // |nibble 15 * x 127 * 2| < 2^15: vpmaddubsw does not saturate
  static __m256i pair_dot(__m256i u8, __m256i s8) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1));
  }
  static __m128i scales(const BlockQ4_0* bg) { return q4_0_pairs::scales_by_load(bg); }
};
}  // namespace

// Rows of at most q4_0_pairs::kMaxCols: matvec_q4_0_pairs.h; wider ones the generic block kernel.
__attribute__((target("f16c"))) void matvec_q4_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  if (!q4_0_pairs::matvec<DpMaddubs>(w, xq, xs, y, r0, r1)) matvec_blocks<Q4_0Traits>(w, xq, xs, y, r0, r1);
}
void matvec_q4g64(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks<Q4G64Traits>(w, xq, xs, y, r0, r1);
}

}  // namespace mcullm::avx2
