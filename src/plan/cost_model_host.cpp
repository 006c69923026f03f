#include "plan/cost_model_host.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "load/board_image_export_host.h"

namespace mcullm {

KernelKind kernel_kind_of(DType t) {
  switch (t) {
    case DType::kQ8_0: return KernelKind::kInt8;
    case DType::kQ4_0:
    case DType::kQ4G64:
    case DType::kQ4E: return KernelKind::kInt4;
    case DType::kTQ1_0:
    case DType::kTQ2_0:
    case DType::kI2_S:
    case DType::kTL1:
    case DType::kTL2: return KernelKind::kTernary;
    default: return KernelKind::kF32;
  }
}

namespace {

uint64_t q4e_scale_bytes_per_row(const MatRef& m) {
  return m.group > 0 ? 2ull * ((m.cols + m.group - 1) / m.group) : 0;
}
uint64_t row_bytes_of(const MatRef& m) {
  if (m.type == DType::kQ4E) return m.row_bytes + q4e_scale_bytes_per_row(m);
  return dtype_row_bytes(m.type, m.cols);
}
uint64_t bytes_of(const MatRef& m) {
  if (m.type == DType::kQ4E) return static_cast<uint64_t>(m.rows) * row_bytes_of(m);
  return dtype_tensor_bytes(m.type, m.rows, m.cols);
}

// One weight tensor: how it is read decides its placement rank (the board image's rule).
struct Entry {
  CostTensor t;
  uint64_t row_bytes = 0;  // the embedding row a tied head also serves
  int rank = 1;
  bool matvec = false;
};

// The stage a tensor belongs to, from its class and name.
Stage stage_of(TensorClass cls, const std::string& name) {
  switch (cls) {
    case TensorClass::kAttention:
    case TensorClass::kKvCache: return Stage::kAttention;
    case TensorClass::kFfn: return Stage::kFfn;
    case TensorClass::kHead: return Stage::kHead;
    case TensorClass::kEmbedding: return Stage::kInput;
    default: break;
  }
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("ple_model_proj") || has("ple_proj_norm") || has("ple_table")) return Stage::kInput;
  if (has("ple_")) return Stage::kPle;
  if (has("ffn")) return Stage::kFfn;
  if (has("out_norm")) return Stage::kHead;
  return Stage::kAttention;  // attention norms
}

struct Builder {
  std::vector<Entry> e;
  bool f32_act = false;
  int head_groups = 0, head_top = 0;
  int ffn_live_permille = 0;  // CostOptions::ffn_live_permille (ReLU models only: collect checks)
  InstrUnits instr;  // the token's instruction units without attention (added per position)
  bool inorder_head = false;  // an f32 head summed in order (BitNet llama2c)

  void norm(const std::string& name, int n) {
    instr[InstrTerm::kNormElem] += n;
    Entry x;
    x.t.name = name;
    x.t.cls = TensorClass::kNorm;
    x.t.stage = stage_of(x.t.cls, name);
    x.t.bytes = x.t.read_per_token = 4ull * n;
    x.rank = 0;
    e.push_back(x);
  }
  // Read in full every token (a layer matrix or an untied head); new_input: its input vector is not
  // the previous matrix's (quantized once for both).
  void mat(const std::string& name, const MatRef& m, TensorClass cls, int rank = 1, bool new_input = true) {
    Entry x;
    x.t.name = name;
    x.t.cls = cls;
    x.t.stage = stage_of(cls, name);
    x.t.kind = f32_act ? KernelKind::kF32 : kernel_kind_of(m.type);
    x.t.bytes = x.t.read_per_token = bytes_of(m);
    x.t.macs_per_token = static_cast<uint64_t>(m.rows) * m.cols;
    x.rank = rank;
    x.matvec = true;
    const double before = instr.instructions(), before2 = instr.instructions(2);
    if (new_input && !f32_act && kernel_kind_of(m.type) != KernelKind::kF32) instr[InstrTerm::kQuantElem] += m.cols;
    if (cls == TensorClass::kHead && head_groups > 0) {
      two_stage(&x, m);
    } else if (cls == TensorClass::kHead && inorder_head && m.type == DType::kF32) {
      instr.add_inorder_classifier(m.rows, m.cols);
    } else {
      instr.add_matvec(m.type, m.rows, m.cols, m.group, f32_act);
    }
    x.t.instructions = instr.instructions() - before;
    x.t.instructions_cores2 = instr.instructions(2) - before2;
    e.push_back(x);
  }
  // A two-stage head (model/vocab_head.h) as `mcullm head --write` stores it: every group's router
  // row (int8, cols + 8 bytes with its scale and bias; the f16 centroids, radius and maximum row
  // norm are stored too, 2 * cols + 8, for the pruned head) scores the groups, then the rows of the
  // best head_top groups (groups of equal size assumed) are computed.
  // Stored per group: the router row with its scale and bias, and the centroid, radius and bound.
  static uint64_t two_stage_group_bytes(int cols) { return (cols + 8ull) + (2ull * cols + 8); }
  void two_stage(Entry* x, const MatRef& m) {
    const uint64_t g = static_cast<uint64_t>(head_groups), top = std::min<uint64_t>(head_top, g);
    const uint64_t rows = (static_cast<uint64_t>(m.rows) * top + g - 1) / g;
    x->t.read_per_token = g * (m.cols + 8ull) + rows * row_bytes_of(m);
    x->t.bytes += g * two_stage_group_bytes(m.cols);
    x->t.macs_per_token = (g + rows) * m.cols;
    instr.add_matvec(m.type, static_cast<int>(rows), m.cols, m.group, f32_act);
    instr[InstrTerm::kRouterGroup] += static_cast<double>(g);
    instr[InstrTerm::kHeadFill] += m.rows;
    instr[InstrTerm::kHeadRowGlue] += static_cast<double>(rows);
    instr[InstrTerm::kHeadRowCopy] += static_cast<double>(rows);
  }
  // The FFN's up matrix: in full, or gate first only the live share of its rows (stored in full).
  void up(const std::string& name, const MatRef& m) {
    if (ffn_live_permille <= 0) {
      mat(name, m, TensorClass::kFfn, 1, false);
      return;
    }
    MatRef live = m;
    live.rows = static_cast<int>((static_cast<int64_t>(m.rows) * ffn_live_permille + 999) / 1000);
    mat(name, live, TensorClass::kFfn, 1, false);
    e.back().t.bytes = bytes_of(m);
  }
  // A table read one row per token (flash).
  void table(const std::string& name, const MatRef& m, TensorClass cls) {
    Entry x;
    x.t.name = name;
    x.t.cls = cls;
    x.t.stage = stage_of(cls, name);
    x.t.kind = kernel_kind_of(m.type);
    x.t.bytes = bytes_of(m);
    x.t.read_per_token = row_bytes_of(m);
    x.t.row_read = true;
    x.rank = kRankFlashOnly;
    e.push_back(x);
  }
  // A token embedding that is also the head (its first head_rows rows): read in full as the head
  // plus the embedding row.
  void tied(const std::string& name, const MatRef& m, int head_rows) {
    MatRef h = m;
    h.rows = head_rows;
    mat(name, h, TensorClass::kHead, 2);
    Entry& x = e.back();
    x.t.bytes = bytes_of(m);
    // A two-stage head keeps its own copy of the rows in group order, the centroids and the router.
    if (head_groups > 0) x.t.bytes += bytes_of(h) + static_cast<uint64_t>(head_groups) * two_stage_group_bytes(h.cols);
    x.row_bytes = row_bytes_of(m);
    x.t.read_per_token += x.row_bytes;
  }
  // The token embedding and the head: one tied matrix, or a row-read table and its own head.
  void embedding_and_head(bool tied_output, const MatRef& tok_emb, const MatRef& output, int head_rows) {
    if (tied_output) {
      tied("tok_emb", tok_emb, head_rows);
    } else {
      table("tok_emb", tok_emb, TensorClass::kEmbedding);
      mat("output", output, TensorClass::kHead, 2);
    }
  }
  template <typename L>
  void layer(const L& l, int i) {
    const std::string p = "layer" + std::to_string(i) + ".";
    mat(p + "wq", l.wq, TensorClass::kAttention);
    mat(p + "wk", l.wk, TensorClass::kAttention, 1, false);
    mat(p + "wv", l.wv, TensorClass::kAttention, 1, false);
    mat(p + "wo", l.wo, TensorClass::kAttention);
    mat(p + "w1", l.w1, TensorClass::kFfn);
    mat(p + "w2", l.w2, TensorClass::kFfn);
    up(p + "w3", l.w3);
  }
};

Status collect(const LoadedModel& m, Builder* b, LlamaConfig* cfg) {
  b->f32_act = m.f32_activations;
  const bool relu = (m.is(ArchFamily::kTransformer) && m.model.spec.act == FfnAct::kRelu && !m.model.spec.sub_norms) ||
                    (m.is(ArchFamily::kPle) && m.ple.cfg.relu_ffn);
  if (b->ffn_live_permille > 0 && !relu)
    return Status::Error(Code::kInvalidArgument, "cost model: an FFN live share is for a ReLU-gated model; this one is %s",
                         m.arch_name());
  if (m.is(ArchFamily::kTransformer)) {
    const TransformerModel& x = m.model;
    MC_TRY(x.check_shapes());
    *cfg = x.cfg;
    b->embedding_and_head(x.tied_output, x.tok_emb, x.output, cfg->vocab_size);
    b->norm("out_norm", cfg->dim);
    for (int l = 0; l < cfg->n_layers; ++l) {
      const std::string p = "layer" + std::to_string(l) + ".";
      b->norm(p + "attn_norm", cfg->dim);
      if (x.spec.sub_norms) b->norm(p + "attn_sub_norm", cfg->dim);
      b->norm(p + "ffn_norm", cfg->dim);
      if (x.spec.sub_norms) b->norm(p + "ffn_sub_norm", cfg->hidden_dim);
      if (x.spec.qkv_bias) b->norm(p + "qkv_bias", cfg->dim + 2 * cfg->kv_dim());  // read like norms: f32 vectors
      b->layer(x.layers[l], l);
    }
    b->instr[InstrTerm::kSiluElem] += static_cast<double>(cfg->n_layers) * cfg->hidden_dim;
  } else if (m.is(ArchFamily::kBitLlama2c)) {
    const BitLlama2cModel& x = m.bitnet;
    MC_TRY(x.check_shapes());
    *cfg = x.cfg;
    b->inorder_head = true;
    b->tied("tok_emb", x.tok_emb, x.cfg.vocab_size);
    b->norm("out_norm", x.cfg.dim);
    for (int l = 0; l < x.cfg.n_layers; ++l) b->layer(x.layers[l], l);
    b->instr[InstrTerm::kBitnetElem] += static_cast<double>(cfg->n_layers) * cfg->hidden_dim;
  } else if (m.is(ArchFamily::kPle)) {
    const PleModel& x = m.ple;
    MC_TRY(x.check_shapes());
    const PleConfig& c = x.cfg;
    *cfg = c.base();
    // The PLE stage's tensors are class kOther (printed "ple").
    b->embedding_and_head(c.tied_head, x.tok_emb, x.output, c.output_vocab);
    b->mat("ple_model_proj", x.ple_model_proj, TensorClass::kOther);
    b->norm("ple_proj_norm", c.ple_dim);
    b->table("ple_table", x.ple_table, TensorClass::kOther);
    b->norm("out_norm", c.dim);
    for (int l = 0; l < c.n_layers; ++l) {
      const PleLayer& L = x.layers[l];
      const std::string p = "layer" + std::to_string(l) + ".";
      b->norm(p + "attn_norm", c.dim);
      b->norm(p + "ffn_norm", c.dim);
      b->norm(p + "ple_norm", c.dim);
      b->mat(p + "qkv", L.qkv, TensorClass::kAttention);
      b->mat(p + "attn_proj", L.attn_proj, TensorClass::kAttention);
      b->mat(p + "gate", L.gate, TensorClass::kFfn);
      b->up(p + "up", L.up);
      b->mat(p + "down", L.down, TensorClass::kFfn);
      b->mat(p + "ple_gate", L.ple_gate, TensorClass::kOther);
      b->mat(p + "ple_proj", L.ple_proj, TensorClass::kOther);
    }
    b->instr[InstrTerm::kPleActElem] += static_cast<double>(c.n_layers) * (c.ffn + c.ple_dim);
    b->instr[InstrTerm::kPleRowElem] += static_cast<double>(c.n_layers) * c.ple_dim;
  } else {
    return Status::Error(Code::kUnsupported, "cost model: architecture %s", m.arch_name());
  }
  b->instr[InstrTerm::kRopeElem] += static_cast<double>(cfg->n_layers) * (cfg->dim + cfg->kv_dim());
  // Greedy sampling reads every logit, or with a two-stage head only its top groups' rows (the
  // candidates, Decoder::logit_candidates; equal groups assumed; the head's -inf fill: two_stage()).
  double sampled = cfg->vocab_size;
  if (b->head_groups > 0) sampled = std::ceil(sampled * std::min(b->head_top, b->head_groups) / b->head_groups);
  b->instr[InstrTerm::kLogit] += sampled;
  b->instr[InstrTerm::kLayer] += cfg->n_layers;
  return Status::Ok();
}

const char* class_label(TensorClass c) { return c == TensorClass::kOther ? "ple" : tensor_class_name(c); }

std::string human_list(std::vector<const CostTensor*> v) {
  std::sort(v.begin(), v.end(), [](const CostTensor* a, const CostTensor* b) { return a->bytes > b->bytes; });
  std::string s;
  for (size_t i = 0; i < v.size() && i < 3; ++i)
    s += (i ? ", " : "") + v[i]->name + " (" + std::to_string(v[i]->bytes) + " bytes)";
  return s;
}

std::string overflow_msg(const char* tier, const std::string& what, uint64_t need, uint64_t have, const std::string& largest) {
  std::string s = std::string(tier) + " overflows: " + what + " needs " + std::to_string(need) + " bytes, " + tier +
                  " has " + std::to_string(have);
  if (!largest.empty()) s += "; largest there: " + largest;
  return s;
}

}  // namespace

const char* stage_name(Stage s) {
  static const char* const names[kStageCount] = {"input", "attn", "ffn", "ple", "head"};
  const int i = static_cast<int>(s);
  return i >= 0 && i < kStageCount ? names[i] : "?";
}

double stage_seconds(const StageWork& w, const BoardProfile& b) {
  const int core = w.cores >= 2 ? 1 : 0;
  double memory = 0, streamed = 0, stalled = 0;
  for (int t = static_cast<int>(Tier::kPsram); t <= static_cast<int>(Tier::kFlash); ++t)
    memory += w.bytes[t] / b.tiers[t].read_bytes_per_s[core];
  for (int k = 0; k < kKernelKindCount; ++k) {
    const double s = w.macs[k] / b.macs_per_s[k][core];
    (kernel_overlaps_memory(static_cast<KernelKind>(k)) ? streamed : stalled) += s;
  }
  const double handoff = core ? (w.handoff_s >= 0 ? w.handoff_s : b.handoff_s) : 0;
  return std::max(memory, streamed) + stalled + w.matvecs * (b.matvec_cycles / b.clock_hz + handoff) +
         w.attn_entries * (w.entry_cycles >= 0 ? w.entry_cycles : b.attn_entry_cycles) / b.clock_hz / (core + 1);
}

Status cost_model(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt, CostReport* out) {
  if (opt.threads != 1 && opt.threads != 2) return Status::Error(Code::kInvalidArgument, "cost model: threads must be 1 or 2");
  if (opt.kv_bytes != 1 && opt.kv_bytes != 2 && opt.kv_bytes != 4)
    return Status::Error(Code::kInvalidArgument, "cost model: KV cache bytes per element must be 1, 2 or 4");
  if (opt.head_groups < 0 || opt.head_groups > 65536 || opt.head_top < 0 || (opt.head_groups > 0 && opt.head_top < 1))
    return Status::Error(Code::kInvalidArgument, "cost model: a two-stage head needs 1..65536 groups and a top >= 1");
  Builder b;
  b.head_groups = opt.head_groups;
  b.head_top = opt.head_top;
  if (opt.ffn_live_permille < 0 || opt.ffn_live_permille > 1000)
    return Status::Error(Code::kInvalidArgument, "cost model: an FFN live share of %d per mille is not in 0..1000", opt.ffn_live_permille);
  b.ffn_live_permille = opt.ffn_live_permille;
  LlamaConfig c;
  MC_TRY(collect(model, &b, &c));
  const int ctx = opt.ctx_len > 0 ? opt.ctx_len : c.seq_len;
  if (ctx <= 0 || ctx > (1 << 24)) return Status::Error(Code::kInvalidArgument, "cost model: context %d out of range", ctx);
  const int pos = opt.pos < 0 ? ctx - 1 : opt.pos;
  if (pos >= ctx) return Status::Error(Code::kInvalidArgument, "cost model: position %d outside the context of %d", pos, ctx);
  CostReport r;
  r.ctx_len = ctx;
  r.pos = pos;
  const uint64_t sram = board.tiers[0].capacity_bytes, psram = board.tiers[1].capacity_bytes;

  // Buffers first: activations in SRAM, the KV cache in SRAM beside them if it fits, else PSRAM.
  const uint64_t act = 4ull * (4ull * c.dim + 3ull * c.hidden_dim + c.vocab_size + static_cast<uint64_t>(c.n_heads) * ctx);
  // Keys + values of one position and layer: the model's own KV type (int8 with its scales under --kv int8),
  // else opt.kv_bytes per element (predictions for caches the engine was not loaded with).
  const bool kv_int8 = model.kv == KvType::kInt8 || opt.kv_bytes == 1;
  const uint64_t kv_row = model.kv == KvType::kInt8 ? kv_bytes_per_layer_position(c, model.kv)
                                                    : 2ull * c.kv_dim() * static_cast<uint64_t>(opt.kv_bytes);
  // The RoPE angle table (transformer.h's DecoderState: every position's angles, computed at start) sits with it.
  const uint64_t kv = kv_row * c.n_layers * ctx + rope_table_bytes(c, ctx);
  Tier kv_tier = act + kv <= sram ? Tier::kSram : Tier::kPsram;
  r.placed[static_cast<int>(Tier::kSram)] += act;
  r.placed[static_cast<int>(kv_tier)] += kv;
  if (act > sram) {
    r.fits = false;
    r.overflow = overflow_msg("sram", "the activations", act, sram, "");
  } else if (kv_tier == Tier::kPsram && kv > psram) {
    r.fits = false;
    r.overflow = overflow_msg("psram", "the KV cache for " + std::to_string(ctx) + " positions", kv, psram, "");
  }

  // Then the weights, by the board image's rule, in what is left.
  std::vector<PlacementItem> items;
  for (const Entry& x : b.e) items.push_back({x.t.bytes, x.rank, Tier::kFlash});
  const uint64_t sram_left = sram - std::min(sram, r.placed[0]);
  const uint64_t psram_left = psram - std::min(psram, r.placed[1]);
  place_in_tiers(&items, sram_left, psram_left);
  uint64_t weights = 0;
  for (int s = 0; s < kStageCount; ++s) r.work[s].cores = opt.threads;
  for (size_t i = 0; i < b.e.size(); ++i) {
    CostTensor t = b.e[i].t;
    t.tier = items[i].tier;
    const int ti = static_cast<int>(t.tier);
    const uint64_t row = b.e[i].row_bytes;  // a tied head's embedding row: the input stage's
    r.placed[ti] += t.bytes;
    r.read[ti] += t.read_per_token;
    r.read_by_class[static_cast<int>(t.cls)][ti] += t.read_per_token - row;
    r.read_by_class[static_cast<int>(TensorClass::kEmbedding)][ti] += row;
    r.macs[static_cast<int>(t.kind)] += t.macs_per_token;
    StageWork& w = r.work[static_cast<int>(t.stage)];
    w.bytes[ti] += static_cast<double>(t.read_per_token - row);
    r.work[static_cast<int>(Stage::kInput)].bytes[ti] += static_cast<double>(row);
    w.macs[static_cast<int>(t.kind)] += static_cast<double>(t.macs_per_token);
    w.matvecs += b.e[i].matvec ? 1 : 0;
    weights += t.bytes;
    r.tensors.push_back(t);
  }
  // The image (every weight) is stored in flash, in the board's image partition; SRAM and PSRAM
  // copies are made at boot.
  const uint64_t flash = board.tiers[2].capacity_bytes, room = std::min(flash, board.image_bytes_max);
  if (r.fits && weights > room) {
    std::vector<const CostTensor*> all;
    for (const CostTensor& t : r.tensors) all.push_back(&t);
    r.fits = false;
    r.overflow = overflow_msg(room < flash ? "image partition" : "flash", "the model image", weights, room, human_list(all));
  }

  // The KV cache read by the token at `pos`: keys and values of positions 0..pos, every layer.
  CostTensor kvt;
  kvt.name = "kv_cache";
  kvt.cls = TensorClass::kKvCache;
  kvt.stage = Stage::kAttention;
  kvt.tier = kv_tier;
  kvt.kind = kv_int8 && !model.f32_activations ? KernelKind::kInt8 : KernelKind::kF32;
  kvt.bytes = kv;
  kvt.read_per_token = kv_row * c.n_layers * (pos + 1);
  kvt.macs_per_token = 2ull * c.n_layers * (pos + 1) * c.n_heads * c.head_dim();
  r.read[static_cast<int>(kv_tier)] += kvt.read_per_token;
  r.read_by_class[static_cast<int>(TensorClass::kKvCache)][static_cast<int>(kv_tier)] += kvt.read_per_token;
  r.macs[static_cast<int>(kvt.kind)] += kvt.macs_per_token;
  StageWork& att = r.work[static_cast<int>(Stage::kAttention)];
  att.bytes[static_cast<int>(kv_tier)] += static_cast<double>(kvt.read_per_token);
  att.macs[static_cast<int>(kvt.kind)] += static_cast<double>(kvt.macs_per_token);
  att.attn_entries = static_cast<double>(c.n_layers) * c.n_heads * (pos + 1);
  r.tensors.push_back(kvt);

  const int core = opt.threads - 1;
  for (int t = 1; t < 3; ++t) r.memory_s += r.read[t] / board.tiers[t].read_bytes_per_s[core];
  for (int k = 0; k < kKernelKindCount; ++k) r.compute_s += r.macs[k] / board.macs_per_s[k][core];
  for (int s = 0; s < kStageCount; ++s) r.token_s += r.stage_s[s] = stage_seconds(r.work[s], board);
  r.tokens_per_s = 1.0 / r.token_s;
  r.instr = b.instr;
  r.instr.add_attention(att.attn_entries, c.head_dim(), kv_int8);
  r.instructions = r.instr.instructions(opt.threads);
  r.instr_cores = opt.threads;
  r.instr_s = r.instr.unsupported.empty() ? r.instructions / board.clock_hz : 0;
  *out = std::move(r);
  return Status::Ok();
}

std::string format_cost_report(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt,
                               const CostReport& r) {
  std::string s;
  char line[256];
  const CostTensor& kv = r.tensors.back();
  std::snprintf(line, sizeof line, "board: %s, %d core(s); model %s (%s); context %d, token at position %d; KV cache in %s\n",
                board.name.c_str(), opt.threads, model.path.c_str(), model.arch_name(), r.ctx_len, r.pos,
                tier_name(kv.tier));
  s += line;
  std::snprintf(line, sizeof line, "%-10s %14s %14s %14s %10s\n", "tier", "capacity", "placed_bytes",
                "read_per_token", "read_ms");
  s += line;
  for (int t = 0; t < 3; ++t) {
    std::snprintf(line, sizeof line, "%-10s %14llu %14llu %14llu %10.3f\n", tier_name(static_cast<Tier>(t)),
                  static_cast<unsigned long long>(board.tiers[t].capacity_bytes),
                  static_cast<unsigned long long>(r.placed[t]), static_cast<unsigned long long>(r.read[t]),
                  1e3 * r.read[t] / board.tiers[t].read_bytes_per_s[opt.threads - 1]);
    s += line;
  }
  std::snprintf(line, sizeof line, "%-10s %14s %14s %14s   (bytes read per token)\n", "class", "sram", "psram", "flash");
  s += line;
  for (int c = 0; c < kClassCount; ++c) {
    const uint64_t* v = r.read_by_class[c];
    if (v[0] + v[1] + v[2] == 0) continue;
    std::snprintf(line, sizeof line, "%-10s %14llu %14llu %14llu\n", class_label(static_cast<TensorClass>(c)),
                  static_cast<unsigned long long>(v[0]), static_cast<unsigned long long>(v[1]),
                  static_cast<unsigned long long>(v[2]));
    s += line;
  }
  s += "compute (MAC per token):";
  for (int k = 0; k < kKernelKindCount; ++k)
    if (r.macs[k]) {
      std::snprintf(line, sizeof line, " %s %llu", kernel_kind_name(static_cast<KernelKind>(k)),
                    static_cast<unsigned long long>(r.macs[k]));
      s += line;
    }
  std::snprintf(line, sizeof line, "\n%-8s %12s %12s %12s %12s %8s %9s\n", "stage", "sram_read", "psram_read",
                "flash_read", "macs", "matvecs", "ms");
  s += line;
  for (int st = 0; st < kStageCount; ++st) {
    const StageWork& w = r.work[st];
    double macs = 0;
    for (double m : w.macs) macs += m;
    std::snprintf(line, sizeof line, "%-8s %12.0f %12.0f %12.0f %12.0f %8.0f %9.3f\n", stage_name(static_cast<Stage>(st)),
                  w.bytes[0], w.bytes[1], w.bytes[2], macs, w.matvecs, 1e3 * r.stage_s[st]);
    s += line;
  }
  std::snprintf(line, sizeof line,
                "predicted: %.3f ms per token -> %.1f tok/s (PSRAM+flash reads %.3f ms, MACs %.3f ms before overlap)\n",
                1e3 * r.token_s, r.tokens_per_s, 1e3 * r.memory_s, 1e3 * r.compute_s);
  s += line;
  s += r.fits ? "fits: yes\n" : "fits: NO: " + r.overflow + "\n";
  s += format_instruction_bound(board, r);
  return s;
}

std::string format_instruction_bound(const BoardProfile& board, const CostReport& r) {
  std::string s = "instruction bound (emulated ESP32-S3 with PIE, the board runner; " + std::to_string(r.instr_cores) +
                  " core(s)" + (r.instr_cores > 1 ? ": the split terms (*) halved, the busier core's instructions" : "") +
                  "):\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-26s %14s %10s %14s\n", "term", "units", "instr/unit", "instructions");
  s += line;
  for (int i = 0; i < kInstrTermCount; ++i) {
    const InstrTermInfo& t = instr_term(static_cast<InstrTerm>(i));
    if (r.instr.n[i] == 0) continue;
    std::snprintf(line, sizeof line, "%-26s %14.0f %10.3f %14.0f\n", (std::string(t.name) + (t.split ? " *" : "")).c_str(),
                  r.instr.n[i], t.per_unit, r.instr.n[i] * t.per_unit);
    s += line;
  }
  if (!r.instr.unsupported.empty()) return s + "no instruction bound: no emulated figure for " + r.instr.unsupported + "\n";
  const double bytes_s = r.memory_s;
  std::snprintf(line, sizeof line,
                "bounds: bytes %.3f ms (%.1f tok/s), instructions %.0f = %.3f ms at %.0f MHz (%.1f tok/s): the %s bind\n",
                1e3 * bytes_s, bytes_s > 0 ? 1.0 / bytes_s : 0.0, r.instructions, 1e3 * r.instr_s, board.clock_hz / 1e6,
                1.0 / r.instr_s, r.instructions_bind() ? "instructions" : "bytes");
  return s + line;
}

Status format_position_table(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt,
                             std::string* out) {
  CostOptions o = opt;
  CostReport r;
  o.pos = 0;
  MC_TRY(cost_model(model, board, o, &r));
  const int ctx = r.ctx_len;
  char line[256];
  std::string s = "ms per stage by position (" + board.name + ", " + std::to_string(opt.threads) + " core(s)):\n";
  std::snprintf(line, sizeof line, "%8s %8s %8s %8s %8s %8s %9s %8s %10s %10s %6s\n", "pos", "input", "attn", "ffn", "ple",
                "head", "total_ms", "tok/s", "bytes_tok/s", "instr_tok/s", "binds");
  s += line;
  const int positions[5] = {0, ctx / 4, ctx / 2, 3 * ctx / 4, ctx - 1};
  for (int i = 0; i < 5; ++i) {
    if (i > 0 && positions[i] == positions[i - 1]) continue;
    o.pos = positions[i];
    MC_TRY(cost_model(model, board, o, &r));
    std::snprintf(line, sizeof line, "%8d %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f %8.1f %10.1f %10.1f %6s\n", o.pos,
                  1e3 * r.stage_s[0], 1e3 * r.stage_s[1], 1e3 * r.stage_s[2], 1e3 * r.stage_s[3], 1e3 * r.stage_s[4],
                  1e3 * r.token_s, r.tokens_per_s, r.memory_s > 0 ? 1.0 / r.memory_s : 0.0, r.instr_s > 0 ? 1.0 / r.instr_s : 0.0,
                  r.instr_s <= 0 ? "-" : r.instructions_bind() ? "instr" : "bytes");
    s += line;
  }
  // A run that fills the context: the mean time of positions 0..ctx-1 (every position up to 1024,
  // else 1024 evenly spaced), the figure the published tokens/s of a whole run compare with.
  const int step = ctx <= 1024 ? 1 : ctx / 1024;
  double sum = 0, bytes = 0, instr = 0, bound = 0;
  int n = 0;
  for (int p = 0; p < ctx; p += step, ++n) {
    o.pos = p;
    MC_TRY(cost_model(model, board, o, &r));
    sum += r.token_s;
    bytes += r.memory_s;
    instr += r.instr_s;
    bound += std::max(r.memory_s, r.instr_s);
  }
  std::snprintf(line, sizeof line, "mean over positions 0..%d: %.3f ms per token -> %.1f tok/s\n", ctx - 1, 1e3 * sum / n,
                n / sum);
  s += line;
  if (r.instr_s > 0) {
    std::snprintf(line, sizeof line,
                  "bounds, mean over positions 0..%d: bytes %.1f tok/s, instructions (%d core(s)) %.1f tok/s; the larger "
                  "time of the two: %.1f tok/s (the %s bind)\n",
                  ctx - 1, n / bytes, opt.threads, n / instr, n / bound, instr > bytes ? "instructions" : "bytes");
    s += line;
  }
  *out = s;
  return Status::Ok();
}

}  // namespace mcullm
