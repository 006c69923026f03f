// Ternary matrices that read the same int8 activations, whatever their packing: i2_s rows through
// matvec / matmat, TL1 / TL2 tiles through the LUT kernels (kernels.h "LUT kernels"). For TL
// matrices thread 0 builds each column's LUT once per LUT layout (type, columns, triple columns) and
// every matrix of that layout reads it (q, k and v share one; gate and up share one); the pool's
// start is the barrier, then the tiles of all TL matrices (and the rows of the others) are split
// over the threads. The workspace comes from the model's arena once (TlLutBuffer), so nothing is
// allocated per token. Integer sums are exact and the one float step is the i2_s kernels'
// (float)isum * (scale * xs), so a TL matrix gives the same bits as the same weights in i2_s.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "mcullm/status.h"

namespace mcullm {

struct TlLutBuffer {
  uint8_t* data = nullptr;
  size_t col_stride = 0;  // bytes of one column's LUT (the largest layout, rounded up to 64)
  int cap = 0;            // columns
  int slots = 0;          // distinct LUT layouts one call may hold
  bool empty() const { return data == nullptr; }
};

// True when one of the matrices is tl1 / tl2.
bool any_tl(const MatRef* const* mats, int count);
// Distinct LUT layouts among the matrices (0 without TL matrices).
int tl_lut_layouts(const MatRef* const* mats, int count);
// Room for `slots` layouts of `cap` columns, sized for the largest LUT among `mats` (every TL
// matrix of the model); leaves the buffer empty (and succeeds) when there is none.
Status tl_lut_buffer_init(TlLutBuffer* b, const MatRef* const* mats, int count, int cap, int slots, Arena& arena);

// The workspace for `cap` columns of a model whose layers have wq, wk, wv, wo, w1 (gate), w2
// (down), w3 (up): as many layouts as one input group needs ({q, k, v}, {o}, {gate, up}, {down}),
// sized for the widest LUT; empty when no matrix is tl1 / tl2.
template <class Layer>
Status tl_lut_buffer_for_layers(const Layer* layers, int n_layers, int cap, Arena& arena, TlLutBuffer* out) {
  int slots = 0;
  const MatRef* widest[2] = {nullptr, nullptr};  // LUT sizes grow with the columns: dim and hidden
  for (int l = 0; l < n_layers; ++l) {
    const Layer& L = layers[l];
    const MatRef* groups[4][3] = {{&L.wq, &L.wk, &L.wv}, {&L.wo, nullptr, nullptr}, {&L.w1, &L.w3, nullptr}, {&L.w2, nullptr, nullptr}};
    const int counts[4] = {3, 1, 2, 1};
    for (int g = 0; g < 4; ++g) {
      const int n = tl_lut_layouts(groups[g], counts[g]);
      slots = n > slots ? n : slots;
      for (int i = 0; i < counts[g]; ++i)
        if (groups[g][i]->tl) widest[g == 3 ? 1 : 0] = groups[g][i];
    }
  }
  const MatRef* const* mats = widest[0] ? widest : widest + 1;
  return tl_lut_buffer_init(out, mats, widest[0] && widest[1] ? 2 : 1, cap, slots, arena);
}

// outs[m] + c * out_strides[m] = mats[m] times column c (c < n) of the int8 activations q (columns
// q_stride apart, one scale per column: scales[c], the multiplier of kernels.h's ternary rule).
// out_strides may be nullptr when n == 1. Needs a buffer with n <= cap and enough slots.
void run_ternary_q(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                   const size_t* out_strides, int count, const int8_t* q, size_t q_stride, const float* scales, int n,
                   const TlLutBuffer& lut);

}  // namespace mcullm
