// Development check, not part of the build: every one of the 2^32 floats through the single-precision paths of
// mc_expf_rounded and mc_erff against the double code that defines their values ((float)mc_exp((double)x) and
// mc_erff_double). Equal bits required, NaN for NaN; also counts where the fast path defers to the double one.
// One thread, a few minutes per function:
//
//   g++ -O2 -ffp-contract=off -fno-fast-math -std=c++20 -I src tools/check_fmath_exhaustive.cpp src/core/fmath.cpp
//       -o /tmp/check_fmath_exhaustive         (one line)
//   /tmp/check_fmath_exhaustive [exp|erf] [--exp-error]
//
// --exp-error also measures mc_exp's relative error against long double expl on all floats in [-87, 88] (the
// bound mc_expf_rounded's tolerance assumes).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/fmath.h"

namespace {

using mcullm::mc_erff;
using mcullm::mc_erff_double;
using mcullm::mc_erff_fast;
using mcullm::mc_exp;
using mcullm::mc_expf_rounded;
using mcullm::mc_expf_rounded_fast;

float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

struct Function {
  const char* name;
  float (*reference)(float);
  float (*wired)(float);
  bool (*fast)(float, float*);
};

float exp_reference(float x) { return static_cast<float>(mc_exp(static_cast<double>(x))); }

// Returns the number of mismatches.
uint64_t check(const Function& f) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t mismatches = 0, nans = 0, fallbacks = 0;
  uint64_t fallbacks_by_binade[256] = {};  // by the exponent field of |x|
  for (uint64_t i = 0; i < (1ull << 32); ++i) {
    const uint32_t u = static_cast<uint32_t>(i);
    const float x = from_bits(u);
    const float got = f.wired(x), want = f.reference(x);
    float y;
    if (!f.fast(x, &y)) {
      ++fallbacks;
      ++fallbacks_by_binade[(u >> 23) & 0xFF];
    }
    if (x != x) {
      ++nans;
      if (got == got) ++mismatches;
      continue;
    }
    if (bits(got) != bits(want)) {
      if (mismatches < 20) std::printf("  MISMATCH %s(%a): %a, want %a\n", f.name, x, got, want);
      ++mismatches;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double non_nan = static_cast<double>((1ull << 32) - nans);
  std::printf("%s: 2^32 inputs (%llu NaN), %llu mismatches, %llu fallbacks to the double path (%.4f%% of non-NaN "
              "inputs), %.0f s\n", f.name, static_cast<unsigned long long>(nans),
              static_cast<unsigned long long>(mismatches), static_cast<unsigned long long>(fallbacks),
              100.0 * static_cast<double>(fallbacks - fallbacks_by_binade[255]) / non_nan, seconds);
  std::printf("  fallbacks by |x| in [2^e, 2^(e+1)) (2^24 inputs each, both signs; e = -127: zero, subnormals):\n");
  for (int b = 0; b < 255; ++b) {
    if (fallbacks_by_binade[b] == 0) continue;
    std::printf("    e = %4d: %9llu (%.4f%%)\n", b - 127, static_cast<unsigned long long>(fallbacks_by_binade[b]),
                100.0 * static_cast<double>(fallbacks_by_binade[b]) / static_cast<double>(1u << 24));
  }
  return mismatches;
}

void exp_error() {
  long double worst = 0;
  float worst_x = 0;
  for (uint64_t i = 0; i < (1ull << 32); ++i) {
    const float x = from_bits(static_cast<uint32_t>(i));
    if (!(x >= -87.0f && x <= 88.0f)) continue;
    const long double e = expl(static_cast<long double>(x));
    const long double rel = fabsl(static_cast<long double>(mc_exp(static_cast<double>(x))) - e) / e;
    if (rel > worst) { worst = rel; worst_x = x; }
  }
  std::printf("mc_exp on floats in [-87, 88]: max relative error %Lg = 2^%.2f (at %a), against expl\n", worst,
              static_cast<double>(log2l(worst)), worst_x);
}

}  // namespace

int main(int argc, char** argv) {
  const Function functions[] = {{"exp", exp_reference, mc_expf_rounded, mc_expf_rounded_fast},
                                {"erf", mc_erff_double, mc_erff, mc_erff_fast}};
  std::string which = "all";
  bool with_exp_error = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--exp-error") with_exp_error = true;
    else if (a == "exp" || a == "erf" || a == "all") which = a;
    else { std::fprintf(stderr, "usage: %s [exp|erf|all] [--exp-error]\n", argv[0]); return 2; }
  }
  uint64_t mismatches = 0;
  for (const Function& f : functions)
    if (which == "all" || which == f.name) mismatches += check(f);
  if (with_exp_error) exp_error();
  return mismatches == 0 ? 0 : 1;
}
