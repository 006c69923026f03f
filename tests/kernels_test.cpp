// Kernels: the reference follows the reduction-order contract of kernels.h and computes the right
// value (checked against double precision); batched products, thread splits, the type router and
// the registry. (Every table against the reference: kernel_conformance_test.cpp.)
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool_host.h"
#include "kernel_test_data.h"
#include "kernels/ref/f32_unrolled.h"
#include "quant/blocks.h"
#include "quant/dtype.h"
#include "test_support.h"

namespace mcullm {
namespace {

using namespace mcullm::test;

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

#if defined(__x86_64__)
// The tables dispatch offers (it reads glibc's copy of the CPUID bits) against CPUID and XGETBV run
// here: the x86 tables are in every x86-64 build, so each is offered exactly when the CPU and OS can run it.
TEST(KernelsDispatch, TablesFollowTheCpuidInstruction) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  ASSERT_TRUE(__get_cpuid(1, &a, &b, &c, &d));
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
  unsigned xcr0 = 0, xcr0_hi = 0;
  if (osxsave) __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
  unsigned max_sub = 0;
  b = c = d = 0;
  __get_cpuid_count(7, 0, &max_sub, &b, &c, &d);
  const bool ymm = osxsave && avx && (xcr0 & 0x6u) == 0x6u, zmm = ymm && (xcr0 & 0xE6u) == 0xE6u;
  const bool avx2 = ymm && f16c && ((b >> 5) & 1);
  const bool avx512 = avx2 && zmm && ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) && ((c >> 11) & 1);
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  const bool avx_vnni = avx2 && max_sub >= 1 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && ((a1 >> 4) & 1);
  EXPECT_EQ(kernels_avx2() != nullptr, avx2);
  EXPECT_EQ(kernels_avx512() != nullptr, avx512);
  EXPECT_EQ(kernels_avxvnni() != nullptr, avx_vnni);
}
#endif

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

// The unrolled f32 kernels (the PIE table's, kernels/ref/f32_unrolled.h) give the reference's bits:
// every length 0..70 (whole and partial lane rounds, head sizes below 8 and between blocks of 8), every
// position count up to 40, values with signed zeros (a lane of -0 folded with +0 lanes), infinities
// and NaNs among ordinary ones (any NaN for a NaN).
TEST(KernelsUnrolled, F32DotAndAttentionEqualTheReference) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fill = [&](std::vector<float>& v, bool specials) {
    for (float& x : v) {
      x = normal(rng);
      if (specials) {
        const unsigned r = rng() % 64;
        if (r == 0) x = -0.0f;
        else if (r == 1) x = 0.0f;
        else if (r == 2) x = INFINITY;
        else if (r == 3) x = NAN;
      }
    }
  };
  // Bit for bit, except that two NaNs are equal: which NaN an add returns (its sign and payload) follows the
  // operand order the compiler picks, as for every kernel (docs/pie.md).
  const auto bits = [](const float* a, const float* b, int n) {
    for (int i = 0; i < n; ++i)
      if (std::memcmp(a + i, b + i, 4) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
    return true;
  };
  for (bool specials : {false, true}) {
    for (int n = 0; n <= 70; ++n) {
      std::vector<float> a(n + 1), b(n + 1);
      fill(a, specials);
      fill(b, specials);
      const float want = dot_f32_ref(a.data(), b.data(), n), got = dot_f32_unrolled(a.data(), b.data(), n);
      ASSERT_TRUE(bits(&want, &got, 1)) << "dot n " << n << ": " << want << " vs " << got;
      if (n >= 1) {  // all -0 products: the lanes hold -0 and +0, the fold's order decides the sign
        std::vector<float> z(n, -0.0f), o(n, 1.0f);
        const float wz = dot_f32_ref(z.data(), o.data(), n), gz = dot_f32_unrolled(z.data(), o.data(), n);
        ASSERT_TRUE(bits(&wz, &gz, 1)) << "signed zeros, n " << n;
      }
    }
    for (int hs : {1, 3, 7, 8, 9, 16, 17, 32, 33, 64}) {
      for (int n : {0, 1, 2, 5, 16, 40}) {
        const size_t stride = static_cast<size_t>(hs) + 3;
        std::vector<float> q(hs), rows(stride * (n + 1)), att(n + 1);
        fill(q, specials);
        fill(rows, specials);
        fill(att, false);
        std::vector<float> s_ref(n + 1, 7.0f), s_got(n + 1, 7.0f), o_ref(hs, 7.0f), o_got(hs, 7.0f);
        attn_scores_ref(q.data(), rows.data(), stride, n, hs, 5.65685f, s_ref.data());
        attn_scores_unrolled(q.data(), rows.data(), stride, n, hs, 5.65685f, s_got.data());
        ASSERT_TRUE(bits(s_ref.data(), s_got.data(), n + 1)) << "scores hs " << hs << " n " << n;
        attn_values_ref(att.data(), rows.data(), stride, n, hs, o_ref.data());
        attn_values_unrolled(att.data(), rows.data(), stride, n, hs, o_got.data());
        ASSERT_TRUE(bits(o_ref.data(), o_got.data(), hs)) << "values hs " << hs << " n " << n;
        std::vector<int8_t> qv(rows.size());  // int8 values with a scale per position (s_stride 2)
        std::vector<float> vs(2 * (n + 1));
        for (size_t j = 0; j < qv.size(); ++j) qv[j] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        fill(vs, specials);
        attn_values_q8_ref(att.data(), qv.data(), vs.data(), stride, 2, n, hs, o_ref.data());
        attn_values_q8_unrolled(att.data(), qv.data(), vs.data(), stride, 2, n, hs, o_got.data());
        ASSERT_TRUE(bits(o_ref.data(), o_got.data(), hs)) << "int8 values hs " << hs << " n " << n;
      }
    }
  }
  std::vector<float> data(5 * 37), x(37), y_ref(5), y_got(5);
  fill(data, true);
  fill(x, true);
  const MatRef w = f32_matrix(data.data(), 5, 37);
  matvec_f32_ref(w, x.data(), y_ref.data(), 0, 5);
  matvec_f32_unrolled(w, x.data(), y_got.data(), 0, 5);
  EXPECT_TRUE(bits(y_ref.data(), y_got.data(), 5));
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
  const std::vector<const KernelSet*> sets = runnable_tables();
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
  for (const KernelSet* k : runnable_tables())
    if (k->matmat_tiled != matmat_tiled_none) sets.push_back(k);
  if (sets.empty()) GTEST_SKIP() << "no table with a block GEMM on this CPU (AVX2, AVX-VNNI or AVX-512 VNNI)";
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

TEST(KernelsThreads, SplitAcrossThreadsIsBitIdentical) {
  const std::vector<const KernelSet*> sets = runnable_tables();
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

// The registry: ref last, names unique, every name resolves to its table or to nullptr (a table
// this CPU cannot run), "auto" to the first that runs; unknown names are refused.
TEST(KernelsDispatch, RegistryByName) {
  int n = 0;
  const KernelTable* t = kernel_tables(&n);
  ASSERT_GE(n, 1);
  EXPECT_STREQ(t[n - 1].name, "ref");
  EXPECT_EQ(t[n - 1].get(), &kernels_ref());
  EXPECT_STREQ(kernels_ref().name, "ref");
  const KernelSet* first = nullptr;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j) EXPECT_STRNE(t[i].name, t[j].name);
    const KernelSet* k = t[i].get();
    EXPECT_EQ(kernels_by_name(t[i].name), k) << t[i].name;
    if (k) {
      EXPECT_STREQ(k->name, t[i].name);
    }
    if (!first) first = k;
  }
  EXPECT_EQ(&kernels_best(), first);
  EXPECT_EQ(kernels_by_name("auto"), &kernels_best());
  EXPECT_EQ(kernels_by_name(""), nullptr);
  EXPECT_EQ(kernels_by_name("gpu"), nullptr);
#if defined(__x86_64__)
  EXPECT_EQ(kernels_by_name("neon"), nullptr);
  EXPECT_EQ(kernels_by_name("pie"), nullptr);  // ESP32-S3 builds only
  EXPECT_EQ(kernels_pie(), nullptr);
#endif
  // The tables that build on another need it.
  EXPECT_TRUE(!kernels_avxvnni() || kernels_avx2());
  EXPECT_TRUE(!kernels_avx512() || kernels_avx2());
  EXPECT_TRUE(!kernels_amx() || kernels_avx512());
}

}  // namespace
}  // namespace mcullm
