// The llama-family transformer: RMSNorm, RoPE (adjacent pairs, as llama2.c and llama.cpp's
// "normal" mode), grouped-query attention with a KV cache, SwiGLU feed-forward, tied or separate head.
#pragma once
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "mcullm/status.h"

namespace mcullm {

struct LlamaConfig {
  int dim = 0;
  int hidden_dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;
  int seq_len = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;

  int head_dim() const { return dim / n_heads; }
  int kv_dim() const { return head_dim() * n_kv_heads; }
  // Positive sizes, heads that divide dim, even head size, limits that keep every product in range.
  Status validate() const;
};

struct LlamaLayer {
  const float* attn_norm = nullptr;  // [dim]
  const float* ffn_norm = nullptr;   // [dim]
  MatRef wq, wk, wv, wo;             // [dim, dim], [kv_dim, dim], [kv_dim, dim], [dim, dim]
  MatRef w1, w2, w3;                 // gate [hidden, dim], down [dim, hidden], up [hidden, dim]
};

struct LlamaModel {
  LlamaConfig cfg;
  MatRef tok_emb;                    // [vocab, dim]
  LlamaLayer* layers = nullptr;      // [n_layers]
  const float* out_norm = nullptr;   // [dim]
  MatRef output;                     // [vocab, dim]; the same matrix as tok_emb when tied
  bool tied_output = true;

  // Every matrix has the shape the config implies and a type the kernels know.
  Status check_shapes() const;
};

// The mutable state of one generation: KV cache and activations, all from one arena.
class LlamaContext final : public Decoder {
 public:
  // ctx_len <= cfg.seq_len positions of KV cache (0 = seq_len).
  Status init(const LlamaModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels);
  // Feeds `token` at position `pos` (0 <= pos < ctx_len, positions fed in order) and computes
  // the logits of the next token; *logits stays valid until the next call.
  Status forward(int token, int pos, const float** logits) override;
  int vocab_size() const override { return model_->cfg.vocab_size; }
  int ctx_len() const override { return ctx_len_; }
  const LlamaModel& model() const { return *model_; }

 private:
  struct Scratch;
  void run_matvecs(const MatRef* const* mats, float* const* outs, int count, const float* x, int n);
  void attention(int layer, int pos);

  const LlamaModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  int ctx_len_ = 0;
  // activations
  float* x_ = nullptr;      // residual stream [dim]
  float* xb_ = nullptr;     // normed input / attention output [dim]
  float* q_ = nullptr;      // [dim]
  float* k_ = nullptr;      // [kv_dim] (points into the cache row of the current position)
  float* v_ = nullptr;
  float* att_out_ = nullptr;  // [dim]
  float* hb_ = nullptr;     // [hidden]
  float* hb2_ = nullptr;    // [hidden]
  float* att_ = nullptr;    // [n_heads, ctx_len] attention scores
  float* rope_cos_ = nullptr;  // [head_dim / 2] for the current position
  float* rope_sin_ = nullptr;
  float* logits_ = nullptr; // [vocab]
  float* key_cache_ = nullptr;    // [layers, ctx_len, kv_dim]
  float* value_cache_ = nullptr;
  int8_t* act_q_ = nullptr;  // quantized copy of the current matvec input
  float* act_scales_ = nullptr;
  int act_capacity_ = 0;
  ActVec act_;
};

}  // namespace mcullm
