// Writes the bitllama2.c BitLinear model as GGUF (format/bitllama2c_gguf.h describes the layout):
// the i2_s rows and scales as they are, so the file runs with the same bits as the .bin it came from.
#pragma once
#include <string>

#include "format/gguf_writer_host.h"
#include "model/bitnet_llama2c.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

struct BitLlama2cExportReport {
  int matrices = 0;
  size_t weight_bytes = 0;  // ternary tensors, tails included
};

Status export_bitllama2c_gguf(const BitLlama2cModel& model, const Llama2cTokenizer* tok, const std::string& source,
                              GgufWriter* w, BitLlama2cExportReport* report);

}  // namespace mcullm
