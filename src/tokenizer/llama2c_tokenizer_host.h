// The llama2.c tokenizer (tokenizer.bin / tok512.bin): SentencePiece-style pieces with scores, encoded
// by llama2.c run.c's greedy best-score pair merging, plus a UTF-8-safe streaming decoder for output.
// Host code: uses the standard library.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

#include "mcullm/status.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

class Llama2cTokenizer : public Tokenizer {
 public:
  // tokenizer.bin: i32 max_token_length, then per token: f32 score, i32 len, len bytes.
  // vocab_size 0 = read tokens until the end of the data; otherwise the data must hold exactly
  // vocab_size tokens (neither fewer nor trailing bytes).
  Status load_file(const std::string& path, int vocab_size);
  Status load_bytes(const uint8_t* data, size_t size, int vocab_size);
  // From pieces already decoded (e.g. from a GGUF vocabulary; pieces use real spaces, not U+2581).
  Status load_vocab(std::vector<std::string> pieces, std::vector<float> scores);

  const char* kind() const override { return "llama2c-spm"; }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return 1; }
  int eos_id() const override { return 2; }
  std::string token_text(int id) const override { return piece(id); }
  // Out-of-range ids give an empty piece and a score of 0.
  const std::string& piece(int id) const;
  float score(int id) const;
  // Id of the piece that is exactly `text`, or -1.
  int lookup(std::string_view text) const;

  // run.c's encode: optional BOS, the dummy-prefix " " when text is non-empty, UTF-8 codepoints looked
  // up (byte fallback id = byte + 3 when not in the vocabulary), then repeatedly merge the adjacent
  // pair whose concatenation is in the vocabulary with the best score (leftmost pair on ties; pairs
  // scoring <= -1e10 are never merged, as in run.c), optional EOS. Result replaces *ids.
  // Unlike run.c a NUL byte does not end the text: it is encoded like any other byte (byte fallback).
  Status encode(std::string_view text, bool bos, bool eos, std::vector<int>* ids) const;
  // The interface's encode: the same (options.parse_special does not apply: the llama2.c vocabulary
  // has no special tokens that text could spell).
  Status encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const override {
    return encode(text, options.add_bos, options.add_eos, ids);
  }

  // run.c's decode of one step: after BOS (prev == 1) a leading space of the piece is dropped; a piece
  // "<0xXX>" becomes that byte. An id outside the vocabulary decodes to "" (skipped, never a crash).
  std::string decode_step(int prev, int id) const override;
  // Concatenation of decode_step over the sequence (prev of the first = -1).
  std::string decode(const std::vector<int>& ids) const override;

 private:
  Status finish_load();

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  // Piece -> id: an open-addressing table of id + 1 (0 = empty), a power of two at least twice the
  // vocabulary, probed linearly; the lowest id wins on duplicates. One allocation where a node-based
  // map took one per piece (building and freeing them was most of a short run's tokenizer time).
  std::vector<int32_t> index_;
  int space_id_ = -1;                                 // the dummy-prefix piece " "
};

// Streams bytes to the user without ever emitting half a UTF-8 character: push() returns what is
// complete so far, finish() flushes the rest. Bytes that cannot start or continue a well-formed
// sequence (stray continuation bytes, C0/C1/F5-FF, overlongs, surrogates) are passed through raw as
// soon as they are known to be invalid: nothing is ever replaced or lost.
class Utf8StreamDecoder {
 public:
  std::string push(std::string_view bytes);
  std::string finish();

 private:
  std::string pending_;  // at most 3 bytes: a valid but incomplete sequence
};

}  // namespace mcullm
