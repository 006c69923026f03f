// Random-weight models of the llama family's ternary architectures as GGUF, for `mcullm dummy --arch
// bitnet / bitnet-25 / qwen2` and the tests: the counterpart of bitnet.cpp's
// generate-dummy-bitnet-model, in the layout format/transformer_gguf.h reads. Every byte follows
// from the seed. (The llama dummy is a TransformerModel written by export_transformer_gguf, cmd_dummy.cpp.)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf_writer_host.h"
#include "plan/model_layouts_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

struct GgufDummyOptions {
  ModelLayout layout;                   // its arch picks the writer: bitnet, bitnet-25 or qwen2
  uint64_t seed = 1234;
  DType linear_type = DType::kI2_S;     // i2_s / tl1 / tl2 (the same weights whichever); qwen2 also f32 / f16 / q8_0 / q4_0 / q4g64
  DType embedding_type = DType::kF16;   // BitNet f32, f16 or q8_0; qwen2 any dense type
  bool tied_head = true;                // qwen2: else output.weight, of embedding_type
  bool relu_ffn = false;                // qwen2: a ReLU-gated FFN (mcullm.ffn_activation = "relu")
  std::string name;                     // general.name; empty: "mcullm dummy bitnet" / "mcullm dummy qwen2"
};

struct GgufDummyReport {
  uint64_t params = 0;         // weights of every tensor
  uint64_t linear_params = 0;  // of the layers' seven matrices
  size_t weight_bytes = 0;     // bytes of tensor data
  std::vector<std::string> notes;  // matrices a TL layout could not hold (written as i2_s)
};

// Fills `w` with the keys, the tensors and `tok`'s vocabulary (its size must be the layout's, or
// sets it when the layout's is 0). The embedding uniform in +-0.15; ternary matrices uniform over
// {-1, 0, 1} with scale 1 / sqrt(cols), packed as the linear type (format/ternary_gguf_host.h),
// dense ones uniform in +-1 / sqrt(cols) (then quantized). BitNet: norms 1.0; qwen2: norms 1 +- 0.2,
// biases +-0.5.
Status write_gguf_dummy(const GgufDummyOptions& opt, const Llama2cTokenizer& tok, GgufWriter* w, GgufDummyReport* report);

}  // namespace mcullm
