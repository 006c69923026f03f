// Head groups (model/vocab_head.h) stored in a GGUF file beside the model, so that a board reads the
// offline clustering instead of redoing it (`mcullm head --write` stores them):
//   tensor head_groups.rows         the head's rows in group order, the head's type, [dim, vocab]
//   tensor head_groups.rows.scales  q4e heads only: their f16 group scales in the same order
//   tensor head_groups.centroids    f16 [dim, n_groups]
//   i32 arrays head_groups.token_of_row [vocab], head_groups.group_start [n_groups + 1]
//   f32 arrays head_groups.radius, head_groups.row_norm_max [n_groups]
//   optional, all three or none: i8 array head_groups.router [n_groups * dim] (group-major), f32 arrays
//   head_groups.router_scale, head_groups.router_bias [n_groups]: the two-stage head's router
//   optional: string head_groups.default_mode ("full", "two-stage", "pruned"), u32 head_groups.default_top:
//   the head generation uses when the user does not choose (`mcullm run --head auto`)
#pragma once
#include "core/arena.h"
#include "format/gguf.h"
#include "model/vocab_head.h"
#include "mcullm/status.h"

namespace mcullm {

// Whether the file stores head groups (head_groups.rows is present).
bool gguf_has_vocab_head(const GgufFile& f);

// Binds the stored groups of `head` (the model's output matrix): the rows in place, the tables
// copied into `tables`. Every part is checked against the head: shapes and types, a permutation of
// the vocabulary, group bounds in order, finite non-negative radii, each stored row equal to the
// head row it stands for, and a router (if any) whole with positive finite scales, finite biases and
// values in [-127, 127]; anything else is a kCorrupt error naming the part.
Status vocab_head_from_gguf(const GgufFile& f, const MatRef& head, Arena& tables, VocabHead* out);

// The stored default head (kFull with top 0 when the file names none); a name or count that is not
// one is kCorrupt.
Status vocab_head_default_from_gguf(const GgufFile& f, HeadMode* mode, int* top);

// The checks above on an already built VocabHead (also used by the board image reader).
Status check_vocab_head(const VocabHead& h, const MatRef& head, Arena& scratch);

}  // namespace mcullm
