// Register-tiled int8 GEMM for the block types (q8_0, q4_0, q4g64) on VNNI, for batched (prefill)
// products. Each output keeps the matvec's bits (kernels.h): one exact int32 sum per block, then
// acc[b % 8] += (float)isum_b * (d_w_b * d_x_b) in increasing block order, folded as a tree.
//
// The trick that makes the 8 block lanes come out of vpdpbusd directly: the weights of 8 blocks
// and the activations of the same 8 blocks are both transposed by 32-bit words (word j of block
// b + k goes to lane k of vector j), so summing vpdpbusd over j leaves block b + k's sum in lane k,
// with no horizontal reduction. The weights of a row block are transposed once into a stack
// buffer and reused by every column; the activations of a few columns once per row block.
// vpdpbusd multiplies unsigned by signed bytes: the activations go in as x + 128 (x ^ 0x80) and
// each block's accumulator starts at -128 * (sum of its weights), so the int32 sums are exact.
//
// Without VNNI (plain AVX2, gemm_avx2.cpp) the same layout serves, with vpmaddubsw + vpmaddwd in
// place of vpdpbusd (Dp says whether the activations are flipped to x + 128 as above, or kept signed
// for a sign trick; see that file for why neither saturates int16).
//
// Included by one file per instruction set (internal linkage: each compiles it with its own flags);
// Dp supplies kFlip and either (kGroup == 0) the dot-product step dp(acc, x, w) (vpdpbusd on
// AVX-512 VL or AVX-VNNI) or (kGroup > 0) pairs(x, w), int16 sums of adjacent byte products
// (vpmaddubsw), kGroup of which may be added in int16 exactly; Rows x Cols the register tile.
#pragma once
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/x86/avx2_kernels.h"
#include "kernels/x86/transpose8.h"
#include "quant/blocks.h"

namespace mcullm {
namespace {

namespace gemm {

constexpr int kLanes = 8;                  // blocks per chunk: the contract's 8 block lanes
constexpr size_t kWeightBuffer = 64 << 10;  // transposed weights of one row block (stays in L2)
constexpr size_t kActBuffer = 128 << 10;    // transposed activations of one column tile

// Unpacked signed weights of one block, 32 per vector, in element order.
struct Q8_0 {
  using Block = BlockQ8_0;
  static constexpr int kBlock = 32;
  static void unpack(const Block& b, __m256i* v) { v[0] = avx2::load_q8_0(b); }
};
struct Q4_0 {
  using Block = BlockQ4_0;
  static constexpr int kBlock = 32;
  static void unpack(const Block& b, __m256i* v) { v[0] = avx2::unpack_nibbles16(b.qs); }
};
struct Q4G64 {
  using Block = BlockQ4G64;
  static constexpr int kBlock = 64;
  static void unpack(const Block& b, __m256i* v) { avx2::unpack_q4g64(b, v); }
};

// Bytes per chunk of 8 blocks: J word vectors, then (weights) 8 int32 start values and 8 f32
// scales, or (activations) 8 f32 scales. Blocks past the row's end are zero with scale 0: they add
// (float)0 * 0 = +0 to a lane, which leaves it unchanged (lanes start at +0 and never become -0).
template <typename T>
struct Layout {
  static constexpr int J = T::kBlock / 4;  // word vectors per chunk
  static constexpr size_t kWeightChunk = J * 32 + 64;
  static constexpr size_t kActChunk = J * 32 + 32;
};

// Row r of w, transposed into dst (nchunks chunks).
template <typename T, typename Dp>
inline void transpose_row(const MatRef& w, int r, int nb, int nchunks, uint8_t* dst) {
  constexpr int V = T::kBlock / 32;
  const typename T::Block* blocks = reinterpret_cast<const typename T::Block*>(w.row(r));
  const __m256i ones = _mm256_set1_epi8(1);
  for (int ch = 0; ch < nchunks; ++ch, dst += Layout<T>::kWeightChunk) {
    __m256i v[V][kLanes];
    const int b0 = ch * kLanes;
    for (int k = 0; k < kLanes; ++k) {
      if (b0 + k < nb) {
        __m256i u[V];
        T::unpack(blocks[b0 + k], u);
        for (int h = 0; h < V; ++h) v[h][k] = u[h];
      } else {
        for (int h = 0; h < V; ++h) v[h][k] = _mm256_setzero_si256();
      }
    }
    // The 8 scales straight into a vector (through a stack array, the 8 narrow stores and the wide
    // load after them missed store forwarding: a quarter of a prefill's GEMM time on a Zen 5).
    auto d = [&](int k) { return static_cast<short>(b0 + k < nb ? blocks[b0 + k].d : 0); };
    const __m128i dw = _mm_setr_epi16(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7));
    __m256i wsum = _mm256_setzero_si256();
    for (int h = 0; h < V; ++h) {
      transpose8_epi32(v[h]);
      for (int j = 0; j < kLanes; ++j) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (h * kLanes + j) * 32), v[h][j]);
        if constexpr (Dp::kGroup == 0) wsum = Dp::dp(wsum, ones, v[h][j]);
        else if constexpr (Dp::kFlip) wsum = _mm256_add_epi32(wsum, _mm256_madd_epi16(Dp::pairs(ones, v[h][j]), _mm256_set1_epi16(1)));
      }
    }
    __m256i* tail = reinterpret_cast<__m256i*>(dst + Layout<T>::J * 32);
    const __m256i start = Dp::kFlip ? _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(wsum, 7)) : _mm256_setzero_si256();
    _mm256_storeu_si256(tail, start);
    _mm256_storeu_ps(reinterpret_cast<float*>(tail + 1), _mm256_cvtph_ps(dw));
  }
}

// Columns [c0, c0 + C) of x (clamped to the last column: a repeated column is computed but not
// stored), transposed into dst, one group of P columns after another (P * col_bytes apart),
// the P columns' word vectors (and scales) side by side in each (P = 2: a 512-bit vector holds
// one word of two columns); flipped to x + 128 when Dp::kFlip (blocks past the row's end are then
// 0x80, the flipped 0).
template <typename T, typename Dp, int C, int P = 1>
inline void transpose_cols(const ActMat& x, int n, int c0, int nb, int nchunks, uint8_t* dst, size_t col_bytes) {
  constexpr int V = T::kBlock / 32;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(Dp::kFlip ? 0x80 : 0));
  for (int i = 0; i < C; ++i) {
    const int c = c0 + i < n ? c0 + i : n - 1;
    const int8_t* q = x.q + static_cast<size_t>(c) * x.q_stride;
    const float* s = x.scales + static_cast<size_t>(c) * x.s_stride;
    uint8_t* d = dst + (i / P) * P * col_bytes + (i % P) * 32;
    for (int ch = 0; ch < nchunks; ++ch, d += P * Layout<T>::kActChunk) {
      __m256i v[V][kLanes];
      const int b0 = ch * kLanes;
      for (int k = 0; k < kLanes; ++k) {
        const int b = b0 + k;
        for (int h = 0; h < V; ++h)
          v[h][k] = b < nb ? _mm256_xor_si256(avx2::load_x(q + b * T::kBlock + h * 32), flip) : flip;
      }
      auto sc = [&](int k) { return b0 + k < nb ? s[b0 + k] : 0.0f; };
      const __m256 dx = b0 + kLanes <= nb ? _mm256_loadu_ps(s + b0) : _mm256_setr_ps(sc(0), sc(1), sc(2), sc(3), sc(4), sc(5), sc(6), sc(7));
      for (int h = 0; h < V; ++h) {
        transpose8_epi32(v[h]);
        for (int j = 0; j < kLanes; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + (h * kLanes + j) * 32 * P), v[h][j]);
      }
      _mm256_storeu_ps(reinterpret_cast<float*>(d + Layout<T>::J * 32 * P), dx);
    }
  }
}

// One R x C tile: rows at w (w_bytes apart; rows past nr repeat row nr - 1, computed but not
// stored), columns at x (x_bytes apart); out[i * C + c] = the 8 lanes of row i, column c.
template <typename T, typename Dp, int R, int C>
inline void tile(const uint8_t* w, size_t w_bytes, int nr, const uint8_t* x, size_t x_bytes, int nchunks, __m256* out) {
  constexpr int J = Layout<T>::J;
  __m256 accf[R][C];
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) accf[i][c] = _mm256_setzero_ps();
  for (int ch = 0; ch < nchunks; ++ch) {
    const uint8_t* wr[R];
    const uint8_t* xr[C];
    for (int i = 0; i < R; ++i) wr[i] = w + (i < nr ? i : nr - 1) * w_bytes + ch * Layout<T>::kWeightChunk;
    for (int c = 0; c < C; ++c) xr[c] = x + c * x_bytes + ch * Layout<T>::kActChunk;
    __m256i acc[R][C];
    for (int i = 0; i < R; ++i) {
      const __m256i start = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[i] + J * 32));
      for (int c = 0; c < C; ++c) acc[i][c] = start;
    }
    if constexpr (Dp::kGroup == 0) {
      for (int j = 0; j < J; ++j) {
        __m256i xv[C];
        for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[c] + j * 32));
        for (int i = 0; i < R; ++i) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[i] + j * 32));
          for (int c = 0; c < C; ++c) acc[i][c] = Dp::dp(acc[i][c], xv[c], wv);
        }
      }
    } else {
      // Without VNNI: Dp::pairs gives int16 sums of byte pairs; kGroup steps of them are added in
      // int16 (Dp bounds that sum below 2^15), then widened to int32 by vpmaddwd with ones.
      static_assert(J % Dp::kGroup == 0, "whole groups per chunk");
      const __m256i ones = _mm256_set1_epi16(1);
      for (int g = 0; g < J; g += Dp::kGroup) {
        __m256i p[R][C];
        for (int j = g; j < g + Dp::kGroup; ++j) {
          __m256i xv[C];
          for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[c] + j * 32));
          for (int i = 0; i < R; ++i) {
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[i] + j * 32));
            for (int c = 0; c < C; ++c) {
              const __m256i pj = Dp::pairs(xv[c], wv);
              p[i][c] = j == g ? pj : _mm256_add_epi16(p[i][c], pj);
            }
          }
        }
        for (int i = 0; i < R; ++i)
          for (int c = 0; c < C; ++c) acc[i][c] = _mm256_add_epi32(acc[i][c], _mm256_madd_epi16(p[i][c], ones));
      }
    }
    for (int i = 0; i < R; ++i) {
      const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(wr[i] + J * 32 + 32));
      for (int c = 0; c < C; ++c) {
        const __m256 scale = _mm256_mul_ps(dw, _mm256_loadu_ps(reinterpret_cast<const float*>(xr[c] + J * 32)));
        accf[i][c] = _mm256_add_ps(accf[i][c], _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][c]), scale));
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) out[i * C + c] = accf[i][c];
}

#if defined(__AVX512F__)
// tile() on 512-bit vectors: each holds one word of two columns (transpose_cols with P = 2) and
// the rows' word vectors are broadcast to both halves, so every lane does what tile()'s does and
// the bits are the same; R x 2CP outputs, out[i * 2CP + c] their 8 lanes. Where 512-bit vpdpbusd
// runs at full width (Zen 5), twice the products per instruction.
template <typename T, int R, int CP>
inline void tile_pairs(const uint8_t* w, size_t w_bytes, int nr, const uint8_t* x, size_t x_bytes, int nchunks, __m256* out) {
  constexpr int J = Layout<T>::J;
  __m512 accf[R][CP];
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < CP; ++p) accf[i][p] = _mm512_setzero_ps();
  for (int ch = 0; ch < nchunks; ++ch) {
    const uint8_t* wr[R];
    const uint8_t* xr[CP];
    for (int i = 0; i < R; ++i) wr[i] = w + (i < nr ? i : nr - 1) * w_bytes + ch * Layout<T>::kWeightChunk;
    for (int p = 0; p < CP; ++p) xr[p] = x + p * 2 * x_bytes + ch * 2 * Layout<T>::kActChunk;
    __m512i acc[R][CP];
    for (int i = 0; i < R; ++i) {
      const __m512i start = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[i] + J * 32)));
      for (int p = 0; p < CP; ++p) acc[i][p] = start;
    }
    for (int j = 0; j < J; ++j) {
      __m512i xv[CP];
      for (int p = 0; p < CP; ++p) xv[p] = _mm512_loadu_si512(xr[p] + j * 64);
      for (int i = 0; i < R; ++i) {
        const __m512i wv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[i] + j * 32)));
        for (int p = 0; p < CP; ++p) acc[i][p] = _mm512_dpbusd_epi32(acc[i][p], xv[p], wv);
      }
    }
    for (int i = 0; i < R; ++i) {
      const __m512 dw = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(wr[i] + J * 32 + 32))));
      for (int p = 0; p < CP; ++p) {
        const __m512 scale = _mm512_mul_ps(dw, _mm512_loadu_ps(reinterpret_cast<const float*>(xr[p] + J * 64)));
        accf[i][p] = _mm512_add_ps(accf[i][p], _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][p]), scale));
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < CP; ++p) {
      out[i * 2 * CP + 2 * p] = _mm512_castps512_ps256(accf[i][p]);
      out[i * 2 * CP + 2 * p + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(accf[i][p]), 1));
    }
}
#endif

// Rows [r0, r1) of w times the n columns of x; false (nothing written) when a row is too long for
// the stack buffers (the caller then takes the matvec path).
// P = 2: tile_pairs (512-bit vpdpbusd, two columns per vector; C even).
template <typename T, typename Dp, int R, int C, int P = 1>
__attribute__((noinline)) bool matmat(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) {
  static_assert(P == 1 || (P == 2 && C % 2 == 0 && Dp::kGroup == 0 && Dp::kFlip), "column pairs: vpdpbusd on x + 128");
  const int nb = (w.cols + T::kBlock - 1) / T::kBlock;
  const int nchunks = (nb + kLanes - 1) / kLanes;
  const size_t w_bytes = nchunks * Layout<T>::kWeightChunk, x_bytes = nchunks * Layout<T>::kActChunk;
  if (n <= 0 || r1 <= r0) return true;
  if (w_bytes * R > kWeightBuffer || x_bytes * C > kActBuffer) return false;
  alignas(64) uint8_t wbuf[kWeightBuffer];
  alignas(64) uint8_t xbuf[kActBuffer];
  const int rb = static_cast<int>(kWeightBuffer / w_bytes) / R * R;
  for (int rb0 = r0; rb0 < r1; rb0 += rb) {
    const int rb1 = r1 - rb0 < rb ? r1 : rb0 + rb;
    for (int r = rb0; r < rb1; ++r) transpose_row<T, Dp>(w, r, nb, nchunks, wbuf + (r - rb0) * w_bytes);
    for (int c0 = 0; c0 < n; c0 += C) {
      transpose_cols<T, Dp, C, P>(x, n, c0, nb, nchunks, xbuf, x_bytes);
      const int nc = n - c0 < C ? n - c0 : C;
      for (int r = rb0; r < rb1; r += R) {
        const int nr = rb1 - r < R ? rb1 - r : R;
        __m256 out[R * C];
#if defined(__AVX512F__)
        if constexpr (P == 2) tile_pairs<T, R, C / 2>(wbuf + (r - rb0) * w_bytes, w_bytes, nr, xbuf, x_bytes, nchunks, out);
        else
#endif
          tile<T, Dp, R, C>(wbuf + (r - rb0) * w_bytes, w_bytes, nr, xbuf, x_bytes, nchunks, out);
        for (int i = 0; i < nr; ++i)
          for (int c = 0; c < nc; ++c) y[static_cast<size_t>(c0 + c) * y_stride + r + i] = avx2::fold8(out[i * C + c]);
      }
    }
  }
  return true;
}

}  // namespace gemm

}  // namespace
}  // namespace mcullm
