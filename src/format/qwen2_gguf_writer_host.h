// Qwen2 models with random weights from a seed, written as GGUF in llama.cpp's `qwen2` layout (what
// format/qwen2_gguf.h reads): `mcullm dummy --arch qwen2`. Every byte follows from the seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf_writer_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

struct Qwen2Layout {
  std::string name;
  int dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0;
  int vocab = 0;  // 0: the tokenizer's size
  int seq_len = 512;
};

// "ref": the ESP32-S3 cluster reference design's model (docs/cluster.md: 24 layers, d 896, FFN 4864,
// 14 / 2 heads of 64, vocabulary 32000, context 512); "small" (8 layers, d 256) and "tiny"
// (4 layers, d 128, the word vocabulary) for tests. Widths are multiples of 128 (i2_s rows).
const std::vector<Qwen2Layout>& qwen2_layouts();
// nullptr for an unknown name.
const Qwen2Layout* qwen2_layout_by_name(const std::string& name);
// "ref, small, tiny".
std::string qwen2_layout_names();

struct Qwen2DummyOptions {
  Qwen2Layout layout;
  uint64_t seed = 1234;
  DType linear_type = DType::kI2_S;     // i2_s / tl1 / tl2 (ternary), or f32 / f16 / q8_0 / q4_0 / q4g64
  DType embedding_type = DType::kQ4_0;  // any dense type
  bool tied_head = true;                // else output.weight, of embedding_type
  std::string name = "mcullm dummy qwen2";
};

struct Qwen2DummyReport {
  uint64_t params = 0;         // weights of every tensor
  uint64_t linear_params = 0;  // of the layers' seven matrices
  size_t weight_bytes = 0;     // bytes of tensor data
  std::vector<std::string> notes;  // matrices a TL layout could not hold (written as i2_s)
};

// Fills `w` with the keys, the tensors and `tok`'s vocabulary (its size must be the layout's, or
// sets it when the layout's is 0). Norm weights 1 +- 0.2, biases +-0.5, the embedding +-0.15;
// ternary matrices uniform over {-1, 0, 1} with scale 1 / sqrt(cols), dense ones uniform in
// +-1 / sqrt(cols) (then quantized to the type).
Status write_qwen2_dummy(const Qwen2DummyOptions& opt, const Llama2cTokenizer& tok, GgufWriter* w,
                         Qwen2DummyReport* report);

}  // namespace mcullm
