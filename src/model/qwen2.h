// Qwen2 (llama.cpp's `qwen2` architecture): the llama layer with biases on the q, k and v
// projections, RoPE on the pairs (i, i + head_dim/2) of each head (llama.cpp's NEOX mode),
// grouped-query attention, SwiGLU feed-forward, a tied or separate head.
//
// One layer, for the residual stream x:
//   h = RMSNorm(x; attn_norm) -> Q = wq h + bq, K = wk h + bk, V = wv h + bv -> RoPE -> attention
//   x += wo(attention output)
//   h = RMSNorm(x; ffn_norm) -> x += down(SiLU(gate h) * up h)
// then the final RMSNorm (output_norm) and the head (output.weight, or tied to token_embd).
//
// The seven linear matrices of every layer are either all ternary (i2_s / tl1 / tl2 with their
// per-tensor scale; the input quantized once per token as bitnet.cpp's I8_S, as model/bitnet.h) or
// all dense (f32, f16, q8_0, q4_0, q4g64: as model/llama.h), so that small models can be checked
// against a float reference. The embedding (one row dequantized per token) and the head may be any
// dense type, e.g. 4-bit.
//
// A model may hold only some of its layers (a cluster node's slice, model/layer_slice.h):
// layers [first_layer, end_layer), with or without the embedding and the head. Qwen2Runner runs
// any part of it on one residual stream; Qwen2Context (the whole model, Decoder) and Qwen2Slice (a
// LayerSlice) are both that runner, so embed + every range in order + head is forward bit for bit.
#pragma once
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "model/layer_slice.h"
#include "model/ternary_lut.h"
#include "model/transformer.h"
#include "mcullm/status.h"

namespace mcullm {

struct Qwen2Layer {
  const float* attn_norm = nullptr;  // [dim]
  const float* ffn_norm = nullptr;   // [dim]
  const float* bq = nullptr;         // [dim]
  const float* bk = nullptr;         // [kv_dim]
  const float* bv = nullptr;         // [kv_dim]
  MatRef wq, wk, wv, wo;             // [dim, dim], [kv_dim, dim], [kv_dim, dim], [dim, dim]
  MatRef w1, w2, w3;                 // gate [hidden, dim], down [dim, hidden], up [hidden, dim]
};

struct Qwen2Model {
  LlamaConfig cfg;                   // rope_theta 1e6 and norm_eps 1e-6 unless the file says otherwise
  bool ternary = true;               // the linear layers' kind (all of them)
  int first_layer = 0;               // layers held: [first_layer, end_layer)
  int end_layer = 0;
  Qwen2Layer* layers = nullptr;      // [end_layer - first_layer]: layers[l - first_layer] is layer l
  bool has_embedding = false;
  bool has_head = false;
  MatRef tok_emb;                    // [vocab, dim], any dense type (with has_embedding)
  const float* out_norm = nullptr;   // [dim] (with has_head)
  MatRef output;                     // [vocab, dim]; tok_emb's matrix when tied (with has_head)
  bool tied_output = true;

  bool whole() const { return first_layer == 0 && end_layer == cfg.n_layers && has_embedding && has_head; }
  const Qwen2Layer& layer(int l) const { return layers[l - first_layer]; }
  // Config limits, a layer range inside the model, and every part held present with its shape
  // and kind (ternary or dense, the same in every layer).
  Status check_shapes() const;
};

// Runs any part of a Qwen2 model on one residual stream (s().x; b().x for batches). Not a
// Decoder itself: Qwen2Context and Qwen2Slice wrap it. The KV cache covers the model's layers
// only (end_layer - first_layer of them).
class Qwen2Runner {
 public:
  Status init(const Qwen2Model* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  // Batched buffers for up to `cap` tokens per call.
  Status enable_batch(int cap, Arena& arena);

  // s().x = the embedding row of `token` (token checked).
  Status embed(int token);
  // Layers [l0, l1) (held ones) at `pos` on s().x; pos checked against the context.
  Status layers(int l0, int l1, int pos);
  // Final norm and head of s().x into s().logits.
  void head();

  // The same for n tokens at positions pos0.. on b().x (column i at i * dim).
  Status embed_batch(const int* tokens, int n);
  Status layers_batch(int l0, int l1, int pos0, int n);
  void head_batch(int n);

  const Qwen2Model& model() const { return *model_; }
  DecoderState& s() { return s_; }
  BatchState& b() { return b_; }
  int max_batch() const { return b_.cap > 0 ? b_.cap : 1; }
  int ctx_len() const { return s_.ctx_len; }

 private:
  // Matrices reading the same input x (n values): ternary (quantized once) or dense.
  void linear(const MatRef* const* mats, float* const* outs, int count, const float* x, int n);
  void linear_batch(const MatRef* const* mats, float* const* outs, const size_t* strides, int count, const float* x,
                    size_t x_stride, int n_vals, int n);

  const Qwen2Model* model_ = nullptr;
  LlamaConfig cache_cfg_;  // the config with the held layers' count (what the KV cache covers)
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  DecoderState s_;
  BatchState b_;
  TlLutBuffer lut_, lut_batch_;
};

// The whole model as a Decoder.
class Qwen2Context final : public Decoder {
 public:
  // The model must be whole (Qwen2Model::whole()).
  Status init(const Qwen2Model* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  Status enable_batch(int cap, Arena& arena) { return r_.enable_batch(cap, arena); }
  Status forward(int token, int pos, const float** logits) override;
  Status prefill(const int* tokens, int n, int pos0, const float** logits) override;
  int max_batch() const override { return r_.max_batch(); }
  int vocab_size() const override { return r_.model().cfg.vocab_size; }
  int ctx_len() const override { return r_.ctx_len(); }
  Qwen2Runner& runner() { return r_; }

 private:
  Qwen2Runner r_;
};

// A slice of the model (whatever part it holds) as a LayerSlice: one sequence's cache.
class Qwen2Slice final : public LayerSlice {
 public:
  Status init(const Qwen2Model* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  Status enable_batch(int cap, Arena& arena) { return r_.enable_batch(cap, arena); }
  int dim() const override { return r_.model().cfg.dim; }
  int vocab_size() const override { return r_.model().cfg.vocab_size; }
  int ctx_len() const override { return r_.ctx_len(); }
  int n_layers() const override { return r_.model().cfg.n_layers; }
  int first_layer() const override { return r_.model().first_layer; }
  int end_layer() const override { return r_.model().end_layer; }
  bool has_embedding() const override { return r_.model().has_embedding; }
  bool has_head() const override { return r_.model().has_head; }
  Status embed(int token, float* hidden) override;
  Status run_layers(float* hidden, int pos) override;
  Status head(const float* hidden, const float** logits) override;
  // run_layers for n positions pos0.. at once (hidden: n rows of dim()), 1 <= n <= max_batch():
  // each row the bits run_layers gives it.
  Status run_layers_batch(float* hidden, int n, int pos0);
  int max_batch() const { return r_.max_batch(); }

 private:
  Qwen2Runner r_;
};

}  // namespace mcullm
