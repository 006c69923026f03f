// The project's own elementary functions. libm differs between glibc, newlib and picolibc, so every
// value that reaches a logit goes through these: basic IEEE operations only, hence the same bits on
// every target (given -ffp-contract=off).
#pragma once

namespace mcullm {

float mc_expf(float x);    // max error ~2 ulp, single precision only
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

}  // namespace mcullm
