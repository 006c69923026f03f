// Picks a kernel table at run time (CPU features) and routes a matvec by weight type.
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "kernels/kernels.h"
#include "kernels/matmat_rows.h"
#include "kernels/ref/dot_order.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm {

#if defined(MCULLM_HAVE_AVX2)
const KernelSet* kernels_avx2_table();    // kernels/x86/table_avx2.cpp
#endif

#if defined(MCULLM_HAVE_AVX2)
namespace {
// F16C (half <-> float conversion, CPUID leaf 1, ECX bit 29): every AVX2 CPU made has it, but the
// AVX2 table's f16 matvec uses it, so it is checked. (clang does not know "f16c" as a
// __builtin_cpu_supports feature name.)
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
}  // namespace
#endif

const KernelSet* kernels_avx2() {
#if defined(MCULLM_HAVE_AVX2)
  if (__builtin_cpu_supports("avx2") && cpu_has_f16c()) return kernels_avx2_table();
#endif
  return nullptr;
}

#if defined(MCULLM_HAVE_AVX2)
const KernelSet* kernels_avxvnni_table();  // kernels/x86/gemm_avxvnni.cpp
#endif

// AVX-VNNI: CPUID leaf 7 subleaf 1, EAX bit 4 (by hand, as F16C: not every compiler's
// __builtin_cpu_supports knows the name).
const KernelSet* kernels_avxvnni() {
#if defined(MCULLM_HAVE_AVX2)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (kernels_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0) return kernels_avxvnni_table();
#endif
  return nullptr;
}

#if defined(MCULLM_HAVE_AVX512)
const KernelSet* kernels_avx512_table();  // kernels/x86_512/table_avx512.cpp
#endif

const KernelSet* kernels_avx512() {
#if defined(MCULLM_HAVE_AVX512)
  if (kernels_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
    return kernels_avx512_table();
#endif
  return nullptr;
}

#if defined(MCULLM_HAVE_AVX512)
const KernelSet* kernels_amx_table();  // kernels/x86_512/table_avx512.cpp

namespace {
// AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), then Linux's permission to use the tile
// data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), process-wide; a raw syscall: the core
// has no libc). Asked once; racing first calls ask twice, which is harmless.
bool amx_usable() {
#if defined(__linux__) && defined(__x86_64__)
  static int state = 0;  // 0 not asked, 1 usable, -1 not
  if (state == 0) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    bool ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25));
    if (ok) {
      long ret = 158;  // SYS_arch_prctl
      const long code = 0x1023, feature = 18;
      __asm__ volatile("syscall" : "+a"(ret) : "D"(code), "S"(feature) : "rcx", "r11", "memory");
      ok = ret == 0;
    }
    state = ok ? 1 : -1;
  }
  return state == 1;
#else
  return false;
#endif
}
}  // namespace
#endif

const KernelSet* kernels_amx() {
#if defined(MCULLM_HAVE_AVX512)
  if (kernels_avx512() && amx_usable()) return kernels_amx_table();
#endif
  return nullptr;
}

#if defined(MCULLM_HAVE_NEON)
const KernelSet* kernels_neon_table();  // kernels/arm/table_neon.cpp
#endif

const KernelSet* kernels_neon() {
#if defined(MCULLM_HAVE_NEON)
  return kernels_neon_table();
#else
  return nullptr;
#endif
}

#if defined(__XTENSA__) && defined(MCULLM_PIE)
const KernelSet* kernels_pie_table();  // kernels/esp32s3/pie_table.cpp
#endif

const KernelSet* kernels_pie() {
#if defined(__XTENSA__) && defined(MCULLM_PIE)
  return kernels_pie_table();
#else
  return nullptr;
#endif
}

namespace {
const KernelSet* kernels_ref_table() { return &kernels_ref(); }

// The registry: one line per table this build holds, fastest first (kernels_best takes the first
// that runs here). A table's line sits under the define its CMake line sets.
constexpr KernelTable kTables[] = {
#if defined(__XTENSA__) && defined(MCULLM_PIE)
    {"pie", kernels_pie},
#endif
#if defined(MCULLM_HAVE_AVX512)
    {"amx", kernels_amx},
    {"avx512", kernels_avx512},
#endif
#if defined(MCULLM_HAVE_AVX2)
    {"avxvnni", kernels_avxvnni},
    {"avx2", kernels_avx2},
#endif
#if defined(MCULLM_HAVE_NEON)
    {"neon", kernels_neon},
#endif
    {"ref", kernels_ref_table},
};
constexpr int kTableCount = static_cast<int>(sizeof(kTables) / sizeof(kTables[0]));
}  // namespace

const KernelTable* kernel_tables(int* count) {
  *count = kTableCount;
  return kTables;
}

const KernelSet& kernels_best() {
  for (const KernelTable& t : kTables)
    if (const KernelSet* k = t.get()) return *k;
  return kernels_ref();
}

const KernelSet* kernels_by_name(const char* name) {
  if (strcmp(name, "auto") == 0) return &kernels_best();
  for (const KernelTable& t : kTables)
    if (strcmp(name, t.name) == 0) return t.get();
  return nullptr;
}

namespace {
// Weights without an integer kernel: each row expanded to f32 one block at a time, then the f32
// 16-lane order of kernels.h (blocks are multiples of 16 weights, so lanes continue across them).
void matvec_expand_f32(const MatRef& w, const float* x, float* y, int r0, int r1) {
  const DTypeInfo* info = dtype_info(w.type);
  const int block = info->block;
  float buf[256];
  for (int r = r0; r < r1; ++r) {
    float acc[kF32Lanes] = {};
    const uint8_t* row = w.row(r);
    for (int b = 0; b * block < w.cols; ++b) {
      const uint8_t* src = row + static_cast<size_t>(b) * static_cast<size_t>(info->block_bytes);
      const bool ok = w.type == DType::kI2_S ? i2s_dequantize_row(src, buf, block, w.scale)
                                             : dequantize_row_any(w.type, src, buf, block);
      for (int j = 0; j < block; ++j) acc[(b * block + j) % kF32Lanes] += (ok ? buf[j] : 0.0f) * x[b * block + j];
    }
    y[r] = fold_lanes16(acc);
  }
}
// TL weights weight by weight: with int8 input the LUT kernels' bits (one exact int32 sum, then
// (float)isum * (scale * xs[0])); with f32 input kernels.h's 16-lane f32 order.
void matvec_tl_scalar(const MatRef& w, const ActVec& x, float* y, int r0, int r1) {
  const TlTensor& t = *w.tl;
  for (int r = r0; r < r1; ++r) {
    int32_t isum = 0;
    float acc[kF32Lanes] = {};
    for (int c = 0; c < w.cols; ++c) {
      int v = tl_weight(t.type, t.tiling, t.index, t.rows, t.cols, r, c);
      v = v > 1 ? 0 : v;
      if (x.q) isum += v * x.q[c];
      else acc[c % kF32Lanes] += static_cast<float>(v) * t.scale * x.f[c];
    }
    y[r] = x.q && x.scales ? static_cast<float>(isum) * (t.scale * x.scales[0]) : fold_lanes16(acc);
  }
}
}  // namespace

void matvec(const KernelSet& k, const MatRef& w, const ActVec& x, float* y, int r0, int r1) {
  switch (w.type) {
    case DType::kI2_S:
      if (x.q && x.scales) {
        k.matvec_i2s(w, x.q, x.scales, y, r0, r1);
        return;
      }
      matvec_expand_f32(w, x.f, y, r0, r1);
      return;
    case DType::kTQ1_0:
    case DType::kTQ2_0: matvec_expand_f32(w, x.f, y, r0, r1); return;
    case DType::kF32: k.matvec_f32(w, x.f, y, r0, r1); return;
    case DType::kF16: k.matvec_f16(w, x.f, y, r0, r1); return;
    case DType::kQ8_0: k.matvec_q8_0(w, x.q, x.scales, y, r0, r1); return;
    case DType::kQ4_0: k.matvec_q4_0(w, x.q, x.scales, y, r0, r1); return;
    case DType::kQ4G64: k.matvec_q4g64(w, x.q, x.scales, y, r0, r1); return;
    case DType::kQ4E:
      if (x.q && x.scales) k.matvec_q4e_q8(w, x.q, x.scales, y, r0, r1);
      else k.matvec_q4e_f32(w, x.f, y, r0, r1);
      return;
    case DType::kTL1:
    case DType::kTL2: matvec_tl_scalar(w, x, y, r0, r1); return;
  }
}

void matmat(const KernelSet& k, const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) {
  if (w.type == DType::kI2_S && x.q && x.scales && x.s_stride == 1) {
    k.matmat_i2s(w, x.q, x.q_stride, x.scales, n, y, y_stride, r0, r1);
    return;
  }
  if (k.matmat_tiled(w, x, n, y, y_stride, r0, r1)) return;
  for_row_blocks(w, n, r0, r1, [&](int c, int rb0, int rb1) {
    matvec(k, w, x.col(c), y + static_cast<size_t>(c) * y_stride, rb0, rb1);
  });
}

}  // namespace mcullm
