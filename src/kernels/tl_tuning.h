// Stored LUT-kernel tilings (`mcullm tune` writes them, `--use-pretuned` reads them): per weight
// shape, the BM / BK / bm measured fastest on a machine. Freestanding: a fixed-size table.
//
// Text format, one record a line ('#' starts a comment line; blank lines are skipped):
//   mcullm-tl-tuning 1                 the first record: format name and version
//   tl2 768 768 256 96 32              type M K BM BK bm (decimal, each tiling valid for its shape)
// At most kTlTuningMax records, one per (type, M, K), lines of at most 255 bytes, printable ASCII.
#pragma once
#include <stddef.h>

#include "mcullm/status.h"
#include "quant/ternary.h"

namespace mcullm {

constexpr int kTlTuningMax = 64;

struct TlTuningEntry {
  TlType type = TlType::kTL2;
  int M = 0, K = 0;
  TlTiling tiling;
};

struct TlTuningTable {
  TlTuningEntry entries[kTlTuningMax];
  int count = 0;
};

// Parses the text form; on error the table is left empty and the status names the line.
Status tl_tuning_parse(const char* text, size_t len, TlTuningTable* out);
// Writes the text form into buf (NUL-terminated); false when it does not fit.
bool tl_tuning_format(const TlTuningTable& table, char* buf, size_t cap);
// Adds or replaces the record of (type, M, K); false when the table is full or the tiling invalid.
bool tl_tuning_put(TlTuningTable* table, TlType type, int M, int K, const TlTiling& t);
const TlTuningEntry* tl_tuning_find(const TlTuningTable& table, TlType type, int M, int K);

// The process-wide stored tilings (nullptr: none). The table must outlive its use.
void tl_set_pretuned(const TlTuningTable* table);
// The tiling the model layer should pack / load a (type, M, K) tensor with: the stored one when
// set and present, else tl_default_tiling (BM == 0 when no tiling fits the shape).
TlTiling tl_tiling_for(TlType type, int M, int K);

}  // namespace mcullm
