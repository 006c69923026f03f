// Picks a kernel table at run time (CPU features) and routes a matvec by weight type.
#include <string.h>

#include "kernels/kernels.h"

namespace mcullm {

#if defined(MCULLM_HAVE_AVX2)
const KernelSet* kernels_avx2_table();  // kernels/x86/matvec_avx2.cpp
#endif

const KernelSet* kernels_avx2() {
#if defined(MCULLM_HAVE_AVX2)
  if (__builtin_cpu_supports("avx2")) return kernels_avx2_table();
#endif
  return nullptr;
}

const KernelSet& kernels_best() {
  const KernelSet* avx2 = kernels_avx2();
  return avx2 ? *avx2 : kernels_ref();
}

const KernelSet* kernels_by_name(const char* name) {
  if (strcmp(name, "ref") == 0) return &kernels_ref();
  if (strcmp(name, "avx2") == 0) return kernels_avx2();
  if (strcmp(name, "auto") == 0) return &kernels_best();
  return nullptr;
}

void matvec(const KernelSet& k, const MatRef& w, const ActVec& x, float* y, int r0, int r1) {
  switch (w.type) {
    case DType::kF32: k.matvec_f32(w, x.f, y, r0, r1); return;
    case DType::kF16: k.matvec_f16(w, x.f, y, r0, r1); return;
    case DType::kQ8_0: k.matvec_q8_0(w, x.q, x.scales, y, r0, r1); return;
    case DType::kQ4_0: k.matvec_q4_0(w, x.q, x.scales, y, r0, r1); return;
    case DType::kQ4G64: k.matvec_q4g64(w, x.q, x.scales, y, r0, r1); return;
  }
}

}  // namespace mcullm
