// esp32-ai's model file (FACTS.md section 4): header v0 (magic 0x504C4531, 40 bytes) or v1
// (magic "PLE\0", version 1, header_bytes >= 56, flags bit 0 = tied head, separate input and output
// vocabularies), then the tensors in a fixed order, int4 ones in esp32-ai's layout (quant/q4e.h)
// and norm weights as raw f32. Weights stay in the file; norm weights are copied (they may be
// unaligned). Every size is checked against the file before anything is bound.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "model/ple.h"
#include "mcullm/status.h"

namespace mcullm {

constexpr uint32_t kEsp32aiMagicV0 = 0x504C4531u;
constexpr uint32_t kEsp32aiMagicV1 = 0x00454C50u;  // "PLE\0"
constexpr int kEsp32aiHeaderV0Bytes = 40;
constexpr int kEsp32aiHeaderV1Bytes = 56;

// True when the file starts with either magic.
bool esp32ai_is_model(const uint8_t* data, size_t size);
// Reads the header only (for `mcullm` to describe a file).
Status esp32ai_read_config(const uint8_t* data, size_t size, PleConfig* cfg, int* header_bytes);
// Binds every tensor of the file; tables (layers, norm copies) come from `tables`.
Status esp32ai_load(const uint8_t* data, size_t size, Arena& tables, PleModel* out);

}  // namespace mcullm
