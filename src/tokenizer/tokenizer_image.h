// The board tokenizer image: one flat, versioned, little-endian blob that a microcontroller keeps
// in flash and encodes / decodes with in place. Opening it checks every offset, count and index
// once; encoding then uses only the caller's two int32 buffers (no allocation, no recursion beyond
// the pre-tokenizer's stages). Written on the PC by tokenizer/tokenizer_image_writer_host.h from any
// SentencePiece-style (llama2.c, GGUF "llama") or byte-level BPE (GGUF "gpt2", tokenizer.json)
// tokenizer; the encoder gives the host tokenizer's ids (tests/tokenizer_image_test.cpp), except
// that it does not NFC-normalize (the image records whether the source did: flag kNfc).
//
// Layout (version 1). All offsets are from the start of the image and 8-byte aligned:
//   header   TokImageHeader (below)
//   str_off  u32[n_tokens + 1]  token i's bytes are strings[str_off[i], str_off[i+1])
//   strings  u8[strings_bytes]  SPM: the piece as stored (" hello", "<0x0A>"); BPE: the bytes
//                               the token stands for (added tokens: their text)
//   sorted   u32[n_tokens]      ids ordered by (bytes, id): binary-search lookup, lowest id first
//   scores   f32[n_tokens]      SPM merge scores (absent, offset 0, for BPE)
//   types    u8[n_tokens]       GGUF token types (1 normal, 3 control, 4 user-defined, 6 byte...)
//   merges   TokImageMerge[n_merges]  BPE: sorted by (left, right) (absent for SPM)
//   byte_ids i32[256]           SPM: byte fallback id (-1: none); BPE: the token of each byte
//   added    u32[n_added]       BPE added tokens, matched in the text before pre-tokenizing,
//                               longest first (then lowest id)
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "mcullm/status.h"
#include "tokenizer/pretokenizer.h"

namespace mcullm {

constexpr uint32_t kTokImageMagic = 0x4b54434d;  // "MCTK"
constexpr uint32_t kTokImageVersion = 1;

enum class TokImageKind : uint32_t { kSpm = 1, kBpe = 2 };

// Header flags.
constexpr uint32_t kTokImageIgnoreMerges = 1u << 0;  // BPE: a piece that is a whole token is taken as it is (Llama-3)
constexpr uint32_t kTokImageNfc = 1u << 1;           // the source NFC-normalizes (the image encoder does not)
constexpr uint32_t kTokImageAddBos = 1u << 2;        // the model wants BOS before a prompt

struct TokImageHeader {
  uint32_t magic, version, header_bytes, total_bytes;
  uint32_t kind, pre, flags, n_tokens;
  int32_t bos, eos, eot;
  uint32_t n_merges, n_added, strings_bytes;
  uint32_t off_str, off_strings, off_sorted, off_scores, off_types, off_merges, off_byte_ids, off_added;
};
static_assert(sizeof(TokImageHeader) == 88, "the header is part of the format");

struct TokImageMerge {
  uint32_t left, right, rank, result;
};

class TokenizerImage {
 public:
  // Checks the whole image (bounds, alignment, sortedness, every id in range); the bytes must stay
  // valid and unchanged while the object is used. kCorrupt / kUnsupported with the reason.
  Status open(const void* data, size_t size);

  bool is_open() const { return h_ != nullptr; }
  TokImageKind kind() const { return static_cast<TokImageKind>(h_->kind); }
  PreTokenizer pretokenizer() const { return static_cast<PreTokenizer>(h_->pre); }
  uint32_t flags() const { return h_->flags; }
  int vocab_size() const { return static_cast<int>(h_->n_tokens); }
  int bos_id() const { return h_->bos; }
  int eos_id() const { return h_->eos; }
  int eot_id() const { return h_->eot; }
  size_t size_bytes() const { return h_->total_bytes; }

  // Token id's stored bytes (for SPM the piece as stored); length 0 for ids out of range.
  const char* token_bytes(int id, size_t* len) const;
  // Id of the token whose stored bytes are exactly s[0, n) (lowest id among equals), or -1.
  int lookup(const char* s, size_t n) const;

  // Tokens text[0, n) gives, as the host tokenizer of the same vocabulary gives them (options as in
  // tokenizer.h's EncodeOptions; parse_special applies to BPE control tokens). `ids` and `work` are
  // caller buffers of `capacity` entries each; n + 3 is always enough (kOutOfRange when short).
  Status encode(const char* text, size_t n, bool add_bos, bool add_eos, bool parse_special, int32_t* ids,
                int32_t* work, size_t capacity, size_t* n_ids) const;

  // The bytes token `id` stands for after `prev` (-1 at the start), as the host's decode_step:
  // SPM drops the leading space of the first piece after BOS and turns "<0xXX>" into the byte.
  // Points into the image (or a static table); length 0 for ids out of range.
  const char* decode_step(int prev, int id, size_t* len) const;

 private:
  Status encode_spm(const char* text, size_t n, int32_t* ids, int32_t* work, size_t capacity, size_t* count) const;
  Status encode_bpe_segment(const char* text, size_t n, int32_t* ids, int32_t* work, size_t capacity, size_t* count) const;
  bool encode_bpe_piece(const uint8_t* p, size_t n, int32_t* ids, int32_t* work, size_t capacity, size_t* count) const;
  int lookup_concat(int a, int b) const;
  uint64_t merge_of(int32_t left, int32_t right) const;  // (rank << 32) | result, or UINT64_MAX
  const char* str(uint32_t id, uint32_t* len) const;

  const uint8_t* base_ = nullptr;
  const TokImageHeader* h_ = nullptr;
  const uint32_t* str_off_ = nullptr;
  const uint8_t* strings_ = nullptr;
  const uint32_t* sorted_ = nullptr;
  const float* scores_ = nullptr;
  const uint8_t* types_ = nullptr;
  const TokImageMerge* merges_ = nullptr;
  const int32_t* byte_ids_ = nullptr;
  const uint32_t* added_ = nullptr;
  int space_id_ = -1;  // SPM dummy prefix " "
};

}  // namespace mcullm
