// Named shapes of llama-family models: bitnet.cpp's dummy generator layouts, the released BitNet
// models' shapes, and Qwen2's ("ref": the ESP32-S3 cluster reference design). `mcullm dummy` writes
// random-weight files of them (apps/mcullm/dummy_gguf.h); `mcullm plan --layout` plans a qwen2 one.
#pragma once
#include <string>
#include <vector>

namespace mcullm {

struct ModelLayout {
  std::string name;
  std::string arch;  // its GGUF architecture (model/arch.h): bitnet, bitnet-25 or qwen2
  int dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0;
  int vocab = 0;     // 0: the tokenizer's size
  int seq_len = 2048;
  float rope_theta = 10000.0f;  // rope.freq_base
};

// bitnet.cpp's generator layouts (125M, 350M, 1B, 1.5B, 2.7B, 3.8B, 7B; vocab 32002 as its
// Llama-2 tokenizer gives), the released models' shapes ("large" = bitnet_b1_58-large 0.7B,
// "2B-4T" = BitNet b1.58 2B-4T, arch bitnet-25), and tiny layouts for tests ("tiny", "tiny-25").
const std::vector<ModelLayout>& bitnet_layouts();
// "ref": the ESP32-S3 cluster reference design's model (docs/cluster.md: 24 layers, d 896, FFN 4864,
// 14 / 2 heads of 64, vocabulary 32000, context 512); "small" (8 layers, d 256) and "tiny"
// (4 layers, d 128, the word vocabulary) for tests. Widths are multiples of 128 (i2_s rows).
const std::vector<ModelLayout>& qwen2_layouts();

// nullptr for an unknown name.
const ModelLayout* layout_by_name(const std::vector<ModelLayout>& layouts, const std::string& name);
inline const ModelLayout* bitnet_layout_by_name(const std::string& name) { return layout_by_name(bitnet_layouts(), name); }
inline const ModelLayout* qwen2_layout_by_name(const std::string& name) { return layout_by_name(qwen2_layouts(), name); }
// "ref, small, tiny".
std::string layout_names(const std::vector<ModelLayout>& layouts);

}  // namespace mcullm
