#include "model/ternary_lut.h"

#include "kernels/tl_layout.h"
#include "model/transformer.h"

namespace mcullm {

namespace {

constexpr int kMaxMats = 8;
constexpr size_t round64(size_t n) { return (n + 63) & ~static_cast<size_t>(63); }

bool same_lut_layout(const TlTensor& a, const TlTensor& b) {
  return a.type == b.type && a.cols == b.cols && a.three_k == b.three_k;
}

struct TernaryJob {
  const KernelSet* k;
  const MatRef* const* mats;
  float* const* outs;
  const size_t* out_strides;
  int count;
  const int8_t* q;
  size_t q_stride;
  const float* scales;
  int n;
  const uint8_t* lut[kMaxMats];  // each TL matrix's LUTs (column c at + c * lut_stride)
  size_t lut_stride;
  int total_tiles;
};

size_t out_stride(const TernaryJob& j, int m) { return j.out_strides ? j.out_strides[m] : 0; }

void ternary_task(void* p, int ith, int nth) {
  const TernaryJob& j = *static_cast<const TernaryJob*>(p);
  // TL tiles: one slice of all the matrices' tiles together (qkv's 3 x 3 tiles split 5 / 4, not 6 / 3).
  int t0, t1;
  slice(j.total_tiles, ith, nth, &t0, &t1);
  int first = 0;
  for (int m = 0; m < j.count; ++m) {
    const MatRef& w = *j.mats[m];
    if (!w.tl) {  // i2_s rows
      int r0, r1;
      slice(w.rows, ith, nth, &r0, &r1);
      if (r0 >= r1) continue;
      if (j.n == 1) {
        ActVec a;
        a.q = j.q;
        a.scales = j.scales;
        a.block = w.cols;
        matvec(*j.k, w, a, j.outs[m], r0, r1);
      } else {
        ActMat a;
        a.q = j.q;
        a.q_stride = j.q_stride;
        a.scales = j.scales;
        a.s_stride = 1;
        a.block = w.cols;
        matmat(*j.k, w, a, j.n, j.outs[m], out_stride(j, m), r0, r1);
      }
      continue;
    }
    const int tiles = w.rows / w.tl->tiling.BM;
    const int a = t0 > first ? t0 - first : 0, b = t1 - first < tiles ? t1 - first : tiles;
    if (a < b) j.k->tl_matmul(*w.tl, j.lut[m], j.lut_stride, j.scales, j.n, j.outs[m], out_stride(j, m), a, b);
    first += tiles;
  }
}

}  // namespace

bool any_tl(const MatRef* const* mats, int count) {
  for (int m = 0; m < count; ++m)
    if (mats[m]->tl) return true;
  return false;
}

int tl_lut_layouts(const MatRef* const* mats, int count) {
  int n = 0;
  for (int m = 0; m < count; ++m) {
    if (!mats[m]->tl) continue;
    bool seen = false;
    for (int e = 0; e < m; ++e) seen = seen || (mats[e]->tl && same_lut_layout(*mats[e]->tl, *mats[m]->tl));
    n += seen ? 0 : 1;
  }
  return n;
}

Status tl_lut_buffer_init(TlLutBuffer* b, const MatRef* const* mats, int count, int cap, int slots, Arena& arena) {
  *b = TlLutBuffer();
  size_t widest = 0;
  for (int m = 0; m < count; ++m)
    if (mats[m] && mats[m]->tl && tl_lut_bytes(*mats[m]->tl) > widest) widest = tl_lut_bytes(*mats[m]->tl);
  if (widest == 0) return Status::Ok();
  if (cap < 1 || slots < 1) return Status::Error(Code::kInvalidArgument, "LUT workspace of %d columns, %d layouts", cap, slots);
  const size_t stride = round64(widest);
  const size_t bytes = stride * static_cast<size_t>(cap) * static_cast<size_t>(slots);
  void* p = nullptr;
  MC_TRY(arena.alloc_checked(bytes, 64, TensorClass::kActivations, &p));
  b->data = static_cast<uint8_t*>(p);
  b->col_stride = stride;
  b->cap = cap;
  b->slots = slots;
  return Status::Ok();
}

void run_ternary_q(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                   const size_t* out_strides, int count, const int8_t* q, size_t q_stride, const float* scales, int n,
                   const TlLutBuffer& lut) {
  TernaryJob job{&k, mats, outs, out_strides, count, q, q_stride, scales, n, {}, lut.col_stride, 0};
  const size_t slot_bytes = lut.col_stride * static_cast<size_t>(lut.cap);
  // Thread 0: one LUT per column and layout, shared by the matrices of that layout.
  int used = 0;
  for (int m = 0; m < count && m < kMaxMats; ++m) {
    const TlTensor* t = mats[m]->tl;
    if (!t) continue;
    job.total_tiles += t->rows / t->tiling.BM;
    for (int e = 0; e < m && !job.lut[m]; ++e)
      if (mats[e]->tl && same_lut_layout(*mats[e]->tl, *t)) job.lut[m] = job.lut[e];
    if (job.lut[m]) continue;
    uint8_t* dst = lut.data + static_cast<size_t>(used++) * slot_bytes;
    for (int c = 0; c < n; ++c) k.tl_lut_build(*t, q + static_cast<size_t>(c) * q_stride, dst + c * lut.col_stride);
    job.lut[m] = dst;
  }
  pool.run_sized(ternary_task, &job, mats_work(mats, count, n));
}

}  // namespace mcullm
