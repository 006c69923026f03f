// The llama-family transformer: RMSNorm, RoPE (adjacent pairs, as llama2.c and llama.cpp's
// "normal" mode), grouped-query attention with a KV cache, SwiGLU or ReLU-gated feed-forward
// (h = relu(gate x) * (up x), run gate first by model/sparse_ffn.h when down is f32), tied or separate head.
#pragma once
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "model/transformer.h"
#include "mcullm/status.h"

namespace mcullm {

// The FFN's activation; GGUF key mcullm.ffn_activation ("relu"; absent or "silu": SwiGLU), board
// image config.ffn (0 / 1).
enum class LlamaFfn : uint8_t { kSwiglu = 0, kRelu };
bool parse_llama_ffn(const char* name, size_t len, LlamaFfn* out);
const char* llama_ffn_name(LlamaFfn f);  // "silu" / "relu"

struct LlamaLayer {
  const float* attn_norm = nullptr;  // [dim]
  const float* ffn_norm = nullptr;   // [dim]
  MatRef wq, wk, wv, wo;             // [dim, dim], [kv_dim, dim], [kv_dim, dim], [dim, dim]
  MatRef w1, w2, w3;                 // gate [hidden, dim], down [dim, hidden], up [hidden, dim]
  const float* w2_t = nullptr;       // ReLU FFN: f32 down transposed [hidden, dim]; set: the sparse FFN runs
};

struct LlamaModel {
  LlamaConfig cfg;
  MatRef tok_emb;                    // [vocab, dim]
  LlamaLayer* layers = nullptr;      // [n_layers]
  const float* out_norm = nullptr;   // [dim]
  MatRef output;                     // [vocab, dim]; the same matrix as tok_emb when tied
  bool tied_output = true;
  LlamaFfn ffn = LlamaFfn::kSwiglu;

  // Every matrix has the shape the config implies and a type the kernels know.
  Status check_shapes() const;
};

// The three parts of LlamaContext::forward, shared with LlamaSlice (model/llama_slice.h): the
// token's embedding into hidden[dim]; layers [first, end) at `pos` on s.x, whose cache holds
// exactly those layers (cache layer l - first); the final norm and head of s.x into s.logits.
// A ReLU FFN runs gate first (model/sparse_ffn.h) in layers with w2_t when `sparse` is given, else
// dense; both give the same bits and count the live neurons in `sparse` / the context's counters.
struct LlamaSparseFfn {
  float* lanes = nullptr;  // [dim * 16]
  float* h = nullptr;      // [hidden]
  float* y = nullptr;      // [dim]
  bool enabled = true;     // false: dense even where w2_t is set (tests of sparse == dense)
  unsigned long long neurons = 0, live = 0;  // summed over tokens and layers
};
Status llama_embed(const LlamaModel& m, int token, float* hidden);
void llama_layers(const LlamaModel& m, ThreadPool& pool, const KernelSet& k, DecoderState& s, int first, int end, int pos,
                  LlamaSparseFfn* sparse = nullptr);
// Builds w2_t (in `arena`) for every layer of a ReLU model whose down matrix is f32.
Status llama_build_sparse_ffn(LlamaModel* m, Arena& arena);
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
  bool ffn_counts(unsigned long long* neurons, unsigned long long* live) const override;
  // false: the ReLU FFN runs dense even where w2_t is set (for tests of sparse == dense).
  void set_sparse_ffn(bool on) { ffn_.enabled = on; }

 private:
  const LlamaModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  DecoderState s_;
  BatchState b_;
  LlamaSparseFfn ffn_;
};

}  // namespace mcullm
