#include "plan/instruction_table_host.h"

namespace mcullm {

namespace {

// Instructions per unit, per term. Fitted by tools/esp32s3-pie/fit_instr_table.py from the per-stage
// profiles of `tools/esp32s3-pie/profile_stages.sh` (Espressif's QEMU fork with fork-sim-pie.patch,
// -icount shift=0, prompt 1 403 407, greedy) of stories260K q4g64 and q8_0 (-n 16; q8_0 keeps w2 in
// f32), bit1M and the esp32-ai fixture (-n 12), on main 1b5abcd with branch instbound's
// profile_stages.py (mc_expf_rounded charged to its callers); docs/cost-model.md, "The instruction
// bound", has the commands and the check.
// `split`: the decoders hand the term's work to their thread pool (rows, heads, elements), so two
// cores share it; the rest runs on core 0 (norms, sampling, PLE rows, glue).
// A matvec kind measured on one shape: its per-weight / per-block figure is the assembly's loop
// (docs/firmware.md), the per-row figure is what the stage's total leaves.
const InstrTermInfo kTable[kInstrTermCount] = {
    {"q4e weights", 0.2812, true},
    {"q4e groups", 26.0, true},
    {"q4e rows", 36.44, true},
    {"q4g64 blocks", 47.0, true},
    {"q4g64 rows", 9.927, true},
    {"q8_0 blocks", 40.0, true},
    {"q8_0 rows", 18.35, true},
    {"i2_s weights", 0.4411, true},
    {"f32 weights", 13.73, true},
    {"f32 classifier weights", 8.094, true},
    {"quantized inputs", 39.72, true},  // split: blocks, and q4e's two passes; i2_s's (one scale) is not yet
    {"norm elements", 11.87, false},
    {"rope elements", 14.85, true},  // rotations only since the angle table (fixture profile, 2026-12-05 below)
    {"silu elements", 125.0, true},
    {"bitnet layer elements", 229.7, false},
    // After silu_mul's assembly (2026-12-05): the fixture's activation stage 256.8k in C (GELU's erf) plus
    // mcullm_silu_denominators 111.3k and mcullm_silu_gate 82.3k, over 2,874 elements (was 196.2).
    {"ple activation elements", 156.7, true},
    {"ple row elements", 86.47, false},
    // The attention terms: the slope of instructions per token over positions (board runner with PIE,
    // one core, 2026-12-05, after the divisions by one divisor, the padded int8 scores, softmax's
    // exponentials and the int8 values twelve outputs at a time): esp32-ai fixture as fx-g64.gguf
    // -n 254 (24 entries a position, head 32) and stories260K q4g64 -n 250 (40 entries, head 8), f32
    // and int8 KV; the two head sizes solved for a per-entry and a per-element figure
    // (docs/cost-model.md, "The instruction bound").
    {"attention entries", 190.8, true},
    {"attention entry dims", 8.506, true},
    {"attention entries (int8 KV)", 124.6, true},
    {"attention entry dims (int8 KV)", 5.145, true},
    {"logits", 20.04, false},
    // The two-stage head's parts besides its rows' matvec: the esp32-ai fixture as fx-g64.gguf (64
    // router groups of 128, top 12: 768 rows of 4,096), profile_stages.sh -n 6 --kv int8: attn_scores_q8_pie
    // with its divisions and dot 19.4k / 64 groups (2026-12-05, before the padded scores); then, after the
    // eight-store fill, the best-row scan left to the host tools and the copy split (the same day, later):
    // mcullm_fill_u32 4.6k / 4,096; visit_groups with its double compares 15.0k and grouped_head_logits 0.3k
    // / 768 rows; the copy to the tokens' places (grouped_head_logits' run_slices) 10.0k / 768 rows.
    {"router groups", 304.0, true},
    {"head -inf fill", 1.13, true},
    {"head row glue", 19.9, false},
    {"head row copy", 13.0, true},
    {"layers", 8353.0, false},
};

double ceil_div(int a, int b) { return static_cast<double>((a + b - 1) / b); }

}  // namespace

const InstrTermInfo& instr_term(InstrTerm t) { return kTable[static_cast<int>(t)]; }

void InstrUnits::add_matvec(DType type, int rows, int cols, int group, bool f32_activations) {
  const double r = rows, macs = r * cols;
  switch (type) {
    case DType::kQ4E:
      if (f32_activations || group <= 0) break;
      (*this)[InstrTerm::kQ4eMac] += macs;
      (*this)[InstrTerm::kQ4eGroup] += r * ceil_div(cols, group);
      (*this)[InstrTerm::kQ4eRow] += r;
      return;
    case DType::kQ4G64:
      if (f32_activations) break;
      (*this)[InstrTerm::kQ4g64Block] += r * ceil_div(cols, 64);
      (*this)[InstrTerm::kQ4g64Row] += r;
      return;
    case DType::kQ8_0:
      if (f32_activations) break;
      (*this)[InstrTerm::kQ8Block] += r * ceil_div(cols, 32);
      (*this)[InstrTerm::kQ8Row] += r;
      return;
    case DType::kI2_S:
      if (f32_activations) break;
      (*this)[InstrTerm::kI2sMac] += macs;
      return;
    case DType::kF32:
      (*this)[InstrTerm::kF32Mac] += macs;
      return;
    default: break;
  }
  const DTypeInfo* info = dtype_info(type);
  const std::string name = std::string(info ? info->name : "?") + (f32_activations ? " (f32 activations)" : "");
  if (unsupported.find(name) == std::string::npos) unsupported += (unsupported.empty() ? "" : ", ") + name;
}

double InstrUnits::instructions(int cores) const {
  double s = 0;
  for (int i = 0; i < kInstrTermCount; ++i) s += n[i] * kTable[i].per_unit / (kTable[i].split && cores > 1 ? cores : 1);
  return s;
}

double InstrUnits::elementwise_instructions(int cores) const {
  InstrUnits u;
  for (InstrTerm t : {InstrTerm::kNormElem, InstrTerm::kRopeElem, InstrTerm::kSiluElem, InstrTerm::kBitnetElem,
                      InstrTerm::kPleActElem, InstrTerm::kPleRowElem, InstrTerm::kLayer})
    u[t] = (*this)[t];
  return u.instructions(cores);
}

double InstrUnits::attention_entry_instructions(int head_dim, bool kv_int8, int cores) {
  InstrUnits u;
  u.add_attention(1.0, head_dim, kv_int8);
  return u.instructions(cores);
}

void InstrUnits::add_attention(double entries, int head_dim, bool kv_int8) {
  (*this)[kv_int8 ? InstrTerm::kAttnEntryQ8 : InstrTerm::kAttnEntry] += entries;
  (*this)[kv_int8 ? InstrTerm::kAttnEntryDimQ8 : InstrTerm::kAttnEntryDim] += entries * head_dim;
}

}  // namespace mcullm
