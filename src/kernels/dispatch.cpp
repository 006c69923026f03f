// Picks a kernel table at run time (CPU features) and routes a matvec by weight type.
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__GLIBC__) && __has_include(<sys/platform/x86.h>)
// glibc >= 2.33: the CPUID bits its dynamic loader read at start-up. The header is C: its functions
// return _Bool, which clang++ (the fuzz build) does not know and g++ accepts as an extension.
#if defined(__clang__)
#define _Bool bool
#include <sys/platform/x86.h>
#undef _Bool
#else
#include <sys/platform/x86.h>
#endif
#define MC_GLIBC_CPUID 1
#endif
#endif

#include "kernels/kernels.h"
#include "kernels/matmat_rows.h"
#include "kernels/ref/dot_order.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm {

#if defined(MCULLM_HAVE_AVX2) || defined(MCULLM_HAVE_AVX512)
namespace {
// The x86 features the tables need, read once per process: in a VM every CPUID instruction traps to
// the hypervisor (about 14 us each on the Zen 3 VM of docs/performance.md), and libgcc's
// __builtin_cpu_supports would run a dozen more of them at start-up. Three CPUID leaves (or glibc's
// copy of them) and XGETBV (whether the OS saves the ymm / zmm state: the AVX and AVX-512 bits mean
// nothing without it).
enum CpuFeature : unsigned {
  kProbed = 1,    // the bits below are known
  kAvx2 = 2,      // AVX2 + F16C (the f16 kernels convert with it), ymm state enabled
  kAvx512 = 4,    // AVX-512 F / BW / VL / VNNI, zmm state enabled
  kAvxVnni = 8,   // AVX-VNNI (leaf 7 subleaf 1, EAX bit 4)
  kAmx = 16,      // AMX-TILE and AMX-INT8 (leaf 7, EDX bits 24 and 25)
};

// The CPUID bits the tables need: glibc's copy where it has one (no CPUID instruction: 7 us each on
// the Zen 4 VM of docs/performance.md), else the instruction.
struct CpuidBits {
  bool osxsave, avx, f16c, avx2, avx512f, avx512bw, avx512vl, avx512vnni, amx_tile, amx_int8, avx_vnni;
};

bool read_cpuid(CpuidBits* r) {
#if defined(MC_GLIBC_CPUID)
  // PRESENT: the CPUID bit as read (glibc's ACTIVE would also apply its tunables).
  r->osxsave = CPU_FEATURE_PRESENT(OSXSAVE);
  r->avx = CPU_FEATURE_PRESENT(AVX);
  r->f16c = CPU_FEATURE_PRESENT(F16C);
  r->avx2 = CPU_FEATURE_PRESENT(AVX2);
  r->avx512f = CPU_FEATURE_PRESENT(AVX512F);
  r->avx512bw = CPU_FEATURE_PRESENT(AVX512BW);
  r->avx512vl = CPU_FEATURE_PRESENT(AVX512VL);
  r->avx512vnni = CPU_FEATURE_PRESENT(AVX512_VNNI);
  r->amx_tile = CPU_FEATURE_PRESENT(AMX_TILE);
  r->amx_int8 = CPU_FEATURE_PRESENT(AMX_INT8);
  r->avx_vnni = CPU_FEATURE_PRESENT(AVX_VNNI);
  return true;
#else
  unsigned a = 0, b = 0, c = 0, d = 0, max_sub = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  *r = {};
  r->osxsave = c & (1u << 27);
  r->avx = c & (1u << 28);
  r->f16c = c & (1u << 29);
  if (!__get_cpuid_count(7, 0, &max_sub, &b, &c, &d)) return true;
  r->avx2 = b & (1u << 5);
  r->avx512f = b & (1u << 16);
  r->avx512bw = b & (1u << 30);
  r->avx512vl = b & (1u << 31);
  r->avx512vnni = c & (1u << 11);
  r->amx_tile = d & (1u << 24);
  r->amx_int8 = d & (1u << 25);
  r->avx_vnni = max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
  return true;
#endif
}

unsigned probe_cpu() {
  unsigned f = kProbed;
  CpuidBits r;
  if (!read_cpuid(&r) || !r.osxsave || !r.avx) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_state = (xcr0_lo & 0x6u) == 0x6u;    // SSE and AVX state
  const bool zmm_state = (xcr0_lo & 0xE6u) == 0xE6u;  // and opmask, ZMM_Hi256, Hi16_ZMM
  if (!ymm_state || !r.avx2 || !r.f16c) return f;
  f |= kAvx2;
  if (zmm_state && r.avx512f && r.avx512bw && r.avx512vl && r.avx512vnni) f |= kAvx512;
  if (r.amx_tile && r.amx_int8) f |= kAmx;
  if (r.avx_vnni) f |= kAvxVnni;
  return f;
}

// Probed on first use. No function-local static object (the core has no __cxa_guard): racing first
// calls both probe and store the same bits.
bool cpu_has(CpuFeature feature) {
  static unsigned bits = 0;
  unsigned f = __atomic_load_n(&bits, __ATOMIC_ACQUIRE);
  if (f == 0) {
    f = probe_cpu();
    __atomic_store_n(&bits, f, __ATOMIC_RELEASE);
  }
  return (f & feature) != 0;
}
}  // namespace
#endif

#if defined(MCULLM_HAVE_AVX2)
const KernelSet* kernels_avx2_table();      // kernels/x86/table_avx2.cpp
const KernelSet* kernels_avxvnni_table();  // kernels/x86/gemm_avxvnni.cpp
#endif

const KernelSet* kernels_avx2() {
#if defined(MCULLM_HAVE_AVX2)
  if (cpu_has(kAvx2)) return kernels_avx2_table();
#endif
  return nullptr;
}

const KernelSet* kernels_avxvnni() {
#if defined(MCULLM_HAVE_AVX2)
  if (cpu_has(kAvxVnni)) return kernels_avxvnni_table();
#endif
  return nullptr;
}

#if defined(MCULLM_HAVE_AVX512)
const KernelSet* kernels_avx512_table();  // kernels/x86_512/table_avx512.cpp
const KernelSet* kernels_amx_table();     // kernels/x86_512/table_avx512.cpp
#endif

const KernelSet* kernels_avx512() {
#if defined(MCULLM_HAVE_AVX512)
  if (cpu_has(kAvx512)) return kernels_avx512_table();
#endif
  return nullptr;
}

#if defined(MCULLM_HAVE_AVX512)
namespace {
// Linux's permission to use the AMX tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
// process-wide; a raw syscall), asked once.
bool amx_permitted() {
#if defined(__linux__) && defined(__x86_64__)
  static int state = 0;  // 0 not asked, 1 permitted, -1 not (racing first calls ask twice: harmless)
  int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
  if (st == 0) {
    long ret = 158;  // SYS_arch_prctl
    const long code = 0x1023, feature = 18;
    __asm__ volatile("syscall" : "+a"(ret) : "D"(code), "S"(feature) : "rcx", "r11", "memory");
    st = ret == 0 ? 1 : -1;
    __atomic_store_n(&state, st, __ATOMIC_RELEASE);
  }
  return st == 1;
#else
  return false;
#endif
}
}  // namespace
#endif

const KernelSet* kernels_amx() {
#if defined(MCULLM_HAVE_AVX512)
  if (cpu_has(kAvx512) && cpu_has(kAmx) && amx_permitted()) return kernels_amx_table();
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
