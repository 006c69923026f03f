// Writes the board tokenizer image (tokenizer/tokenizer_image.h) from a tokenizer loaded on the PC:
// SentencePiece-style (llama2.c tokenizer.bin, GGUF "llama") or byte-level BPE (GGUF "gpt2",
// tokenizer.json). WordPiece vocabularies are refused (kUnsupported).
// Host code.
#pragma once
#include <stdint.h>

#include <vector>

#include "mcullm/status.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

Status write_tokenizer_image(const Tokenizer& tok, std::vector<uint8_t>* out);

}  // namespace mcullm
