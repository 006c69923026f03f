// A Hugging Face model folder (config.json, model.safetensors or shards named by
// model.safetensors.index.json, tokenizer.json) of the Qwen2 or Llama family as a TransformerModel
// of the matching architecture row (qwen2 dense / llama), its weights widened to f32 (F32, F16 and
// BF16 tensors, exactly), for `mcullm convert` to write as GGUF. Host code.
//
// Llama's q_proj / k_proj rows are stored for RoPE on the halves of each head (Hugging Face's
// rotate_half); our llama architecture rotates adjacent pairs (2i, 2i + 1) as llama2.c and GGUF do,
// so the rows are put back in that order: GGUF row h*hd + 2i + j = HF row h*hd + j*hd/2 + i. Qwen2
// rotates the halves (RopeStyle::kNeox) and takes the rows as they are.
//
// Bad input is refused naming the file and the tensor: a missing config key, an unsupported
// architecture or option (rope_scaling, a head_dim other than hidden_size / heads, an activation
// other than silu, Llama biases), a missing tensor, one of the wrong shape or dtype, a corrupt
// safetensors file (format/safetensors_host.h), a shard index naming a missing file.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "load/mapped_file_host.h"
#include "model/arch.h"
#include "model/transformer_runner.h"
#include "tokenizer/bpe_tokenizer_host.h"

namespace mcullm {

struct HfCheckpoint {
  std::string dir;
  std::string hf_arch;                  // config.json architectures[0]
  const ArchInfo* arch = nullptr;       // qwen2 or llama
  TransformerModel model;               // f32 weights in `store`, dense spec of the row
  std::vector<TransformerLayer> layers;
  std::vector<std::vector<float>> store;
  std::vector<std::vector<uint8_t>> packed;  // ternary matrices (hf_ternarize)
  std::string dtypes;                   // the tensors' dtypes seen, e.g. "BF16" or "F32, F16"
  int files = 0;                        // safetensors files read
  bool has_vocab = false;               // tokenizer.json was there
  BpeVocab vocab;
};

// Reads the folder (the object holds pointers into itself: keep it where it is).
Status load_hf_checkpoint(const std::string& dir, HfCheckpoint* out);

// ternarize_layers (load/ternarize_host.h) on the checkpoint's layers. Only architectures whose
// files may hold ternary layers (ArchInfo::dense_or_ternary: qwen2) take it.
Status hf_ternarize(HfCheckpoint* ck);

}  // namespace mcullm
