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

// Each group's mean point into cent [K, D]; an empty group keeps its centroid.
void group_means(const std::vector<float>& pts, const std::vector<int32_t>& assign, int V, int D, int K, std::vector<float>* cent) {
  std::vector<double> sum(static_cast<size_t>(K) * D, 0.0);
  std::vector<int> count(K, 0);
  for (int r = 0; r < V; ++r) {
    ++count[assign[r]];
    for (int j = 0; j < D; ++j) sum[static_cast<size_t>(assign[r]) * D + j] += pts[static_cast<size_t>(r) * D + j];
  }
  for (int g = 0; g < K; ++g)
    if (count[g] > 0)
      for (int j = 0; j < D; ++j) (*cent)[static_cast<size_t>(g) * D + j] = static_cast<float>(sum[static_cast<size_t>(g) * D + j] / count[g]);
}

// Lloyd's k-means over `pts` [V, D] from points spread evenly over the rows: the group of each row,
// and in *cent the centroids of the last update (before the last assignment).
std::vector<int32_t> kmeans(const std::vector<float>& pts, int V, int D, int K, int iters, std::vector<float>* centroids) {
  std::vector<float>& cent = *centroids;
  cent.assign(static_cast<size_t>(K) * D, 0.0f);
  for (int g = 0; g < K; ++g)
    std::memcpy(&cent[static_cast<size_t>(g) * D], &pts[static_cast<size_t>(static_cast<int64_t>(g) * V / K) * D], D * 4);
  std::vector<int32_t> assign(V, 0);
  for (int it = 0; it <= iters; ++it) {
    std::vector<double> cnorm(K);
    for (int g = 0; g < K; ++g) {
      double s = 0;
      for (int j = 0; j < D; ++j) s += static_cast<double>(cent[static_cast<size_t>(g) * D + j]) * cent[static_cast<size_t>(g) * D + j];
      cnorm[g] = s;
    }
    for (int r = 0; r < V; ++r) {  // nearest centroid: min |c|^2 - 2 r.c
      const float* row = &pts[static_cast<size_t>(r) * D];
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
    group_means(pts, assign, V, D, K, &cent);
  }
  return assign;
}

// A symmetric positive definite a [n, n] (lower triangle read) plus a small ridge (1e-6 of the mean
// diagonal) into its Cholesky factor L (lower triangle, in place); false when not definite.
bool cholesky(std::vector<double>& a, int n) {
  double tr = 0;
  for (int i = 0; i < n; ++i) tr += a[static_cast<size_t>(i) * n + i];
  for (int i = 0; i < n; ++i) a[static_cast<size_t>(i) * n + i] += 1e-6 * tr / n + 1e-12;
  for (int j = 0; j < n; ++j) {
    double d = a[static_cast<size_t>(j) * n + j];
    for (int k = 0; k < j; ++k) d -= a[static_cast<size_t>(j) * n + k] * a[static_cast<size_t>(j) * n + k];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[static_cast<size_t>(j) * n + j] = d;
    for (int i = j + 1; i < n; ++i) {
      double v = a[static_cast<size_t>(i) * n + j];
      for (int k = 0; k < j; ++k) v -= a[static_cast<size_t>(i) * n + k] * a[static_cast<size_t>(j) * n + k];
      a[static_cast<size_t>(i) * n + j] = v / d;
    }
  }
  return true;
}

// m [n, n] (lower triangle) += x x^T.
void add_outer_lower(const double* x, int n, std::vector<double>& m) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) m[static_cast<size_t>(i) * n + j] += x[i] * x[j];
}

// Rows mapped so that squared distances are the mean squared logit differences over the states:
// |L^T (a - b)|^2 = E[((a - b) . x)^2] with L L^T = E[x x^T] (a small ridge keeps it definite).
Status logit_metric_rows(const std::vector<float>& rows, int V, int D, const float* states, int n, std::vector<float>* out) {
  std::vector<double> m(static_cast<size_t>(D) * D, 0.0), xd(D);
  for (int s = 0; s < n; ++s) {
    std::copy(states + static_cast<size_t>(s) * D, states + static_cast<size_t>(s + 1) * D, xd.begin());
    add_outer_lower(xd.data(), D, m);
  }
  if (!cholesky(m, D))
    return Status::Error(Code::kInvalidArgument, "the calibration states span too little to group the head by them");
  out->assign(static_cast<size_t>(V) * D, 0.0f);
  for (int r = 0; r < V; ++r)
    for (int j = 0; j < D; ++j) {  // (L^T row)[j] = sum_{i >= j} L[i][j] row[i]
      double v = 0;
      for (int i = j; i < D; ++i) v += m[static_cast<size_t>(i) * D + j] * rows[static_cast<size_t>(r) * D + i];
      (*out)[static_cast<size_t>(r) * D + j] = static_cast<float>(v / std::sqrt(static_cast<double>(n)));
    }
  return Status::Ok();
}

// Solves (A + ridge) x = b for a symmetric positive definite A [n, n] (cholesky's ridge) in place; b: [n, m].
bool solve_spd(std::vector<double>& a, int n, std::vector<double>& b, int m) {
  if (!cholesky(a, n)) return false;
  for (int c = 0; c < m; ++c) {  // L y = b, then L^T x = y
    for (int i = 0; i < n; ++i) {
      double s = b[static_cast<size_t>(i) * m + c];
      for (int k = 0; k < i; ++k) s -= a[static_cast<size_t>(i) * n + k] * b[static_cast<size_t>(k) * m + c];
      b[static_cast<size_t>(i) * m + c] = s / a[static_cast<size_t>(i) * n + i];
    }
    for (int i = n - 1; i >= 0; --i) {
      double s = b[static_cast<size_t>(i) * m + c];
      for (int k = i + 1; k < n; ++k) s -= a[static_cast<size_t>(k) * n + i] * b[static_cast<size_t>(k) * m + c];
      b[static_cast<size_t>(i) * m + c] = s / a[static_cast<size_t>(i) * n + i];
    }
  }
  return true;
}

}  // namespace

Status build_vocab_head(const MatRef& head, int n_groups, int iters, Arena& arena, VocabHead* out, const float* states,
                        int n_states) {
  if (head.type == DType::kI2_S) return Status::Error(Code::kUnsupported, "i2_s heads are not clustered");
  if (n_groups < 1 || n_groups > kMaxHeadGroups)
    return Status::Error(Code::kInvalidArgument, "%d head groups (1 to %d)", n_groups, kMaxHeadGroups);
  if (head.cols > 4096) return Status::Error(Code::kUnsupported, "head width %d (at most 4096)", head.cols);
  const int V = head.rows, D = head.cols, K = std::min(n_groups, V);
  std::vector<float> rows;
  MC_TRY(dequantize_head(head, &rows));
  std::vector<int32_t> assign;
  std::vector<float> cent;
  if (states && n_states > 0) {
    std::vector<float> mapped;
    MC_TRY(logit_metric_rows(rows, V, D, states, n_states, &mapped));
    assign = kmeans(mapped, V, D, K, iters, &cent);
    std::fill(cent.begin(), cent.end(), 0.0f);  // centroids in the rows' own space: each group's mean row
    group_means(rows, assign, V, D, K, &cent);
  } else {
    assign = kmeans(rows, V, D, K, iters, &cent);
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


Status fit_head_router(const VocabHead& h, const float* states, int n, Arena& arena, VocabHead* out) {
  if (n < 1) return Status::Error(Code::kInvalidArgument, "the head router needs calibration states");
  const int V = h.rows.rows, D = h.dim, K = h.n_groups, P = D + 1;  // P: the inputs and a bias
  std::vector<float> rows;
  MC_TRY(dequantize_head(h.rows, &rows));
  // Least squares, one shared Gram matrix: router[g] . x + bias[g] ~ the largest logit of g's rows.
  std::vector<double> gram(static_cast<size_t>(P) * P, 0.0), rhs(static_cast<size_t>(P) * K, 0.0);
  std::vector<float> logit(V);
  std::vector<double> target(K), xa(P, 1.0);  // xa: the state and a constant 1 for the bias
  for (int s = 0; s < n; ++s) {
    const float* x = states + static_cast<size_t>(s) * D;
    for (int r = 0; r < V; ++r) {
      const float* w = &rows[static_cast<size_t>(r) * D];
      float acc = 0;
      for (int j = 0; j < D; ++j) acc += w[j] * x[j];
      logit[r] = acc;
    }
    for (int g = 0; g < K; ++g) {
      const int r0 = h.group_start[g], r1 = h.group_start[g + 1];
      if (r1 <= r0) {  // an empty group (its start may be the vocabulary's end: nothing to read)
        target[g] = -1e3;
        continue;
      }
      float m = logit[r0];
      for (int r = r0 + 1; r < r1; ++r) m = std::max(m, logit[r]);
      target[g] = m;
    }
    std::copy(x, x + D, xa.begin());
    add_outer_lower(xa.data(), P, gram);
    for (int i = 0; i < P; ++i)
      for (int g = 0; g < K; ++g) rhs[static_cast<size_t>(i) * K + g] += xa[i] * target[g];
  }
  if (!solve_spd(gram, P, rhs, K))
    return Status::Error(Code::kInvalidArgument, "the head router's least squares are singular (too few calibration states?)");
  int8_t* w = nullptr;
  float *scale = nullptr, *bias = nullptr;
  MC_TRY(arena.alloc_array(static_cast<size_t>(K) * D, TensorClass::kHead, &w));
  MC_TRY(arena.alloc_array(static_cast<size_t>(K), TensorClass::kHead, &scale));
  MC_TRY(arena.alloc_array(static_cast<size_t>(K), TensorClass::kHead, &bias));
  for (int g = 0; g < K; ++g) {  // int8 per group: scale = amax / 127
    double amax = 0;
    for (int j = 0; j < D; ++j) amax = std::max(amax, std::fabs(rhs[static_cast<size_t>(j) * K + g]));
    const float sc = amax > 0 ? static_cast<float>(amax / 127) : 1.0f;
    for (int j = 0; j < D; ++j)
      w[static_cast<size_t>(g) * D + j] = static_cast<int8_t>(std::lrint(std::clamp(rhs[static_cast<size_t>(j) * K + g] / sc, -127.0, 127.0)));
    scale[g] = sc;
    bias[g] = static_cast<float>(rhs[static_cast<size_t>(D) * K + g]);
  }
  *out = h;
  out->router = w;
  out->router_scale = scale;
  out->router_bias = bias;
  return Status::Ok();
}

}  // namespace mcullm
