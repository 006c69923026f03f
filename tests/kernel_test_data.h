// Test data for the kernel tests (kernels_test, kernel_conformance_test): nasty values by kind,
// matrices of every dense type with row strides past the packed size, activations in both forms,
// q4e tensors at unaligned addresses, one kernel call into a sentinel-filled output, and the
// registered tables this CPU runs. Core library and gtest only (tests/cross builds it for aarch64).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/dtype.h"
#include "quant/q4e.h"

namespace mcullm::test {

constexpr uint32_t kSentinel = 0x7FBADBADu;  // a signalling NaN no kernel can produce

const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4G64};

inline std::vector<int> sweep_cols() {
  std::vector<int> c;
  for (int i = 1; i <= 70; ++i) c.push_back(i);
  for (int i : {96, 127, 128, 129, 172, 255, 256, 257, 511, 512, 1000, 4096}) c.push_back(i);
  // Block counts past one 8-block SIMD step with a tail (9, 15, 17, 25, 37 blocks of 32; 9, 13, 19 of 64).
  for (int i : {288, 480, 544, 576, 800, 1184}) c.push_back(i);
  c.push_back(8224);  // past the 8192 columns avx512::matvec_q4_0 rearranges on its stack (it hands wider rows on)
  return c;
}
const int kSweepRows[] = {1, 2, 3, 4, 5, 7, 8, 9, 33};

inline uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Independent IEEE half decode (exact in double for every finite half).
inline double half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// Kinds of data: the sweep cycles through them so every shape sees several.
enum Kind { kNormal, kHuge, kTiny, kSparse, kExtreme, kLogUniform, kKindCount };

inline float gen_value(std::mt19937_64& rng, Kind kind) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  switch (kind) {
    case kNormal: return normal(rng);
    case kHuge: return normal(rng) * 1e18f;  // products reach 1e36: sums may overflow to inf
    case kTiny: return normal(rng) * 1e-20f;  // products are subnormal
    case kSparse: {
      const float u = uni(rng);
      return u < 0.4f ? 0.0f : u < 0.6f ? -0.0f : normal(rng);
    }
    case kExtreme: return (rng() & 1) ? 1e19f : -1e19f;
    case kLogUniform: {
      const float v = std::ldexp(1.0f + uni(rng), static_cast<int>(rng() % 250) - 125);
      return (rng() & 1) ? -v : v;
    }
    case kKindCount: break;
  }
  return 0.0f;
}

// Quantized sources must keep the f16 scale finite; their kinds scale a normal sample instead.
inline float gen_quant_source(std::mt19937_64& rng, Kind kind) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  switch (kind) {
    case kHuge: return normal(rng) * 3000.0f;
    case kTiny: return normal(rng) * 1e-6f;  // scale is an f16 subnormal or zero
    case kExtreme: return (rng() & 1) ? 1.0f : -1.0f;
    default: return gen_value(rng, kind == kLogUniform ? kSparse : kind);
  }
}

// A matrix with its storage (row_bytes may exceed the packed size: row stride is not assumed).
struct Matrix {
  std::vector<uint8_t> data;
  MatRef ref;
};

inline uint16_t random_finite_half(std::mt19937_64& rng) {
  for (;;) {
    const uint16_t h = static_cast<uint16_t>(rng());
    if (((h >> 10) & 31) != 31) return h;
  }
}

// Fills row r of a quantized matrix: from floats (quantize_row), every code at an extreme, or raw random bytes.
inline void fill_quant_row(std::mt19937_64& rng, DType type, int cols, int r, uint8_t* row) {
  const DTypeInfo* info = dtype_info(type);
  const int nb = (cols + info->block - 1) / info->block;
  const int mode = r % 4;
  if (mode == 0 || mode == 3) {
    std::vector<float> src(static_cast<size_t>(cols));
    const Kind kind = static_cast<Kind>((r / 4 + cols) % kKindCount);
    for (float& v : src) v = gen_quant_source(rng, kind);
    ASSERT_TRUE(quantize_row(type, src.data(), row, cols));
    return;
  }
  for (int b = 0; b < nb; ++b) {
    uint8_t* blk = row + static_cast<size_t>(b) * info->block_bytes;
    const uint16_t d = random_finite_half(rng);
    std::memcpy(blk, &d, 2);
    for (int j = 2; j < info->block_bytes; ++j) {
      if (mode == 1) {  // extreme codes: q8_0 -128 / -127 / 127, 4-bit codes 0 (-8) / 15 (+7)
        const int pick = static_cast<int>((r / 4 + b) % 3);
        if (type == DType::kQ8_0) blk[j] = pick == 0 ? 0x80 : pick == 1 ? 0x81 : 0x7F;
        else blk[j] = pick == 0 ? 0x00 : 0xFF;
      } else {
        blk[j] = static_cast<uint8_t>(rng());
      }
    }
  }
}

inline Matrix make_matrix(std::mt19937_64& rng, DType type, int rows, int cols, size_t extra_stride) {
  Matrix m;
  const size_t row_bytes = dtype_row_bytes(type, cols) + extra_stride;
  m.data.assign(row_bytes * static_cast<size_t>(rows), 0xA5);
  m.ref = MatRef{type, m.data.data(), rows, cols, row_bytes};
  for (int r = 0; r < rows; ++r) {
    uint8_t* row = m.data.data() + row_bytes * static_cast<size_t>(r);
    const Kind kind = static_cast<Kind>((r + cols) % kKindCount);
    if (type == DType::kF32 || type == DType::kF16) {
      std::vector<float> src(static_cast<size_t>(cols));
      // f16 rows: halves' own range (largest finite 65504, subnormals near 1e-6), not inf everywhere.
      for (float& v : src)
        v = type == DType::kF32 ? gen_value(rng, kind) : kind == kExtreme ? ((rng() & 1) ? 65504.0f : -65504.0f) : gen_quant_source(rng, kind);
      quantize_row(type, src.data(), row, cols);
    } else {
      fill_quant_row(rng, type, cols, r, row);
    }
  }
  return m;
}

// An activation vector in both forms, int8 blocks padded with zeros.
struct Act {
  std::vector<float> f;
  std::vector<int8_t> q;
  std::vector<float> scales;
  ActVec vec;
};

inline Act make_act(std::mt19937_64& rng, int cols, int act_block, Kind kind, bool quant_source) {
  Act a;
  a.f.resize(static_cast<size_t>(cols));
  for (float& v : a.f) v = quant_source ? gen_quant_source(rng, kind) : gen_value(rng, kind);
  a.vec.f = a.f.data();
  if (act_block > 0) {
    const int nb = (cols + act_block - 1) / act_block;
    a.q.assign(static_cast<size_t>(nb) * act_block, 0x55);
    a.scales.assign(static_cast<size_t>(nb), -1.0f);
    quantize_activations(a.f.data(), cols, act_block, a.q.data(), a.scales.data());
    a.vec.q = a.q.data();
    a.vec.scales = a.scales.data();
    a.vec.block = act_block;
  }
  return a;
}

using QuantFn = void (*)(const MatRef&, const int8_t*, const float*, float*, int, int);
using FloatFn = void (*)(const MatRef&, const float*, float*, int, int);

// Runs one kernel of table k on rows [r0, r1) into a sentinel-filled y.
inline std::vector<float> run_kernel(const KernelSet& k, const MatRef& w, const Act& x, int r0, int r1) {
  std::vector<float> y(static_cast<size_t>(w.rows), from_bits(kSentinel));
  FloatFn ff = nullptr;
  QuantFn qf = nullptr;
  switch (w.type) {
    case DType::kF32: ff = k.matvec_f32; break;
    case DType::kF16: ff = k.matvec_f16; break;
    case DType::kQ8_0: qf = k.matvec_q8_0; break;
    case DType::kQ4_0: qf = k.matvec_q4_0; break;
    case DType::kQ4G64: qf = k.matvec_q4g64; break;
    default: break;
  }
  if (ff) ff(w, x.f.data(), y.data(), r0, r1);
  else qf(w, x.q.data(), x.scales.data(), y.data(), r0, r1);
  return y;
}

inline std::vector<std::pair<int, int>> row_ranges(int rows) {
  std::vector<std::pair<int, int>> out = {{0, rows}};
  if (rows > 1) {
    out.push_back({1, rows});
    out.push_back({0, rows - 1});
  }
  if (rows > 2) out.push_back({rows / 3, rows - rows / 3 - (rows > 4 ? 1 : 0)});
  if (rows > 4) out.push_back({3, 4});
  out.push_back({rows / 2, rows / 2});  // empty: nothing written
  return out;
}

// Every float whose bits are a multiple of `step`, but the NaNs (infinities, zeros, subnormals included).
inline std::vector<float> float_sweep(uint32_t step) {
  std::vector<float> g;
  for (uint32_t u = 0; u < 0xFFFFFFFFu - step; u += step)
    if (!std::isnan(from_bits(u))) g.push_back(from_bits(u));
  return g;
}

// A small xorshift generator of uniform floats (the attention, softmax and SwiGLU data).
struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  float uniform(float lo, float hi) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return lo + (hi - lo) * static_cast<float>(s >> 40) / static_cast<float>(1ull << 24);
  }
};

// SwiGLU inputs: gates in [-120, 120] (exp overflows and underflows) with -0, inf and a subnormal
// among the first five, ups in [-2, 2].
inline void swiglu_inputs(Rng& rng, int n, std::vector<float>* g, std::vector<float>* u) {
  g->resize(n);
  u->resize(n);
  for (float& v : *g) v = rng.uniform(-120, 120);
  for (float& v : *u) v = rng.uniform(-2, 2);
  if (n > 4) {
    (*g)[0] = -0.0f;
    (*g)[1] = 89.0f;
    (*g)[2] = -105.0f;
    (*g)[3] = std::numeric_limits<float>::infinity();
    (*g)[4] = 1e-40f;
  }
}

// esp32-ai int4 (q4e) from normal weights (every eighth 8x larger), bound one byte past an aligned
// address so that the scales are unaligned, as in esp32-ai files.
struct Q4eTensor {
  std::vector<uint8_t> bytes;
  MatRef m;
};
inline Q4eTensor make_q4e_tensor(int rows, int cols, int group, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows) * cols);
  for (float& v : x) v = normal(rng) * ((rng() & 7) == 0 ? 8.0f : 1.0f);
  Q4eTensor t;
  t.bytes.assign(q4e_tensor_bytes(rows, cols, group) + 1, 0xEE);
  q4e_quantize_tensor(x.data(), rows, cols, group, t.bytes.data() + 1);
  EXPECT_TRUE(q4e_bind(t.bytes.data() + 1, rows, cols, &t.m));
  return t;
}

// The registered tables (kernels.h kernel_tables) this CPU runs, ref included.
inline std::vector<const KernelSet*> runnable_tables() {
  int n = 0;
  const KernelTable* t = kernel_tables(&n);
  std::vector<const KernelSet*> out;
  for (int i = 0; i < n; ++i)
    if (const KernelSet* k = t[i].get()) out.push_back(k);
  return out;
}

}  // namespace mcullm::test
