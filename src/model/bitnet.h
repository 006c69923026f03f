// BitNet b1.58 as llama.cpp / bitnet.cpp name it in GGUF: architecture `bitnet` (bitnet.cpp's dummy
// models, the 0.7B-3B research models) and `bitnet-25` (microsoft's 2B-4T model).
//
// One layer, for the residual stream x:
//   h = RMSNorm(x; attn_norm) -> Q, K, V (ternary, one int8 quantization of h) -> RoPE -> attention
//   a = RMSNorm(attention output; attn_sub_norm) -> wo (ternary)          x += wo(a)
//   h = RMSNorm(x; ffn_norm) -> gate, up (ternary) -> act(gate) * up
//   f = RMSNorm(that; ffn_sub_norm) over the hidden width -> down (ternary)  x += down(f)
// then the final RMSNorm (output_norm) and the head (output.weight, or tied to token_embd).
// act = SiLU for `bitnet`, squared ReLU (max(0, g)^2) for `bitnet-25`. RoPE: `bitnet` rotates the
// pairs (i, i + head_dim/2) of each head (llama.cpp's NEOX mode); `bitnet-25` adjacent pairs
// (llama.cpp's NORM mode, as our llama model; not checked against a real 2B-4T file here).
//
// Every ternary matrix is i2_s, tl1 or tl2 with its per-tensor scale; its input is quantized as bitnet.cpp's
// I2_S path does (quantize_i8s: one scale 127 / max|x| per token). The matvec is the exact integer
// kernel (matvec_i2s, or the LUT kernels for tl1 / tl2 weights: model/ternary_lut.h, the same bits as
// i2_s), so the result is the same bits for any kernel table, packing and thread count; float
// parts (norms, attention, head) follow kernels.h's reduction order. The int32 sum is scaled as
// isum * (w_scale * (1 / s)), where bitnet.cpp computes isum / s * w_scale: results can differ from
// bitnet.cpp's in the last bits.
#pragma once
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "model/ternary_lut.h"
#include "model/transformer.h"
#include "mcullm/status.h"

namespace mcullm {

enum class BitnetFfn : uint8_t { kSilu = 0, kReluSqr };

struct BitnetConfig {
  LlamaConfig base;  // dim, hidden_dim, layers, heads, kv heads, vocab, seq_len, norm_eps, rope_theta
  BitnetFfn ffn = BitnetFfn::kSilu;
  RopeStyle rope = RopeStyle::kNeox;
};

struct BitnetLayer {
  const float* attn_norm = nullptr;      // [dim]
  const float* attn_sub_norm = nullptr;  // [dim]
  const float* ffn_norm = nullptr;       // [dim]
  const float* ffn_sub_norm = nullptr;   // [hidden]
  MatRef wq, wk, wv, wo;                 // i2_s: [dim, dim], [kv_dim, dim], [kv_dim, dim], [dim, dim]
  MatRef w1, w2, w3;                     // i2_s: gate [hidden, dim], down [dim, hidden], up [hidden, dim]
};

struct BitnetModel {
  BitnetConfig cfg;
  MatRef tok_emb;                    // [vocab, dim], any dense type (f32, f16, q8_0, ...)
  BitnetLayer* layers = nullptr;
  const float* out_norm = nullptr;   // [dim]
  MatRef output;                     // [vocab, dim]; tok_emb when tied
  bool tied_output = true;

  // Config limits, every norm present, i2_s matrices of the shapes the config implies, a head and
  // an embedding of a type the kernels read.
  Status check_shapes() const;
};

class BitnetContext final : public Decoder {
 public:
  // ctx_len <= seq_len positions of KV cache (0 = seq_len); everything from `arena`.
  Status init(const BitnetModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  Status forward(int token, int pos, const float** logits) override;
  // Batched prefill for up to `cap` tokens per call (buffers from `arena`); without it max_batch() is 1.
  Status enable_batch(int cap, Arena& arena);
  Status prefill(const int* tokens, int n, int pos0, const float** logits) override;
  int max_batch() const override { return b_.cap > 0 ? b_.cap : 1; }
  int vocab_size() const override { return model_->cfg.base.vocab_size; }
  int ctx_len() const override { return s_.ctx_len; }

 private:
  // Quantizes x (n values) once (one scale per token), then the matrices in one hand-off to the pool.
  void ternary(const MatRef* const* mats, float* const* outs, int count, const float* x, int n);

  const BitnetModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  DecoderState s_;
  BatchState b_;
  TlLutBuffer lut_, lut_batch_;  // LUT workspaces for tl1 / tl2 weights (empty without them)
};

}  // namespace mcullm
