// The llama-family transformer: RMSNorm, RoPE (adjacent pairs, as llama2.c and llama.cpp's
// "normal" mode), grouped-query attention with a KV cache, SwiGLU feed-forward, tied or separate head.
#pragma once
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "model/transformer.h"
#include "mcullm/status.h"

namespace mcullm {

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

// The three parts of LlamaContext::forward, shared with LlamaSlice (model/llama_slice.h): the
// token's embedding into hidden[dim]; layers [first, end) at `pos` on s.x, whose cache holds
// exactly those layers (cache layer l - first); the final norm and head of s.x into s.logits.
Status llama_embed(const LlamaModel& m, int token, float* hidden);
void llama_layers(const LlamaModel& m, ThreadPool& pool, const KernelSet& k, DecoderState& s, int first, int end, int pos);
void llama_head(const LlamaModel& m, ThreadPool& pool, const KernelSet& k, DecoderState& s);

// The mutable state of one generation: KV cache and activations, all from one arena.
class LlamaContext final : public Decoder {
 public:
  // ctx_len <= cfg.seq_len positions of KV cache (0 = seq_len), f32 or int8.
  Status init(const LlamaModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  // Feeds `token` at position `pos` (0 <= pos < ctx_len, positions fed in order) and computes
  // the logits of the next token; *logits stays valid until the next call.
  Status forward(int token, int pos, const float** logits) override;
  // Batched prefill for up to `cap` tokens per call (buffers from `arena`); without it max_batch() is 1.
  Status enable_batch(int cap, Arena& arena);
  Status prefill(const int* tokens, int n, int pos0, const float** logits) override;
  int max_batch() const override { return b_.cap > 0 ? b_.cap : 1; }
  int vocab_size() const override { return model_->cfg.vocab_size; }
  int ctx_len() const override { return s_.ctx_len; }
  const LlamaModel& model() const { return *model_; }

 private:
  const LlamaModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  DecoderState s_;
  BatchState b_;
};

}  // namespace mcullm
