// Picks a kernel table at run time (CPU features) and routes a matvec by weight type.
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/ref/dot_order.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

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
  }
}

}  // namespace mcullm
