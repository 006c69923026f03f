// The tokenizer interface the rest of the engine uses: encode text to ids, decode ids (one step at a
// time for streaming), the vocabulary size, the special ids and each token's text. Implemented by
// Llama2cTokenizer (SentencePiece-style: llama2.c tokenizer.bin, GGUF "llama") and BpeTokenizer
// (byte-level BPE: GGUF "gpt2", Hugging Face tokenizer.json). load_tokenizer_file() in
// tokenizer_loader.h picks the right one from a file.
// Host code: uses the standard library.
#pragma once
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

#include "mcullm/status.h"

namespace mcullm {

// Appends code point cp (< 0x110000) to out as UTF-8 (utf8_encode).
void append_utf8(uint32_t cp, std::string* out);

struct EncodeOptions {
  bool add_bos = false;
  bool add_eos = false;
  // Control tokens written in the text ("<|im_start|>", "<|endoftext|>") become their ids; when
  // false they are encoded as plain text. (User-defined added tokens are always matched.)
  bool parse_special = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "llama2c-spm" or "bpe" (with the pre-tokenizer in describe()).
  virtual const char* kind() const = 0;
  // One line for reports: kind, vocabulary size, pre-tokenizer.
  virtual std::string describe() const;

  virtual int vocab_size() const = 0;
  // -1 when the vocabulary has none.
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  // End of a chat turn (<|im_end|>, <|eot_id|>, <|end_of_turn|>); -1 when none.
  virtual int eot_id() const { return -1; }
  // Whether the model wants BOS in front of a prompt (GGUF tokenizer.ggml.add_bos_token).
  virtual bool wants_bos() const { return bos_id() >= 0; }
  // Control tokens (BOS, EOS, <|im_start|>...): not text.
  virtual bool is_control(int id) const { return id == bos_id() || id == eos_id() || id == eot_id(); }
  // Should generation stop after `id`?
  bool is_end_of_generation(int id) const { return id >= 0 && (id == eos_id() || id == eot_id()); }

  // The token as the vocabulary stores it (SentencePiece pieces with real spaces; byte-level BPE
  // tokens as Hugging Face writes them, "Ġhello"); "" for ids out of range.
  virtual std::string token_text(int id) const = 0;

  // Replaces *ids. Invalid UTF-8 is encoded too (byte fallback / byte-level), never refused.
  virtual Status encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const = 0;

  // The bytes token `id` stands for when it follows `prev` (-1 at the start): streaming output
  // goes through Utf8StreamDecoder so that no half UTF-8 character is printed. Ids out of range
  // give "" (skipped, never a crash).
  virtual std::string decode_step(int prev, int id) const = 0;
  // Concatenation of decode_step over the sequence (prev of the first = -1).
  virtual std::string decode(const std::vector<int>& ids) const;
};

}  // namespace mcullm
