#include "model/arch.h"

#include "model/bitnet.h"
#include "model/llama.h"
#include "model/qwen2.h"

namespace mcullm {

namespace {

bool same(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

// board_arch: format/board_image.h BoardArch (kLlama 1 ... kQwen2 6); the image format owns the numbers.
constexpr ArchInfo kArchs[] = {
    // name            gguf_arch      hf_class             family                    spec                board ternary either act_var head  slices
    {"llama",          "llama",       "LlamaForCausalLM",  ArchFamily::kTransformer, llama_spec(),       1,    false,  false, true,   true,  ArchSlices::kMapped},
    {"bitnet-llama2c", "bitllama2c",  nullptr,             ArchFamily::kBitLlama2c,  BlockSpec(),        2,    true,   false, false,  false, ArchSlices::kNone},
    {"bitnet",         "bitnet",      nullptr,             ArchFamily::kTransformer, bitnet_spec(false), 3,    true,   false, true,   false, ArchSlices::kNone},
    {"bitnet-25",      "bitnet-25",   nullptr,             ArchFamily::kTransformer, bitnet_spec(true),  4,    true,   false, true,   false, ArchSlices::kNone},
    {"ple",            "esp32ai-ple", nullptr,             ArchFamily::kPle,         BlockSpec(),        5,    false,  false, false,  true,  ArchSlices::kNone},
    {"qwen2",          "qwen2",       "Qwen2ForCausalLM",  ArchFamily::kTransformer, qwen2_spec(true),   6,    true,   true,  true,   false, ArchSlices::kRanges},
};
constexpr int kNumArchs = static_cast<int>(sizeof kArchs / sizeof kArchs[0]);

}  // namespace

const ArchInfo* arch_table() { return kArchs; }
int n_archs() { return kNumArchs; }

const ArchInfo* arch_info(const char* name) {
  if (!name) return nullptr;
  for (const ArchInfo& a : kArchs)
    if (same(a.name, name)) return &a;
  return nullptr;
}

const ArchInfo* arch_info_by_gguf(const char* gguf_arch) {
  if (!gguf_arch) return nullptr;
  for (const ArchInfo& a : kArchs)
    if (same(a.gguf_arch, gguf_arch)) return &a;
  return nullptr;
}

const ArchInfo* arch_info_by_hf_class(const char* hf_class) {
  if (!hf_class) return nullptr;
  for (const ArchInfo& a : kArchs)
    if (a.hf_class && same(a.hf_class, hf_class)) return &a;
  return nullptr;
}

const ArchInfo* arch_info_by_board(uint32_t board_arch) {
  for (const ArchInfo& a : kArchs)
    if (a.board_arch == board_arch) return &a;
  return nullptr;
}

}  // namespace mcullm
