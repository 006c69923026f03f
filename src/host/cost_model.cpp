#include "host/cost_model.h"

#include <algorithm>
#include <cstdio>

#include "host/board_image_export.h"

namespace mcullm {

namespace {

KernelKind kind_of(DType t) {
  switch (t) {
    case DType::kQ8_0: return KernelKind::kInt8;
    case DType::kQ4_0:
    case DType::kQ4G64:
    case DType::kQ4E: return KernelKind::kInt4;
    case DType::kTQ1_0:
    case DType::kTQ2_0:
    case DType::kI2_S: return KernelKind::kTernary;
    default: return KernelKind::kF32;
  }
}

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
};

struct Builder {
  std::vector<Entry> e;
  bool f32_act = false;

  void norm(const std::string& name, int n) {
    Entry x;
    x.t.name = name;
    x.t.cls = TensorClass::kNorm;
    x.t.bytes = x.t.read_per_token = 4ull * n;
    x.rank = 0;
    e.push_back(x);
  }
  // Read in full every token (a layer matrix or an untied head).
  void mat(const std::string& name, const MatRef& m, TensorClass cls, int rank = 1) {
    Entry x;
    x.t.name = name;
    x.t.cls = cls;
    x.t.kind = f32_act ? KernelKind::kF32 : kind_of(m.type);
    x.t.bytes = x.t.read_per_token = bytes_of(m);
    x.t.macs_per_token = static_cast<uint64_t>(m.rows) * m.cols;
    x.rank = rank;
    e.push_back(x);
  }
  // A table read one row per token (flash).
  void table(const std::string& name, const MatRef& m, TensorClass cls) {
    Entry x;
    x.t.name = name;
    x.t.cls = cls;
    x.t.kind = kind_of(m.type);
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
    x.row_bytes = row_bytes_of(m);
    x.t.read_per_token += x.row_bytes;
  }
  template <typename L>
  void layer(const L& l, int i) {
    const std::string p = "layer" + std::to_string(i) + ".";
    mat(p + "wq", l.wq, TensorClass::kAttention);
    mat(p + "wk", l.wk, TensorClass::kAttention);
    mat(p + "wv", l.wv, TensorClass::kAttention);
    mat(p + "wo", l.wo, TensorClass::kAttention);
    mat(p + "w1", l.w1, TensorClass::kFfn);
    mat(p + "w2", l.w2, TensorClass::kFfn);
    mat(p + "w3", l.w3, TensorClass::kFfn);
  }
};

Status collect(const LoadedModel& m, Builder* b, LlamaConfig* cfg) {
  b->f32_act = m.f32_activations;
  if (m.arch == "llama") {
    const LlamaModel& x = m.model;
    MC_TRY(x.check_shapes());
    *cfg = x.cfg;
    if (x.tied_output) {
      b->tied("tok_emb", x.tok_emb, x.cfg.vocab_size);
    } else {
      b->table("tok_emb", x.tok_emb, TensorClass::kEmbedding);
      b->mat("output", x.output, TensorClass::kHead, 2);
    }
    b->norm("out_norm", x.cfg.dim);
    for (int l = 0; l < x.cfg.n_layers; ++l) {
      b->norm("layer" + std::to_string(l) + ".attn_norm", x.cfg.dim);
      b->norm("layer" + std::to_string(l) + ".ffn_norm", x.cfg.dim);
      b->layer(x.layers[l], l);
    }
  } else if (m.arch == "bitnet-llama2c") {
    const BitLlama2cModel& x = m.bitnet;
    MC_TRY(x.check_shapes());
    *cfg = x.cfg;
    b->tied("tok_emb", x.tok_emb, x.cfg.vocab_size);
    b->norm("out_norm", x.cfg.dim);
    for (int l = 0; l < x.cfg.n_layers; ++l) b->layer(x.layers[l], l);
  } else if (m.arch == "bitnet" || m.arch == "bitnet-25") {
    const BitnetModel& x = m.bitnet_gguf;
    MC_TRY(x.check_shapes());
    *cfg = x.cfg.base;
    if (x.tied_output) {
      b->tied("tok_emb", x.tok_emb, cfg->vocab_size);
    } else {
      b->table("tok_emb", x.tok_emb, TensorClass::kEmbedding);
      b->mat("output", x.output, TensorClass::kHead, 2);
    }
    b->norm("out_norm", cfg->dim);
    for (int l = 0; l < cfg->n_layers; ++l) {
      const std::string p = "layer" + std::to_string(l) + ".";
      b->norm(p + "attn_norm", cfg->dim);
      b->norm(p + "attn_sub_norm", cfg->dim);
      b->norm(p + "ffn_norm", cfg->dim);
      b->norm(p + "ffn_sub_norm", cfg->hidden_dim);
      b->layer(x.layers[l], l);
    }
  } else if (m.arch == "ple") {
    const PleModel& x = m.ple;
    MC_TRY(x.check_shapes());
    const PleConfig& c = x.cfg;
    *cfg = c.base();
    // The PLE stage's tensors are class kOther (printed "ple").
    if (c.tied_head) {
      b->tied("tok_emb", x.tok_emb, c.output_vocab);
    } else {
      b->table("tok_emb", x.tok_emb, TensorClass::kEmbedding);
      b->mat("output", x.output, TensorClass::kHead, 2);
    }
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
      b->mat(p + "up", L.up, TensorClass::kFfn);
      b->mat(p + "down", L.down, TensorClass::kFfn);
      b->mat(p + "ple_gate", L.ple_gate, TensorClass::kOther);
      b->mat(p + "ple_proj", L.ple_proj, TensorClass::kOther);
    }
  } else {
    return Status::Error(Code::kUnsupported, "cost model: architecture %s", m.arch.c_str());
  }
  return Status::Ok();
}

const char* class_label(TensorClass c) { return c == TensorClass::kOther ? "ple" : tensor_class_name(c); }

}  // namespace

Status cost_model(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt, CostReport* out) {
  if (opt.threads != 1 && opt.threads != 2) return Status::Error(Code::kInvalidArgument, "cost model: threads must be 1 or 2");
  Builder b;
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
  char msg[256];

  // Buffers first: activations in SRAM, the KV cache in SRAM beside them if it fits, else PSRAM.
  const uint64_t act = 4ull * (4ull * c.dim + 3ull * c.hidden_dim + c.vocab_size + static_cast<uint64_t>(c.n_heads) * ctx);
  const uint64_t kv_row = kv_bytes_per_layer_position(c, model.kv);  // keys + values of one position, one layer
  const uint64_t kv = kv_row * c.n_layers * ctx;
  Tier kv_tier = act + kv <= sram ? Tier::kSram : Tier::kPsram;
  r.placed[static_cast<int>(Tier::kSram)] += act;
  r.placed[static_cast<int>(kv_tier)] += kv;
  if (act > sram) {
    std::snprintf(msg, sizeof msg, "activations (%llu bytes) overflow SRAM (%llu bytes)",
                  static_cast<unsigned long long>(act), static_cast<unsigned long long>(sram));
    r.fits = false, r.overflow = msg;
  } else if (kv_tier == Tier::kPsram && kv > psram) {
    std::snprintf(msg, sizeof msg, "KV cache for %d positions (%llu bytes) overflows PSRAM (%llu bytes)", ctx,
                  static_cast<unsigned long long>(kv), static_cast<unsigned long long>(psram));
    r.fits = false, r.overflow = msg;
  }

  // Then the weights, by the board image's rule, in what is left.
  std::vector<PlacementItem> items;
  for (const Entry& x : b.e) items.push_back({x.t.bytes, x.rank, Tier::kFlash});
  const uint64_t sram_left = sram - std::min(sram, r.placed[0]);
  const uint64_t psram_left = psram - std::min(psram, r.placed[1]);
  place_in_tiers(&items, sram_left, psram_left);
  uint64_t weights = 0;
  for (size_t i = 0; i < b.e.size(); ++i) {
    CostTensor t = b.e[i].t;
    t.tier = items[i].tier;
    const int ti = static_cast<int>(t.tier);
    r.placed[ti] += t.bytes;
    r.read[ti] += t.read_per_token;
    r.read_by_class[static_cast<int>(t.cls)][ti] += t.read_per_token - b.e[i].row_bytes;
    r.read_by_class[static_cast<int>(TensorClass::kEmbedding)][ti] += b.e[i].row_bytes;
    r.macs[static_cast<int>(t.kind)] += t.macs_per_token;
    weights += t.bytes;
    r.tensors.push_back(t);
  }
  // The image (every weight) is stored in flash; SRAM and PSRAM copies are made at boot.
  if (r.fits && weights > board.tiers[2].capacity_bytes) {
    std::snprintf(msg, sizeof msg, "weights (%llu bytes) overflow flash (%llu bytes)",
                  static_cast<unsigned long long>(weights), static_cast<unsigned long long>(board.tiers[2].capacity_bytes));
    r.fits = false, r.overflow = msg;
  }

  // The KV cache read by the token at `pos`: keys and values of positions 0..pos, every layer.
  CostTensor kvt;
  kvt.name = "kv_cache";
  kvt.cls = TensorClass::kKvCache;
  kvt.tier = kv_tier;
  kvt.bytes = kv;
  kvt.read_per_token = kv_row * c.n_layers * (pos + 1);
  kvt.macs_per_token = 2ull * c.n_layers * (pos + 1) * c.n_heads * c.head_dim();
  r.read[static_cast<int>(kv_tier)] += kvt.read_per_token;
  r.read_by_class[static_cast<int>(TensorClass::kKvCache)][static_cast<int>(kv_tier)] += kvt.read_per_token;
  r.macs[static_cast<int>(model.kv == KvType::kInt8 ? KernelKind::kInt8 : KernelKind::kF32)] += kvt.macs_per_token;
  r.tensors.push_back(kvt);

  const int core = opt.threads - 1;
  for (int t = 0; t < 3; ++t) r.memory_s += r.read[t] / board.tiers[t].read_bytes_per_s[core];
  for (int k = 0; k < kKernelKindCount; ++k) r.compute_s += r.macs[k] / board.macs_per_s[k][core];
  r.tokens_per_s = 1.0 / std::max(r.memory_s, r.compute_s);
  *out = std::move(r);
  return Status::Ok();
}

std::string format_cost_report(const LoadedModel& model, const BoardProfile& board, const CostOptions& opt,
                               const CostReport& r) {
  std::string s;
  char line[256];
  const CostTensor& kv = r.tensors.back();
  std::snprintf(line, sizeof line, "board: %s, %d core(s); model %s (%s); context %d, token at position %d; KV cache in %s\n",
                board.name.c_str(), opt.threads, model.path.c_str(), model.arch.c_str(), r.ctx_len, r.pos,
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
  std::snprintf(line, sizeof line, "\npredicted: memory %.3f ms, compute %.3f ms per token (%s-bound) -> %.1f tok/s\n",
                1e3 * r.memory_s, 1e3 * r.compute_s, r.memory_s >= r.compute_s ? "memory" : "compute", r.tokens_per_s);
  s += line;
  s += r.fits ? "fits: yes\n" : "fits: NO: " + r.overflow + "\n";
  return s;
}

}  // namespace mcullm
