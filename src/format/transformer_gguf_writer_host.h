// Writes a model of the llama family (a TransformerModel from any reader) as a llama.cpp-style GGUF
// with format/transformer_gguf.h's names: the tensors of its BlockSpec, dense matrices optionally
// quantized, ternary ones (i2_s / tl1 / tl2) as they are. transformer_from_gguf reads it back.
#pragma once
#include <string>
#include <vector>

#include "format/gguf_writer_host.h"
#include "model/transformer_runner.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

struct GgufExportOptions {
  const char* gguf_arch = "llama";     // a row of format/transformer_gguf.h gguf_arch_keys; its spec is the model's
  DType weight_type = DType::kF32;     // the layers' dense matrices (norms stay f32; ternary ones stay as they are)
  // The token embedding and the output head. Unset: the weight type, except that 4-bit weight types
  // keep these at q8_0 (as llama.cpp keeps its output tensor at higher precision): on small models a
  // 4-bit head costs most of the quality loss.
  bool has_embedding_type = false;
  DType embedding_type = DType::kF32;
  std::string name = "mcullm model";
  std::string source;                  // recorded as mcullm.source
};

struct GgufExportReport {
  int matrices = 0;
  int kept_f32 = 0;                     // matrices whose rows the chosen type cannot hold
  std::vector<std::string> notes;       // one line per matrix kept in f32, with the reason
  size_t weight_bytes = 0;
};

// The llama2.c-style vocabulary as llama.cpp's tokenizer.ggml.* keys (U+2581 for spaces).
Status add_llama_vocab(GgufWriter* w, const Llama2cTokenizer& tok, int vocab_size);

// A byte-level BPE vocabulary (a Hugging Face tokenizer.json) as llama.cpp's "gpt2" tokenizer.ggml.*
// keys: tokens as stored, token types, merges "left right", the pre-tokenizer's name, special ids.
// At most vocab_size tokens (a model may pad its embedding). tokenizer.json's NFC normalizer, which
// llama.cpp has no key for, becomes mcullm.tokenizer.nfc = true (our reader applies it).
Status add_bpe_vocab(GgufWriter* w, const BpeVocab& v, int vocab_size);

// Fills `w` with the model's keys, tensors and (when given) the tokenizer's vocabulary.
Status export_transformer_gguf(const TransformerModel& model, const Llama2cTokenizer* tok, const GgufExportOptions& opt,
                               GgufWriter* w, GgufExportReport* report);

}  // namespace mcullm
