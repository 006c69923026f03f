// Writes a LlamaModel (from any reader) as a llama.cpp-style GGUF, optionally quantized.
#pragma once
#include <string>
#include <vector>

#include "format/gguf_writer_host.h"
#include "model/llama.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

struct LlamaExportOptions {
  DType weight_type = DType::kF32;     // the layers' matrices (norms stay f32)
  // The token embedding and the output head. Unset: the weight type, except that 4-bit weight types
  // keep these at q8_0 (as llama.cpp keeps its output tensor at higher precision): on small models a
  // 4-bit head costs most of the quality loss.
  bool has_embedding_type = false;
  DType embedding_type = DType::kF32;
  std::string name = "mcullm model";
  std::string source;                  // recorded as mcullm.source
};

struct LlamaExportReport {
  int matrices = 0;
  int kept_f32 = 0;                     // matrices whose rows the chosen type cannot hold
  std::vector<std::string> notes;       // one line per matrix kept in f32, with the reason
  size_t weight_bytes = 0;
};

// The llama2.c-style vocabulary as llama.cpp's tokenizer.ggml.* keys (U+2581 for spaces).
Status add_llama_vocab(GgufWriter* w, const Llama2cTokenizer& tok, int vocab_size);

// Fills `w` with the model's keys, tensors and (when given) the tokenizer's vocabulary.
Status export_llama_gguf(const LlamaModel& model, const Llama2cTokenizer* tok, const LlamaExportOptions& opt,
                         GgufWriter* w, LlamaExportReport* report);

}  // namespace mcullm
