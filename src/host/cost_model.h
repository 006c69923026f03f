// The cost model: bytes each generated token reads from each memory tier, per tensor class, and the
// predicted speed on a board (host/board_profile.h) = 1 / max(memory time, compute time).
//
// Placement: the buffers first (activations in SRAM; the KV cache for the whole context in SRAM when
// it fits beside them, else PSRAM), then the weights by the board image's rule (place_in_tiers,
// host/board_image_export.h) in what SRAM and PSRAM have left: tensors read in full every token
// (norms, layer matrices, head) fill SRAM then PSRAM; tables read one row per token (an untied token
// embedding, the PLE table) stay in flash.
// Per token: every norm, layer matrix and the head in full, one row of each row-read table, and the
// KV cache's rows 0..pos of every layer (keys and values, f32).
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

#include "host/board_profile.h"
#include "host/model_loader.h"

namespace mcullm {

struct CostTensor {
  std::string name;
  TensorClass cls = TensorClass::kOther;
  Tier tier = Tier::kFlash;
  KernelKind kind = KernelKind::kF32;
  uint64_t bytes = 0;           // stored
  uint64_t read_per_token = 0;  // read by one generated token
  uint64_t macs_per_token = 0;
  bool row_read = false;        // one row per token (a table)
};

struct CostOptions {
  int ctx_len = 0;   // the KV cache's length (0: the model's)
  int pos = -1;      // the position of the predicted token (-1: ctx_len - 1, the worst case)
  int threads = 1;   // 1 or 2 cores
};

struct CostReport {
  std::vector<CostTensor> tensors;  // weights and the KV cache
  uint64_t placed[kTierCount] = {};  // weight and buffer bytes per tier
  uint64_t read[kTierCount] = {};    // bytes read per token per tier
  uint64_t read_by_class[kClassCount][kTierCount] = {};
  uint64_t macs[kKernelKindCount] = {};
  double memory_s = 0, compute_s = 0, tokens_per_s = 0;
  int ctx_len = 0, pos = 0;  // as used
  bool fits = true;
  std::string overflow;  // what does not fit, when !fits
};

Status cost_model(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt, CostReport* out);

// The table `mcullm plan` prints.
std::string format_cost_report(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt,
                               const CostReport& r);

}  // namespace mcullm
