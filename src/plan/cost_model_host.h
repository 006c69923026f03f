// The cost model: bytes each generated token reads from each memory tier, per tensor class and per
// stage (input, attention, FFN, PLE, head), and the predicted time of each stage on a board
// (plan/board_profile_host.h). The equations, the calibration and its limits: docs/cost-model.md.
//
// Placement: the buffers first (activations in SRAM; the KV cache for the whole context in SRAM when
// it fits beside them, else PSRAM), then the weights by the board image's rule (place_in_tiers,
// load/board_image_export_host.h) in what SRAM and PSRAM have left: tensors read in full every token
// (norms, layer matrices, head) fill SRAM then PSRAM; tables read one row per token (an untied token
// embedding, the PLE table) stay in flash.
// Per token: every norm, layer matrix and the head in full (or, with a two-stage head, the group
// centroids and the rows of the best groups), one row of each row-read table, and the KV cache's
// rows 0..pos of every layer (keys and values).
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

#include "plan/board_profile_host.h"
#include "plan/instruction_table_host.h"
#include "load/model_loader_host.h"

namespace mcullm {

enum class Stage : int { kInput = 0, kAttention, kFfn, kPle, kHead, kCount };
constexpr int kStageCount = static_cast<int>(Stage::kCount);
const char* stage_name(Stage s);  // input, attn, ffn, ple, head

// The kernel kind that multiplies weights of this type (f32 for types without an integer kernel).
KernelKind kernel_kind_of(DType t);

// The work of one stage of one token: what the time model needs.
struct StageWork {
  int cores = 1;
  double bytes[kTierCount] = {};          // weights and KV cache read
  double macs[kKernelKindCount] = {};
  double matvecs = 0;                     // matvec calls (each split over the cores)
  double attn_entries = 0;                // (head, position) pairs of attention
  double handoff_s = -1;                  // per matvec on two cores; < 0: the board's
  double entry_cycles = -1;               // per attention entry; < 0: the board's
};
// Seconds of one stage (docs/cost-model.md, "Equations"):
//   memory     = sum over PSRAM and flash of bytes / bandwidth(tier, cores)
//   streamed   = MACs of PIE kinds / rate(kind, cores)       (hidden under memory)
//   stalled    = MACs of the other kinds / rate(kind, cores) (added)
//   t = max(memory, streamed) + stalled + matvecs * (matvec_cycles / clock + hand-off on 2 cores)
//       + attn_entries * attn_entry_cycles / clock / cores
// SRAM reads are not added: the kernels' cycles per MAC are measured with operands in SRAM.
double stage_seconds(const StageWork& w, const BoardProfile& b);

struct CostTensor {
  std::string name;
  TensorClass cls = TensorClass::kOther;
  Stage stage = Stage::kInput;
  Tier tier = Tier::kFlash;
  KernelKind kind = KernelKind::kF32;
  uint64_t bytes = 0;           // stored
  uint64_t read_per_token = 0;  // read by one generated token
  uint64_t macs_per_token = 0;
  bool row_read = false;        // one row per token (a table)
  double instructions = 0;      // of its matvec (and its input's quantization), by the instruction table
  double instructions_cores2 = 0;  // the same on the busier of two cores
};

struct CostOptions {
  int ctx_len = 0;      // the KV cache's length (0: the model's)
  int pos = -1;         // the position of the predicted token (-1: ctx_len - 1, the worst case)
  int threads = 1;      // 1 or 2 cores
  int kv_bytes = 4;     // bytes per KV cache element: 4 (f32, the engine's today), 2 or 1 (int8)
  int head_groups = 0;  // > 0: a two-stage head of this many groups (`mcullm head`)...
  int head_top = 0;     // ...reading the rows of this many best groups
  // > 0: a ReLU model's FFN gate first with its down rows read whole (model/sparse_ffn.h, the
  // firmware's default): only this many up rows per mille of the neurons are read and multiplied
  // (the live share, e.g. from `mcullm eval`'s dead share). 0: dense.
  int ffn_live_permille = 0;
};

struct CostReport {
  std::vector<CostTensor> tensors;  // weights and the KV cache
  uint64_t placed[kTierCount] = {};  // weight and buffer bytes per tier
  uint64_t read[kTierCount] = {};    // bytes read per token per tier
  uint64_t read_by_class[kClassCount][kTierCount] = {};
  uint64_t macs[kKernelKindCount] = {};
  StageWork work[kStageCount];
  double stage_s[kStageCount] = {};
  double memory_s = 0, compute_s = 0;  // PSRAM + flash time; MAC time (for the summary line)
  double token_s = 0, tokens_per_s = 0;
  // The two lower bounds of a token's time: bytes (memory_s: PSRAM and flash reads at the tiers'
  // bandwidth) and instructions (instr_s: the emulated instruction count at the clock, on the busier core;
  // 0 when instr.unsupported names a kernel without an emulated figure).
  InstrUnits instr;
  double instructions = 0, instr_s = 0;  // on the busier of instr_cores cores
  int instr_cores = 1;
  bool instructions_bind() const { return instr_s > memory_s; }
  int ctx_len = 0, pos = 0;  // as used
  bool fits = true;
  std::string overflow;  // what does not fit, when !fits: the tier, bytes needed vs available, the largest tensors
};

Status cost_model(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt, CostReport* out);

// The table `mcullm plan` prints.
std::string format_cost_report(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt,
                               const CostReport& r);
// The instruction bound's terms and both bounds (part of format_cost_report).
std::string format_instruction_bound(const BoardProfile& board, const CostReport& r);
// ms per stage and tokens/s at a few positions of the context (0, 1/4, 1/2, 3/4, last).
Status format_position_table(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt,
                             std::string* out);

}  // namespace mcullm
