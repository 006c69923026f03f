// The architectures mcullm runs, one row each: the name the loader and the messages use, the GGUF
// general.architecture it is read from, the family whose code holds it (the llama family is one
// TransformerModel configured by the row's BlockSpec, model/transformer_runner.h), its board image
// id, and what the cluster and the converters must know. Code that tells architectures apart asks
// the row, never compares names (docs/architecture.md, "Adding an architecture").
// Freestanding: a constant table, no heap.
#pragma once
#include <stdint.h>

#include "model/transformer_runner.h"

namespace mcullm {

enum class ArchFamily : uint8_t {
  kTransformer,  // TransformerModel / TransformerContext / TransformerSlice with the row's spec
  kBitLlama2c,   // BitLlama2cModel: bitllama2.c's BitLinear model (its numerics follow that C core)
  kPle,          // PleModel: esp32-ai's per-layer-embedding model (its numerics follow esp32-ai)
};

// How a cluster cuts the architecture by layers (cluster/slice_source_host.h).
enum class ArchSlices : uint8_t {
  kNone,    // not run on a cluster
  kMapped,  // the whole file is mapped; a LlamaSlice over the layers (slice_hash)
  kRanges,  // a node reads only its range's tensors (load/layer_slice_loader_host.h, the same slice_hash)
};

struct ArchInfo {
  const char* name;       // what LoadedModel and the messages call it
  const char* gguf_arch;  // general.architecture of its GGUF files
  const char* hf_class;   // config.json "architectures"[0] of its Hugging Face checkpoints, or nullptr
  ArchFamily family;
  BlockSpec spec;         // kTransformer: the block; the default spec for the other families
  uint32_t board_arch;    // format/board_image.h BoardArch of its board images
  bool ternary;           // its linear layers are ternary (dense_or_ternary: may be)
  bool dense_or_ternary;  // its files choose dense or ternary linear layers (spec.ternary from the file)
  bool act_variants;      // its files may choose a ReLU FFN (llama, qwen2: ReLU; bitnet: ReLU^2; board config.ffn)
  bool head_groups;       // vocab head groups are read for it (model/vocab_head.h, `mcullm head`)
  ArchSlices slices;
};

// Every row, in board_arch order; n_archs() of them.
const ArchInfo* arch_table();
int n_archs();

// nullptr for an unknown (or null) name / GGUF architecture / board architecture.
const ArchInfo* arch_info(const char* name);
const ArchInfo* arch_info_by_gguf(const char* gguf_arch);
const ArchInfo* arch_info_by_board(uint32_t board_arch);
const ArchInfo* arch_info_by_hf_class(const char* hf_class);

}  // namespace mcullm
