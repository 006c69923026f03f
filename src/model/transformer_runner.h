// One transformer block runner for the llama family (llama, bitnet, bitnet-25, qwen2): one layer
// struct, one model struct, one layer loop. An architecture is a BlockSpec (model/llama.h,
// model/bitnet.h, model/qwen2.h name theirs) over the pieces of model/transformer.h.
//
// One layer, for the residual stream x (the bracketed steps per BlockSpec):
//   h = RMSNorm(x; attn_norm) -> Q = wq h [+ bq], K = wk h [+ bk], V = wv h [+ bv] -> RoPE -> attention
//   a = [RMSNorm(attention output; attn_sub_norm)] -> x += wo a
//   h = RMSNorm(x; ffn_norm) -> g = act(gate h) * (up h) -> [RMSNorm(g; ffn_sub_norm)] -> x += down g
// then the final RMSNorm (output_norm) and the head (output, or tied to the embedding).
//
// The seven linear matrices of every layer are all dense (any type the kernels read; the input
// quantized per the weights' block) or all ternary (i2_s / tl1 / tl2 with their per-tensor scale;
// the input quantized once per token as bitnet.cpp's I8_S). A ReLU FFN whose down matrix has an f32
// transposed copy (w2_t) or a q8_0 / q4_0 / q4g64 / i2_s down matrix with a column-stored copy (w2_cols)
// runs gate first (model/sparse_ffn.h) for single tokens: the same bits.
//
// n tokens at positions pos0.. go through the same loop on the batch buffers (for n = 1 a view of
// the single-token ones): matmats, which give each column the matvec's bits (kernels.h) and run the
// matvec kernels for n = 1 (generation), so prefill equals forward token by token.
//
// A model may hold only some of its layers (a cluster node's slice, model/layer_slice.h): layers
// [first_layer, end()), with or without the embedding and the head.
#pragma once
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "model/layer_slice.h"
#include "model/sparse_ffn.h"
#include "model/ternary_lut.h"
#include "model/transformer.h"
#include "mcullm/status.h"

namespace mcullm {

// The FFN's activation on the gate (always gated: act(gate h) * up h). Files store it per
// architecture (llama: GGUF mcullm.ffn_activation, board image config.ffn 0 / 1 for silu / relu;
// bitnet: the architecture name, config.ffn 0 / 1 for silu / relu^2).
enum class FfnAct : uint8_t { kSilu = 0, kRelu, kReluSqr };

struct BlockSpec {
  RopeStyle rope = RopeStyle::kAdjacent;
  FfnAct act = FfnAct::kSilu;
  bool ternary = false;    // the seven linear matrices: ternary (I8_S input) or dense
  bool qkv_bias = false;   // bq, bk, bv added after the projections (qwen2)
  bool sub_norms = false;  // attn_sub_norm before wo, ffn_sub_norm before down (BitNet b1.58)
};

struct TransformerLayer {
  const float* attn_norm = nullptr;      // [dim]
  const float* ffn_norm = nullptr;       // [dim]
  const float* attn_sub_norm = nullptr;  // [dim] (sub_norms)
  const float* ffn_sub_norm = nullptr;   // [hidden] (sub_norms)
  const float* bq = nullptr;             // [dim] (qkv_bias)
  const float* bk = nullptr;             // [kv_dim]
  const float* bv = nullptr;             // [kv_dim]
  MatRef wq, wk, wv, wo;                 // [dim, dim], [kv_dim, dim], [kv_dim, dim], [dim, dim]
  MatRef w1, w2, w3;                     // gate [hidden, dim], down [dim, hidden], up [hidden, dim]
  const float* w2_t = nullptr;           // ReLU FFN: f32 down transposed [hidden, dim]; set: the sparse FFN runs
  DownCols w2_cols;                      // ReLU FFN: q8_0 / q4_0 / q4g64 / i2_s down stored by column; built: the sparse FFN runs
};

struct TransformerModel {
  LlamaConfig cfg;
  BlockSpec spec;
  int first_layer = 0;                   // layers held: [first_layer, end())
  int end_layer = -1;                    // -1: through the last layer
  TransformerLayer* layers = nullptr;    // [end() - first_layer]: layers[l - first_layer] is layer l
  bool has_embedding = true;
  bool has_head = true;
  MatRef tok_emb;                        // [vocab, dim], any dense type (with has_embedding)
  const float* out_norm = nullptr;       // [dim] (with has_head)
  MatRef output;                         // [vocab, dim]; tok_emb's matrix when tied (with has_head)
  bool tied_output = true;

  int end() const { return end_layer < 0 ? cfg.n_layers : end_layer; }
  bool whole() const { return first_layer == 0 && end() == cfg.n_layers && has_embedding && has_head; }
  const TransformerLayer& layer(int l) const { return layers[l - first_layer]; }
  // Config limits, a layer range inside the model, and every part held present with its shape
  // and kind (the spec's norms and biases; ternary or dense, the same in every layer).
  Status check_shapes() const;
};

// Builds w2_t (in `arena`) for every layer of a ReLU model whose down matrix is f32, w2_cols for one
// whose down matrix is q8_0 / q4_0 / q4g64 (dense models) or i2_s (ternary models whose gate, up and
// down are i2_s); models with sub-norms are left dense (model/sparse_ffn.h).
Status build_sparse_ffn(TransformerModel* m, Arena& arena);

// Runs layers [first, end) of a model (held ones) on one residual stream, with a KV cache of those
// layers only; with embedding and head when the model holds them and `master`. Not a Decoder
// itself: TransformerContext and TransformerSlice wrap it.
class TransformerRunner {
 public:
  Status init(const TransformerModel* model, int first, int end, bool master, int ctx_len, Arena& arena,
              ThreadPool* pool, const KernelSet* kernels, KvType kv = KvType::kF32);
  // Batched buffers for up to `cap` tokens per call (else one token on the single-token buffers).
  Status enable_batch(int cap, Arena& arena);

  // The residual stream of the tokens of a call: column i at i * dim.
  float* x() { return b_.x; }
  // x() = the embedding rows of the n tokens (checked).
  Status embed(const int* tokens, int n);
  // Layers [l0, l1) (inside the runner's range) at positions pos0.. on n columns of x().
  Status layers(int l0, int l1, int pos0, int n);
  // Final norm and head of n columns of x() into logits() (n rows of vocab values), as set_head chose.
  void head(int n);
  // The head from now on (full by default); a grouped head's scratch from `arena`.
  Status set_head(const HeadChoice& c, Arena& arena);
  // After head(): where its logits may be finite (a grouped head), as Decoder::logit_candidates.
  bool logit_candidates(LogitCandidates* out) const { return head_visit_.candidates(head_.groups, out); }
  const float* logits() const { return b_.logits; }

  const TransformerModel& model() const { return *model_; }
  int first() const { return first_; }
  int end() const { return end_; }
  bool has_embedding() const { return master_ && model_->has_embedding; }
  bool has_head() const { return master_ && model_->has_head; }
  int max_batch() const { return b_.cap; }
  int ctx_len() const { return s_.ctx_len; }
  // A ReLU FFN's counts since init (false without one).
  bool ffn_counts(FfnCounts* counts) const;
  // false: the ReLU FFN runs dense even where w2_t / w2_cols is set (for tests of sparse == dense).
  // max_live_permille: a quantized down matrix's sparse path runs only for tokens with at most this
  // share of live neurons (ReluFfnQ; 1000: always), else the dense path after the gate.
  void set_sparse_ffn(bool on, int max_live_permille = kSparseFfnMaxLivePermille) {
    sparse_on_ = on;
    sparse_max_live_ = max_live_permille;
  }

 private:
  // Matrices reading the same n columns (x + i * x_stride, n_vals values): ternary or dense.
  void linear(const MatRef* const* mats, float* const* outs, const size_t* strides, int count, const float* x,
              size_t x_stride, int n_vals, int n);
  // One matrix of them (wo, down): out has out_stride floats per column.
  void linear(const MatRef& m, float* out, size_t out_stride, const float* x, size_t x_stride, int n_vals, int n) {
    const MatRef* mats[1] = {&m};
    linear(mats, &out, &out_stride, 1, x, x_stride, n_vals, n);
  }
  // One token's ReLU FFN gate first on xb, added to x; false where it does not apply.
  bool sparse_ffn(const TransformerLayer& L);
  // g = act(g) * u over n contiguous columns of the hidden width, counting a ReLU's live neurons.
  void activate(float* g, const float* u, int n);

  const TransformerModel* model_ = nullptr;
  int first_ = 0, end_ = 0;
  bool master_ = false;
  LlamaConfig cache_cfg_;  // the config with the range's layer count (what the KV cache covers)
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  DecoderState s_;  // KV cache and attention; its single-token buffers are b_ until enable_batch
  BatchState b_;
  TlLutBuffer lut_;
  float* ffn_lanes_ = nullptr;  // sparse FFN scratch: [dim * 16], [hidden], [dim]
  float* ffn_h_ = nullptr;
  float* ffn_y_ = nullptr;
  int32_t* ffn_live_ = nullptr;  // quantized sparse FFN: [hidden] live neurons, then non-zero columns
  bool sparse_on_ = true;
  int sparse_max_live_ = kSparseFfnMaxLivePermille;
  FfnCounts ffn_;
  HeadChoice head_;
  HeadVisit head_visit_;
  float* head_rows_ = nullptr;  // grouped head: head_scratch_floats (model/vocab_head.h)
};

// The whole model as a Decoder.
class TransformerContext final : public Decoder {
 public:
  // The model must be whole (TransformerModel::whole()); ctx_len <= seq_len (0 = seq_len).
  Status init(const TransformerModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  // Batched prefill for up to `cap` tokens per call (buffers from `arena`); without it max_batch() is 1.
  Status enable_batch(int cap, Arena& arena) { return r_.enable_batch(cap, arena); }
  Status forward(int token, int pos, const float** logits) override;
  Status prefill(const int* tokens, int n, int pos0, const float** logits) override;
  int max_batch() const override { return r_.max_batch(); }
  int vocab_size() const override { return r_.model().cfg.vocab_size; }
  int ctx_len() const override { return r_.ctx_len(); }
  bool ffn_counts(FfnCounts* counts) const override { return r_.ffn_counts(counts); }
  Status set_head(const HeadChoice& c, Arena& arena) override { return r_.set_head(c, arena); }
  bool logit_candidates(LogitCandidates* out) const override { return r_.logit_candidates(out); }
  const TransformerModel& model() const { return r_.model(); }
  void set_sparse_ffn(bool on, int max_live_permille = kSparseFfnMaxLivePermille) {
    r_.set_sparse_ffn(on, max_live_permille);
  }

 private:
  TransformerRunner r_;
};

struct SliceRange {
  int first = 0;          // layers [first, end)
  int end = 0;
  bool master = false;    // embedding, final norm and head
};

// Layers inside the model, first <= end, and a non-empty slice (layers or the master's part).
Status check_slice_range(const LlamaConfig& c, const SliceRange& r);
// The nodes' ranges, in ring order, cut the model's n_layers into consecutive non-empty pieces from
// layer 0 to the last, none of them the master's part. `code`: what a bad split is (kInvalidArgument
// for options, kCorrupt for a file's plan).
Status check_layer_split(const SliceRange* ranges, int count, int n_layers, Code code);

// Part of a model as a LayerSlice: one sequence's cache. Weights outside the range are never read,
// so a memory-mapped file is only paged in where the slice reads it.
class TransformerSlice final : public LayerSlice {
 public:
  // Whatever part the model holds.
  Status init(const TransformerModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  // Layers `range` of a model that holds them (the master's part: its embedding and head).
  Status init(const TransformerModel* model, const SliceRange& range, int ctx_len, Arena& arena, ThreadPool* pool,
              const KernelSet* kernels, KvType kv = KvType::kF32);
  Status enable_batch(int cap, Arena& arena) { return r_.enable_batch(cap, arena); }
  int dim() const override { return r_.model().cfg.dim; }
  int vocab_size() const override { return r_.model().cfg.vocab_size; }
  int ctx_len() const override { return r_.ctx_len(); }
  int n_layers() const override { return r_.model().cfg.n_layers; }
  int first_layer() const override { return r_.first(); }
  int end_layer() const override { return r_.end(); }
  bool has_embedding() const override { return r_.has_embedding(); }
  bool has_head() const override { return r_.has_head(); }
  Status set_head(const HeadChoice& c, Arena& arena) { return r_.set_head(c, arena); }
  Status embed(int token, float* hidden) override;
  Status run_layers(float* hidden, int pos) override { return run_layers_batch(hidden, 1, pos); }
  Status head(const float* hidden, const float** logits) override;
  // run_layers for n positions pos0.. at once (hidden: n rows of dim()), 1 <= n <= max_batch():
  // each row the bits run_layers gives it.
  Status run_layers_batch(float* hidden, int n, int pos0);
  int max_batch() const { return r_.max_batch(); }

 private:
  TransformerRunner r_;
};

}  // namespace mcullm
