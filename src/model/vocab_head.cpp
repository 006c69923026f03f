#include "model/vocab_head.h"

#include "core/fmath.h"
#include "quant/q4e.h"

namespace mcullm {

size_t head_row_bytes(const MatRef& w) {
  if (w.type == DType::kQ4E) return w.row_bytes + static_cast<size_t>(q4e_groups(w.cols, w.group)) * 2;
  return w.row_bytes;
}

void head_effective_input(const ActVec& x, int dim, float* out) {
  for (int j = 0; j < dim; ++j)
    out[j] = x.q ? static_cast<float>(x.q[j]) * x.scales[x.block > 0 ? j / x.block : 0] : x.f[j];
}

namespace {

double dot_d(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Group scores into `score`, and the group order by decreasing score (ties: lower group first).
void order_groups(const double* score, int n, int* order) {
  for (int i = 0; i < n; ++i) order[i] = i;
  for (int i = 1; i < n; ++i) {
    const int g = order[i];
    int j = i;
    while (j > 0 && score[order[j - 1]] < score[g]) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = g;
  }
}

// Logits of group g's rows (into logits[row]); returns the best (highest, then lowest token id).
void visit_group(const KernelSet& k, const VocabHead& h, const ActVec& x, int g, float* logits, int* best_row,
                 HeadStats* stats) {
  const int r0 = h.group_start[g], r1 = h.group_start[g + 1];
  if (r1 > r0) matvec(k, h.rows, x, logits, r0, r1);
  for (int r = r0; r < r1; ++r) {
    if (*best_row < 0 || logits[r] > logits[*best_row] ||
        (logits[r] == logits[*best_row] && h.token_of_row[r] < h.token_of_row[*best_row]))
      *best_row = r;
  }
  stats->rows_computed += r1 - r0;
  stats->groups_visited += 1;
  stats->bytes_read += static_cast<size_t>(r1 - r0) * head_row_bytes(h.rows);
}

}  // namespace

int two_stage_argmax(const KernelSet& k, const VocabHead& h, const ActVec& x, int top_groups, float* logits,
                     HeadStats* stats) {
  float xe[4096];
  const int dim = h.dim <= 4096 ? h.dim : 4096;
  head_effective_input(x, dim, xe);
  double score[kMaxHeadGroups];
  int order[kMaxHeadGroups];
  for (int g = 0; g < h.n_groups; ++g) score[g] = dot_d(h.centroids + static_cast<size_t>(g) * h.dim, xe, dim);
  *stats = HeadStats();
  stats->bytes_read = static_cast<size_t>(h.n_groups) * static_cast<size_t>(h.dim) * 2;  // f16 centroids
  order_groups(score, h.n_groups, order);
  int best = -1;
  for (int i = 0; i < top_groups && i < h.n_groups; ++i) visit_group(k, h, x, order[i], logits, &best, stats);
  return best < 0 ? -1 : h.token_of_row[best];
}

int pruned_argmax(const KernelSet& k, const VocabHead& h, const ActVec& x, float* logits, HeadStats* stats) {
  float xe[4096];
  const int dim = h.dim <= 4096 ? h.dim : 4096;
  head_effective_input(x, dim, xe);
  const double xnorm = static_cast<double>(mc_sqrtf(static_cast<float>(dot_d(xe, xe, dim)))) * (1 + 1e-6);
  // The kernels' rounding: each computed logit is within (dim + 64) * 2^-23 * |row| |x| of the exact
  // dot product (a generous bound for sums of dim products, group scales and the final scale).
  const double eps = (dim + 64) * 1.1920928955078125e-07;
  double bound[kMaxHeadGroups];
  int order[kMaxHeadGroups];
  for (int g = 0; g < h.n_groups; ++g)
    bound[g] = dot_d(h.centroids + static_cast<size_t>(g) * h.dim, xe, dim) + h.radius[g] * xnorm +
               2 * eps * h.row_norm_max[g] * xnorm;
  *stats = HeadStats();
  stats->bytes_read = static_cast<size_t>(h.n_groups) * (static_cast<size_t>(h.dim) * 2 + 8);  // f16 centroids, 2 f32 bounds
  order_groups(bound, h.n_groups, order);
  int best = -1;
  for (int i = 0; i < h.n_groups; ++i) {
    const int g = order[i];
    if (best >= 0 && bound[g] < static_cast<double>(logits[best])) break;  // no row of g can reach it
    visit_group(k, h, x, g, logits, &best, stats);
  }
  return best < 0 ? -1 : h.token_of_row[best];
}

}  // namespace mcullm
