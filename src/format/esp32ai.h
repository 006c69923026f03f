// esp32-ai's model file (FACTS.md section 4): header v0 (magic 0x504C4531, 40 bytes) or v1
// (magic "PLE\0", version 1, header_bytes >= 56, flags bit 0 = tied head, separate input and output
// vocabularies), then the tensors in a fixed order, int4 ones in esp32-ai's layout (quant/q4e.h)
// and norm weights as raw f32. Weights stay in the file; norm weights are copied (they may be
// unaligned). Every size is checked against the file before anything is bound.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "format/gguf.h"
#include "model/ple.h"
#include "mcullm/status.h"

namespace mcullm {

constexpr uint32_t kEsp32aiMagicV0 = 0x504C4531u;
constexpr uint32_t kEsp32aiMagicV1 = 0x00454C50u;  // "PLE\0"
constexpr int kEsp32aiHeaderV0Bytes = 40;
constexpr int kEsp32aiHeaderV1Bytes = 56;
// v1 header flags: bit 0 tied head (esp32-ai's); bit 1 ReLU FFN (PleConfig::relu_ffn), mcullm's
// extension: esp32-ai itself does not read it and would run such a file with its SiLU FFN.
constexpr uint32_t kEsp32aiFlagTied = 1u;
constexpr uint32_t kEsp32aiFlagReluFfn = 2u;

// One tensor of a PLE model, in file order, with its GGUF name (llama.cpp style where one exists).
struct PleSlot {
  char name[48];
  int layer;            // -1: model-wide
  bool quant;           // q4e matrix (else an f32 vector of `cols` values)
  int rows, cols;
  MatRef* mat;          // quant
  const float** norm;   // !quant
};
// Every tensor slot of `m` (its cfg and layers set), in esp32-ai's file order; returns the count
// (at most 10 * n_layers + 6 = ple_slot_capacity).
int ple_slot_capacity(const PleConfig& c);
// The arena class of a slot's bytes: embedding, attention, ffn, head, norm; the PLE tensors are kOther.
TensorClass ple_slot_class(const PleSlot& s);
int ple_slots(PleModel& m, PleSlot* out);

// True when the file starts with either magic.
bool esp32ai_is_model(const uint8_t* data, size_t size);
// Reads the header only (for `mcullm` to describe a file).
Status esp32ai_read_config(const uint8_t* data, size_t size, PleConfig* cfg, int* header_bytes);
// Binds every tensor of the file; tables (layers, norm copies) come from `tables`.
Status esp32ai_load(const uint8_t* data, size_t size, Arena& tables, PleModel* out);

// GGUF form (general.architecture "esp32ai-ple"): keys ple.* (see esp32ai.cpp), each q4e matrix as a
// q4e tensor of codes plus "<name>.scales" (f16, [n_groups, rows]), ple.group_size for all of them;
// mcullm.ffn_activation "relu" (format/transformer_gguf.h kLlamaFfnKey) for a ReLU FFN.
constexpr const char* kPleGgufArch = "esp32ai-ple";
Status ple_from_gguf(const GgufFile& f, Arena& tables, PleModel* out);

}  // namespace mcullm
