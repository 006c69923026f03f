// Loads a tokenizer of the right kind from a file:
//   GGUF with a vocabulary: tokenizer.ggml.model "llama" (SentencePiece-style -> Llama2cTokenizer)
//                           or "gpt2" (byte-level BPE, tokenizer.ggml.pre names the pre-tokenizer)
//   Hugging Face tokenizer.json: a BPE model with merges, added tokens, byte-level pre-tokenizer
//   llama2.c tokenizer.bin
//   the board tokenizer image ("MCTK", tokenizer/tokenizer_image.h)
// Host code.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/arena.h"
#include "format/gguf.h"
#include "mcullm/status.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

// By the file's content: GGUF magic, a JSON object, else llama2.c tokenizer.bin (whose size must
// then be exactly its tokens). *source (optional) says what was read.
Status load_tokenizer_file(const std::string& path, std::unique_ptr<Tokenizer>* out, std::string* source = nullptr);
Status load_tokenizer_bytes(const uint8_t* data, size_t size, std::unique_ptr<Tokenizer>* out,
                            std::string* source = nullptr);

// The vocabulary of an open GGUF file (model or vocab-only). `scratch` holds string indexes while
// loading and is rolled back before returning.
Status tokenizer_from_gguf_any(const GgufFile& file, Arena& scratch, std::unique_ptr<Tokenizer>* out);

// A Hugging Face tokenizer.json (the text of the file).
Status tokenizer_from_hf_json(std::string_view json, std::unique_ptr<Tokenizer>* out);
// Its vocabulary as read (special ids guessed as above), not yet checked by BpeTokenizer::load.
Status bpe_vocab_from_hf_json(std::string_view json, BpeVocab* out);

// -m MODEL_OR_TOKENIZER as `mcullm tokenize` takes it: a tokenizer file as above, or a model
// (llama2.c checkpoint) whose tokenizer load_tokenizer() finds beside it.
Status load_tokenizer_for(const std::string& path, std::unique_ptr<Tokenizer>* out, std::string* source);

}  // namespace mcullm
