// Vocabulary heads that read fewer bytes than the full [vocab, dim] matvec (issue 5, item 3).
//
// The head's rows are clustered offline (k-means, vocab_head_build_host.h) into at most 256 groups
// and stored in group order (a permuted copy of the head, with the token id of every row), with one
// f16 centroid and one f32 radius (max |row - centroid|) per group.
//  * Two-stage head: score every group by centroid . x, compute full logits only for the rows of the
//    best `top_groups` groups, take their argmax. Approximate: it may miss the true argmax.
//  * Pruned greedy head: exact. row . x <= centroid . x + radius * |x| (Cauchy-Schwarz), plus a margin
//    for the kernel's rounding; groups are visited in decreasing bound order and the search stops at
//    the first group whose bound is below the best logit found. Returns the full argmax (lowest id on
//    ties), having read only the groups it visited.
//  * Router (optional, two-stage only): an int8 table fitted offline on calibration states so that a
//    group's score predicts the largest logit among its rows (vocab_head_build_host.h). It replaces
//    the centroid scores of the two-stage head: smaller (int8) and a better ranking. Scored in
//    integers with the input quantized to int8 (one scale), so every platform ranks alike.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "mcullm/status.h"

namespace mcullm {

constexpr int kMaxHeadGroups = 256;

struct VocabHead {
  int n_groups = 0;
  int dim = 0;
  MatRef rows;                        // the head's rows in group order (same type as the head)
  const int32_t* token_of_row = nullptr;  // [vocab]
  const int32_t* group_start = nullptr;   // [n_groups + 1]: rows of group g are [start[g], start[g+1])
  const float* centroids = nullptr;   // [n_groups, dim], f16 values (stored as f16: 2 bytes each)
  const float* radius = nullptr;      // [n_groups], rounded up
  const float* row_norm_max = nullptr;  // [n_groups]: max |row| in the group (rounding margin)
  const int8_t* router = nullptr;       // [n_groups, dim] or null (then the two-stage head scores centroids)
  const float* router_scale = nullptr;  // [n_groups]: score = router_scale * (router . q) * q_scale + router_bias
  const float* router_bias = nullptr;   // [n_groups]
};

// Two-stage scores of every group from the router: xe, the input as the head sees it, is quantized
// to int8 (one scale, q: [dim] scratch), each group's exact int32 dot product taken by the table's
// int8 score kernel (attn_scores_q8 with unit scales gives (float)isum exactly: PIE on the S3), then
// score = (float)isum * router_scale * q_scale + router_bias in float. h.router must be set.
// pool (may be null): the groups split over its threads.
void router_scores(const KernelSet& k, const VocabHead& h, const float* xe, int8_t* q, double* score,
                   ThreadPool* pool = nullptr);
// Bytes the two-stage head reads to score the groups (router or f16 centroids).
size_t two_stage_score_bytes(const VocabHead& h);

// Bytes one stored row of `w` takes (q4e: codes and scales).
size_t head_row_bytes(const MatRef& w);

struct HeadStats {
  size_t bytes_read = 0;  // weight bytes: centroid table and the rows whose logits were computed
  int rows_computed = 0;
  int groups_visited = 0;
};

// The activations as the head's kernel sees them (int8 values times their scales, or x itself).
void head_effective_input(const ActVec& x, int dim, float* out);

// Argmax of the rows of the best `top_groups` groups (by centroid score). `logits` scratch: [vocab].
int two_stage_argmax(const KernelSet& k, const VocabHead& h, const ActVec& x, int top_groups, float* logits,
                     HeadStats* stats);
// The exact argmax of the full head, reading only the groups that may hold it. `logits`: [vocab].
int pruned_argmax(const KernelSet& k, const VocabHead& h, const ActVec& x, float* logits, HeadStats* stats);

// Which head generation computes. Full: every row (the only exact one for sampling). Two-stage:
// the rows of the best `top_groups` groups (approximate). Pruned: the groups that may hold the
// argmax (exact for greedy decoding: the argmax is the full head's; other rows are not computed).
enum class HeadMode : uint8_t { kFull = 0, kTwoStage, kPruned };
// "full" / "two-stage" / "pruned"; false for anything else.
bool parse_head_mode(const char* name, HeadMode* out);
const char* head_mode_name(HeadMode m);
// Top groups of the two-stage head when nothing says otherwise.
constexpr int kDefaultTopGroups = 16;

// What a decoder's head computes; groups null means full.
struct HeadChoice {
  HeadMode mode = HeadMode::kFull;
  const VocabHead* groups = nullptr;
  int top_groups = kDefaultTopGroups;
  bool grouped() const { return mode != HeadMode::kFull && groups; }
};

// Where a grouped head's last logits may be finite: the rows of groups[0..n_groups) (token ids
// head->token_of_row[row]); every other logit is -inf. Lets greedy sampling skip the rest.
struct LogitCandidates {
  const VocabHead* head = nullptr;
  const int* groups = nullptr;
  int n_groups = 0;
};

// The groups a decoder's last grouped head read (grouped_head_logits fills it; n < 0: the last
// logits were the full head's), and so where those logits may be finite.
struct HeadVisit {
  int groups[kMaxHeadGroups];
  int n = -1;
  // False after the full head; else the candidates of `head`'s groups.
  bool candidates(const VocabHead* head, LogitCandidates* out) const {
    if (n < 0) return false;
    *out = LogitCandidates{head, groups, n};
    return true;
  }
};

// Floats of grouped_head_logits's scratch (row logits, the input as the head sees it, and that
// input as int8 for the router).
inline size_t head_scratch_floats(const MatRef& head) {
  return static_cast<size_t>(head.rows) + static_cast<size_t>(head.cols) + (static_cast<size_t>(head.cols) + 3) / 4;
}

// The choice fits a head matrix: full, or groups over the same rows (count, width, type).
Status check_head_choice(const HeadChoice& c, const MatRef& head);
// A decoder's set_head: checks `c` against the head, takes grouped_head_logits's scratch from `arena`
// the first time a grouped choice needs it (*scratch keeps it for later choices), then *current = c.
Status apply_head_choice(const HeadChoice& c, const MatRef& head, Arena& arena, float** scratch, HeadChoice* current);
// x (dim values) as a head of `type` reads it: int8 codes in q / scales ([dim + 64] each; q4e: one
// scale for the vector unless f32_q4e, the block types: k.quantize_blocks), or x itself.
ActVec head_activations(const KernelSet& k, DType type, const float* x, int dim, bool f32_q4e, int8_t* q, float* scales);
// What forward()'s head does with `c`: quantizes x as the head's rows need (q4e: one scale for the
// vector unless f32_q4e) into q / scales ([dim + 64] each), then grouped_head_logits.
// visit (may be null): the groups read.
void grouped_head_logits(ThreadPool& pool, const KernelSet& k, const HeadChoice& c, const float* x, int dim, bool f32_q4e,
                         int8_t* q, float* scales, float* row_logits, float* logits, HeadVisit* visit = nullptr);
// The logits by token id of the rows `mode` (two-stage or pruned) reads; every other token gets -inf.
// A computed logit has the bits of the full head's (the rows are copies, the same kernel); the rows
// are split over the pool. row_logits: [head_scratch_floats(h)] scratch.
void grouped_head_logits(ThreadPool& pool, const KernelSet& k, const VocabHead& h, HeadMode mode, int top_groups,
                         const ActVec& x, float* row_logits, float* logits, HeadStats* stats, HeadVisit* visit = nullptr);

}  // namespace mcullm
