#include "format/board_image_model.h"

#include <inttypes.h>

#include "format/vocab_head_gguf.h"
#include "quant/q4e.h"
#include "quant/ternary.h"

namespace mcullm {

namespace {

Status find(const BoardImage& img, BoardRole role, int layer, const BoardImageTensor** out) {
  *out = img.find(board_tensor_id(role, layer));
  if (!*out) return Status::Error(Code::kNotFound, "board image: tensor role %u of layer %d is missing", static_cast<unsigned>(role), layer);
  return Status::Ok();
}

Status matrix(const BoardImage& img, BoardRole role, int layer, MatRef* out) {
  const BoardImageTensor* t = nullptr;
  MC_TRY(find(img, role, layer, &t));
  const DType type = static_cast<DType>(t->dtype);  // open() checked the id, the shape and the bytes
  out->type = type;
  out->data = img.data(*t);
  out->rows = static_cast<int>(t->rows);
  out->cols = static_cast<int>(t->cols);
  out->row_bytes = dtype_row_bytes(type, t->cols);
  out->scale = type == DType::kI2_S ? i2s_tensor_scale(out->data, t->rows, t->cols) : 1.0f;
  if (type != DType::kQ4E) return Status::Ok();
  // q4e: the group scales beside it, [rows, n_groups] f16.
  const int group = img.config().group;
  const BoardImageTensor* s = img.find(board_scales_id(t->id));
  if (!s || static_cast<DType>(s->dtype) != DType::kF16 || s->rows != t->rows ||
      s->cols != static_cast<uint32_t>(q4e_groups(out->cols, group)))
    return Status::Error(Code::kCorrupt, "board image: q4e tensor %#" PRIx32 " needs f16 scales [%" PRIu32 ", %d]", t->id, t->rows,
                         q4e_groups(out->cols, group));
  out->scales = img.data(*s);
  out->group = group;
  return Status::Ok();
}

Status vector(const BoardImage& img, BoardRole role, int layer, int n, const float** out) {
  const BoardImageTensor* t = nullptr;
  MC_TRY(find(img, role, layer, &t));
  if (static_cast<DType>(t->dtype) != DType::kF32 || t->rows != 1 || t->cols != static_cast<uint32_t>(n))
    return Status::Error(Code::kCorrupt, "board image: tensor %#" PRIx32 " should be %d f32 values", t->id, n);
  *out = reinterpret_cast<const float*>(img.data(*t));  // 64-byte aligned in the image
  return Status::Ok();
}

// The arena's bytes are not zeroed (a board's RAM holds whatever was there): every layer starts from
// its defaults, so fields an architecture does not set (a q4e scale pointer of an f32 matrix) are
// null, not garbage.
template <typename Layer>
Status layer_table(Arena& tables, int n, Layer** out) {
  MC_TRY(tables.alloc_array(static_cast<size_t>(n), TensorClass::kOther, out));
  for (int i = 0; i < n; ++i) (*out)[i] = Layer();
  return Status::Ok();
}

// The seven matrices of layer l (as gguf_layer_matrices, format/gguf_model.h): wq wk wv wo w1 w2 w3.
template <class Layer>
Status layer_matrices(const BoardImage& img, int l, Layer& L) {
  const BoardRole roles[7] = {BoardRole::kWq, BoardRole::kWk, BoardRole::kWv, BoardRole::kWo,
                              BoardRole::kW1, BoardRole::kW2, BoardRole::kW3};
  MatRef* const mats[7] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3};
  for (int i = 0; i < 7; ++i) MC_TRY(matrix(img, roles[i], l, mats[i]));
  return Status::Ok();
}

// The head: its own tensor, or the embedding when tied.
Status head(const BoardImage& img, const MatRef& tok_emb, MatRef* out, bool* tied) {
  *tied = img.config().tied != 0;
  if (*tied) {
    if (img.find(board_tensor_id(BoardRole::kOutput)))
      return Status::Error(Code::kCorrupt, "board image: a tied head and an output tensor");
    *out = tok_emb;
    return Status::Ok();
  }
  return matrix(img, BoardRole::kOutput, 0, out);
}

Status ple_from_image(const BoardImage& img, const LlamaConfig& base, Arena& tables, BoardModel* out) {
  const BoardImageConfig& ic = img.config();
  if (base.n_kv_heads != base.n_heads)
    return Status::Error(Code::kCorrupt, "board image: PLE attention has no GQA (%d kv heads, %d heads)", base.n_kv_heads,
                         base.n_heads);
  PleModel& m = out->ple;
  PleConfig& c = m.cfg;
  c.version = 1;
  c.input_vocab = ic.input_vocab;
  c.output_vocab = base.vocab_size;
  c.dim = base.dim;
  c.n_layers = base.n_layers;
  c.n_heads = base.n_heads;
  c.ffn = base.hidden_dim;
  c.ple_dim = ic.ple_dim;
  c.seq_len = base.seq_len;
  c.group = ic.group;
  c.rope_theta = base.rope_theta;
  c.tied_head = ic.tied != 0;
  c.norm_eps = base.norm_eps;
  c.relu_ffn = ic.ffn != 0;
  MC_TRY(c.validate());
  const int d = c.dim;
  MC_TRY(matrix(img, BoardRole::kTokEmb, 0, &m.tok_emb));
  MC_TRY(matrix(img, BoardRole::kPleModelProj, 0, &m.ple_model_proj));
  MC_TRY(vector(img, BoardRole::kPleProjNorm, 0, c.ple_dim, &m.ple_proj_norm));
  MC_TRY(matrix(img, BoardRole::kPleTable, 0, &m.ple_table));
  MC_TRY(vector(img, BoardRole::kOutNorm, 0, d, &m.out_norm));
  bool tied = false;
  MC_TRY(head(img, m.tok_emb, &m.output, &tied));
  if (tied) m.output.rows = c.output_vocab;  // tied: the embedding's first rows (validate: output <= input vocab)
  MC_TRY(layer_table(tables, c.n_layers, &m.layers));
  for (int l = 0; l < c.n_layers; ++l) {
    PleLayer& L = m.layers[l];
    L = PleLayer();
    MC_TRY(vector(img, BoardRole::kAttnNorm, l, d, &L.attn_norm));
    MC_TRY(vector(img, BoardRole::kFfnNorm, l, d, &L.ffn_norm));
    MC_TRY(vector(img, BoardRole::kPleNorm, l, d, &L.ple_norm));
    const BoardRole roles[7] = {BoardRole::kWqkv, BoardRole::kWo, BoardRole::kW1, BoardRole::kW3,
                                BoardRole::kW2, BoardRole::kPleGate, BoardRole::kPleProj};
    MatRef* const mats[7] = {&L.qkv, &L.attn_proj, &L.gate, &L.up, &L.down, &L.ple_gate, &L.ple_proj};
    for (int i = 0; i < 7; ++i) MC_TRY(matrix(img, roles[i], l, mats[i]));
  }
  m.split_qkv();
  out->ple_base = c.base();
  return m.check_shapes();
}

}  // namespace

LlamaConfig board_llama_config(const BoardImageConfig& c) {
  LlamaConfig cfg;
  cfg.dim = c.dim;
  cfg.hidden_dim = c.hidden_dim;
  cfg.n_layers = c.n_layers;
  cfg.n_heads = c.n_heads;
  cfg.n_kv_heads = c.n_kv_heads;
  cfg.vocab_size = c.vocab_size;
  cfg.seq_len = c.seq_len;
  cfg.norm_eps = c.norm_eps;
  cfg.rope_theta = c.rope_theta;
  return cfg;
}

const LlamaConfig& BoardModel::cfg() const {
  switch (arch ? arch->family : ArchFamily::kTransformer) {
    case ArchFamily::kBitLlama2c: return bitllama2c.cfg;
    case ArchFamily::kPle: return ple_base;
    case ArchFamily::kTransformer: break;
  }
  return transformer.cfg;
}

// The llama family (model/transformer_runner.h): the row's spec, with what the image chooses:
// config.ffn 1 is ReLU for llama and qwen2 (dense or ternary), ReLU^2 for the bitnet archs (act_variants); config.rope the
// RoPE style of the sub-norm (bitnet) archs; dense_or_ternary (qwen2) as layer 0's wq.
static Status transformer_from_image(const BoardImage& img, const LlamaConfig& cfg, Arena& tables, BoardModel* out) {
  const BoardImageConfig& ic = img.config();
  const BoardSlice& part = img.slice();  // a per-node image holds some layers and / or the master's part
  TransformerModel& m = out->transformer;
  m = TransformerModel();
  m.cfg = cfg;
  m.first_layer = part.first;
  m.end_layer = part.end;
  m.has_embedding = part.embedding;
  m.has_head = part.head;
  const ArchInfo& a = *out->arch;
  m.spec = a.spec;
  if (a.act_variants)  // ReLU runs dense here (no f32 down copy)
    m.spec.act = !ic.ffn ? FfnAct::kSilu : a.spec.ternary && !a.dense_or_ternary ? FfnAct::kReluSqr : FfnAct::kRelu;
  if (a.spec.sub_norms) m.spec.rope = static_cast<RopeStyle>(ic.rope);  // written by the export for these archs
  if (a.dense_or_ternary) {
    const BoardImageTensor* wq = img.find(board_tensor_id(BoardRole::kWq, part.first));
    m.spec.ternary = wq && static_cast<DType>(wq->dtype) == DType::kI2_S;
  }
  const int d = cfg.dim, h = cfg.hidden_dim, kv = cfg.kv_dim();
  if (part.embedding || (part.head && ic.tied)) MC_TRY(matrix(img, BoardRole::kTokEmb, 0, &m.tok_emb));
  if (part.head) {
    MC_TRY(vector(img, BoardRole::kOutNorm, 0, d, &m.out_norm));
    MC_TRY(head(img, m.tok_emb, &m.output, &m.tied_output));
  }
  const int n = part.end - part.first;
  if (n > 0) MC_TRY(layer_table(tables, n, &m.layers));
  for (int l = part.first; l < part.end; ++l) {
    TransformerLayer& L = m.layers[l - part.first];
    MC_TRY(vector(img, BoardRole::kAttnNorm, l, d, &L.attn_norm));
    MC_TRY(vector(img, BoardRole::kFfnNorm, l, d, &L.ffn_norm));
    if (m.spec.sub_norms) {
      MC_TRY(vector(img, BoardRole::kAttnSubNorm, l, d, &L.attn_sub_norm));
      MC_TRY(vector(img, BoardRole::kFfnSubNorm, l, h, &L.ffn_sub_norm));
    }
    if (m.spec.qkv_bias) {
      MC_TRY(vector(img, BoardRole::kBq, l, d, &L.bq));
      MC_TRY(vector(img, BoardRole::kBk, l, kv, &L.bk));
      MC_TRY(vector(img, BoardRole::kBv, l, kv, &L.bv));
    }
    MC_TRY(layer_matrices(img, l, L));
  }
  return m.check_shapes();
}

static Status arch_from_image(const BoardImage& img, Arena& tables, BoardModel* out) {
  out->arch = arch_info_by_board(img.config().arch);
  if (!out->arch) return Status::Error(Code::kUnsupported, "board image: unknown architecture");
  const LlamaConfig cfg = board_llama_config(img.config());
  MC_TRY(cfg.validate());
  if (!img.slice().whole && out->arch->family != ArchFamily::kTransformer)
    return Status::Error(Code::kUnsupported, "board image: a slice of a %s model (per-node images hold llama-family models)",
                         out->arch->name);
  const int d = cfg.dim;
  switch (out->arch->family) {
    case ArchFamily::kTransformer: return transformer_from_image(img, cfg, tables, out);
    case ArchFamily::kBitLlama2c: {
      BitLlama2cModel& m = out->bitllama2c;
      m.cfg = cfg;
      MC_TRY(matrix(img, BoardRole::kTokEmb, 0, &m.tok_emb));
      MC_TRY(vector(img, BoardRole::kOutNorm, 0, d, &m.out_norm));
      bool tied = false;
      MC_TRY(head(img, m.tok_emb, &m.output, &tied));
      MC_TRY(layer_table(tables, cfg.n_layers, &m.layers));
      for (int l = 0; l < cfg.n_layers; ++l) {
        BitLlama2cLayer& L = m.layers[l];
        MC_TRY(layer_matrices(img, l, L));
      }
      return m.check_shapes();
    }
    case ArchFamily::kPle: return ple_from_image(img, cfg, tables, out);
  }
  return Status::Error(Code::kUnsupported, "board image: unknown architecture");
}

Status BoardDecoder::init(const BoardModel& model, int ctx_len, Arena& work, ThreadPool* pool, const KernelSet* kernels,
                          KvType kv) {
  active_ = nullptr;
  if (!model.arch) return Status::Error(Code::kUnsupported, "board image: unknown architecture");
  switch (model.arch->family) {
    case ArchFamily::kTransformer:
      MC_TRY(transformer_.init(&model.transformer, ctx_len, work, pool, kernels, kv));
      active_ = &transformer_;
      break;
    case ArchFamily::kBitLlama2c:
      MC_TRY(bitllama2c_.init(&model.bitllama2c, ctx_len, work, pool, kernels, kv));
      active_ = &bitllama2c_;
      break;
    case ArchFamily::kPle:
      MC_TRY(ple_.init(&model.ple, ctx_len, work, pool, kernels, false, kv));
      active_ = &ple_;
      break;
  }
  if (!active_) return Status::Error(Code::kUnsupported, "board image: unknown architecture");
  head_ = model.head();
  return active_->set_head(head_, work);  // a grouped head's scratch now, before any generation
}

Status BoardDecoder::enable_batch(int cap, Arena& arena) {
  if (cap <= 1 || !active_) return Status::Ok();
  Status st = Status::Ok();
  if (active_ == &transformer_) st = transformer_.enable_batch(cap, arena);
  else if (active_ == &ple_) st = ple_.enable_batch(cap, arena);
  return st.ok() ? st : st.prefix("batched prefill: ");
}

Status BoardDecoder::choose_head(bool picks_argmax) {
  Arena none(Tier::kHost, nullptr, 0);  // set_head allocated the scratch at init
  return active_->set_head(head_.mode == HeadMode::kPruned && !picks_argmax ? HeadChoice() : head_, none);
}

HeadChoice BoardModel::head() const {
  HeadChoice h;
  if (!has_head_groups || default_head == HeadMode::kFull) return h;
  h.mode = default_head;
  h.groups = &head_groups;
  const int top = default_head_top > 0 ? default_head_top : kDefaultTopGroups;
  h.top_groups = top < head_groups.n_groups ? top : head_groups.n_groups;
  return h;
}

namespace {

// n f32 values of a head-group table ([rows, cols] = [1, n] or [n_groups, dim]).
Status f32_table(const BoardImage& img, BoardRole role, uint32_t rows, uint32_t cols, const float** out) {
  const BoardImageTensor* t = nullptr;
  MC_TRY(find(img, role, 0, &t));
  if (static_cast<DType>(t->dtype) != DType::kF32 || t->rows != rows || t->cols != cols)
    return Status::Error(Code::kCorrupt, "board image: head-group tensor %#" PRIx32 " should be f32 [%" PRIu32 ", %" PRIu32 "]", t->id, rows, cols);
  *out = reinterpret_cast<const float*>(img.data(*t));
  return Status::Ok();
}

// An integer table stored as f32: every value an integer in [0, limit].
Status int_table(const BoardImage& img, BoardRole role, uint32_t n, int limit, Arena& tables, const int32_t** out) {
  const float* f = nullptr;
  MC_TRY(f32_table(img, role, 1, n, &f));
  int32_t* v = nullptr;
  MC_TRY(tables.alloc_array(n, TensorClass::kHead, &v));
  for (uint32_t i = 0; i < n; ++i) {
    if (!(f[i] >= 0.0f && f[i] <= static_cast<float>(limit)) || static_cast<float>(static_cast<int32_t>(f[i])) != f[i])
      return Status::Error(Code::kCorrupt, "board image: head-group tensor role %u: value %" PRIu32 " (%g) is not an integer in [0, %d]",
                           static_cast<unsigned>(role), i, static_cast<double>(f[i]), limit);
    v[i] = static_cast<int32_t>(f[i]);
  }
  *out = v;
  return Status::Ok();
}

Status head_groups_from_image(const BoardImage& img, Arena& tables, BoardModel* out) {
  if (!img.find(board_tensor_id(BoardRole::kHeadRows))) return Status::Ok();
  if (!img.slice().head) return Status::Error(Code::kCorrupt, "board image: head groups in a slice without the head");
  const MatRef* head = !out->arch->head_groups                 ? nullptr
                       : out->arch->family == ArchFamily::kPle ? &out->ple.output
                                                               : &out->transformer.output;
  if (!head) return Status::Error(Code::kUnsupported, "board image: head groups are read for llama and PLE models");
  VocabHead& h = out->head_groups;
  MC_TRY(matrix(img, BoardRole::kHeadRows, 0, &h.rows));
  const BoardImageTensor* c = img.find(board_tensor_id(BoardRole::kHeadCentroids));
  if (!c) return Status::Error(Code::kNotFound, "board image: the head groups have no centroids");
  if (c->rows < 1 || c->rows > static_cast<uint32_t>(kMaxHeadGroups))
    return Status::Error(Code::kCorrupt, "board image: %" PRIu32 " head groups (1 to %d)", c->rows, kMaxHeadGroups);
  h.n_groups = static_cast<int>(c->rows);
  h.dim = head->cols;
  const uint32_t K = c->rows, V = static_cast<uint32_t>(head->rows);
  MC_TRY(f32_table(img, BoardRole::kHeadCentroids, K, static_cast<uint32_t>(h.dim), &h.centroids));
  MC_TRY(int_table(img, BoardRole::kHeadTokenOfRow, V, head->rows - 1, tables, &h.token_of_row));
  MC_TRY(int_table(img, BoardRole::kHeadGroupStart, K + 1, head->rows, tables, &h.group_start));
  MC_TRY(f32_table(img, BoardRole::kHeadRadius, 1, K, &h.radius));
  MC_TRY(f32_table(img, BoardRole::kHeadRowNormMax, 1, K, &h.row_norm_max));
  if (img.find(board_tensor_id(BoardRole::kHeadRouter))) {
    const float* r = nullptr;  // per group: dim int8 values as f32, scale, bias
    const uint32_t D = static_cast<uint32_t>(h.dim);
    MC_TRY(f32_table(img, BoardRole::kHeadRouter, K, D + 2, &r));
    int8_t* w = nullptr;
    float *scale = nullptr, *bias = nullptr;
    MC_TRY(tables.alloc_array(static_cast<size_t>(K) * D, TensorClass::kHead, &w));
    MC_TRY(tables.alloc_array(K, TensorClass::kHead, &scale));
    MC_TRY(tables.alloc_array(K, TensorClass::kHead, &bias));
    for (uint32_t g = 0; g < K; ++g) {
      const float* row = r + static_cast<size_t>(g) * (D + 2);
      for (uint32_t j = 0; j < D; ++j) {
        if (!(row[j] >= -127.0f && row[j] <= 127.0f) || static_cast<float>(static_cast<int>(row[j])) != row[j])
          return Status::Error(Code::kCorrupt, "board image: head router value %" PRIu32 " of group %" PRIu32 " (%g) is not an integer in [-127, 127]",
                               j, g, static_cast<double>(row[j]));
        w[static_cast<size_t>(g) * D + j] = static_cast<int8_t>(row[j]);
      }
      scale[g] = row[D];
      bias[g] = row[D + 1];
    }
    h.router = w;
    h.router_scale = scale;
    h.router_bias = bias;
  }
  MC_TRY(check_vocab_head(h, *head, tables));
  out->has_head_groups = true;
  if (img.find(board_tensor_id(BoardRole::kHeadDefault))) {
    const int32_t* d = nullptr;  // mode, top
    MC_TRY(int_table(img, BoardRole::kHeadDefault, 2, kMaxHeadGroups, tables, &d));
    if (d[0] > static_cast<int32_t>(HeadMode::kPruned) || d[1] > h.n_groups)
      return Status::Error(Code::kCorrupt, "board image: default head %d with %d of %d groups", static_cast<int>(d[0]),
                           static_cast<int>(d[1]), h.n_groups);
    out->default_head = static_cast<HeadMode>(d[0]);
    out->default_head_top = d[1];
  }
  return Status::Ok();
}

Status node_plan_from_image(const BoardImage& img, Arena& tables, BoardModel* out) {
  const BoardImageTensor* t = img.find(board_tensor_id(BoardRole::kNodePlan));
  if (!t) return Status::Ok();
  const int n_layers = out->cfg().n_layers;
  if (!img.slice().head || t->rows != 1 || t->cols % 6 != 0 || t->cols / 6 > static_cast<uint32_t>(kBoardMaxPlanNodes))
    return Status::Error(Code::kCorrupt, "board image: a nodes' plan of %" PRIu32 " values (6 per node, at most %d nodes, in a master's image)",
                         t->cols, kBoardMaxPlanNodes);
  const int32_t* v = nullptr;
  MC_TRY(int_table(img, BoardRole::kNodePlan, t->cols, 0xffff, tables, &v));
  out->plan_nodes = static_cast<int>(t->cols / 6);
  for (int k = 0; k < out->plan_nodes; ++k, v += 6) {
    out->plan_ranges[k] = SliceRange{v[0], v[1], false};
    out->plan_hashes[k] = uint64_t(v[2]) | uint64_t(v[3]) << 16 | uint64_t(v[4]) << 32 | uint64_t(v[5]) << 48;
  }
  if (Status st = check_layer_split(out->plan_ranges, out->plan_nodes, n_layers, Code::kCorrupt); !st.ok())
    return st.prefix("board image: ");
  return Status::Ok();
}

// The tokenizer image: raw bytes in an f32 row, whole or master images only, the image's own size
// within the last 4 bytes of padding (zeros), and open() content with it.
Status tokenizer_from_image(const BoardImage& img, BoardModel* out) {
  const BoardImageTensor* t = img.find(board_tensor_id(BoardRole::kTokenizer));
  if (!t) return Status::Ok();
  if (!img.slice().embedding)
    return Status::Error(Code::kCorrupt, "board image: a tokenizer in an image without the embedding (a node's image carries none)");
  if (static_cast<DType>(t->dtype) != DType::kF32 || t->rows != 1)
    return Status::Error(Code::kCorrupt, "board image: the tokenizer should be one f32 row of raw bytes");
  const uint8_t* bytes = img.data(*t);
  const size_t n = t->bytes;
  if (Status st = out->tokenizer.open(bytes, n); !st.ok()) return st.prefix("board image: embedded ");
  const size_t used = out->tokenizer.size_bytes();
  bool zeros = n - used < 4;
  for (size_t i = used; i < n && zeros; ++i) zeros = bytes[i] == 0;
  if (!zeros) {
    out->tokenizer = TokenizerImage();
    return Status::Error(Code::kCorrupt, "board image: the tokenizer image of %zu bytes lies in %zu (its padding is 0 to 3 zero bytes)", used, n);
  }
  if (out->tokenizer.vocab_size() > out->cfg().vocab_size) {
    const int tv = out->tokenizer.vocab_size();
    out->tokenizer = TokenizerImage();
    return Status::Error(Code::kCorrupt, "board image: the tokenizer has %d tokens, the model's vocabulary %d", tv, out->cfg().vocab_size);
  }
  return Status::Ok();
}

}  // namespace

Status board_model_build_sparse_ffn(BoardModel* m, Arena& arena, size_t* bytes) {
  const size_t before = arena.stats().used;
  Status st = Status::Ok();
  if (m->arch && m->arch->family == ArchFamily::kTransformer) st = build_sparse_ffn(&m->transformer, arena);
  else if (m->arch && m->arch->family == ArchFamily::kPle) st = ple_build_sparse_ffn(&m->ple, arena);
  *bytes = arena.stats().used - before;
  return st.ok() ? st : st.prefix("the sparse FFN's down columns: ");
}

Status board_model_from_image(const BoardImage& img, Arena& tables, BoardModel* out) {
  *out = BoardModel();
  MC_TRY(arch_from_image(img, tables, out));
  MC_TRY(head_groups_from_image(img, tables, out));
  MC_TRY(node_plan_from_image(img, tables, out));
  return tokenizer_from_image(img, out);
}

}  // namespace mcullm
