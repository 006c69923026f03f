// Byte-level BPE (GPT-2 style, as in GGUF "gpt2" vocabularies and Hugging Face tokenizer.json):
// text -> added/special tokens split out -> pre-tokenizer pieces (pretokenizer.h) -> each piece's
// bytes as byte tokens -> merges applied by rank (lowest first, leftmost on ties) -> ids.
// Host code: uses the standard library.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mcullm/status.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : uint8_t { kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// A byte-level BPE vocabulary as a file gives it.
struct BpeVocab {
  std::vector<std::string> tokens;  // as stored: byte-level text ("Ġhello") for normal tokens, raw text for added ones
  std::vector<TokenType> types;     // one per token; empty = all normal
  std::vector<std::pair<std::string, std::string>> merges;  // (left, right) in rank order
  PreTokenizer pre = PreTokenizer::kGpt2;
  bool ignore_merges = false;  // a piece that is a whole token is taken as it is (Llama-3)
  bool nfc = false;            // tokenizer.json's NFC normalizer: text between added tokens is NFC-normalized
  int bos = -1, eos = -1, eot = -1;
  bool add_bos = false;
};

// GPT-2's byte <-> character map: bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for themselves, the
// other 68 for U+0100.. in byte order. Appends the UTF-8 of byte b's character to *out.
void byte_level_append(uint8_t b, std::string* out);
// The bytes a byte-level string stands for; false when it has a character outside the map.
bool byte_level_decode(std::string_view text, std::string* out);

class BpeTokenizer : public Tokenizer {
 public:
  // Checks and indexes the vocabulary: every merge must name two tokens whose concatenation is a
  // token, and every byte must have its token; kCorrupt naming the culprit otherwise.
  Status load(BpeVocab vocab);

  const char* kind() const override { return "bpe"; }
  std::string describe() const override;
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  int eot_id() const override { return eot_; }
  bool wants_bos() const override { return add_bos_ && bos_ >= 0; }
  bool is_control(int id) const override;
  std::string token_text(int id) const override;
  PreTokenizer pretokenizer() const { return pre_; }
  size_t merge_count() const { return merges_.size(); }
  // Bytes held by the loaded vocabulary (strings, indexes, merge table), approximately.
  size_t memory_bytes() const;

  Status encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const override;
  std::string decode_step(int prev, int id) const override;
  std::string decode(const std::vector<int>& ids) const override;

  // For the board image writer (tokenizer_image_writer.h): what token `id` stands for (ids in range),
  // its type, the token of each byte (-1: none), the flags, and the merge table.
  const std::string& token_bytes(int id) const { return bytes_[static_cast<size_t>(id)]; }
  TokenType token_type(int id) const { return types_[static_cast<size_t>(id)]; }
  int byte_token(uint8_t b) const { return byte_id_[b]; }
  bool ignores_merges() const { return ignore_merges_; }
  bool normalizes_nfc() const { return nfc_; }
  struct MergeEntry {
    uint32_t left, right, rank, result;
  };
  std::vector<MergeEntry> merge_entries() const;

  // Pieces of at most this many bytes are merged with a linear scan, longer ones with a heap (the
  // two give the same ids; tests move the threshold to compare them).
  void set_heap_threshold(size_t bytes) { heap_threshold_ = bytes; }

 private:
  struct Scratch;
  Status encode_segment(const char* text, size_t n, Scratch* s, std::vector<int>* ids) const;
  void encode_piece(const uint8_t* p, size_t n, Scratch* s, std::vector<int>* ids) const;
  // (rank << 32) | merged id of the pair, or UINT64_MAX.
  uint64_t merge_of(int left, int right) const {
    const auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right));
    return it == merges_.end() ? UINT64_MAX : it->second;
  }

  std::vector<std::string> tokens_;  // as stored
  std::vector<std::string> bytes_;   // what each token stands for
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int> index_;  // stored text -> id (lowest id on duplicates)
  std::unordered_map<uint64_t, uint64_t> merges_;
  int byte_id_[256];
  bool all_bytes_ = false;  // every byte has its token
  // Added tokens matched in the text before pre-tokenization, longest first per first byte.
  struct Added {
    std::string text;
    int id;
    bool control;
  };
  std::vector<Added> added_;
  std::vector<int> added_by_byte_[256];
  PreTokenizer pre_ = PreTokenizer::kGpt2;
  bool ignore_merges_ = false;
  bool nfc_ = false;
  int bos_ = -1, eos_ = -1, eot_ = -1;
  bool add_bos_ = false;
  size_t heap_threshold_ = 256;
};

}  // namespace mcullm
