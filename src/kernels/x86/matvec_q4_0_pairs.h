// q4_0 rows times q8 activations (generation's matvec), eight blocks per step, shared by the
// AVX2 and AVX-512 tables (each file includes it with its own flags; internal linkage).
// Same bits as kernels/ref (the contract of kernels.h): each block's exact integer dot product,
// times (weight scale * activation scale), added into lane b % 8, then the 8-lane fold.
//
// What makes it faster than the generic block kernel (matvec_avx2.cpp's matvec_blocks):
//  - the activations are rearranged once per call (x is shared by every row): a pair of blocks'
//    first halves in one vector, their second halves in another, which is how a pair of q4_0
//    blocks' low and high nibbles come out of one 32-byte load, so the nibbles go into the
//    unsigned-by-signed byte product as they are (0..15) and the -8 comes off the block sums as
//    8 * sum(x) (exact integers);
//  - eight blocks' sums reduced together (three hadds) into a permuted lane order that the scales
//    and corrections, prepared once per call, share, so the lanes are put back once per row.
// Dp supplies pair_dot(u8, s8): the 8 int32 lanes of 4-product sums (vpdpbusd, or vpmaddubsw +
// vpmaddwd: |15 * 127 * 2| fits int16), and scales(blocks): the eight blocks' f16 scales in the
// lane order below.
#pragma once
#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/ref/dot_order.h"
#include "kernels/x86/avx2_kernels.h"
#include "quant/blocks.h"
#include "quant/f16.h"

namespace mcullm {
namespace {
namespace q4_0_pairs {

// Widest row rearranged on the stack (its x takes this many bytes); wider rows: false.
constexpr int kMaxCols = 8192;

// hadd(hadd(A0, A1), hadd(A2, A3)) leaves block sums in the lane order b0 b2 b4 b6 b1 b3 b5 b7.
constexpr int kLaneBlock[kBlockLanes] = {0, 2, 4, 6, 1, 3, 5, 7};

inline __m256i pair_nibbles(const BlockQ4_0* b) {  // blocks b[0], b[1]: 16 bytes each, side by side
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs)), 1);
}

// The exact integer dot product of a pair of blocks with their rearranged activations (32 bytes
// of first halves, then 32 of second halves): 4 partial sums per block.
template <typename Dp>
inline __m256i pair_sums(const BlockQ4_0* b, const int8_t* xr) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i w = pair_nibbles(b);
  const __m256i lo = _mm256_and_si256(w, mask), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
  return _mm256_add_epi32(Dp::pair_dot(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr))),
                          Dp::pair_dot(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + 32))));
}

inline int block_dot_ref(const BlockQ4_0& b, const int8_t* x) {  // the tail's blocks, one at a time
  int s = 0;
  for (int j = 0; j < 16; ++j) s += ((b.qs[j] & 15) - 8) * x[j] + ((b.qs[j] >> 4) - 8) * x[j + 16];
  return s;
}

// Rows [r0, r1); false (nothing written) when the rows are wider than kMaxCols. F16C: every x86
// table's CPU check includes it (the AVX2 files are compiled without it).
template <typename Dp>
__attribute__((target("f16c"))) inline bool matvec(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const int nb = (w.cols + 31) / 32;
  const int nb8 = nb / kBlockLanes * kBlockLanes;
  if (w.cols > kMaxCols) return false;
  // Per call: x rearranged in pairs of blocks, and per group of 8 blocks the activation scales and
  // the 8 * sum(x) corrections in the lanes' order.
  alignas(32) int8_t xr[kMaxCols];
  alignas(32) float xs_lanes[kMaxCols / 32];
  alignas(32) int32_t x8_lanes[kMaxCols / 32];
  for (int p = 0; p + 2 <= nb8; p += 2) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * p));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * p + 32));
    _mm256_store_si256(reinterpret_cast<__m256i*>(xr + 32 * p), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_store_si256(reinterpret_cast<__m256i*>(xr + 32 * p + 32), _mm256_permute2x128_si256(a, b, 0x31));
  }
  for (int g = 0; g < nb8; g += kBlockLanes) {
    for (int i = 0; i < kBlockLanes; ++i) {
      const int b = g + kLaneBlock[i];
      int s = 0;
      for (int j = 0; j < 32; ++j) s += xq[32 * b + j];
      xs_lanes[g + i] = xs[b];
      x8_lanes[g + i] = 8 * s;
    }
  }
  const __m256i to_contract = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // lane i <- permuted lane
  for (int r = r0; r < r1; ++r) {
    const BlockQ4_0* blocks = reinterpret_cast<const BlockQ4_0*>(w.row(r));
    __m256 acc = _mm256_setzero_ps();  // lanes in kLaneBlock's order
    for (int g = 0; g < nb8; g += kBlockLanes) {
      const BlockQ4_0* bg = blocks + g;
      const int8_t* xg = xr + 32 * g;
      const __m256i h1 = _mm256_hadd_epi32(pair_sums<Dp>(bg, xg), pair_sums<Dp>(bg + 2, xg + 64));
      const __m256i h2 = _mm256_hadd_epi32(pair_sums<Dp>(bg + 4, xg + 128), pair_sums<Dp>(bg + 6, xg + 192));
      const __m256i isum =
          _mm256_sub_epi32(_mm256_hadd_epi32(h1, h2), _mm256_load_si256(reinterpret_cast<const __m256i*>(x8_lanes + g)));
      const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(Dp::scales(bg)), _mm256_load_ps(xs_lanes + g));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale));
    }
    acc = _mm256_permutevar8x32_ps(acc, to_contract);
    if (nb8 < nb) {
      // The last chunk: missing blocks add (float)0 * 0 = +0, which leaves a lane unchanged.
      alignas(32) float dw[kBlockLanes] = {}, dx[kBlockLanes] = {};
      alignas(32) int32_t isum[kBlockLanes] = {};
      for (int k = 0; k < nb - nb8; ++k) {
        isum[k] = block_dot_ref(blocks[nb8 + k], xq + 32 * (nb8 + k));
        dw[k] = f16_to_f32(blocks[nb8 + k].d);
        dx[k] = xs[nb8 + k];
      }
      const __m256 scale = _mm256_mul_ps(_mm256_load_ps(dw), _mm256_load_ps(dx));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(isum))), scale));
    }
    y[r] = avx2::fold8(acc);
  }
  return true;
}

// The eight scales of blocks bg[0..7] in kLaneBlock's order, one load each (AVX2).
inline __m128i scales_by_load(const BlockQ4_0* bg) {
  return _mm_setr_epi16(static_cast<short>(bg[0].d), static_cast<short>(bg[2].d), static_cast<short>(bg[4].d),
                        static_cast<short>(bg[6].d), static_cast<short>(bg[1].d), static_cast<short>(bg[3].d),
                        static_cast<short>(bg[5].d), static_cast<short>(bg[7].d));
}

}  // namespace q4_0_pairs
}  // namespace
}  // namespace mcullm
