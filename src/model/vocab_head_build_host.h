// Builds a VocabHead (model/vocab_head.h) from a head matrix: k-means over the dequantized rows,
// then a copy of the head in group order. Host-only (the clustering is the offline step; a board
// reads the stored result).
#pragma once
#include "core/arena.h"
#include "kernels/kernels.h"
#include "model/vocab_head.h"
#include "mcullm/status.h"

namespace mcullm {

// n_groups in [1, kMaxHeadGroups] (capped at the row count); `iters` Lloyd iterations from rows
// spread evenly over the vocabulary (deterministic). Tables and the permuted head come from `arena`.
// With calibration states ([n_states, cols], the head's input as the head sees it), k-means runs in
// the metric of the logits: rows are near when their logits differ little on the states.
Status build_vocab_head(const MatRef& head, int n_groups, int iters, Arena& arena, VocabHead* out, const float* states = nullptr,
                        int n_states = 0);

// *out = h with a router (vocab_head.h) fitted on calibration states ([n, h.dim], the head's input as
// the head sees it): least squares (a small ridge) so that router[g] . x + bias[g] predicts the
// largest logit of group g's rows, then int8 per group (scale amax / 127). Deterministic.
Status fit_head_router(const VocabHead& h, const float* states, int n, Arena& arena, VocabHead* out);

}  // namespace mcullm
