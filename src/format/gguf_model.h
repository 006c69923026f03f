// Reading the parts every llama-style model shares from a GGUF file with llama.cpp's names:
// the `<arch>.*` config keys, token_embd / output / output_norm, and each layer's seven matrices
// (attn_q/k/v/output, ffn_gate/down/up) and norm vectors. Weights stay in the file's bytes; only
// tables (and norms not stored as aligned f32) go into the arena. The architecture loaders
// (transformer_gguf for the llama family, bitllama2c_gguf) are these calls plus their own extra tensors.
#pragma once
#include "format/gguf.h"
#include "model/transformer.h"
#include "quant/ternary.h"

namespace mcullm {

// The tensor names llama.cpp uses for layer `layer` (buffer of at least 64 bytes).
void llama_tensor_name(char* out, int size, int layer, const char* suffix);

// general.architecture, refused unless it is one of `accepted` (count names) with a message that
// names them; *index (optional) gets the position of the match.
Status gguf_expect_arch(const GgufFile& f, const char* const* accepted, int count, int* index);

// `<prefix>.embedding_length`, feed_forward_length, block_count, attention.head_count and
// context_length (required); attention.head_count_kv, attention.layer_norm_rms_epsilon and
// rope.freq_base (optional: kv heads = heads, eps and theta as *c holds them); the vocabulary from
// token_embd.weight's rows; then validate().
Status gguf_read_config(const GgufFile& f, const char* prefix, LlamaConfig* c);

// A 2-D tensor as a matrix (i2_s: with its per-tensor scale), its bytes counted as mapped in `cls`.
Status gguf_matrix(const GgufFile& f, const char* name, Arena& arena, TensorClass cls, MatRef* out);
// A tl1 / tl2 tensor (quant/ternary.h "Our GGUF tensor types"): tiling and scale from its tail
// (refused with a message naming the tensor when malformed), a TlTensor from the arena in out->tl.
// out's shape must be set. The index nibbles are not scanned: an out-of-range one reads a zero
// LUT entry (kernels.h), never memory outside the tensor.
Status gguf_tl_matrix(const GgufTensor& t, const char* name, TlType type, Arena& arena, MatRef* out);
// A vector of n weights as f32: in place when stored as aligned f32, else converted into the arena.
Status gguf_norm(const GgufFile& f, const char* name, int n, Arena& arena, const float** out);

// token_embd.weight, output.weight (absent: tied to the embedding) and output_norm.weight.
Status gguf_embedding_head(const GgufFile& f, int dim, Arena& arena, MatRef* tok_emb, MatRef* output, bool* tied,
                           const float** out_norm);

// The seven matrices of layer l, in the order wq, wk, wv, wo, w1 (gate), w2 (down), w3 (up).
// ternary: each must be i2_s, tl1 or tl2 with a finite, non-negative scale (refused naming the tensor).
Status gguf_layer_matrices(const GgufFile& f, int layer, Arena& arena, MatRef* const mats[7], bool ternary);

// For any layer struct with members wq, wk, wv, wo, w1, w2, w3.
template <class Layer>
Status gguf_layer_matrices(const GgufFile& f, int layer, Arena& arena, Layer& L, bool ternary = false) {
  MatRef* const mats[7] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3};
  return gguf_layer_matrices(f, layer, arena, mats, ternary);
}

}  // namespace mcullm
