#include "model/vocab_head_build_host.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "quant/blocks.h"
#include "quant/f16.h"
#include "quant/q4e.h"

namespace mcullm {

namespace {

Status dequantize_head(const MatRef& w, std::vector<float>* out) {
  out->assign(static_cast<size_t>(w.rows) * w.cols, 0.0f);
  for (int r = 0; r < w.rows; ++r) {
    float* dst = out->data() + static_cast<size_t>(r) * w.cols;
    if (w.type == DType::kQ4E) {
      q4e_dequantize_row(w, r, dst);
    } else if (!dequantize_row_any(w.type, w.row(r), dst, w.cols)) {
      return Status::Error(Code::kUnsupported, "a head of type %s cannot be clustered", dtype_info(w.type) ? dtype_info(w.type)->name : "?");
    }
  }
  return Status::Ok();
}

// The head's rows in `perm` order, in the head's own storage layout.
Status permute_rows(const MatRef& w, const std::vector<int32_t>& perm, Arena& arena, MatRef* out) {
  *out = w;
  const size_t rb = w.row_bytes;
  if (w.type == DType::kQ4E) {
    const size_t sb = static_cast<size_t>(q4e_groups(w.cols, w.group)) * 2;
    uint8_t* p = nullptr;
    MC_TRY(arena.alloc_array(4 + static_cast<size_t>(w.rows) * (rb + sb), TensorClass::kHead, &p));
    const int32_t g = w.group;
    std::memcpy(p, &g, 4);
    for (int r = 0; r < w.rows; ++r) {
      std::memcpy(p + 4 + static_cast<size_t>(r) * rb, w.row(perm[r]), rb);
      std::memcpy(p + 4 + static_cast<size_t>(w.rows) * rb + static_cast<size_t>(r) * sb,
                  w.scales + static_cast<size_t>(perm[r]) * sb, sb);
    }
    q4e_bind(p, w.rows, w.cols, out);
    return Status::Ok();
  }
  uint8_t* p = nullptr;
  MC_TRY(arena.alloc_array(static_cast<size_t>(w.rows) * rb, TensorClass::kHead, &p));
  for (int r = 0; r < w.rows; ++r) std::memcpy(p + static_cast<size_t>(r) * rb, w.row(perm[r]), rb);
  out->data = p;
  return Status::Ok();
}

}  // namespace

Status build_vocab_head(const MatRef& head, int n_groups, int iters, Arena& arena, VocabHead* out) {
  if (head.type == DType::kI2_S) return Status::Error(Code::kUnsupported, "i2_s heads are not clustered");
  if (n_groups < 1 || n_groups > kMaxHeadGroups)
    return Status::Error(Code::kInvalidArgument, "%d head groups (1 to %d)", n_groups, kMaxHeadGroups);
  if (head.cols > 4096) return Status::Error(Code::kUnsupported, "head width %d (at most 4096)", head.cols);
  const int V = head.rows, D = head.cols, K = std::min(n_groups, V);
  std::vector<float> rows;
  MC_TRY(dequantize_head(head, &rows));
  std::vector<float> cent(static_cast<size_t>(K) * D);
  for (int g = 0; g < K; ++g)
    std::memcpy(&cent[static_cast<size_t>(g) * D], &rows[static_cast<size_t>(static_cast<int64_t>(g) * V / K) * D], D * 4);
  std::vector<int32_t> assign(V, 0);
  for (int it = 0; it <= iters; ++it) {
    std::vector<double> cnorm(K);
    for (int g = 0; g < K; ++g) {
      double s = 0;
      for (int j = 0; j < D; ++j) s += static_cast<double>(cent[static_cast<size_t>(g) * D + j]) * cent[static_cast<size_t>(g) * D + j];
      cnorm[g] = s;
    }
    for (int r = 0; r < V; ++r) {  // nearest centroid: min |c|^2 - 2 r.c
      const float* row = &rows[static_cast<size_t>(r) * D];
      double best = 0;
      for (int g = 0; g < K; ++g) {
        const float* c = &cent[static_cast<size_t>(g) * D];
        float dot = 0;
        for (int j = 0; j < D; ++j) dot += row[j] * c[j];
        const double d = cnorm[g] - 2.0 * dot;
        if (g == 0 || d < best) {
          best = d;
          assign[r] = g;
        }
      }
    }
    if (it == iters) break;
    std::vector<double> sum(static_cast<size_t>(K) * D, 0.0);
    std::vector<int> count(K, 0);
    for (int r = 0; r < V; ++r) {
      ++count[assign[r]];
      for (int j = 0; j < D; ++j) sum[static_cast<size_t>(assign[r]) * D + j] += rows[static_cast<size_t>(r) * D + j];
    }
    for (int g = 0; g < K; ++g)
      if (count[g] > 0)
        for (int j = 0; j < D; ++j) cent[static_cast<size_t>(g) * D + j] = static_cast<float>(sum[static_cast<size_t>(g) * D + j] / count[g]);
  }
  // Stored as f16 (the bounds below are taken around these rounded centroids, so they stay exact).
  for (float& v : cent) v = f16_to_f32(f32_to_f16(v));
  std::vector<int32_t> perm(V);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return assign[a] < assign[b]; });

  VocabHead h;
  h.n_groups = K;
  h.dim = D;
  MC_TRY(permute_rows(head, perm, arena, &h.rows));
  int32_t *tok = nullptr, *start = nullptr;
  float *c = nullptr, *rad = nullptr, *nmax = nullptr;
  MC_TRY(arena.alloc_array(static_cast<size_t>(V), TensorClass::kHead, &tok));
  MC_TRY(arena.alloc_array(static_cast<size_t>(K) + 1, TensorClass::kHead, &start));
  MC_TRY(arena.alloc_array(cent.size(), TensorClass::kHead, &c));
  MC_TRY(arena.alloc_array(static_cast<size_t>(K), TensorClass::kHead, &rad));
  MC_TRY(arena.alloc_array(static_cast<size_t>(K), TensorClass::kHead, &nmax));
  std::memcpy(c, cent.data(), cent.size() * 4);
  std::fill(start, start + K + 1, 0);
  for (int r = 0; r < V; ++r) {
    tok[r] = perm[r];
    ++start[assign[perm[r]] + 1];
  }
  for (int g = 0; g < K; ++g) start[g + 1] += start[g];
  for (int g = 0; g < K; ++g) {
    double rmax = 0, nm = 0;
    for (int r = start[g]; r < start[g + 1]; ++r) {
      const float* row = &rows[static_cast<size_t>(perm[r]) * D];
      double d2 = 0, n2 = 0;
      for (int j = 0; j < D; ++j) {
        const double d = static_cast<double>(row[j]) - c[static_cast<size_t>(g) * D + j];
        d2 += d * d;
        n2 += static_cast<double>(row[j]) * row[j];
      }
      rmax = std::max(rmax, std::sqrt(d2));
      nm = std::max(nm, std::sqrt(n2));
    }
    rad[g] = static_cast<float>(rmax * (1 + 1e-6)) * (1 + 1e-6f);  // rounded up
    nmax[g] = static_cast<float>(nm * (1 + 1e-6));
  }
  h.token_of_row = tok;
  h.group_start = start;
  h.centroids = c;
  h.radius = rad;
  h.row_norm_max = nmax;
  *out = h;
  return Status::Ok();
}

}  // namespace mcullm
