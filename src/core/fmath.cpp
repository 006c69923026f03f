#include "core/fmath.h"

#include <stdint.h>
#include <string.h>

namespace mcullm {

namespace {
inline uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline uint64_t bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
inline double from_bits64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
using fmath_detail::from_bits;
using fmath_detail::kInf;
using fmath_detail::nearest_int;

// Float-float arithmetic (a value is hi + lo, |lo| <= ulp(hi) / 2): IEEE +, -, * only, no fused multiply-add.
// s + e == a + b exactly, s = fl(a + b); needs |a| >= |b| (or a == 0).
inline void fast_two_sum(float a, float b, float* s, float* e) {
  *s = a + b;
  *e = b - (*s - a);
}

// The same without the order condition.
inline void two_sum(float a, float b, float* s, float* e) {
  *s = a + b;
  const float bb = *s - a;
  *e = (a - (*s - bb)) + (b - bb);
}

// Veltkamp: a = hi + lo with 12 significant bits each, so that products of halves are exact. |a| < 2^115.
inline void split(float a, float* hi, float* lo) {
  const float c = 4097.0f * a;
  *hi = c - (c - a);
  *lo = a - *hi;
}

// Dekker: p + e == a b exactly, p = fl(a b), with b already split as bh + bl.
inline void two_prod(float a, float b, float bh, float bl, float* p, float* e) {
  float ah, al;
  split(a, &ah, &al);
  *p = a * b;
  *e = ((ah * bh - *p) + ah * bl + al * bh) + al * bl;
}

// Whether hi + lo, with hi = fl(hi + lo), lies farther than tol from every midpoint between adjacent floats,
// so that any value within tol of it rounds to hi. hi must be a normal float.
inline bool clear_of_midpoints(float hi, float lo, float tol) {
  const uint32_t u = bits(hi);
  float half_ulp = from_bits((u & 0x7F800000u) - (24u << 23));  // 2^(e-24) for hi in [2^e, 2^(e+1))
  if ((u & 0x007FFFFFu) == 0 && lo < 0.0f) half_ulp *= 0.5f;    // below a power of two the floats are denser
  return (lo < 0.0f ? -lo : lo) < half_ulp - tol;
}

// 2^(j/64) = th + tl (within 2^-48), and t1 = th rounded to 12 bits.
constexpr float kExp2Table[64][3] = {
  {0x1p0f, 0x1p0f, 0x0p0f}, {0x1.02c9a4p0f, 0x1.02cp0f, -0x1.887fap-28f},
  {0x1.059b0ep0f, 0x1.05ap0f, -0x1.9d4f52p-25f}, {0x1.087452p0f, 0x1.088p0f, -0x1.e2990ep-26f},
  {0x1.0b5586p0f, 0x1.0b6p0f, 0x1.9f3122p-25f}, {0x1.0e3ec4p0f, 0x1.0e4p0f, -0x1.a585ccp-25f},
  {0x1.11301ep0f, 0x1.114p0f, -0x1.fdb496p-25f}, {0x1.1429aap0f, 0x1.142p0f, 0x1.d525bcp-25f},
  {0x1.172b84p0f, 0x1.172p0f, -0x1.c15742p-27f}, {0x1.1a35bep0f, 0x1.1a4p0f, 0x1.6df96ep-25f},
  {0x1.1d4874p0f, 0x1.1d4p0f, -0x1.d2e8cap-25f}, {0x1.2063b8p0f, 0x1.206p0f, 0x1.0c519ap-25f},
  {0x1.2387a6p0f, 0x1.238p0f, 0x1.ceac48p-25f}, {0x1.26b456p0f, 0x1.26cp0f, 0x1.789f38p-26f},
  {0x1.29e9ep0f, 0x1.29ep0f, -0x1.5c0424p-25f}, {0x1.2d285ap0f, 0x1.2d2p0f, 0x1.b900c2p-26f},
  {0x1.306fep0f, 0x1.306p0f, 0x1.4636e2p-25f}, {0x1.33c08cp0f, 0x1.33cp0f, -0x1.b37d2p-25f},
  {0x1.371a74p0f, 0x1.372p0f, -0x1.18aac6p-25f}, {0x1.3a7db4p0f, 0x1.3a8p0f, -0x1.634c02p-25f},
  {0x1.3dea64p0f, 0x1.3dep0f, 0x1.824684p-25f}, {0x1.4160a2p0f, 0x1.416p0f, 0x1.f72e2ap-28f},
  {0x1.44e086p0f, 0x1.44ep0f, 0x1.8624b4p-30f}, {0x1.486a2cp0f, 0x1.486p0f, -0x1.47d866p-25f},
  {0x1.4bfdaep0f, 0x1.4cp0f, -0x1.593abcp-25f}, {0x1.4f9b28p0f, 0x1.4fap0f, -0x1.2c5a6cp-25f},
  {0x1.5342b6p0f, 0x1.534p0f, -0x1.2c561p-25f}, {0x1.56f474p0f, 0x1.57p0f, -0x1.295b04p-25f},
  {0x1.5ab07ep0f, 0x1.5acp0f, -0x1.5bd5ecp-27f}, {0x1.5e76f2p0f, 0x1.5e8p0f, -0x1.4a5bd6p-25f},
  {0x1.6247ecp0f, 0x1.624p0f, -0x1.f8b55p-25f}, {0x1.662388p0f, 0x1.662p0f, 0x1.2a9112p-27f},
  {0x1.6a09e6p0f, 0x1.6ap0f, 0x1.9fcef4p-26f}, {0x1.6dfb24p0f, 0x1.6ep0f, -0x1.cd72e8p-27f},
  {0x1.71f75ep0f, 0x1.72p0f, 0x1.1d8beep-25f}, {0x1.75feb6p0f, 0x1.76p0f, -0x1.37b306p-25f},
  {0x1.7a1148p0f, 0x1.7a2p0f, -0x1.829fdp-25f}, {0x1.7e2f34p0f, 0x1.7e2p0f, -0x1.261634p-25f},
  {0x1.82589ap0f, 0x1.826p0f, -0x1.accc7cp-26f}, {0x1.868d9ap0f, 0x1.868p0f, -0x1.2edb44p-26f},
  {0x1.8ace54p0f, 0x1.8acp0f, 0x1.15506ep-27f}, {0x1.8f1aeap0f, 0x1.8f2p0f, -0x1.baa232p-26f},
  {0x1.93737cp0f, 0x1.938p0f, -0x1.e64744p-25f}, {0x1.97d82ap0f, 0x1.97ep0f, -0x1.0d8d84p-31f},
  {0x1.9c4918p0f, 0x1.9c4p0f, 0x1.51f848p-27f}, {0x1.a0c668p0f, 0x1.a0cp0f, -0x1.2886a6p-26f},
  {0x1.a5503cp0f, 0x1.a56p0f, -0x1.b83b54p-25f}, {0x1.a9e6b6p0f, 0x1.a9ep0f, -0x1.50c048p-25f},
  {0x1.ae89fap0f, 0x1.ae8p0f, -0x1.a94b14p-26f}, {0x1.b33a2cp0f, 0x1.b34p0f, -0x1.ec3a82p-26f},
  {0x1.b7f77p0f, 0x1.b8p0f, -0x1.a09438p-25f}, {0x1.bcc1eap0f, 0x1.bccp0f, -0x1.f687c6p-25f},
  {0x1.c199bep0f, 0x1.c1ap0f, -0x1.3d56b2p-27f}, {0x1.c67f12p0f, 0x1.c68p0f, 0x1.cafa2ap-25f},
  {0x1.cb720ep0f, 0x1.cb8p0f, -0x1.8837ccp-27f}, {0x1.d072d4p0f, 0x1.d08p0f, 0x1.40f13p-25f},
  {0x1.d5818ep0f, 0x1.d58p0f, -0x1.822dbcp-27f}, {0x1.da9e6p0f, 0x1.daap0f, 0x1.ed9942p-27f},
  {0x1.dfc974p0f, 0x1.dfcp0f, -0x1.908c94p-25f}, {0x1.e502eep0f, 0x1.e5p0f, 0x1.e2cffep-26f},
  {0x1.ea4afap0f, 0x1.ea4p0f, 0x1.52486cp-27f}, {0x1.efa1bep0f, 0x1.efap0f, 0x1.cc2b44p-25f},
  {0x1.f50766p0f, 0x1.f5p0f, -0x1.246ebp-26f}, {0x1.fa7c18p0f, 0x1.fa8p0f, 0x1.9e90d8p-28f}};

// exp(xh + xl) = 2^k (h + lo), h = fl(h + lo) in [0.99, 2.02], for xh in [-87, 88] (so k in [-126, 126]).
// Relative error < 2^-40 for |xl| <= 2^-24, < 2^-39 for |xl| <= 2^-20.
//
// xh = (64 k + j) ln2/64 + r, |r| <= ln2/128 (1 + 2^-10), and h + lo = M = T_j (1 + p): T_j = 2^(j/64) from the
// table, p = exp(r + xl) - 1 = r + r^2/2 + r^3/6 + r^4/24 + r^5/120 (truncation < 2^-54).
// Exact steps: m = 64 k + j has <= 14 bits and ln2/64 = L1 + L2 + L3 + L4 with L1..L3 of <= 9 bits, so m L1..m L3 are
// exact; xh - m L1 is exact (Sterbenz for |m| >= 2, short enough otherwise) and so is minus m L2 (a multiple of 2^-28,
// or of ulp(xh) if smaller (then |xh| < 2^-5), below 2^-7.4): rh = xh - m (L1 + L2) exactly, rl = xl - m (L3 + L4)
// rounded once (|m L3| < 2^-22: 2^-47). a = rh on a 2^-19 grid (<= 12 bits) and t1 on a 2^-11 grid, so a^2, t1 a and t2
// a (t2 = th - t1, <= 12 bits) are exact; v = a^2/2 = v1 (<= 12 bits, so t1 v1 is exact) + v2.
// Error of M, absolute, for xl = 0: w = b + c rounded (|w| < 2^-19.6): 2^-44, times th: 2^-43; th w rounded: 2^-43; the
// sum of the small terms (|small| < 2^-17.6, added smallest first): < 2^-41.3; the rest (c, q, tl p, the table, rl,
// truncation) < 2^-45. Total < 2^-40.5 < 2^-40 M. |xl| <= 2^-20 grows c, w and small to < 2^-19.6, 2^-18.8 and 2^-17.2:
// total < 2^-39.5.
inline float exp_ff(float xh, float xl, float* lo, int32_t* k) {
  const float kf = xh * 0x1.715476p6f + 0x1.8p23f;  // 64/ln2 xh rounded to an integer, in the low mantissa bits
  const int32_t m = static_cast<int32_t>(bits(kf) - bits(0x1.8p23f));
  const float mf = kf - 0x1.8p23f;
  const float rh = (xh - mf * 0x1.63p-7f) - mf * -0x1.bdp-19f;
  const float rl = xl - (mf * -0x1p-35f + mf * -0x1.718432p-41f);
  const float a = (rh + 24.0f) - 24.0f, b = rh - a;
  const float d = b + rl;  // r = a + d
  const float r = rh + rl;  // for the cubic and higher terms (rh alone would miss rh^2 rl / 2, up to 2^-38)
  const float q = r * r * r * (1.0f / 6.0f + r * (1.0f / 24.0f + r * (1.0f / 120.0f)));
  const float c = rl + (d * (a + 0.5f * d) + q);
  const float w = b + c;  // p = a + v + w
  const float v = 0.5f * (a * a);
  const float v1 = (v + 0x1.8p-5f) - 0x1.8p-5f, v2 = v - v1;
  const float* t = kExp2Table[m & 63];
  const float th = t[0], t1 = t[1], tl = t[2], t2 = th - t1;
  // M = th + t1 a + t1 v1 + (t2 a + th w + t2 v1 + th v2 + tl + tl p)
  float h, e1, e2;
  fast_two_sum(th, t1 * a, &h, &e1);
  fast_two_sum(h, t1 * v1, &h, &e2);
  float small = tl * (a + (v + w)) + tl;
  small += t2 * v1 + th * v2;
  small += e1 + e2;
  small += t2 * a;
  small += th * w;
  fast_two_sum(h, small, &h, lo);
  *k = m >> 6;
  return h;
}

inline float pow2(int32_t k) { return from_bits(static_cast<uint32_t>(k + 127) << 23); }  // k in [-126, 127]
}  // namespace

// mc_exp is within 2^-50 of exp (Cody-Waite, degree-13 Taylor; 2^-52.2 measured on every float of the range by
// tools/check_fmath_exhaustive.cpp --exp-error) and exp_ff within 2^-40, so together less than 2^-38 apart on M's scale
// (M < 2.02): wherever h + lo is farther than that from the midpoints between floats, (float)mc_exp(x) rounds to h too.
bool mc_expf_rounded_fast(float x, float* y) {
  if (x > 89.0f) { *y = kInf; return true; }     // exp(x) >= 2^128: mc_exp gives a double above FLT_MAX (or inf)
  if (x < -104.0f) { *y = 0.0f; return true; }   // exp(x) < 2^-150: rounds to 0
  if (!(x >= -87.0f && x <= 88.0f)) return false;  // NaN; results near overflow or subnormal
  float lo;
  int32_t k;
  const float h = exp_ff(x, 0.0f, &lo, &k);
  if (!clear_of_midpoints(h, lo, 0x1p-38f)) return false;
  *y = h * pow2(k);  // exact: the result is normal
  return true;
}

float mc_expf_rounded(float x) {
  float y;
  return mc_expf_rounded_fast(x, &y) ? y : static_cast<float>(mc_exp(static_cast<double>(x)));
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

// mc_erff's value is defined by mc_erff_double below (the double formula); this is that formula in float-float.
// t = 1/(1 + z/2) by Newton's iteration from a bit-pattern seed (no division), then t = r (1 + e + e^2) with
// e = 1 - D r exact but for 2^-46 r (|e| < 2^-20: error e^3). P(t) by Horner's rule in float-float, the double
// coefficients as float pairs (within 2^-48.9). Error of erfc, relative: P (9 steps, each three roundings of
// <= 2^-46.4 of values < 1.6, t <= 1; plus the coefficients) < 2^-40.8, t < 2^-44 (times 1 + t P'(t) < 2.3),
// -z^2 + P < 2^-46, exp_ff < 2^-40 (|xl| <= 2^-24 while |-z^2 + P| < 2, else < 2^-39 but erfc < 0.14), the product
// < 2^-46: erfc within 2^-39.3 erfc, so 1 - erfc within 2^-39.3 absolute (2^-42.5 seen against long double). The
// double formula's own roundings (divide, ten Horner steps on values < 1.6, mc_exp within 2^-50) put it within
// 2^-47 of the exact formula (2^-50.6 seen): outside 2^-38 of a midpoint both round alike.
bool mc_erff_fast(float x, float* y) {
  static constexpr float kP[10][2] = {  // NR's coefficients as doubles, each = hi + lo, c9 first
    {0x1.5df28ap-3f, 0x1.eed4b4p-28f}, {-0x1.a4f124p-1f, 0x1.cf442p-26f}, {0x1.7d0f6p0f, 0x1.14e87p-26f},
    {-0x1.229cbap0f, -0x1.818e6p-26f}, {0x1.1d8f98p-2f, -0x1.3b9c64p-27f}, {-0x1.7d8498p-3f, -0x1.557552p-30f},
    {0x1.8c6d92p-4f, -0x1.042782p-29f}, {0x1.7f11f6p-2f, 0x1.de583ap-28f}, {0x1.00018ep0f, -0x1.6e595p-25f},
    {-0x1.43f89cp0f, -0x1.11378ap-29f}};
  if (x != x) { *y = x; return true; }
  const float z = x < 0 ? -x : x;
  const float sign = x < 0 ? -1.0f : 1.0f;  // -0 counts as positive, as in the double code
  // Found by scanning every float: below z0 the double code returns its value at 0 (the fit's offset), from z1
  // on it returns 1.
  if (z < 0x1.a00002p-49f) { *y = sign * -0x1.01b2b2p-25f; return true; }
  if (z >= 0x1.f5a88ap1f) { *y = sign; return true; }
  if (z < 0x1p-13f) return false;  // |erf| < 2^-12.8: the double code's rounding noise reaches the float's ulp
  float dh, dl;  // D = 1 + z/2
  two_sum(1.0f, 0.5f * z, &dh, &dl);
  float r = from_bits(0x7EF311C3u - bits(dh));  // 1/dh within 12.5%; three Newton steps: within 2^-21
  for (int i = 0; i < 3; ++i) r = r * (2.0f - dh * r);
  float dhh, dhl, pr, pre, th, tl;
  split(dh, &dhh, &dhl);
  two_prod(r, dh, dhh, dhl, &pr, &pre);
  const float e = ((1.0f - pr) - pre) - dl * r;  // 1 - D r; 1 - pr is exact (Sterbenz)
  fast_two_sum(r, r * (e + e * e), &th, &tl);
  // P(t) by Horner's rule: p = p t + c
  float t1, t2, ph = kP[0][0], pl = kP[0][1];
  split(th, &t1, &t2);
  for (int i = 1; i < 10; ++i) {
    float pp, ppe, s, se;
    two_prod(ph, th, t1, t2, &pp, &ppe);
    two_sum(pp, kP[i][0], &s, &se);
    two_sum(s, se + ((ppe + (ph * tl + pl * th)) + kP[i][1]), &ph, &pl);  // the sum may cancel: not fast_two_sum
  }
  // -z^2 + P, exp, times t
  float zh, zl, z2, z2e, ah, al;
  split(z, &zh, &zl);
  two_prod(z, z, zh, zl, &z2, &z2e);
  two_sum(ph, -z2, &ah, &al);
  two_sum(ah, al + (pl - z2e), &ah, &al);
  float ml, mh2, ml2, eh, el;
  int32_t k;
  const float mh = exp_ff(ah, al, &ml, &k);
  split(mh, &mh2, &ml2);
  two_prod(th, mh, mh2, ml2, &eh, &el);
  el += th * ml + tl * mh;
  const float scale = pow2(k);  // exact: erfc > 2^-27 here
  float rh, rl;
  two_sum(1.0f, -(eh * scale), &rh, &rl);
  fast_two_sum(rh, rl - el * scale, &rh, &rl);
  if (!clear_of_midpoints(rh, rl, 0x1p-38f)) return false;
  *y = sign * rh;
  return true;
}

float mc_erff(float x) {
  float y;
  return mc_erff_fast(x, &y) ? y : mc_erff_double(x);
}

// The definition of mc_erff's value (the fallback of its fast path).
float mc_erff_double(float x) {
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

namespace {

// The series' coefficients, divided at compile time: IEEE division rounds the same there as at run
// time (the same bits as dividing in the loops, as this code once did), without a soft-float
// __divdf3 per term on single-precision FPUs (the ESP32-S3's) and per call.
struct SeriesCoefs {
  double exp[13];  // 1/12!, 1/11!, ..., 1/1!, 1/0!: Horner after the leading 1/13!
  double log[14];  // 1/27, 1/25, ..., 1/1
  double sin[11];  // (-1)^i / (2i+1)!, the factorials accumulated in double as the loop below once did
  double cos[11];  // (-1)^i / (2i)!
};
constexpr SeriesCoefs series_coefs() {
  SeriesCoefs c{};
  const double inv[13] = {479001600.0, 39916800.0, 3628800.0, 362880.0, 40320.0, 5040.0, 720.0,
                          120.0,       24.0,       6.0,       2.0,      1.0,     1.0};
  for (int i = 0; i < 13; ++i) c.exp[i] = 1.0 / inv[i];
  for (int k = 27, i = 0; k >= 1; k -= 2, ++i) c.log[i] = 1.0 / k;
  double f = 1.0;
  for (int i = 0; i < 11; ++i) {
    c.cos[i] = (i % 2 ? -1.0 : 1.0) / f;
    f *= (2 * i + 1);
    c.sin[i] = (i % 2 ? -1.0 : 1.0) / f;
    f *= (2 * i + 2);
  }
  return c;
}
constexpr SeriesCoefs kSeries = series_coefs();

}  // namespace

double mc_exp(double x) {
  if (x != x) return x;
  if (x > 709.0) return __builtin_huge_val();
  if (x < -745.0) return 0.0;
  const double n = static_cast<double>(static_cast<int64_t>(x * 1.4426950408889634 + (x >= 0 ? 0.5 : -0.5)));
  // Cody-Waite: ln2 split so that n * ln2_hi is exact.
  const double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  // exp(r) for |r| <= 0.347: Taylor to degree 13, truncation < 1e-17.
  double p = 1.0 / 6227020800.0;
  for (double c : kSeries.exp) p = p * r + c;
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
  for (double c : kSeries.log) p = p * s2 + c;  // 1/27, 1/25, ..., 1/1
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
  for (int i = 10; i >= 0; --i) {
    sp = sp * r2 + kSeries.sin[i];
    cp = cp * r2 + kSeries.cos[i];
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
