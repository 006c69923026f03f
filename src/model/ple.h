// The PLE transformer of esp32-ai (FACTS.md section 4): per-layer embeddings (a [vocab, L * P]
// table read one row per token, plus a projection of the token embedding), split-half RoPE, fused
// QKV, multi-head attention without GQA, SwiGLU feed-forward, a per-layer GELU gate that mixes the
// PLE input into the residual stream, tied or untied head. RMSNorm eps 1e-6.
//
// Activations: int8 by default, quantized as esp32-ai's int8 build does (one scale per matvec input,
// kernels.h); `f32_activations` computes every matvec in f32, in esp32-ai's C core order.
#pragma once
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "mcullm/status.h"

namespace mcullm {

struct PleConfig {
  int version = 0;         // header version: 0 or 1
  int input_vocab = 0;     // rows of tok_emb and of the PLE table
  int output_vocab = 0;    // rows of the head
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int ffn = 0;
  int ple_dim = 0;
  int seq_len = 0;
  int group = 0;           // the header's group size (each tensor stores its own)
  float rope_theta = 10000.0f;
  bool tied_head = true;
  float norm_eps = 1e-6f;

  int head_dim() const { return dim / n_heads; }
  Status validate() const;
};

struct PleLayer {
  const float* attn_norm = nullptr;  // [dim]
  const float* ffn_norm = nullptr;   // [dim]
  const float* ple_norm = nullptr;   // [dim]
  MatRef qkv;                        // [3 dim, dim]: q rows, then k, then v
  MatRef attn_proj;                  // [dim, dim]
  MatRef gate, up;                   // [ffn, dim]
  MatRef down;                       // [dim, ffn]
  MatRef ple_gate;                   // [ple_dim, dim]
  MatRef ple_proj;                   // [dim, ple_dim]
};

struct PleModel {
  PleConfig cfg;
  MatRef tok_emb;                    // [input_vocab, dim]
  MatRef ple_model_proj;             // [n_layers * ple_dim, dim]
  const float* ple_proj_norm = nullptr;  // [ple_dim]
  MatRef ple_table;                  // [input_vocab, n_layers * ple_dim]
  PleLayer* layers = nullptr;
  const float* out_norm = nullptr;   // [dim]
  MatRef output;                     // [output_vocab, dim]: tok_emb's first rows when tied

  Status check_shapes() const;
};

class PleContext final : public Decoder {
 public:
  Status init(const PleModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              bool f32_activations);
  Status forward(int token, int pos, const float** logits) override;
  int vocab_size() const override { return model_->cfg.output_vocab; }
  int ctx_len() const override { return ctx_len_; }
  // After forward: the head's input (the final RMSNorm's output), [dim].
  const float* head_input() const { return x_; }
  const PleModel& model() const { return *model_; }
  bool f32_activations() const { return f32_act_; }

 private:
  void run_matvec(const MatRef& w, const float* x, float* y);
  void run_matvec2(const MatRef& a, const MatRef& b, const float* x, float* ya, float* yb);
  void attention(int layer, int pos);

  const PleModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  bool f32_act_ = false;
  int ctx_len_ = 0;
  float* x_ = nullptr;       // residual [dim]
  float* h_ = nullptr;       // [max(dim, ffn)]
  float* qkv_ = nullptr;     // [3 dim]
  float* att_out_ = nullptr; // [dim]
  float* g1_ = nullptr;      // [ffn]
  float* g2_ = nullptr;      // [max(ffn, ple_dim)]
  float* ple_ = nullptr;     // [L * P]: this token's per-layer inputs
  float* row_ = nullptr;     // [L * P]: the PLE table row
  float* rope_cos_ = nullptr;
  float* rope_sin_ = nullptr;
  float* att_ = nullptr;     // [n_heads, ctx_len]
  float* logits_ = nullptr;  // [output_vocab]
  float* key_cache_ = nullptr;    // [L, ctx_len, dim]
  float* value_cache_ = nullptr;
  int8_t* act_q_ = nullptr;
  float act_scale_ = 0.0f;
};

}  // namespace mcullm
