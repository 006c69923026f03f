// BitNet b1.58 models with random ternary weights, written as GGUF in llama.cpp's `bitnet` /
// `bitnet-25` layout (what format/bitnet_gguf.h reads): the counterpart of bitnet.cpp's
// generate-dummy-bitnet-model. Every byte follows from the seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf_writer_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

struct BitnetLayout {
  std::string name;
  std::string arch;  // "bitnet" or "bitnet-25"
  int dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0;
  int vocab = 0;     // 0: the tokenizer's size
  int seq_len = 2048;
  float rope_theta = 10000.0f;  // rope.freq_base
};

// bitnet.cpp's generator layouts (125M, 350M, 1B, 1.5B, 2.7B, 3.8B, 7B; vocab 32002 as its
// Llama-2 tokenizer gives), the released models' shapes ("large" = bitnet_b1_58-large 0.7B,
// "2B-4T" = BitNet b1.58 2B-4T, arch bitnet-25), and tiny layouts for tests ("tiny", "tiny-25").
const std::vector<BitnetLayout>& bitnet_layouts();
// nullptr for an unknown name.
const BitnetLayout* bitnet_layout_by_name(const std::string& name);

struct BitnetDummyOptions {
  BitnetLayout layout;
  uint64_t seed = 1234;
  DType embedding_type = DType::kF16;  // f32, f16 or q8_0; the head is tied to it
  DType ternary_type = DType::kI2_S;   // i2_s, tl1 or tl2 (the same weights whichever: same logits)
  std::string name = "mcullm dummy bitnet";
};

struct BitnetDummyReport {
  uint64_t params = 0;        // weights of every tensor (ternary, embedding, norms)
  uint64_t ternary_params = 0;
  size_t weight_bytes = 0;    // bytes of tensor data
  std::vector<std::string> notes;  // matrices a TL layout could not hold (written as i2_s)
};

// Fills `w` with the keys, the tensors (norms 1.0, ternary matrices with weights uniform over {-1, 0, 1}
// and scale 1 / sqrt(cols), packed as opt.ternary_type (format/ternary_gguf_host.h), the embedding uniform in +-0.15) and `tok`'s vocabulary, whose size
// must be the layout's vocabulary (or sets it when the layout's is 0).
Status write_bitnet_dummy(const BitnetDummyOptions& opt, const Llama2cTokenizer& tok, GgufWriter* w,
                          BitnetDummyReport* report);

}  // namespace mcullm
