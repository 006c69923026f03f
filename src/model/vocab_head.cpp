#include "model/vocab_head.h"

#include <string.h>

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

void router_scores(const KernelSet& k, const VocabHead& h, const float* xe, int8_t* q, double* score, ThreadPool* pool) {
  float qs = 0;
  q4e_quantize_activations(k, xe, h.dim, q, &qs);
  // (float)isum * (1 * 1) / 1 is (float)isum: each group's exact int32 sum rounded to float once, the same
  // on every platform and table.
  const float one = 1.0f;
  const size_t dim = static_cast<size_t>(h.dim);
  const auto groups = [&](int b, int e) {
    float isum[kMaxHeadGroups];
    k.attn_scores_q8(q, 1.0f, h.router + static_cast<size_t>(b) * dim, &one, dim, 0, e - b, h.dim, 1.0f, isum);
    for (int g = b; g < e; ++g) score[g] = static_cast<double>(isum[g - b] * h.router_scale[g] * qs + h.router_bias[g]);
  };
  if (pool) run_slices(*pool, h.n_groups, 1, static_cast<size_t>(h.n_groups) * dim, groups);
  else groups(0, h.n_groups);
}

size_t two_stage_score_bytes(const VocabHead& h) {
  if (h.router) return static_cast<size_t>(h.n_groups) * (static_cast<size_t>(h.dim) + 8);  // int8 rows, scale, bias
  return static_cast<size_t>(h.n_groups) * static_cast<size_t>(h.dim) * 2;                  // f16 centroids
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

// The best `top` groups in order[0..top): what order_groups puts first, keeping only those (a group
// enters when it beats the worst kept; ties keep the earlier group). NaN scores: order_groups decides.
void select_top_groups(const double* score, int n, int top, int* order) {
  if (top <= 0) return;
  for (int g = 0; g < n; ++g) {
    if (score[g] != score[g]) {
      order_groups(score, n, order);
      return;
    }
  }
  int m = 0;
  for (int g = 0; g < n; ++g) {
    if (m == top && !(score[g] > score[order[top - 1]])) continue;
    int j = m < top ? m++ : top - 1;
    while (j > 0 && score[order[j - 1]] < score[g]) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = g;
  }
}

// The best of group g's computed rows and *best_row (highest logit, then lowest token id: a total
// order, so the groups may be compared in any order), and g's share of the stats. best_row null:
// the stats only (generation samples from the logits: a board would scan every computed row twice).
void take_group(const VocabHead& h, int g, const float* logits, int* best_row, HeadStats* stats) {
  const int r0 = h.group_start[g], r1 = h.group_start[g + 1];
  for (int r = r0; best_row && r < r1; ++r) {
    if (*best_row < 0 || logits[r] > logits[*best_row] ||
        (logits[r] == logits[*best_row] && h.token_of_row[r] < h.token_of_row[*best_row]))
      *best_row = r;
  }
  stats->rows_computed += r1 - r0;
  stats->groups_visited += 1;
  stats->bytes_read += static_cast<size_t>(r1 - r0) * head_row_bytes(h.rows);
}

// The rows of groups[0..n), listed group after group: how many, and fn(r0, r1) for each run of head
// rows among the list's entries [b, e) (a pool slice of the list).
int listed_rows(const VocabHead& h, const int* groups, int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += h.group_start[groups[i] + 1] - h.group_start[groups[i]];
  return total;
}
template <typename Fn>
void for_listed_rows(const VocabHead& h, const int* groups, int n, int b, int e, Fn fn) {
  for (int i = 0, at = 0; i < n && at < e; ++i) {  // at: where group i's rows start in the list
    const int r0 = h.group_start[groups[i]], len = h.group_start[groups[i] + 1] - r0;
    const int lo = b > at ? b : at, hi = e < at + len ? e : at + len;
    if (lo < hi) fn(r0 + lo - at, r0 + hi - at);
    at += len;
  }
}

// The logits of the rows of groups[0..n) (into logits[row]), those rows split over the pool (null:
// the caller's thread; the host tools' argmax calls, which keep the core free of a pool object).
void group_rows(ThreadPool* pool, const KernelSet& k, const VocabHead& h, const ActVec& x, const int* groups, int n,
                float* logits) {
  const int total = listed_rows(h, groups, n);
  const auto rows = [&](int b, int e) {
    for_listed_rows(h, groups, n, b, e, [&](int r0, int r1) { matvec(k, h.rows, x, logits, r0, r1); });
  };
  if (pool) run_slices(*pool, total, 1, static_cast<size_t>(total) * static_cast<size_t>(h.dim), rows);
  else rows(0, total);
}

// Visits the groups `mode` reads (their rows' logits into logits[row]) and lists them in `visited`;
// returns how many, and the best row in *best_row (-1 for none; best_row may be null in two-stage mode).
// xe: [dim] scratch, q: [dim] scratch (the router's int8 input).
int visit_groups(ThreadPool* pool, const KernelSet& k, const VocabHead& h, HeadMode mode, int top_groups, const ActVec& x,
                 float* logits, float* xe, int8_t* q, int* visited, int* best_row, HeadStats* stats) {
  const int dim = h.dim;
  head_effective_input(x, dim, xe);
  double score[kMaxHeadGroups];
  int order[kMaxHeadGroups];
  *stats = HeadStats();
  const bool pruned = mode == HeadMode::kPruned;
  if (pruned) {
    const double xnorm = static_cast<double>(mc_sqrtf(static_cast<float>(dot_d(xe, xe, dim)))) * (1 + 1e-6);
    // The kernels' rounding: each computed logit is within (dim + 64) * 2^-23 * |row| |x| of the exact
    // dot product (a generous bound for sums of dim products, group scales and the final scale).
    const double eps = (dim + 64) * 1.1920928955078125e-07;
    for (int g = 0; g < h.n_groups; ++g)  // the bound of every row of g (Cauchy-Schwarz)
      score[g] = dot_d(h.centroids + static_cast<size_t>(g) * h.dim, xe, dim) + h.radius[g] * xnorm +
                 2 * eps * h.row_norm_max[g] * xnorm;
    stats->bytes_read = static_cast<size_t>(h.n_groups) * (static_cast<size_t>(h.dim) * 2 + 8);  // f16 centroids, 2 f32 bounds
  } else {
    if (h.router) router_scores(k, h, xe, q, score, pool);
    else
      for (int g = 0; g < h.n_groups; ++g) score[g] = dot_d(h.centroids + static_cast<size_t>(g) * h.dim, xe, dim);
    stats->bytes_read = two_stage_score_bytes(h);
  }
  if (best_row) *best_row = -1;
  if (!pruned) {  // the top groups' rows at once
    const int n = top_groups < h.n_groups ? top_groups : h.n_groups;
    select_top_groups(score, h.n_groups, n, order);
    group_rows(pool, k, h, x, order, n, logits);
    for (int i = 0; i < n; ++i) {
      take_group(h, order[i], logits, best_row, stats);
      visited[i] = order[i];
    }
    return n;
  }
  order_groups(score, h.n_groups, order);
  int n = 0;
  for (; n < h.n_groups; ++n) {  // group by group, until no row of the next can reach the best
    const int g = order[n];
    if (*best_row >= 0 && score[g] < static_cast<double>(logits[*best_row])) break;
    group_rows(pool, k, h, x, &g, 1, logits);
    take_group(h, g, logits, best_row, stats);
    visited[n] = g;
  }
  return n;
}

}  // namespace

int two_stage_argmax(const KernelSet& k, const VocabHead& h, const ActVec& x, int top_groups, float* logits,
                     HeadStats* stats) {
  float xe[4096];  // a host tool's call (mcullm head); generation passes its own scratch
  int8_t q[4096];
  int visited[kMaxHeadGroups], best = -1;
  if (h.dim > 4096) return -1;
  visit_groups(nullptr, k, h, HeadMode::kTwoStage, top_groups, x, logits, xe, q, visited, &best, stats);
  return best < 0 ? -1 : h.token_of_row[best];
}

int pruned_argmax(const KernelSet& k, const VocabHead& h, const ActVec& x, float* logits, HeadStats* stats) {
  float xe[4096];
  int visited[kMaxHeadGroups], best = -1;
  if (h.dim > 4096) return -1;
  visit_groups(nullptr, k, h, HeadMode::kPruned, 0, x, logits, xe, nullptr, visited, &best, stats);
  return best < 0 ? -1 : h.token_of_row[best];
}

void grouped_head_logits(ThreadPool& pool, const KernelSet& k, const VocabHead& h, HeadMode mode, int top_groups,
                         const ActVec& x, float* row_logits, float* logits, HeadStats* stats, HeadVisit* visit) {
  HeadVisit own;
  int* visited = (visit ? visit : &own)->groups;
  int best = -1;  // the pruned head's walk needs it; the two-stage head's best row is not used here
  const int vocab = h.group_start[h.n_groups];
  float* xe = row_logits + vocab;  // head_scratch_floats: then dim floats of input, then its int8 copy
  int8_t* q = reinterpret_cast<int8_t*>(xe + h.dim);
  const int n = visit_groups(&pool, k, h, mode, top_groups, x, row_logits, xe, q, visited,
                             mode == HeadMode::kPruned ? &best : nullptr, stats);
  if (visit) visit->n = n;
  run_slices(pool, vocab, 16, static_cast<size_t>(vocab),
             [&k, logits](int b, int e) { k.fill_f32(logits + b, e - b, -__builtin_huge_valf()); });
  // The computed rows to their tokens, split too (a board's core 0 would otherwise copy them alone).
  const int rows = listed_rows(h, visited, n);
  run_slices(pool, rows, 16, static_cast<size_t>(rows), [&](int b, int e) {
    for_listed_rows(h, visited, n, b, e, [&](int r0, int r1) {
      for (int r = r0; r < r1; ++r) logits[h.token_of_row[r]] = row_logits[r];
    });
  });
}

Status check_head_choice(const HeadChoice& c, const MatRef& head) {
  if (c.mode != HeadMode::kFull && c.mode != HeadMode::kTwoStage && c.mode != HeadMode::kPruned)
    return Status::Error(Code::kInvalidArgument, "unknown head mode");
  if (c.mode == HeadMode::kFull) return Status::Ok();
  if (!c.groups)
    return Status::Error(Code::kUnsupported, "--head %s needs the head's groups in the model file (mcullm head --write adds them)",
                         head_mode_name(c.mode));
  const VocabHead& h = *c.groups;
  if (h.rows.rows != head.rows || h.dim != head.cols || h.rows.cols != head.cols || h.rows.type != head.type ||
      h.n_groups < 1 || h.n_groups > kMaxHeadGroups || h.group_start[h.n_groups] != head.rows)
    return Status::Error(Code::kInvalidArgument, "the head groups (%d rows of %d) do not fit the head (%d rows of %d)",
                         h.rows.rows, h.dim, head.rows, head.cols);
  if (c.mode == HeadMode::kTwoStage && (c.top_groups < 1 || c.top_groups > h.n_groups))
    return Status::Error(Code::kOutOfRange, "--head-top %d is not in 1..%d (the model's head groups)", c.top_groups, h.n_groups);
  return Status::Ok();
}

Status apply_head_choice(const HeadChoice& c, const MatRef& head, Arena& arena, float** scratch, HeadChoice* current) {
  MC_TRY(check_head_choice(c, head));
  if (c.grouped() && !*scratch) MC_TRY(arena.alloc_array(head_scratch_floats(head), TensorClass::kActivations, scratch));
  *current = c;
  return Status::Ok();
}

ActVec head_activations(const KernelSet& k, DType type, const float* x, int dim, bool f32_q4e, int8_t* q, float* scales) {
  ActVec act;
  act.f = x;
  if (type == DType::kQ4E) {
    if (!f32_q4e) {
      q4e_quantize_activations(k, x, dim, q, scales);
      act.q = q;
      act.scales = scales;
      act.block = dim;
    }
  } else if (const DTypeInfo* info = dtype_info(type); info && info->act_block > 0) {
    k.quantize_blocks(x, dim, info->act_block, q, scales);
    act.q = q;
    act.scales = scales;
    act.block = info->act_block;
  }
  return act;
}

void grouped_head_logits(ThreadPool& pool, const KernelSet& k, const HeadChoice& c, const float* x, int dim, bool f32_q4e,
                         int8_t* q, float* scales, float* row_logits, float* logits, HeadVisit* visit) {
  const ActVec act = head_activations(k, c.groups->rows.type, x, dim, f32_q4e, q, scales);
  HeadStats stats;
  grouped_head_logits(pool, k, *c.groups, c.mode, c.top_groups, act, row_logits, logits, &stats, visit);
}

bool parse_head_mode(const char* name, HeadMode* out) {
  const HeadMode modes[3] = {HeadMode::kFull, HeadMode::kTwoStage, HeadMode::kPruned};
  for (HeadMode m : modes) {
    if (name && strcmp(name, head_mode_name(m)) == 0) {
      *out = m;
      return true;
    }
  }
  return false;
}

const char* head_mode_name(HeadMode m) {
  switch (m) {
    case HeadMode::kFull: return "full";
    case HeadMode::kTwoStage: return "two-stage";
    case HeadMode::kPruned: return "pruned";
  }
  return "?";
}

}  // namespace mcullm
