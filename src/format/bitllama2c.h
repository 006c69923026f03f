// bitllama2.c checkpoints (the ternary TinyStories models): an ak42 version 1 header (256 bytes:
// magic, version 1, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, u8
// shared_classifier = 1), then f32 rms_final[dim], f32 tok_embeddings[vocab][dim], then for each of
// wq (all layers), wk, wv, wo, w1, w2, w3: per layer one f32 scale and the ternary matrix
// [out][in], 4 weights a byte (TernaryLayout kBitllama2cMsb or kBitllama2cLsb: the header does not
// say which). An f32 ak42 v1 file has the same header: the file size tells them apart.
// The matrices are repacked into i2_s rows in the arena (the kernels' layout); the f32 parts stay
// in place (the bytes must outlive the model).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "model/bitnet_llama2c.h"
#include "quant/ternary.h"

namespace mcullm {

struct BitLlama2cInfo {
  LlamaConfig cfg;
  uint64_t expected_size = 0;  // bytes a ternary file with this header has
};

// Reads and checks the header; kCorrupt when the file does not hold exactly the ternary layout's
// bytes (an f32 ak42 v1 file gets this error too: see bitllama2c_is_ternary).
Status bitllama2c_read_header(const uint8_t* data, size_t size, BitLlama2cInfo* info);

// True when the bytes are an ak42 v1 header whose size is the ternary layout's (other fields, such
// as the classifier flag, are checked by bitllama2c_read_header, which then names the problem).
bool bitllama2c_is_ternary(const uint8_t* data, size_t size);

// Builds `model` over the bytes with the given bit order (kBitllama2cMsb or kBitllama2cLsb).
// The i2_s kernels need dim and hidden_dim to be multiples of 128 (kUnsupported otherwise); a code
// 10 in any matrix is kCorrupt (it is no ternary value in either order).
Status bitllama2c_load(const uint8_t* data, size_t size, TernaryLayout order, Arena& arena, BitLlama2cModel* model);

}  // namespace mcullm
