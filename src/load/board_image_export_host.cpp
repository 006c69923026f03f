#include "load/board_image_export_host.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "format/board_image_writer_host.h"
#include "model/llama_slice.h"
#include "quant/q4e.h"
#include "quant/ternary.h"
#include "tokenizer/tokenizer_image.h"

namespace mcullm {

namespace {

// Collects the tensors of one model; owns the contiguous copies it has to make.
struct Collector {
  std::vector<BoardTensorSource> tensors;
  std::vector<std::unique_ptr<uint8_t[]>> copies;

  void vec(BoardRole role, int layer, const float* data, int n) {
    BoardTensorSource s;
    s.id = board_tensor_id(role, layer);
    s.type = DType::kF32;
    s.rows = 1;
    s.cols = static_cast<uint32_t>(n);
    s.data = data;
    s.cls = TensorClass::kNorm;
    tensors.push_back(s);
  }

  // Rows may be strided (row_bytes) and i2_s keeps its scale beside the rows: the image stores
  // dtype_tensor_bytes contiguous bytes, the scale in the i2_s tail.
  void mat(BoardRole role, int layer, const MatRef& m, TensorClass cls) {
    BoardTensorSource s;
    s.id = board_tensor_id(role, layer);
    s.type = m.type;
    s.rows = static_cast<uint32_t>(m.rows);
    s.cols = static_cast<uint32_t>(m.cols);
    s.cls = cls;
    const size_t row = dtype_row_bytes(m.type, m.cols);
    const size_t bytes = dtype_tensor_bytes(m.type, m.rows, m.cols);
    auto copy = std::make_unique<uint8_t[]>(bytes);
    std::memset(copy.get(), 0, bytes);
    for (int r = 0; r < m.rows; ++r) std::memcpy(copy.get() + r * row, m.row(r), row);
    if (m.type == DType::kI2_S) std::memcpy(copy.get() + static_cast<size_t>(m.rows) * row, &m.scale, 4);
    s.data = copy.get();
    copies.push_back(std::move(copy));
    tensors.push_back(s);
    if (m.type != DType::kQ4E) return;
    // q4e: its f16 group scales (contiguous, rows first) under the scales id, in the same class.
    s.id = board_scales_id(s.id);
    s.type = DType::kF16;
    s.cols = static_cast<uint32_t>(q4e_groups(m.cols, m.group));
    s.data = m.scales;
    tensors.push_back(s);
  }

  // n f32 values (an integer table is stored as exact f32 values), class head: the head groups.
  template <typename T>
  void head_table(BoardRole role, const T* data, uint32_t rows, uint32_t cols) {
    BoardTensorSource s;
    s.id = board_tensor_id(role);
    s.type = DType::kF32;
    s.rows = rows;
    s.cols = cols;
    s.cls = TensorClass::kHead;
    const size_t n = static_cast<size_t>(rows) * cols;
    auto copy = std::make_unique<uint8_t[]>(n * 4);
    for (size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(data[i]);
      std::memcpy(copy.get() + 4 * i, &v, 4);
    }
    s.data = copy.get();
    copies.push_back(std::move(copy));
    tensors.push_back(s);
  }

  // The head's groups (model/vocab_head.h) when the model file stores them.
  void head_groups(const VocabHead& h) {
    const uint32_t K = static_cast<uint32_t>(h.n_groups), V = static_cast<uint32_t>(h.rows.rows);
    mat(BoardRole::kHeadRows, 0, h.rows, TensorClass::kHead);
    head_table(BoardRole::kHeadCentroids, h.centroids, K, static_cast<uint32_t>(h.dim));
    head_table(BoardRole::kHeadTokenOfRow, h.token_of_row, 1, V);
    head_table(BoardRole::kHeadGroupStart, h.group_start, 1, K + 1);
    head_table(BoardRole::kHeadRadius, h.radius, 1, K);
    head_table(BoardRole::kHeadRowNormMax, h.row_norm_max, 1, K);
    if (h.router) {
      const size_t D = static_cast<size_t>(h.dim);
      std::vector<float> r(K * (D + 2));
      for (size_t g = 0; g < K; ++g) {
        for (size_t j = 0; j < D; ++j) r[g * (D + 2) + j] = h.router[g * D + j];
        r[g * (D + 2) + D] = h.router_scale[g];
        r[g * (D + 2) + D + 1] = h.router_bias[g];
      }
      head_table(BoardRole::kHeadRouter, r.data(), K, static_cast<uint32_t>(D + 2));
    }
  }

  template <typename Layer>
  void layer_mats(const Layer& L, int l) {
    mat(BoardRole::kWq, l, L.wq, TensorClass::kAttention);
    mat(BoardRole::kWk, l, L.wk, TensorClass::kAttention);
    mat(BoardRole::kWv, l, L.wv, TensorClass::kAttention);
    mat(BoardRole::kWo, l, L.wo, TensorClass::kAttention);
    mat(BoardRole::kW1, l, L.w1, TensorClass::kFfn);
    mat(BoardRole::kW2, l, L.w2, TensorClass::kFfn);
    mat(BoardRole::kW3, l, L.w3, TensorClass::kFfn);
  }
};

void fill_config(const LlamaConfig& c, BoardArch arch, bool tied, BoardImageConfig* out) {
  std::memset(out, 0, sizeof *out);
  out->arch = static_cast<uint32_t>(arch);
  out->dim = c.dim;
  out->hidden_dim = c.hidden_dim;
  out->n_layers = c.n_layers;
  out->n_heads = c.n_heads;
  out->n_kv_heads = c.n_kv_heads;
  out->vocab_size = c.vocab_size;
  out->seq_len = c.seq_len;
  out->norm_eps = c.norm_eps;
  out->rope_theta = c.rope_theta;
  out->tied = tied ? 1 : 0;
}

// Read-every-token tensors in placement order: norms, layer matrices, head; an untied embedding (and
// the PLE table) last.
int placement_rank(const BoardTensorSource& t, bool tied) {
  const uint32_t id = t.id & ~kBoardScalesFlag;  // scales go with their matrix
  if (t.cls == TensorClass::kNorm) return 0;
  if (id == board_tensor_id(BoardRole::kTokEmb)) return tied ? 2 : kRankFlashOnly;
  if (id == board_tensor_id(BoardRole::kPleTable)) return kRankFlashOnly;  // one row read per token
  if (id == board_tensor_id(BoardRole::kTokenizer)) return kRankFlashOnly;  // read in place, a few bytes a token
  if (id == board_tensor_id(BoardRole::kOutput)) return 2;
  return 1;
}

void place(std::vector<BoardTensorSource>* tensors, bool tied, const BoardImageOptions& opt) {
  std::vector<PlacementItem> items;
  for (const auto& t : *tensors)
    items.push_back({dtype_tensor_bytes(t.type, t.rows, t.cols), placement_rank(t, tied), Tier::kFlash});
  place_in_tiers(&items, opt.sram_budget, opt.psram_budget);
  for (size_t i = 0; i < items.size(); ++i) (*tensors)[i].tier = items[i].tier;
}

}  // namespace

void place_in_tiers(std::vector<PlacementItem>* items, uint64_t sram_budget, uint64_t psram_budget) {
  std::vector<PlacementItem*> order;
  for (auto& t : *items) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(),
                   [](const PlacementItem* a, const PlacementItem* b) { return a->rank < b->rank; });
  uint64_t left[2] = {sram_budget, psram_budget};
  const Tier tiers[2] = {Tier::kSram, Tier::kPsram};
  for (PlacementItem* t : order) {
    t->tier = Tier::kFlash;
    if (t->rank >= kRankFlashOnly) continue;
    const uint64_t bytes = t->bytes + kBoardImageAlign;  // with padding
    for (int i = 0; i < 2; ++i)
      if (bytes <= left[i]) {
        t->tier = tiers[i];
        left[i] -= bytes;
        break;
      }
  }
}

Status export_board_image(const LoadedModel& m, const BoardImageOptions& opt, std::vector<uint8_t>* image,
                          BoardImageReport* report) {
  if (model_has_tl(m))
    return Status::Error(Code::kUnsupported,
                         "board image: tl1 / tl2 matrices are not in the image format; convert the model with --type i2_s first");
  if (opt.sliced && !m.is(ArchFamily::kTransformer))
    return Status::Error(Code::kUnsupported, "board image: per-node images (--layers) hold llama-family models; this is %s",
                         m.arch_name());
  const SliceRange all{0, m.is(ArchFamily::kTransformer) ? m.model.cfg.n_layers : 0, true};
  const SliceRange r = opt.sliced ? opt.slice : all;
  if (opt.sliced) MC_TRY(check_slice_range(m.model.cfg, r));
  Collector c;
  BoardImageConfig cfg;
  bool tied = true;
  const BoardArch board_arch = static_cast<BoardArch>(m.arch->board_arch);
  if (m.is(ArchFamily::kBitLlama2c)) {
    const BitLlama2cModel& b = m.bitnet;
    MC_TRY(b.check_shapes());
    fill_config(b.cfg, board_arch, true, &cfg);
    c.mat(BoardRole::kTokEmb, 0, b.tok_emb, TensorClass::kEmbedding);
    c.vec(BoardRole::kOutNorm, 0, b.out_norm, b.cfg.dim);
    for (int l = 0; l < b.cfg.n_layers; ++l) c.layer_mats(b.layers[l], l);
  } else if (m.is(ArchFamily::kTransformer)) {
    const TransformerModel& b = m.model;
    MC_TRY(b.check_shapes());
    tied = b.tied_output;
    fill_config(b.cfg, board_arch, tied, &cfg);
    cfg.ffn = b.spec.act == FfnAct::kRelu || b.spec.act == FfnAct::kReluSqr ? 1 : 0;
    if (b.spec.sub_norms) cfg.rope = static_cast<uint8_t>(b.spec.rope);  // the bitnet archs say theirs
    if (r.master) {
      c.mat(BoardRole::kTokEmb, 0, b.tok_emb, TensorClass::kEmbedding);
      if (!tied) c.mat(BoardRole::kOutput, 0, b.output, TensorClass::kHead);
      c.vec(BoardRole::kOutNorm, 0, b.out_norm, b.cfg.dim);
    }
    const int d = b.cfg.dim, kv = b.cfg.kv_dim();
    for (int l = r.first; l < r.end; ++l) {
      const TransformerLayer& L = b.layers[l];
      c.vec(BoardRole::kAttnNorm, l, L.attn_norm, d);
      if (b.spec.sub_norms) c.vec(BoardRole::kAttnSubNorm, l, L.attn_sub_norm, d);
      c.vec(BoardRole::kFfnNorm, l, L.ffn_norm, d);
      if (b.spec.sub_norms) c.vec(BoardRole::kFfnSubNorm, l, L.ffn_sub_norm, b.cfg.hidden_dim);
      if (b.spec.qkv_bias) {
        c.vec(BoardRole::kBq, l, L.bq, d);
        c.vec(BoardRole::kBk, l, L.bk, kv);
        c.vec(BoardRole::kBv, l, L.bv, kv);
      }
      c.layer_mats(L, l);
    }
  } else if (m.is(ArchFamily::kPle)) {
    const PleModel& b = m.ple;
    MC_TRY(b.check_shapes());
    if (m.f32_activations)
      return Status::Error(Code::kUnsupported, "board image: the board runs PLE models with int8 activations");
    const PleConfig& pc = b.cfg;
    tied = pc.tied_head;
    fill_config(pc.base(), board_arch, tied, &cfg);
    cfg.ple_dim = pc.ple_dim;
    cfg.input_vocab = pc.input_vocab;
    cfg.group = pc.group;
    cfg.ffn = pc.relu_ffn ? 1 : 0;
    c.mat(BoardRole::kTokEmb, 0, b.tok_emb, TensorClass::kEmbedding);
    c.mat(BoardRole::kPleModelProj, 0, b.ple_model_proj, TensorClass::kOther);
    c.vec(BoardRole::kPleProjNorm, 0, b.ple_proj_norm, pc.ple_dim);
    c.mat(BoardRole::kPleTable, 0, b.ple_table, TensorClass::kOther);  // the PLE stage, as the cost model
    if (!tied) c.mat(BoardRole::kOutput, 0, b.output, TensorClass::kHead);
    c.vec(BoardRole::kOutNorm, 0, b.out_norm, pc.dim);
    for (int l = 0; l < pc.n_layers; ++l) {
      const PleLayer& L = b.layers[l];
      c.vec(BoardRole::kAttnNorm, l, L.attn_norm, pc.dim);
      c.vec(BoardRole::kFfnNorm, l, L.ffn_norm, pc.dim);
      c.vec(BoardRole::kPleNorm, l, L.ple_norm, pc.dim);
      c.mat(BoardRole::kWqkv, l, L.qkv, TensorClass::kAttention);
      c.mat(BoardRole::kWo, l, L.attn_proj, TensorClass::kAttention);
      c.mat(BoardRole::kW1, l, L.gate, TensorClass::kFfn);
      c.mat(BoardRole::kW2, l, L.down, TensorClass::kFfn);
      c.mat(BoardRole::kW3, l, L.up, TensorClass::kFfn);
      c.mat(BoardRole::kPleGate, l, L.ple_gate, TensorClass::kOther);
      c.mat(BoardRole::kPleProj, l, L.ple_proj, TensorClass::kOther);
    }
  } else {
    return Status::Error(Code::kUnsupported, "board image: architecture %s", m.arch_name());
  }
  if (m.has_head_groups && r.master) {
    if (m.head_groups.rows.rows > (1 << 24))
      return Status::Error(Code::kUnsupported, "board image: head groups of %d rows (token ids are stored as exact f32)",
                           m.head_groups.rows.rows);
    c.head_groups(m.head_groups);
    if (m.default_head != HeadMode::kFull || m.default_head_top > 0) {
      const int32_t d[2] = {static_cast<int32_t>(m.default_head), m.default_head_top};
      c.head_table(BoardRole::kHeadDefault, d, 1, 2);
    }
  }
  if (!opt.node_plan.empty()) {
    if (!opt.sliced || !r.master)
      return Status::Error(Code::kInvalidArgument, "board image: the nodes' plan goes into the master's image only");
    const int nodes = static_cast<int>(opt.node_plan.size());
    if (nodes > kBoardMaxPlanNodes)
      return Status::Error(Code::kInvalidArgument, "board image: a nodes' plan of %d nodes (at most %d)", nodes, kBoardMaxPlanNodes);
    if (Status st = check_layer_split(opt.node_plan.data(), nodes, m.model.cfg.n_layers, Code::kInvalidArgument); !st.ok())
      return st.prefix("board image: ");
    std::vector<int32_t> plan;
    for (const SliceRange& n : opt.node_plan) {
      const uint64_t h = slice_hash(m.model, n);
      for (int32_t v : {n.first, n.end, static_cast<int32_t>(h & 0xffff), static_cast<int32_t>((h >> 16) & 0xffff),
                        static_cast<int32_t>((h >> 32) & 0xffff), static_cast<int32_t>(h >> 48)})
        plan.push_back(v);
    }
    c.head_table(BoardRole::kNodePlan, plan.data(), 1, static_cast<uint32_t>(plan.size()));
  }
  if (!opt.tokenizer.empty()) {
    if (!r.master) return Status::Error(Code::kInvalidArgument, "board image: a node's image carries no tokenizer");
    TokenizerImage check;
    if (Status st = check.open(opt.tokenizer.data(), opt.tokenizer.size()); !st.ok()) return st.prefix("board image: ");
    if (check.vocab_size() > cfg.vocab_size)
      return Status::Error(Code::kInvalidArgument, "board image: the tokenizer has %d tokens, the model's vocabulary %d", check.vocab_size(),
                           cfg.vocab_size);
    const size_t words = (opt.tokenizer.size() + 3) / 4;
    auto copy = std::make_unique<uint8_t[]>(words * 4);
    std::memset(copy.get(), 0, words * 4);
    std::memcpy(copy.get(), opt.tokenizer.data(), opt.tokenizer.size());
    BoardTensorSource s;
    s.id = board_tensor_id(BoardRole::kTokenizer);
    s.type = DType::kF32;  // raw bytes: the format has no byte type, and nothing reads them as floats
    s.rows = 1;
    s.cols = static_cast<uint32_t>(words);
    s.data = copy.get();
    s.cls = TensorClass::kOther;
    c.copies.push_back(std::move(copy));
    c.tensors.push_back(s);
  }
  if (opt.bos_id >= cfg.vocab_size || opt.eos_id >= cfg.vocab_size)
    return Status::Error(Code::kInvalidArgument, "board image: BOS %d / EOS %d outside the vocabulary of %d", opt.bos_id,
                         opt.eos_id, cfg.vocab_size);
  cfg.bos_id = opt.bos_id < 0 ? -1 : opt.bos_id;
  cfg.eos_id = opt.eos_id < 0 ? -1 : opt.eos_id;
  place(&c.tensors, tied, opt);
  *report = BoardImageReport();
  BoardSlice slice;  // whole unless sliced
  if (opt.sliced) {
    slice.first = r.first;
    slice.end = r.end;
    slice.embedding = slice.head = r.master;
    slice.whole = false;
    slice.hash = report->slice_hash = slice_hash(m.model, r);
  }
  for (const BoardTensorSource& t : c.tensors) {
    ++report->tensors;
    if (t.id == board_tensor_id(BoardRole::kTokenizer)) report->tokenizer_bytes = dtype_tensor_bytes(t.type, t.rows, t.cols);
    else report->tier_bytes[static_cast<int>(t.tier)] += dtype_tensor_bytes(t.type, t.rows, t.cols);
  }
  return write_board_image(cfg, std::move(c.tensors), image, slice);
}

}  // namespace mcullm
