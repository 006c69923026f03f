// WordPiece (BERT; GGUF tokenizer.ggml.model = "bert", as llama.cpp converts it: a word-initial token
// is stored with a U+2581 prefix, a continuation token without BERT's "##"). Encode: control tokens
// split out (with parse_special), then BERT's normalization (control characters dropped, NFD, nonspacing
// marks removed, lowercase), words split at whitespace, each punctuation character / ASCII symbol / CJK
// ideograph a word of its own, then greedy longest-match per word ([UNK] for a word that cannot be
// covered). Decode gives word-initial tokens a leading space: uncased WordPiece is lossy by design
// (case, accents and spacing around punctuation are not kept). Host code: Unicode data from utf8proc.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

struct WordPieceVocab {
  std::vector<std::string> tokens;  // as GGUF stores them ("\xE2\x96\x81hello", "ing", "[CLS]")
  std::vector<TokenType> types;     // empty = all normal
  int unk = -1, cls = -1, sep = -1;
};

class WordPieceTokenizer : public Tokenizer {
 public:
  Status load(WordPieceVocab vocab);

  const char* kind() const override { return "wordpiece"; }
  std::string describe() const override;
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  int bos_id() const override { return cls_; }
  int eos_id() const override { return sep_; }
  bool is_control(int id) const override;
  std::string token_text(int id) const override;

  Status encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const override;
  std::string decode_step(int prev, int id) const override;

  // BERT's normalization and word split of `text` (exposed for tests).
  std::vector<std::string> words(std::string_view text) const;

 private:
  void encode_segment(std::string_view text, std::vector<int>* ids) const;

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int> index_;
  struct Added {
    std::string text;
    int id;
  };
  std::vector<Added> control_;  // longest first
  size_t max_token_bytes_ = 0;
  int unk_ = -1, cls_ = -1, sep_ = -1;
};

}  // namespace mcullm
