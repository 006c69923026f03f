// The llama family (model/arch.h rows of ArchFamily::kTransformer: llama, bitnet, bitnet-25, qwen2)
// from GGUF as llama.cpp names it, by two tables:
//  - per GGUF architecture: the keys' defaults and the extra keys it reads (gguf_arch_keys);
//  - per layer tensor (transformer_layer_tensors): its name blk.N.<suffix>, its TransformerLayer
//    member, its size, and the BlockSpec flag that asks for it (qkv_bias: attn_{q,k,v}.bias;
//    sub_norms: attn_sub_norm, ffn_sub_norm).
// Keys <arch>.embedding_length, .feed_forward_length, .block_count, .context_length,
// .attention.head_count, [.attention.head_count_kv], [.attention.layer_norm_rms_epsilon],
// [.rope.freq_base]; tensors token_embd.weight, output_norm.weight, [output.weight] (absent: tied
// to the embedding) and the layers'. Adding an architecture of the family is a row in each of
// model/arch.cpp and gguf_arch_keys. format/transformer_gguf_writer_host.h writes the same names.
// Weights stay in the file's bytes; only tables (and norms not stored as aligned f32) go into the arena.
#pragma once
#include "format/gguf.h"
#include "format/gguf_model.h"
#include "model/arch.h"
#include "model/transformer_runner.h"

namespace mcullm {

// A llama file's FFN activation (FfnAct): "relu" or "silu"; absent: SwiGLU. A ReLU model whose
// down matrices are f32 gets their transposed copies in the arena (the sparse FFN).
constexpr const char* kLlamaFfnKey = "mcullm.ffn_activation";
// Reads kLlamaFfnKey when present (llama and esp32ai-ple GGUF): *relu true for "relu", false for
// "silu" / "swiglu", unchanged when absent; anything else is an error.
Status gguf_read_ffn_relu(const GgufFile& f, bool* relu);

// What a GGUF architecture's keys leave out, and what else it reads.
struct GgufArchKeys {
  const char* gguf_arch;  // an ArchInfo row's gguf_arch
  float norm_eps;         // when attention.layer_norm_rms_epsilon is absent
  float rope_theta;       // when rope.freq_base is absent
  bool ffn_act_key;       // kLlamaFfnKey chooses a ReLU FFN
};
// nullptr for an architecture outside the family.
const GgufArchKeys* gguf_arch_keys(const char* gguf_arch);

// One tensor of each layer: a matrix (mat) of `size` rows and `cols` columns, or a vector (vec) of
// `size` values.
struct LayerTensor {
  enum Size : uint8_t { kDim, kKvDim, kHidden };
  enum Need : uint8_t { kAlways, kQkvBias, kSubNorms };
  const char* suffix;                         // blk.N.<suffix>
  MatRef TransformerLayer::*mat;              // or nullptr
  const float* TransformerLayer::*vec;        // or nullptr
  Size size;                                  // a vector's length, a matrix's rows
  Size cols;                                  // a matrix's columns
  Need need;
  TensorClass cls;
  bool in(const BlockSpec& s) const { return need == kAlways || (need == kQkvBias ? s.qkv_bias : s.sub_norms); }
  static int width(Size s, const LlamaConfig& c) { return s == kDim ? c.dim : s == kKvDim ? c.kv_dim() : c.hidden_dim; }
  int length(const LlamaConfig& c) const { return width(size, c); }
};
// Every layer tensor of the family, in the order they are read and written.
const LayerTensor* transformer_layer_tensors(int* count);

// The file's row: a kTransformer architecture (with `slices`, unless kNone), else kUnsupported
// naming the ones read.
Status gguf_transformer_arch(const GgufFile& f, ArchSlices slices, const ArchInfo** out);

// The whole model: spec from the architecture's row (a dense_or_ternary one: ternary when the
// first layer's wq is), check_shapes(), the sparse FFN's copies.
Status transformer_from_gguf(const GgufFile& file, Arena& arena, TransformerModel* model);

// Only layers [first, end) and, when asked, the embedding and / or the final norm and head: the
// other tensors are not looked at (a tied head reads token_embd.weight). end < 0: the last layer.
// `layers` (end - first entries) comes from `arena`.
Status transformer_part_from_gguf(const GgufFile& file, Arena& arena, int first, int end, bool embedding, bool head,
                                  TransformerModel* model);

}  // namespace mcullm
