// llama2.c checkpoints: the legacy header (7 x i32, a negative vocab size = separate classifier)
// and the "ak42" exports: version 1 (f32) and version 2 (int8 groups with f32 scales).
// f32 weights stay in place (the bytes must outlive the model); version 2 weights are expanded to
// f32 in the arena (their values q * s are exact in f32).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "model/llama.h"

namespace mcullm {

constexpr uint32_t kLlama2cMagic = 0x616b3432;  // "ak42"

enum class Llama2cVersion { kLegacy = 0, kV1F32 = 1, kV2Int8 = 2 };

struct Llama2cInfo {
  LlamaConfig cfg;
  Llama2cVersion version = Llama2cVersion::kLegacy;
  bool shared_classifier = true;
  int group_size = 0;         // version 2 only
  uint64_t expected_size = 0; // bytes the header implies
};

// Reads and checks the header, and that the file holds exactly the bytes it implies.
Status llama2c_read_header(const uint8_t* data, size_t size, Llama2cInfo* info);

// Builds `model` over the bytes; tables (layers, expanded weights) come from `arena`.
Status llama2c_load(const uint8_t* data, size_t size, Arena& arena, LlamaModel* model);

}  // namespace mcullm
