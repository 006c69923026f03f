// The cost model's instruction bound: instructions per generated token of our board runner on the
// emulated ESP32-S3 with the PIE kernels (one core), as a sum over terms of units (from the model's
// shapes) times instructions per unit (a constant table fitted to emulated per-stage profiles;
// docs/cost-model.md, "The instruction bound", says which runs and how).
//
// Instructions, not cycles: the bound is instructions / clock (one instruction per cycle, no stall),
// so a token takes at least that long. On two cores the terms the thread pool splits are halved and
// the rest stays on core 0: the busier core's instructions (the board runner's cores=2 on the
// emulated S3 measures that critical path; docs/cost-model.md compares the two).
#pragma once
#include <string>

#include "quant/dtype.h"

namespace mcullm {

enum class InstrTerm : int {
  kQ4eMac = 0,   // q4e (int8 activations, PIE): per weight
  kQ4eGroup,     //   per scale group of a row
  kQ4eRow,       //   per row (and its share of the call)
  kQ4g64Block,   // q4g64 (PIE): per 64-weight block
  kQ4g64Row,
  kQ8Block,      // q8_0 (PIE): per 32-weight block
  kQ8Row,
  kI2sMac,       // i2_s ternary (PIE): per weight
  kF32Mac,       // f32 (scalar, matvec_f32_ref's lanes): per weight
  kF32ClassifierMac,  // f32 in-order classifier (the BitNet llama2c head): per weight
  kQuantElem,    // activation quantization to int8: per element of a distinct matvec input
  kNormElem,     // rmsnorm: per element
  kRopeElem,     // RoPE: per element of q and k
  kSiluElem,     // llama SwiGLU (SiLU and gate): per hidden element
  kBitnetElem,   // BitNet llama2c layer body (SiLU gate, norms, residuals): per hidden element
  kPleActElem,   // esp32-ai PLE: GELU and gate per FFN element plus the PLE gate's SiLU per PLE element
  kPleRowElem,   // PLE rows and their glue: per PLE element per layer
  kAttnEntry,    // attention over the f32 KV cache: per (head, position) entry (score, softmax, value glue)
  kAttnEntryDim, //   per entry and element of the head (score and value MACs)
  kAttnEntryQ8,  // attention over the int8 KV cache (PIE scores, scalar values): per entry
  kAttnEntryDimQ8, //   per entry and element of the head
  kLogit,        // sampling (greedy argmax or candidates) per logit
  kRouterGroup,  // two-stage head: the router's int8 score of one group (PIE dot, its scale and bias)
  kHeadFill,     // two-stage head: -inf into every logit the top groups do not give, per vocabulary entry
  kHeadRowGlue,  // two-stage head: per row of the top groups (the group walk and selection, core 0)
  kHeadRowCopy,  // two-stage head: per row of the top groups (its logit to its token's place, split)
  kLayer,        // per layer: the decoder glue
  kCount
};
constexpr int kInstrTermCount = static_cast<int>(InstrTerm::kCount);

struct InstrTermInfo {
  const char* name;
  double per_unit;  // instructions per unit (the fitted table)
  bool split;       // shared by the cores (the pool's tasks split it)
};
const InstrTermInfo& instr_term(InstrTerm t);

// The units of one token; `unsupported` names a matvec kind the table has no emulated figure for
// (e.g. q4e with f32 activations, q4_0, tl1): its bound is then not given.
struct InstrUnits {
  double n[kInstrTermCount] = {};
  std::string unsupported;
  double& operator[](InstrTerm t) { return n[static_cast<int>(t)]; }
  double operator[](InstrTerm t) const { return n[static_cast<int>(t)]; }
  // One matvec of rows x cols of this type (group: q4e's scale group) and its activation width.
  void add_matvec(DType type, int rows, int cols, int group, bool f32_activations);
  // The BitNet llama2c head: f32, summed in order (its C reader's order), not matvec_f32_ref.
  void add_inorder_classifier(int rows, int cols) { (*this)[InstrTerm::kF32ClassifierMac] += static_cast<double>(rows) * cols; }
  // Sum of units x per_unit on the busier of `cores` (1 or 2) cores: the split terms divided.
  double instructions(int cores = 1) const;
  // Of it: the per-layer work besides matvecs and attention (norms, RoPE, activations, PLE rows, glue).
  double elementwise_instructions(int cores = 1) const;
  // Attention's instructions per (head, position) entry for heads of head_dim, f32 or int8 KV cache.
  static double attention_entry_instructions(int head_dim, bool kv_int8, int cores = 1);
  // entries (head, position) of attention into the f32 or int8 KV terms.
  void add_attention(double entries, int head_dim, bool kv_int8);
};

}  // namespace mcullm
