// The TL1 / TL2 LUT matmul around the kernel table: per-tensor cache, applicability, workspace,
// activation quantization and the thread split (kernels.h, "LUT kernels").
#include <string.h>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/tl_layout.h"

namespace mcullm {

namespace {
constexpr size_t round64(size_t n) { return (n + 63) & ~static_cast<size_t>(63); }
}  // namespace

bool tl_tensor_init(TlTensor* t, TlType type, const void* data, size_t bytes, int M, int K, const TlTiling& tiling) {
  const size_t need = tl_tensor_bytes(type, M, K, tiling);
  if (!t || !data || need == 0 || bytes < need) return false;
  float scale;
  memcpy(&scale, static_cast<const uint8_t*>(data) + tl_scale_offset(type, M, K, tiling), 4);
  return tl_tensor_init_packed(t, type, data, bytes, M, K, tiling, scale);
}

bool tl_tensor_init_packed(TlTensor* t, TlType type, const void* data, size_t bytes, int M, int K,
                           const TlTiling& tiling, float scale) {
  const size_t need = tl_packed_bytes(type, M, K, tiling);
  if (!t || !data || need == 0 || bytes < need) return false;
  const uint8_t* base = static_cast<const uint8_t*>(data);
  if (t->ready)  // idempotent for the same tensor, refused for another one
    return t->index == base && t->type == type && t->rows == M && t->cols == K && t->tiling.BM == tiling.BM &&
           t->tiling.BK == tiling.BK && t->tiling.bm == tiling.bm;
  TlTensor c;
  c.type = type;
  c.tiling = tiling;
  c.rows = M;
  c.cols = K;
  c.three_k = tl_three_k(type, K, tiling);
  c.index = base;
  if (type == TlType::kTL2) {
    c.sign = base + static_cast<size_t>(M) * c.three_k / 6;
    if (c.three_k < K) c.pairs = c.sign + static_cast<size_t>(M) * c.three_k / 24;
  }
  c.scale = scale;
  c.ready = true;
  *t = c;
  return true;
}

void tl_tensor_free(TlTensor* t) {
  if (t) *t = TlTensor{};
}

bool tl_applicable(TlType weights, DType activations, DType output, int n_tokens) {
  if ((weights != TlType::kTL1 && weights != TlType::kTL2) || activations != DType::kF32 || output != DType::kF32 ||
      n_tokens < 1)
    return false;
  return weights == TlType::kTL2 || n_tokens == 1;
}

void tl_quantize_activations(const float* x, int n_tokens, int K, TlActQuant mode, int8_t* q, size_t q_stride,
                             float* inv_scales) {
  float tensor_amax = 0.0f;
  bool tensor_finite = true;
  for (int n = 0; n < n_tokens; ++n) {
    const float* xn = x + static_cast<size_t>(n) * K;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < K; ++i) {
      const float a = xn[i] < 0 ? -xn[i] : xn[i];
      if (!(a - a == 0.0f)) finite = false;
      if (a > amax) amax = a;
    }
    inv_scales[n] = finite ? amax : -1.0f;  // (per-token amax kept here until the scales are known)
    if (amax > tensor_amax) tensor_amax = amax;
    tensor_finite = tensor_finite && finite;
  }
  for (int n = 0; n < n_tokens; ++n) {
    const float amax = mode == TlActQuant::kPerTensor ? (tensor_finite ? tensor_amax : -1.0f) : inv_scales[n];
    // Values are within [-127, 127]: |x| * 127 / amax <= 127 up to one rounding, which round-half-away keeps at 127.
    const float s = amax < 0.0f ? 0.0f : i8s_scale(amax);
    int8_t* qn = q + static_cast<size_t>(n) * q_stride;
    if (s == 0.0f) {
      memset(qn, 0, static_cast<size_t>(K));
      inv_scales[n] = 0.0f;
      continue;
    }
    quantize_i8s_with(x + static_cast<size_t>(n) * K, K, s, qn);
    inv_scales[n] = static_cast<float>(1.0 / static_cast<double>(s));
  }
}

size_t tl_lut_bytes(const TlTensor& w) { return static_cast<size_t>(tl::lut_groups(w)) * tl::kLutGroupBytes; }

size_t tl_workspace_bytes(const TlTensor& w, int n_tokens) {
  if (!w.ready || n_tokens < 1) return 0;
  const size_t n = static_cast<size_t>(n_tokens);
  return round64(n * sizeof(float)) + n * round64(static_cast<size_t>(w.cols)) + n * round64(tl_lut_bytes(w));
}

namespace {
struct MulMatTask {
  const KernelSet* k;
  const TlTensor* w;
  const uint8_t* lut;
  size_t lut_stride;
  const float* inv;
  int n_tokens;
  float* y;
};

void mul_mat_rows(void* ctx, int ith, int nth) {
  const MulMatTask& t = *static_cast<const MulMatTask*>(ctx);
  int tile0, tile1;
  slice(t.w->rows / t.w->tiling.BM, ith, nth, &tile0, &tile1);
  if (tile0 < tile1)
    t.k->tl_matmul(*t.w, t.lut, t.lut_stride, t.inv, t.n_tokens, t.y, static_cast<size_t>(t.w->rows), tile0, tile1);
}
}  // namespace

bool tl_mul_mat(const KernelSet& k, const TlTensor& w, const float* x, int n_tokens, float* y, void* work,
                size_t work_bytes, ThreadPool* pool, TlActQuant mode) {
  const size_t need = tl_workspace_bytes(w, n_tokens);
  if (need == 0 || work_bytes < need || !work) return false;
  uint8_t* base = static_cast<uint8_t*>(work);
  float* inv = reinterpret_cast<float*>(base);
  int8_t* q = reinterpret_cast<int8_t*>(base + round64(static_cast<size_t>(n_tokens) * sizeof(float)));
  const size_t q_stride = round64(static_cast<size_t>(w.cols));
  uint8_t* lut = reinterpret_cast<uint8_t*>(q) + static_cast<size_t>(n_tokens) * q_stride;
  const size_t lut_stride = round64(tl_lut_bytes(w));
  // Thread 0: activations and LUTs; the pool's start is the barrier.
  tl_quantize_activations(x, n_tokens, w.cols, mode, q, q_stride, inv);
  for (int n = 0; n < n_tokens; ++n) k.tl_lut_build(w, q + n * q_stride, lut + n * lut_stride);
  MulMatTask task{&k, &w, lut, lut_stride, inv, n_tokens, y};
  if (pool) pool->run(mul_mat_rows, &task);
  else mul_mat_rows(&task, 0, 1);
  return true;
}

}  // namespace mcullm
