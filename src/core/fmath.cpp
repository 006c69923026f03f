#include "core/fmath.h"

#include <stdint.h>
#include <string.h>

namespace mcullm {

namespace {
inline uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline uint64_t bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
inline double from_bits64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
inline float nearest_int(float x) {  // round half away; |x| < 2^22
  return x >= 0 ? static_cast<float>(static_cast<int32_t>(x + 0.5f)) : -static_cast<float>(static_cast<int32_t>(0.5f - x));
}
constexpr float kInf = __builtin_huge_valf();
}  // namespace

// Single precision only, so that it stays cheap on an FPU without doubles (ESP32-S3).
float mc_expf(float x) {
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

float mc_logf(float x) {
  if (x != x || x < 0.0f) return from_bits(0x7FC00000u);
  if (x == 0.0f) return -kInf;
  if (x == kInf) return kInf;
  return static_cast<float>(mc_log(static_cast<double>(x)));
}

float mc_tanhf(float x) {
  if (x != x) return x;
  const float a = x < 0 ? -x : x;
  if (a > 9.0f) return x < 0 ? -1.0f : 1.0f;
  if (a < 0.0004f) return x;  // tanh x = x - x^3/3: x^3/3 is below half an ulp here
  const double e = mc_exp(2.0 * static_cast<double>(a));
  const double t = (e - 1.0) / (e + 1.0);
  return static_cast<float>(x < 0 ? -t : t);
}

float mc_erff(float x) {
  if (x != x) return x;
  // erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2): Numerical Recipes' Chebyshev fit, rel. error < 1.2e-7.
  const double z = x < 0 ? -static_cast<double>(x) : static_cast<double>(x);
  const double t = 1.0 / (1.0 + 0.5 * z);
  double p = 0.17087277;
  p = p * t - 0.82215223;
  p = p * t + 1.48851587;
  p = p * t - 1.13520398;
  p = p * t + 0.27886807;
  p = p * t - 0.18628806;
  p = p * t + 0.09678418;
  p = p * t + 0.37409196;
  p = p * t + 1.00002368;
  p = p * t - 1.26551223;
  const double erfc = t * mc_exp(-z * z + p);
  const double r = 1.0 - erfc;
  return static_cast<float>(x < 0 ? -r : r);
}

float mc_silu(float x) { return x / (1.0f + mc_expf(-x)); }

float mc_gelu_erf(float x) { return 0.5f * x * (1.0f + mc_erff(x * 0.70710678118654752f)); }

float mc_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + mc_tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// sqrt is one of IEEE 754's basic operations (correctly rounded), implemented exactly by hardware
// and by the soft-float libraries of newlib and picolibc alike; the builtin compiles to that.
float mc_sqrtf(float x) { return __builtin_sqrtf(x); }

double mc_exp(double x) {
  if (x != x) return x;
  if (x > 709.0) return __builtin_huge_val();
  if (x < -745.0) return 0.0;
  const double n = static_cast<double>(static_cast<int64_t>(x * 1.4426950408889634 + (x >= 0 ? 0.5 : -0.5)));
  // Cody-Waite: ln2 split so that n * ln2_hi is exact.
  const double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  // exp(r) for |r| <= 0.347: Taylor to degree 13, truncation < 1e-17.
  double p = 1.0 / 6227020800.0;
  const double inv[] = {479001600.0, 39916800.0, 3628800.0, 362880.0, 40320.0, 5040.0, 720.0, 120.0, 24.0, 6.0, 2.0, 1.0, 1.0};
  for (double f : inv) p = p * r + 1.0 / f;
  int64_t e = static_cast<int64_t>(n);
  // scale in two steps so that subnormal results and 2^1024 do not overflow the exponent field
  const int64_t e1 = e / 2, e2 = e - e1;
  return p * from_bits64(static_cast<uint64_t>(e1 + 1023) << 52) * from_bits64(static_cast<uint64_t>(e2 + 1023) << 52);
}

double mc_log(double x) {
  if (x != x || x < 0.0) return from_bits64(0x7FF8000000000000ull);
  if (x == 0.0) return -__builtin_huge_val();
  if (x == __builtin_huge_val()) return x;
  uint64_t u = bits(x);
  int e = static_cast<int>((u >> 52) & 0x7FF);
  if (e == 0) {  // subnormal: scale up by 2^54
    x *= 18014398509481984.0;
    u = bits(x);
    e = static_cast<int>((u >> 52) & 0x7FF) - 54;
  }
  e -= 1023;
  double m = from_bits64((u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) { m *= 0.5; ++e; }
  // log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 0.0;
  for (int k = 27; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
  const double logm = 2.0 * s * p;
  return static_cast<double>(e) * 6.93147180369123816490e-01 + (static_cast<double>(e) * 1.90821492927058770002e-10 + logm);
}

void mc_sincos(double x, double* s, double* c) {
  if (x != x || x == __builtin_huge_val() || x == -__builtin_huge_val()) {
    *s = *c = from_bits64(0x7FF8000000000000ull);
    return;
  }
  // Reduce by pi/2 with a three-part constant (exact for |x| up to ~1e9), quadrant q.
  const double k = static_cast<double>(static_cast<int64_t>(x * 0.63661977236758134308 + (x >= 0 ? 0.5 : -0.5)));
  double r = x - k * 1.57079632673412561417e+00;
  r -= k * 6.07710050650619224932e-11;
  r -= k * 2.02226624879595063154e-21;
  const double r2 = r * r;
  // Taylor series on |r| <= pi/4: degree 21 / 20, truncation < 1e-19.
  double sp = 0.0, cp = 0.0;
  double sf[11], cf[11];
  double f = 1.0;
  for (int i = 0; i < 11; ++i) {
    cf[i] = (i % 2 ? -1.0 : 1.0) / f;  // 1/(2i)!
    f *= (2 * i + 1);
    sf[i] = (i % 2 ? -1.0 : 1.0) / f;  // 1/(2i+1)!
    f *= (2 * i + 2);
  }
  for (int i = 10; i >= 0; --i) {
    sp = sp * r2 + sf[i];
    cp = cp * r2 + cf[i];
  }
  const double sr = r * sp, cr = cp;
  const int64_t q = static_cast<int64_t>(k) & 3;
  switch (q) {
    case 0: *s = sr; *c = cr; break;
    case 1: *s = cr; *c = -sr; break;
    case 2: *s = -sr; *c = -cr; break;
    default: *s = -cr; *c = sr; break;
  }
}

}  // namespace mcullm
