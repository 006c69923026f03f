// Kernels: the AVX2 table equals the reference bit for bit on a sweep of shapes, row ranges and
// nasty data; the reference follows the reduction-order contract of kernels.h and computes the
// right value (checked against double precision); thread splits and the type router.
#include "kernels/kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool_host.h"
#include "quant/blocks.h"
#include "quant/dtype.h"
#include "test_support.h"

namespace mcullm {
namespace {

constexpr uint32_t kSentinel = 0x7FBADBADu;  // a signalling NaN no kernel can produce

const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4G64};

std::vector<int> sweep_cols() {
  std::vector<int> c;
  for (int i = 1; i <= 70; ++i) c.push_back(i);
  for (int i : {96, 127, 128, 129, 172, 255, 256, 257, 511, 512, 1000, 4096}) c.push_back(i);
  // Block counts past one 8-block SIMD step with a tail (9, 15, 17, 25, 37 blocks of 32; 9, 13, 19 of 64).
  for (int i : {288, 480, 544, 576, 800, 1184}) c.push_back(i);
  return c;
}
const int kSweepRows[] = {1, 2, 3, 4, 5, 7, 8, 9, 33};

uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Independent IEEE half decode (exact in double for every finite half).
double half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// Kinds of data: the sweep cycles through them so every shape sees several.
enum Kind { kNormal, kHuge, kTiny, kSparse, kExtreme, kLogUniform, kKindCount };

float gen_value(std::mt19937_64& rng, Kind kind) {
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
float gen_quant_source(std::mt19937_64& rng, Kind kind) {
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

uint16_t random_finite_half(std::mt19937_64& rng) {
  for (;;) {
    const uint16_t h = static_cast<uint16_t>(rng());
    if (((h >> 10) & 31) != 31) return h;
  }
}

// Fills row r of a quantized matrix: from floats (quantize_row), every code at an extreme, or raw random bytes.
void fill_quant_row(std::mt19937_64& rng, DType type, int cols, int r, uint8_t* row) {
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

Matrix make_matrix(std::mt19937_64& rng, DType type, int rows, int cols, size_t extra_stride) {
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

Act make_act(std::mt19937_64& rng, int cols, int act_block, Kind kind, bool quant_source) {
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
std::vector<float> run_kernel(const KernelSet& k, const MatRef& w, const Act& x, int r0, int r1) {
  std::vector<float> y(static_cast<size_t>(w.rows), from_bits(kSentinel));
  FloatFn ff = nullptr;
  QuantFn qf = nullptr;
  switch (w.type) {
    case DType::kF32: ff = k.matvec_f32; break;
    case DType::kF16: ff = k.matvec_f16; break;
    case DType::kQ8_0: qf = k.matvec_q8_0; break;
    case DType::kQ4_0: qf = k.matvec_q4_0; break;
    case DType::kQ4G64: qf = k.matvec_q4g64; break;
  }
  if (ff) ff(w, x.f.data(), y.data(), r0, r1);
  else qf(w, x.q.data(), x.scales.data(), y.data(), r0, r1);
  return y;
}

std::vector<std::pair<int, int>> row_ranges(int rows) {
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

// The sweep for one type: counts shapes checked, reports the first mismatches in detail.
void sweep_type(DType type) {
  const KernelSet* avx = kernels_avx2();
  if (avx == nullptr) MCULLM_SKIP_OR_FAIL("AVX2", "AVX2 kernels not compiled in or the CPU lacks AVX2");
  const DTypeInfo* info = dtype_info(type);
  std::mt19937_64 rng(0x5EED0000u + static_cast<uint32_t>(type));
  int shapes = 0, failures = 0, outputs = 0, finite_nonzero = 0;
  for (int cols : sweep_cols()) {
    if (!dtype_row_fits(type, cols)) continue;
    for (int rows : kSweepRows) {
      const size_t extra = (rows % 2) ? 8 : 0;
      const Matrix m = make_matrix(rng, type, rows, cols, extra);
      const Kind xkind = static_cast<Kind>((cols + rows) % kKindCount);
      const Act x = make_act(rng, cols, info->act_block, xkind, info->act_block > 0);
      for (const auto& [r0, r1] : row_ranges(rows)) {
        const std::vector<float> want = run_kernel(kernels_ref(), m.ref, x, r0, r1);
        const std::vector<float> got = run_kernel(*avx, m.ref, x, r0, r1);
        ++shapes;
        for (int r = 0; r < rows; ++r) {
          const bool inside = r >= r0 && r < r1;
          if (inside) {
            ++outputs;
            finite_nonzero += std::isfinite(want[r]) && want[r] != 0.0f;
          }
          const bool ok = std::memcmp(&want[r], &got[r], 4) == 0 && (bits(got[r]) == kSentinel) != inside;
          if (!ok && ++failures <= 5)
            ADD_FAILURE() << info->name << " rows=" << rows << " cols=" << cols << " range=[" << r0 << "," << r1
                          << ") row " << r << ": ref 0x" << std::hex << bits(want[r]) << " avx2 0x" << bits(got[r])
                          << std::dec << " (" << want[r] << " vs " << got[r] << ")";
        }
      }
    }
  }
  EXPECT_EQ(failures, 0) << "mismatching rows in " << shapes << " (shape, range) cases";
  EXPECT_GT(shapes, 100);
  // The data is nasty on purpose, but most outputs must still be ordinary numbers worth comparing.
  EXPECT_GT(finite_nonzero, outputs / 2) << "of " << outputs << " outputs";
}

TEST(KernelsAvx2, MatvecF32EqualsRefBitForBit) { sweep_type(DType::kF32); }
TEST(KernelsAvx2, MatvecF16EqualsRefBitForBit) { sweep_type(DType::kF16); }
TEST(KernelsAvx2, MatvecQ8_0EqualsRefBitForBit) { sweep_type(DType::kQ8_0); }
TEST(KernelsAvx2, MatvecQ4_0EqualsRefBitForBit) { sweep_type(DType::kQ4_0); }
TEST(KernelsAvx2, MatvecQ4G64EqualsRefBitForBit) { sweep_type(DType::kQ4G64); }

TEST(KernelsAvx2, DotF32EqualsRefBitForBit) {
  const KernelSet* avx = kernels_avx2();
  if (avx == nullptr) MCULLM_SKIP_OR_FAIL("AVX2", "AVX2 kernels not compiled in or the CPU lacks AVX2");
  std::mt19937_64 rng(7);
  int failures = 0, cases = 0;
  for (int n : sweep_cols()) {
    for (int k = 0; k < kKindCount; ++k) {
      for (int offset : {0, 1, 3}) {  // unaligned starts too
        std::vector<float> a(static_cast<size_t>(n + offset)), b(static_cast<size_t>(n + offset));
        for (float& v : a) v = gen_value(rng, static_cast<Kind>(k));
        for (float& v : b) v = gen_value(rng, static_cast<Kind>((k + offset) % kKindCount));
        const float want = kernels_ref().dot_f32(a.data() + offset, b.data() + offset, n);
        const float got = avx->dot_f32(a.data() + offset, b.data() + offset, n);
        ++cases;
        if (std::memcmp(&want, &got, 4) != 0 && ++failures <= 5)
          ADD_FAILURE() << "n=" << n << " kind=" << k << " offset=" << offset << ": ref 0x" << std::hex << bits(want)
                        << " avx2 0x" << bits(got);
      }
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases;
  // n = 0 is an empty sum.
  EXPECT_EQ(bits(avx->dot_f32(nullptr, nullptr, 0)), 0u);
  EXPECT_EQ(bits(kernels_ref().dot_f32(nullptr, nullptr, 0)), 0u);
}

// Hand-picked exact cases where a wrong order, an FMA or a lost lane shows up in the bits.
TEST(KernelsAvx2, F32OrderSensitiveCases) {
  const KernelSet* avx = kernels_avx2();
  if (avx == nullptr) MCULLM_SKIP_OR_FAIL("AVX2", "AVX2 kernels not compiled in or the CPU lacks AVX2");
  for (const KernelSet* k : {&kernels_ref(), avx}) {
    // Lane 0 gets 1e8 then -1e8, lane 1 gets 1: the contract gives exactly 1 + (1e8 - 1e8) = 1.
    std::vector<float> a(33, 0.0f), b(33, 1.0f);
    a[0] = 1e8f; a[16] = -1e8f; a[1] = 1.0f;
    EXPECT_EQ(k->dot_f32(a.data(), b.data(), 33), 1.0f) << k->name;
    // Sequential summation would lose the 1 (1e8 + 1 - 1e8 = 0): with 16 lanes a[1] is its own lane.
    a.assign(33, 0.0f);
    a[0] = 1e8f; a[1] = 1.0f; a[2] = -1e8f;
    EXPECT_EQ(k->dot_f32(a.data(), b.data(), 3), 1.0f) << k->name;
    // No FMA: lane 0 holds -(1 + 2^-11), then adds (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, which rounds
    // (tie to even) to 1 + 2^-11 as a product: the sum is exactly 0. A fused multiply-add gives 2^-24.
    const float e = 1.0f + std::ldexp(1.0f, -12);
    float p[17] = {-(1.0f + std::ldexp(1.0f, -11))}, q[17] = {1.0f};
    p[16] = e;
    q[16] = e;
    EXPECT_EQ(bits(k->dot_f32(p, q, 17)), 0u) << k->name << " (an fma would leave 2^-24)";
  }
}

// ---- The reference follows the contract and computes the right value -------------------------

// The contract of kernels.h written out directly.
float contract_f32(const float* a, const float* b, int n) {
  float acc[16] = {};
  for (int j = 0; j < n; ++j) {
    const float p = a[j] * b[j];
    acc[j % 16] = acc[j % 16] + p;
  }
  for (int s = 8; s > 0; s /= 2)
    for (int i = 0; i < s; ++i) acc[i] = acc[i] + acc[i + s];
  return acc[0];
}

// Integer value of weight j of a stored block, decoded from the layout dtype.h documents.
int weight_code(DType type, const uint8_t* blk, int j) {
  switch (type) {
    case DType::kQ8_0: return static_cast<int8_t>(blk[2 + j]);
    case DType::kQ4_0: return (j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4)) - 8;
    case DType::kQ4G64: return (j < 32 ? (blk[2 + j] & 15) : (blk[2 + j - 32] >> 4)) - 8;
    default: return 0;
  }
}
uint16_t block_d(const uint8_t* blk) { uint16_t d; std::memcpy(&d, blk, 2); return d; }

float contract_blocks(const MatRef& w, int r, const Act& x, double* exact, double* magnitude) {
  const DTypeInfo* info = dtype_info(w.type);
  const int nb = (w.cols + info->block - 1) / info->block;
  float acc[8] = {};
  *exact = 0.0;
  *magnitude = 0.0;
  for (int b = 0; b < nb; ++b) {
    const uint8_t* blk = w.row(r) + static_cast<size_t>(b) * info->block_bytes;
    int64_t isum = 0;
    for (int j = 0; j < info->block; ++j) isum += weight_code(w.type, blk, j) * x.q[static_cast<size_t>(b) * info->block + j];
    const double dw = half_value(block_d(blk));
    const float scale = static_cast<float>(dw) * x.scales[b];
    acc[b % 8] = acc[b % 8] + static_cast<float>(isum) * scale;
    const double term = static_cast<double>(isum) * dw * static_cast<double>(x.scales[b]);
    *exact += term;
    *magnitude += std::fabs(term);
  }
  for (int s = 4; s > 0; s /= 2)
    for (int i = 0; i < s; ++i) acc[i] = acc[i] + acc[i + s];
  return acc[0];
}

TEST(KernelsRef, FloatKernelsFollowTheLaneContract) {
  std::mt19937_64 rng(11);
  int failures = 0;
  for (int cols : sweep_cols()) {
    for (DType type : {DType::kF32, DType::kF16}) {
      const Matrix m = make_matrix(rng, type, 5, cols, 0);
      const Act x = make_act(rng, cols, 0, static_cast<Kind>(cols % kKindCount), false);
      const std::vector<float> y = run_kernel(kernels_ref(), m.ref, x, 0, 5);
      for (int r = 0; r < 5; ++r) {
        std::vector<float> wrow(static_cast<size_t>(cols));
        if (type == DType::kF32) {
          std::memcpy(wrow.data(), m.ref.row(r), wrow.size() * 4);
        } else {
          for (int j = 0; j < cols; ++j) {
            uint16_t h;
            std::memcpy(&h, m.ref.row(r) + 2 * j, 2);
            wrow[j] = static_cast<float>(half_value(h));
          }
        }
        const float want = contract_f32(wrow.data(), x.f.data(), cols);
        if (std::memcmp(&want, &y[r], 4) != 0 && ++failures <= 5)
          ADD_FAILURE() << dtype_info(type)->name << " cols=" << cols << " row " << r << ": contract " << want << " ref " << y[r];
      }
      if (type == DType::kF32) {
        const float d = kernels_ref().dot_f32(reinterpret_cast<const float*>(m.ref.row(0)), x.f.data(), cols);
        EXPECT_EQ(bits(d), bits(y[0])) << "dot_f32 and matvec_f32 disagree at cols=" << cols;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// Bit-exact against the block-lane contract, and close to a double-precision sum of
// isum_b * d_w * d_x (so the reference computes the right thing, not just the same thing).
void check_quant_reference(DType type) {
  const DTypeInfo* info = dtype_info(type);
  std::mt19937_64 rng(0xD0B1E + static_cast<uint32_t>(type));
  int contract_failures = 0, value_failures = 0, checked = 0;
  for (int cols : sweep_cols()) {
    if (!dtype_row_fits(type, cols)) continue;
    for (int rows : {3, 9}) {
      const Matrix m = make_matrix(rng, type, rows, cols, 0);
      const Act x = make_act(rng, cols, info->act_block, static_cast<Kind>((cols + rows) % kKindCount), true);
      const std::vector<float> y = run_kernel(kernels_ref(), m.ref, x, 0, rows);
      const int nb = (cols + info->block - 1) / info->block;
      for (int r = 0; r < rows; ++r) {
        double exact = 0, magnitude = 0;
        const float want = contract_blocks(m.ref, r, x, &exact, &magnitude);
        if (std::memcmp(&want, &y[r], 4) != 0 && ++contract_failures <= 5)
          ADD_FAILURE() << info->name << " cols=" << cols << " row " << r << ": contract " << want << " ref " << y[r];
        // Per block: two roundings; per lane: nb/8 adds; the fold: 3 adds (relative to the sum of |terms|),
        // plus an absolute allowance for subnormal results.
        const double bound = (nb / 8.0 + 6.0) * std::ldexp(1.0, -24) * magnitude * 1.01 + (nb + 8) * std::ldexp(1.0, -149);
        ++checked;
        if (!(std::fabs(static_cast<double>(y[r]) - exact) <= bound) && ++value_failures <= 5)
          ADD_FAILURE() << info->name << " cols=" << cols << " row " << r << ": ref " << y[r] << " double " << exact
                        << " bound " << bound;
      }
    }
  }
  EXPECT_EQ(contract_failures, 0);
  EXPECT_EQ(value_failures, 0) << "of " << checked;
}

TEST(KernelsRef, Q8_0MatchesContractAndDoublePrecision) { check_quant_reference(DType::kQ8_0); }
TEST(KernelsRef, Q4_0MatchesContractAndDoublePrecision) { check_quant_reference(DType::kQ4_0); }
TEST(KernelsRef, Q4G64MatchesContractAndDoublePrecision) { check_quant_reference(DType::kQ4G64); }

// A dequantized q8_0 row times the float activations lands near the quantized product: the whole
// chain (quantize_row, quantize_activations, kernel) approximates the float dot product.
TEST(KernelsRef, Q8_0ApproximatesTheFloatProduct) {
  std::mt19937_64 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int cols = 1024;
  std::vector<float> w(cols), x(cols);
  for (int t = 0; t < 20; ++t) {
    for (int j = 0; j < cols; ++j) { w[j] = normal(rng); x[j] = normal(rng); }
    std::vector<uint8_t> row(dtype_row_bytes(DType::kQ8_0, cols));
    ASSERT_TRUE(quantize_row(DType::kQ8_0, w.data(), row.data(), cols));
    std::vector<int8_t> q(cols);
    std::vector<float> s(cols / 32);
    quantize_activations(x.data(), cols, 32, q.data(), s.data());
    const MatRef m{DType::kQ8_0, row.data(), 1, cols, row.size()};
    float y = 0;
    kernels_ref().matvec_q8_0(m, q.data(), s.data(), &y, 0, 1);
    double exact = 0, mag = 0;
    for (int j = 0; j < cols; ++j) { exact += static_cast<double>(w[j]) * x[j]; mag += std::fabs(static_cast<double>(w[j]) * x[j]); }
    // Each factor is off by at most 1/254 of its block's max (plus f16): a loose but failing-capable bound.
    EXPECT_NEAR(y, exact, 0.03 * mag) << "trial " << t;
  }
}

// ---- Threads and routing ---------------------------------------------------------------------

struct SplitCtx {
  const KernelSet* k;
  const MatRef* w;
  const ActVec* x;
  float* y;
};

void split_task(void* p, int ith, int nth) {
  const SplitCtx* c = static_cast<const SplitCtx*>(p);
  int r0, r1;
  slice(c->w->rows, ith, nth, &r0, &r1);
  matvec(*c->k, *c->w, *c->x, c->y, r0, r1);
}

// n activation columns side by side, as a prefill batch holds them, each `pad` elements past its
// packed size (f, q and scales alike), padding filled with values no kernel may read into a result.
struct Columns {
  std::vector<float> f, sc;
  std::vector<int8_t> q;
  ActMat a;
};
void side_by_side(const std::vector<Act>& acts, int act_block, size_t pad, Columns* out) {
  const size_t n = acts.size();
  const size_t fs = acts[0].f.size() + pad, qs = acts[0].q.size() + pad, ss = acts[0].scales.size() + pad;
  out->f.assign(fs * n, NAN);
  out->q.assign(qs * n, 0x33);
  out->sc.assign(ss * n, NAN);
  for (size_t c = 0; c < n; ++c) {
    std::copy(acts[c].f.begin(), acts[c].f.end(), out->f.begin() + c * fs);
    std::copy(acts[c].q.begin(), acts[c].q.end(), out->q.begin() + c * qs);
    std::copy(acts[c].scales.begin(), acts[c].scales.end(), out->sc.begin() + c * ss);
  }
  out->a = ActMat();
  out->a.f = out->f.data();
  out->a.f_stride = fs;
  if (act_block > 0) {
    out->a.q = out->q.data();
    out->a.q_stride = qs;
    out->a.scales = out->sc.data();
    out->a.s_stride = ss;
    out->a.block = act_block;
  }
}

// Batched (prefill) products: matmat gives per column the bits of matvec on that column, for every
// dense type, with rows spanning more than one L1 row block and a row range that starts inside one.
TEST(KernelsMatmat, EqualsMatvecPerColumn) {
  std::vector<const KernelSet*> sets = {&kernels_ref()};
  if (kernels_avx2()) sets.push_back(kernels_avx2());
  if (kernels_avxvnni()) sets.push_back(kernels_avxvnni());
  if (kernels_avx512()) sets.push_back(kernels_avx512());
  if (kernels_amx()) sets.push_back(kernels_amx());
  std::mt19937_64 rng(11);
  for (DType type : kAllTypes) {
    const DTypeInfo* info = dtype_info(type);
    const int cols = type == DType::kQ4G64 ? 320 : 288;
    const int rows = 16384 / static_cast<int>(dtype_row_bytes(type, cols)) + 7;  // past one row block
    const Matrix m = make_matrix(rng, type, rows, cols, 0);
    const int n = 6;
    std::vector<Act> acts;
    for (int c = 0; c < n; ++c) acts.push_back(make_act(rng, cols, info->act_block, kNormal, true));
    Columns packed;
    side_by_side(acts, info->act_block, 0, &packed);
    const ActMat& a = packed.a;
    for (const KernelSet* k : sets) {
      const int r0 = 3;
      std::vector<float> y(static_cast<size_t>(rows) * n, from_bits(kSentinel));
      matmat(*k, m.ref, a, n, y.data(), rows, r0, rows);
      for (int c = 0; c < n; ++c) {
        const std::vector<float> want = run_kernel(*k, m.ref, acts[c], r0, rows);
        EXPECT_EQ(std::memcmp(want.data(), y.data() + static_cast<size_t>(c) * rows, rows * 4u), 0)
            << k->name << " " << info->name << " column " << c;
      }
    }
  }
}

// The register-tiled GEMMs (matmat_tiled: the block types on the VNNI tables, f16 on avx512)
// against the reference matvec, column by column: column counts around the tile width, rows around
// the tile height and row block, block counts with and without a partial 8-block chunk (f16: a
// partial 16-lane chunk), nasty data, row and column strides past the packed size, a row range
// that starts inside a tile, and rows too long for the buffers (declined, then matmat's fallback
// gives the same bits).
TEST(KernelsMatmat, TiledGemmEqualsRefPerColumn) {
  std::vector<const KernelSet*> sets;
  for (const KernelSet* k : {kernels_avxvnni(), kernels_avx512(), kernels_amx()})
    if (k) sets.push_back(k);
  if (sets.empty()) GTEST_SKIP() << "no table with a block GEMM on this CPU (AVX-VNNI or AVX-512 VNNI)";
  std::mt19937_64 rng(23);
  int checked = 0, failures = 0, declined = 0;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4G64, DType::kF16}) {
    const DTypeInfo* info = dtype_info(type);
    const bool f16 = type == DType::kF16;
    for (int cols : {17, 32, 64, 96, 256, 288, 544, 576, 1184, 2048, 40000}) {
      if (!dtype_row_fits(type, cols)) continue;
      for (int rows : {1, 3, 4, 7, 33, 130}) {
        if (cols > 4096 && rows > 4) continue;
        const Matrix m = make_matrix(rng, type, rows, cols, rows % 2 ? 8 : 0);
        for (int n : {1, 2, 3, 4, 5, 7, 13}) {
          if (cols > 4096 && n > 2) continue;
          std::vector<Act> acts;
          for (int c = 0; c < n; ++c)
            acts.push_back(make_act(rng, cols, info->act_block, static_cast<Kind>((c + rows) % kKindCount), true));
          Columns packed;
          side_by_side(acts, info->act_block, 32, &packed);  // strides past the packed size
          const ActMat& a = packed.a;
          const int r0 = rows > 4 ? 1 : 0;
          for (const KernelSet* k : sets) {
            const size_t y_stride = static_cast<size_t>(rows) + 3;
            std::vector<float> y(y_stride * n, from_bits(kSentinel));
            if (!k->matmat_tiled(m.ref, a, n, y.data(), y_stride, r0, rows)) {
              const bool has_f16 = k == kernels_avx512() || k == kernels_amx();
              EXPECT_TRUE(cols > 4096 || (f16 && !has_f16)) << k->name << " " << info->name << ": declined an ordinary shape";
              ++declined;
              matmat(*k, m.ref, a, n, y.data(), y_stride, r0, rows);
            }
            for (int c = 0; c < n; ++c) {
              const std::vector<float> want = run_kernel(kernels_ref(), m.ref, acts[c], r0, rows);
              for (int r = 0; r < static_cast<int>(y_stride); ++r) {
                const float got = y[c * y_stride + r];
                const bool inside = r >= r0 && r < rows;
                const bool ok = inside ? std::memcmp(&want[r], &got, 4) == 0 : bits(got) == kSentinel;
                if (!ok && ++failures <= 5)
                  ADD_FAILURE() << k->name << " " << info->name << " rows=" << rows << " cols=" << cols << " n=" << n
                                << " column " << c << " row " << r << ": ref " << (inside ? want[r] : 0.0f) << " got " << got;
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0) << "in " << checked << " columns";
  EXPECT_GT(declined, 0) << "the long rows (cols 40000) should not fit the block GEMM's buffers";
  // Types without a GEMM are declined untouched.
  const Matrix f = make_matrix(rng, DType::kF32, 4, 64, 0);
  float y = from_bits(kSentinel);
  ActMat none;
  EXPECT_FALSE(sets[0]->matmat_tiled(f.ref, none, 1, &y, 4, 0, 1));
  EXPECT_EQ(bits(y), kSentinel);
}

// Every table's quantize_blocks equals quant/blocks.h's quantize_activations byte for byte (codes,
// padding and scales): block sizes with and without a SIMD path, short last blocks, and data with
// nan, +-inf, -0, huge, tiny (subnormal scales) and ordinary values.
TEST(KernelsQuantize, BlocksEqualReference) {
  std::mt19937_64 rng(31);
  int failures = 0, cases = 0;
  for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avxvnni(), kernels_avx512(), kernels_amx()}) {
    if (!k) continue;
    for (int block : {32, 64, 8, 24, 16, 7, 48, 128}) {
      for (int n : {1, 5, 8, 31, 32, 33, 64, 100, 768, 2053}) {
        for (int kind = 0; kind < kKindCount + 2; ++kind) {
          std::vector<float> x(static_cast<size_t>(n));
          for (float& v : x) v = gen_value(rng, static_cast<Kind>(kind % kKindCount));
          if (kind == kKindCount) {  // non-finite values in some blocks
            for (int i = 0; i < n; i += 7) x[i] = (i / 7) % 3 == 0 ? NAN : (i / 7) % 3 == 1 ? INFINITY : -INFINITY;
          } else if (kind == kKindCount + 1) {  // a lone nan in a block of tiny values
            for (float& v : x) v = gen_value(rng, kTiny);
            x[n / 2] = NAN;
          }
          const int nb = (n + block - 1) / block;
          std::vector<int8_t> want_q(static_cast<size_t>(nb) * block, 0x55), got_q(want_q);
          std::vector<float> want_s(nb, -1.0f), got_s(want_s);
          quantize_activations(x.data(), n, block, want_q.data(), want_s.data());
          k->quantize_blocks(x.data(), n, block, got_q.data(), got_s.data());
          ++cases;
          const bool ok = want_q == got_q && std::memcmp(want_s.data(), got_s.data(), want_s.size() * 4) == 0;
          if (!ok && ++failures <= 5) ADD_FAILURE() << k->name << " block " << block << " n " << n << " kind " << kind;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0) << "in " << cases << " cases";
}

TEST(KernelsThreads, SplitAcrossThreadsIsBitIdentical) {
  std::vector<const KernelSet*> sets = {&kernels_ref()};
  if (kernels_avx2()) sets.push_back(kernels_avx2());
  if (kernels_avxvnni()) sets.push_back(kernels_avxvnni());
  if (kernels_avx512()) sets.push_back(kernels_avx512());
  if (kernels_amx()) sets.push_back(kernels_amx());
  HostThreadPool pool1(1), pool2(2), pool3(3);
  std::mt19937_64 rng(3);
  for (const KernelSet* k : sets) {
    for (DType type : kAllTypes) {
      const DTypeInfo* info = dtype_info(type);
      for (int rows : {1, 2, 5, 33, 61}) {
        const int cols = type == DType::kQ4G64 || type == DType::kF32 ? 200 : 256;
        const Matrix m = make_matrix(rng, type, rows, cols, 0);
        const Act x = make_act(rng, cols, info->act_block, kNormal, true);
        std::vector<float> whole(rows, from_bits(kSentinel));
        matvec(*k, m.ref, x.vec, whole.data(), 0, rows);
        for (HostThreadPool* pool : {&pool1, &pool2, &pool3}) {
          std::vector<float> y(rows, from_bits(kSentinel));
          SplitCtx ctx{k, &m.ref, &x.vec, y.data()};
          pool->run(split_task, &ctx);
          EXPECT_EQ(std::memcmp(whole.data(), y.data(), y.size() * 4), 0)
              << k->name << " " << info->name << " rows=" << rows << " threads=" << pool->size();
          for (float v : y) ASSERT_NE(bits(v), kSentinel) << "a row was not computed";
        }
      }
    }
  }
}

// Spy kernels record which entry was called, with what.
struct SpyCall {
  std::string fn;
  const void* x = nullptr;
  const float* xs = nullptr;
  int r0 = -1, r1 = -1;
};
SpyCall g_call;
void spy_f(const char* fn, const float* x, int r0, int r1) { g_call = SpyCall{fn, x, nullptr, r0, r1}; }
void spy_q(const char* fn, const int8_t* x, const float* s, int r0, int r1) { g_call = SpyCall{fn, x, s, r0, r1}; }

TEST(KernelsDispatch, MatvecRoutesEachType) {
  const KernelSet spy = {
      "spy",
      [](const float*, const float*, int) { return 0.0f; },
      [](const MatRef&, const float* x, float*, int r0, int r1) { spy_f("f32", x, r0, r1); },
      [](const MatRef&, const float* x, float*, int r0, int r1) { spy_f("f16", x, r0, r1); },
      [](const MatRef&, const int8_t* q, const float* s, float*, int r0, int r1) { spy_q("q8_0", q, s, r0, r1); },
      [](const MatRef&, const int8_t* q, const float* s, float*, int r0, int r1) { spy_q("q4_0", q, s, r0, r1); },
      [](const MatRef&, const int8_t* q, const float* s, float*, int r0, int r1) { spy_q("q4g64", q, s, r0, r1); },
  };
  float f[4] = {};
  int8_t q[64] = {};
  float s[2] = {};
  const ActVec x{f, q, s, 32};
  float y[8];
  for (DType type : kAllTypes) {
    g_call = SpyCall{};
    const MatRef w{type, nullptr, 8, 64, 0};
    matvec(spy, w, x, y, 2, 7);
    EXPECT_EQ(g_call.fn, dtype_info(type)->name);
    EXPECT_EQ(g_call.r0, 2);
    EXPECT_EQ(g_call.r1, 7);
    const bool quant = dtype_info(type)->act_block > 0;
    EXPECT_EQ(g_call.x, quant ? static_cast<const void*>(q) : static_cast<const void*>(f)) << dtype_info(type)->name;
    EXPECT_EQ(g_call.xs, quant ? s : nullptr) << dtype_info(type)->name;
  }
}

TEST(KernelsDispatch, TablesByName) {
  EXPECT_STREQ(kernels_ref().name, "ref");
  EXPECT_EQ(kernels_by_name("ref"), &kernels_ref());
  EXPECT_EQ(kernels_by_name("avx2"), kernels_avx2());
  EXPECT_EQ(kernels_by_name("auto"), &kernels_best());
  EXPECT_EQ(kernels_by_name("neon"), nullptr);
  EXPECT_EQ(kernels_by_name("pie"), nullptr);  // ESP32-S3 builds only
  EXPECT_EQ(kernels_pie(), nullptr);
  EXPECT_EQ(kernels_by_name(""), nullptr);
  EXPECT_EQ(kernels_by_name("avx512"), kernels_avx512());
  EXPECT_EQ(kernels_by_name("amx"), kernels_amx());
  EXPECT_EQ(kernels_by_name("avxvnni"), kernels_avxvnni());
  if (kernels_avxvnni()) {
    EXPECT_STREQ(kernels_avxvnni()->name, "avxvnni");
    EXPECT_NE(kernels_avx2(), nullptr);  // the AVX-VNNI table builds on the AVX2 one
  }
  if (kernels_amx()) {
    EXPECT_STREQ(kernels_amx()->name, "amx");
    EXPECT_NE(kernels_avx512(), nullptr);  // the AMX table builds on the AVX-512 one
    EXPECT_EQ(&kernels_best(), kernels_amx());
  } else if (kernels_avx512()) {
    EXPECT_STREQ(kernels_avx512()->name, "avx512");
    EXPECT_NE(kernels_avx2(), nullptr);  // the AVX-512 table builds on the AVX2 one
    EXPECT_EQ(&kernels_best(), kernels_avx512());
  } else if (kernels_avx2()) {
    EXPECT_STREQ(kernels_avx2()->name, "avx2");
    EXPECT_EQ(&kernels_best(), kernels_avxvnni() ? kernels_avxvnni() : kernels_avx2());
  } else {
    EXPECT_EQ(&kernels_best(), &kernels_ref());
  }
  // Every entry of every table is filled: a table that lists fewer kernels than KernelSet has
  // (constant initialisation zero-fills the rest) would crash only when that kernel is first called.
  static_assert(sizeof(KernelSet) % sizeof(void*) == 0, "KernelSet holds a name and function pointers");
  for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avxvnni(), kernels_avx512(), kernels_amx()}) {
    if (!k) continue;
    const size_t words = sizeof(KernelSet) / sizeof(void*);
    for (size_t i = 0; i < words; ++i) {
      void* entry = nullptr;
      std::memcpy(&entry, reinterpret_cast<const char*>(k) + i * sizeof(void*), sizeof entry);
      EXPECT_NE(entry, nullptr) << k->name << ": entry " << i << " of " << words << " is empty";
    }
  }
}

// The tests above loop over the SIMD tables present on this CPU, so a table that is absent would
// pass unseen: each x86 table shows up here as run or as skipped with the reason (CI's allow-list,
// tests/allowed_skips.txt, names the ones its CPU lacks).
class KernelTable : public testing::TestWithParam<const char*> {};

TEST_P(KernelTable, PresentOnThisCpu) {
  const std::string name = GetParam();
  const KernelSet* k = name == "avx2" ? kernels_avx2() : name == "avx512" ? kernels_avx512() : kernels_amx();
  if (k == nullptr) MCULLM_SKIP_OR_FAIL(name, "the " << name << " table is not available on this CPU/build: its kernels are not tested here");
  EXPECT_STREQ(k->name, name.c_str());
  EXPECT_EQ(kernels_by_name(name.c_str()), k);
  EXPECT_NE(k, &kernels_ref());
}

INSTANTIATE_TEST_SUITE_P(X86, KernelTable, testing::Values("avx2", "avx512", "amx"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace mcullm
