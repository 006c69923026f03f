// The PLE transformer of esp32-ai (FACTS.md section 4): per-layer embeddings (a [vocab, L * P]
// table read one row per token, plus a projection of the token embedding), split-half RoPE, fused
// QKV, multi-head attention without GQA, SwiGLU (or, mcullm's extension, ReLU-gated) feed-forward, a per-layer GELU gate that mixes the
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
#include "model/sparse_ffn.h"
#include "model/transformer.h"
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
  // mcullm's extension (the "combo" model, docs/models.md): h = relu(gate x) * (up x) instead of
  // esp32-ai's silu. esp32-ai v1 header flags bit 1 (kEsp32aiFlagReluFfn), GGUF mcullm.ffn_activation
  // "relu", board image config.ffn 1.
  bool relu_ffn = false;

  int head_dim() const { return dim / n_heads; }
  Status validate() const;
  // The shared transformer view: hidden = ffn, kv heads = heads, vocab = output_vocab.
  LlamaConfig base() const;
};

struct PleLayer {
  const float* attn_norm = nullptr;  // [dim]
  const float* ffn_norm = nullptr;   // [dim]
  const float* ple_norm = nullptr;   // [dim]
  MatRef qkv;                        // [3 dim, dim]: q rows, then k, then v
  MatRef wq, wk, wv;                 // views of qkv's three row blocks (set by PleModel::split_qkv)
  MatRef attn_proj;                  // [dim, dim]
  MatRef gate, up;                   // [ffn, dim]
  MatRef down;                       // [dim, ffn]
  DownCols down_cols;                // ReLU FFN: down stored by column (ple_build_sparse_ffn); built: the sparse FFN runs
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

  // Sets each layer's wq / wk / wv views of its fused qkv.
  void split_qkv();
  Status check_shapes() const;
};

// A ReLU FFN (cfg.relu_ffn): each layer's column-stored q4e down matrix (build_down_cols) in `arena`,
// which lets PleContext run the FFN gate first (model/sparse_ffn.h); a no-op for SwiGLU models, and
// a layer whose down matrix cannot be column-stored (rows % 32, a non-finite scale) stays dense.
Status ple_build_sparse_ffn(PleModel* m, Arena& arena);

class PleContext final : public Decoder {
 public:
  Status init(const PleModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              bool f32_activations, KvType kv = KvType::kF32);
  // Buffers for batched prefill of up to `cap` tokens (1..4096) from `arena`; without it max_batch() is 1.
  Status enable_batch(int cap, Arena& arena);
  Status forward(int token, int pos, const float** logits) override;
  // Every weight matrix read once for the n tokens (kernels.h matmat); row i of *logits has the bits
  // forward(tokens[i], pos0 + i) gives. n == 1 is forward (the gate-first sparse FFN runs there only).
  Status prefill(const int* tokens, int n, int pos0, const float** logits) override;
  int max_batch() const override { return b_.cap; }
  Status set_head(const HeadChoice& c, Arena& arena) override;
  int vocab_size() const override { return model_->cfg.output_vocab; }
  bool logit_candidates(LogitCandidates* out) const override { return head_visit_.candidates(head_.groups, out); }
  int ctx_len() const override { return s_.ctx_len; }
  // After forward: the head's input (the final RMSNorm's output), [dim].
  const float* head_input() const { return b_.x; }
  const PleModel& model() const { return *model_; }
  bool f32_activations() const { return f32_act_; }
  // A ReLU FFN (cfg.relu_ffn): its counts since init. Gate first (ffn_relu_sparse_q) in the layers
  // with down_cols, with int8 activations and set_sparse_ffn on; dense elsewhere (f32 activations:
  // the column kernel has the int8 order only). Either way the same bits.
  bool ffn_counts(FfnCounts* counts) const override;
  // As TransformerRunner::set_sparse_ffn: off runs the ReLU FFN dense; max_live_permille as ReluFfnQ.
  void set_sparse_ffn(bool on, int max_live_permille = kSparseFfnMaxLivePermille) {
    sparse_on_ = on;
    sparse_max_live_ = max_live_permille;
  }

 private:
  // Matrices reading the same n columns (column i at x + i * x_stride, n_vals values; output m of
  // column i at outs[m] + i * strides[m]): int8 quantization (one scale per column) unless f32.
  void run(const MatRef* const* mats, float* const* outs, const size_t* strides, int count, const float* x,
           size_t x_stride, int n_vals, int n);
  // One matrix of n columns, output column i at out + i * out_stride.
  void run1(const MatRef& w, float* out, size_t out_stride, const float* x, size_t x_stride, int n_vals, int n) {
    const MatRef* mats[1] = {&w};
    run(mats, &out, &out_stride, 1, x, x_stride, n_vals, n);
  }
  // Scratch for `cap` columns: per-layer inputs, PLE gates, int8 activations and their scales.
  Status alloc_columns(int cap, Arena& arena);
  bool sparse_ffn(const PleLayer& Ly);

  const PleModel* model_ = nullptr;
  LlamaConfig base_;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  bool f32_act_ = false;
  DecoderState s_;           // attention scratch, KV cache; single-token buffers until enable_batch
  BatchState b_;             // x, xb, q, att_out, hb (gate), hb2 (up), logits, RoPE angles: [cap, ...]
  float* gate_ = nullptr;    // [cap, ple_dim]: the PLE gates
  float* ple_ = nullptr;     // [cap, L * P]: each token's per-layer inputs
  float* row_ = nullptr;     // [L * P]: a PLE table row
  int widest_ = 0;           // max(dim + 64, ffn, ple_dim): a column of act_q_ (the grouped head's scratch too)
  int8_t* act_q_ = nullptr;  // [cap, widest_]
  float* act_scales_ = nullptr;  // [cap + widest_]: one per column, or the grouped head's scales
  HeadChoice head_;
  float* head_rows_ = nullptr;  // grouped head: head_scratch_floats (model/vocab_head.h)
  HeadVisit head_visit_;
  FfnCounts ffn_;
  bool sparse_on_ = true;
  int sparse_max_live_ = kSparseFfnMaxLivePermille;
  float* ffn_h_ = nullptr;       // sparse FFN scratch: [ffn] h, [ffn] live neurons
  int32_t* ffn_live_ = nullptr;
};

}  // namespace mcullm
