// The project's own elementary functions. libm differs between glibc, newlib and picolibc, so every
// value that reaches a logit goes through these: basic IEEE operations only, hence the same bits on
// every target (given -ffp-contract=off).
#pragma once
#include <stdint.h>
#include <string.h>

namespace mcullm {

namespace fmath_detail {
inline float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline float nearest_int(float x) {  // round half away; |x| < 2^22
  return x >= 0 ? static_cast<float>(static_cast<int32_t>(x + 0.5f)) : -static_cast<float>(static_cast<int32_t>(0.5f - x));
}
constexpr float kInf = __builtin_huge_valf();
}  // namespace fmath_detail

// max error ~2 ulp, single precision only. Inline (below): softmax calls it once per attention entry, and
// in a loop the compiler keeps its constants in registers.
inline float mc_expf(float x);
float mc_expf_rounded(float x);  // the same bits as (float)mc_exp((double)x); double code for ~6e-5 of x
float mc_logf(float x);    // max error ~1 ulp; log(0) = -inf, log(<0) = nan
float mc_tanhf(float x);
float mc_erff(float x);    // absolute error < 2e-7; the bits of mc_erff_double, double code for ~1e-3 of x
float mc_silu(float x);    // x / (1 + exp(-x))
float mc_gelu_erf(float x);   // 0.5 x (1 + erf(x / sqrt 2))
float mc_gelu_tanh(float x);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
float mc_sqrtf(float x);   // correctly rounded (IEEE sqrt is exact on every target; see fmath.cpp)

// The single-precision attempts behind mc_expf_rounded and mc_erff: false where the result could differ from
// the double path's, which is then taken (checked on all 2^32 inputs by tools/check_fmath_exhaustive.cpp).
bool mc_expf_rounded_fast(float x, float* y);
bool mc_erff_fast(float x, float* y);
float mc_erff_double(float x);  // mc_erff's definition: Numerical Recipes' erfc fit in double, rounded

// Double precision, for tables computed once at load (RoPE frequencies and angles).
double mc_exp(double x);
double mc_log(double x);
void mc_sincos(double x, double* s, double* c);

// Single precision only, so that it stays cheap on an FPU without doubles (ESP32-S3).
inline float mc_expf(float x) {
  using fmath_detail::from_bits;
  using fmath_detail::kInf;
  using fmath_detail::nearest_int;
  if (x != x) return x;
  if (x > 88.72283935546875f) return kInf;
  if (x < -103.972084045410f) return 0.0f;
  // exp(x) = 2^n exp(r), r = x - n ln2, |r| <= 0.347; ln2 split so that n * kLn2Hi is exact.
  const float n = nearest_int(x * 1.44269504088896341f);
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
  // Taylor to degree 7: truncation below 6e-9 relative.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n in two factors so that results near the overflow and subnormal ends stay representable.
  const int32_t e = static_cast<int32_t>(n);
  const int32_t e1 = e / 2, e2 = e - e1;
  return p * from_bits(static_cast<uint32_t>(e1 + 127) << 23) * from_bits(static_cast<uint32_t>(e2 + 127) << 23);
}

}  // namespace mcullm
