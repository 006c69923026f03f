// The bitllama2.c model family (ternary TinyStories models, ../shared/FACTS.md section 2): a llama
// whose seven linear layers are BitLinear layers. Each BitLinear normalises its input with a
// SimpleRMSNorm (no weight, no epsilon), quantizes it to int8 with one scale per token
// (quantize_bitlinear), multiplies by ternary weights exactly in int32 and scales the sums by
// weight scale * activation scale. There are no attention / FFN norm weights; the final RMSNorm is
// learned (eps 1e-5); the classifier is the f32 token embedding; the FFN is SwiGLU.
//
// Numerics follow the family's C reader so that sampled runs reproduce its tokens: the SimpleRMSNorm
// is out = x * (1 / sqrt(sum(x^2) / n)) / n (= F.normalize(x) / sqrt(n) of its trainer); the
// attention output and the SwiGLU product are normalised and quantized over their whole length
// (dim and hidden_dim) before wo and w2; every float sum (norms, attention, classifier) runs in
// increasing index order in one scalar code path (the kernel tables serve only the exact ternary
// matvecs), and exp is a correctly rounded single-precision exp (a double exp rounded to float)
// where the C reader calls expf, SiLU written as x * (1 / (1 + exp(-x))). These models are small
// (dim <= 256), so the scalar paths cost little; results are the same for any kernels and threads.
// (Measured on bit1M: with mc_silu instead, greedy tokens still match but the seeded reference run
// diverges at step 144; with the kernel tables' attention and mc_expf as well, at step 54.)
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

struct BitLlama2cLayer {
  MatRef wq, wk, wv, wo;  // i2_s, with their per-matrix scale in MatRef::scale
  MatRef w1, w2, w3;      // gate [hidden, dim], down [dim, hidden], up [hidden, dim]
};

struct BitLlama2cModel {
  LlamaConfig cfg;                  // norm_eps: the final norm's epsilon (1e-5); rope_theta 10000
  MatRef tok_emb;                   // f32 [vocab, dim]
  const float* out_norm = nullptr;  // [dim]
  MatRef output;                    // f32 [vocab, dim]: the embedding (tied)
  BitLlama2cLayer* layers = nullptr;

  // Config limits, f32 embedding and head, i2_s matrices of the shapes the config implies.
  Status check_shapes() const;
};

class BitLlama2cContext final : public Decoder {
 public:
  // ctx_len <= cfg.seq_len positions of KV cache (0 = seq_len); everything from `arena`.
  // An int8 KV cache (kv) runs the shared int8 attention kernels instead of the C reader's scalar path.
  Status init(const BitLlama2cModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  Status forward(int token, int pos, const float** logits) override;
  int vocab_size() const override { return model_->cfg.vocab_size; }
  int ctx_len() const override { return s_.ctx_len; }

 private:
  // SimpleRMSNorm of x (n values) into normed_, quantized once, then the matrices in one hand-off.
  void bitlinear(const MatRef* const* mats, float* const* outs, int count, const float* x, int n);
  void attention(int layer, int pos);

  const BitLlama2cModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  DecoderState s_;
  float* normed_ = nullptr;  // SimpleRMSNorm output [max(dim, hidden)]
  TlLutBuffer lut_;          // LUT workspace for tl1 / tl2 weights (empty without them)
};

}  // namespace mcullm
