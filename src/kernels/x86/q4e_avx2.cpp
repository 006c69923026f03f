// esp32-ai int4 (q4e) times int8 activations with AVX2: each row's nibbles are widened to int8
// weights (interleaving low and high nibbles restores column order), then every group's int32 sum
// is formed exactly with the sign trick; the group scales are applied in the reference's order.
#include "kernels/x86/avx2_kernels.h"
#include "quant/q4e.h"

namespace mcullm::avx2 {

namespace {
constexpr int kMaxCols = 16384;

// Exact int32 sum of w[j] * x[j] for j < n (w in [-8, 7], x in [-127, 127]).
int32_t dot_i8(const int8_t* w, const int8_t* x, int n) {
  __m256i acc = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  int j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + j));
    // |w| * sign(w) * x: maddubs needs an unsigned left operand; pairs stay within int16.
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
  }
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  int32_t sum = _mm_cvtsi128_si32(s);
  for (; j < n; ++j) sum += w[j] * x[j];
  return sum;
}
}  // namespace

void matvec_q4e_q8(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  if (w.cols > kMaxCols) {
    matvec_q4e_q8_ref(w, xq, xs, y, r0, r1);
    return;
  }
  alignas(32) int8_t wq[kMaxCols + 32];
  const int ng = q4e_groups(w.cols, w.group);
  const int nbytes = (w.cols + 1) / 2;
  const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    int b = 0;
    for (; b + 16 <= nbytes; b += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b));
      const __m128i lo = _mm_sub_epi8(_mm_and_si128(v, low), eight);
      const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), low), eight);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(wq + 2 * b), _mm_unpacklo_epi8(lo, hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(wq + 2 * b + 16), _mm_unpackhi_epi8(lo, hi));
    }
    for (; b < nbytes; ++b) {
      wq[2 * b] = static_cast<int8_t>((row[b] & 0x0F) - 8);
      wq[2 * b + 1] = static_cast<int8_t>((row[b] >> 4) - 8);
    }
    float acc = 0.0f;
    for (int g = 0; g < ng; ++g) {
      const int begin = g * w.group, end = begin + w.group < w.cols ? begin + w.group : w.cols;
      acc += static_cast<float>(dot_i8(wq + begin, xq + begin, end - begin)) * q4e_scale(w, r, g);
    }
    y[r] = acc * xs[0];
  }
}

}  // namespace mcullm::avx2

namespace mcullm::avx2 {

// f32 activations, eight rows at a time, one row per lane: every lane adds its products in the
// reference's order (increasing column within a group, then sum * scale into the row's total).
// Each lane's code byte is gathered as the low byte of the dword starting at it; the 3 bytes after it
// must lie inside the matrix's codes, so the last rows (where they may not) go to the reference.
void matvec_q4e_f32(const MatRef& w, const float* x, float* y, int r0, int r1) {
  const int ng = q4e_groups(w.cols, w.group);
  const int stride = static_cast<int>(w.row_bytes);
  const __m256i offs = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
  const __m256i low = _mm256_set1_epi32(0x0F), eight = _mm256_set1_epi32(8), byte_mask = _mm256_set1_epi32(0xFF);
  int r = r0;
  const int64_t end_bytes = static_cast<int64_t>(w.rows) * stride;
  for (; r + 8 <= r1 && static_cast<int64_t>(r + 8) * stride + 3 <= end_bytes && static_cast<int64_t>(stride) * 8 < (int64_t{1} << 30);
       r += 8) {
    const uint8_t* base = w.row(r);
    __m256 acc = _mm256_setzero_ps();
    for (int g = 0; g < ng; ++g) {
      const int begin = g * w.group, end = begin + w.group < w.cols ? begin + w.group : w.cols;
      __m256 sum = _mm256_setzero_ps();
      __m256i bytes = _mm256_setzero_si256();
      for (int j = begin; j < end; ++j) {
        if (j == begin || (j & 1) == 0)
          bytes = _mm256_and_si256(_mm256_i32gather_epi32(reinterpret_cast<const int*>(base + (j >> 1)), offs, 1), byte_mask);
        const __m256i code = (j & 1) ? _mm256_srli_epi32(bytes, 4) : _mm256_and_si256(bytes, low);
        const __m256 wv = _mm256_cvtepi32_ps(_mm256_sub_epi32(code, eight));
        sum = _mm256_add_ps(sum, _mm256_mul_ps(wv, _mm256_set1_ps(x[j])));
      }
      alignas(32) float sc[8];
      for (int i = 0; i < 8; ++i) sc[i] = q4e_scale(w, r + i, g);
      acc = _mm256_add_ps(acc, _mm256_mul_ps(sum, _mm256_load_ps(sc)));
    }
    _mm256_storeu_ps(y + r, acc);
  }
  if (r < r1) matvec_q4e_f32_ref(w, x, y, r, r1);
}

}  // namespace mcullm::avx2
