// Pre-tokenizers of byte-level BPE vocabularies: split text into the pieces that BPE then merges
// inside, as the regular expressions of GPT-2, Llama-3, Qwen2, DeepSeek, Falcon and StarCoder do.
// Hand-written and table-driven: no regex library, no allocation, C headers only, so the same code
// can run on a microcontroller. Checked against PCRE2 (UTF + UCP) in tests/pretokenizer_test.cpp.
//
// Semantics. A pre-tokenizer is a list of stages (llama.cpp's `regex_exprs`, Hugging Face's
// Sequence of Split pre-tokenizers with behavior "Isolated"): each stage searches its pattern
// leftmost-first through every piece the previous stage produced (a match never crosses a piece
// boundary; lookahead and `$` see the end of the piece), and both the matches and the text between
// them become pieces. `\s` is Unicode White_Space (PCRE2's own `\s` also takes U+180E, for Perl
// compatibility; Hugging Face's regex engine and llama.cpp do not). Bytes that are not well-formed
// UTF-8 count as one character each, of class "other" (matched by `[^\s\p{L}\p{N}]`), so invalid
// input is split without a crash and without losing a byte.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace mcullm {

// One class per code point (they do not overlap): Unicode White_Space, \p{L}, \p{N}, \p{P}, other.
enum class UnicodeClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kPunct = 3, kSpace = 4 };
UnicodeClass unicode_class(uint32_t cp);
// Version of the Unicode tables ("14.0.0").
const char* unicode_tables_version();

// Decodes the code point at s[0] (n >= 1 bytes available). Well-formed UTF-8 (no overlongs, no
// surrogates, nothing past U+10FFFF) gives the code point and its length; anything else gives
// kInvalidCodePoint + the byte and length 1.
constexpr uint32_t kInvalidCodePoint = 0x110000;
uint32_t utf8_decode(const uint8_t* s, size_t n, size_t* len);
// True when all n bytes are well-formed UTF-8.
bool utf8_valid(const uint8_t* s, size_t n);
// Writes code point cp (< 0x110000) as 1 to 4 UTF-8 bytes into out; returns how many.
size_t utf8_encode(uint32_t cp, uint8_t out[4]);

enum class PreTokenizer : uint8_t {
  kGpt2,           // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+  (also mpt, olmo)
  kLlama3,         // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
                   //   |\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,          // the same with \p{N} (one digit per piece)
  kStarcoder,      // \p{N}, then GPT-2's (also refact, command-r, smollm, codeshell)
  kFalcon,         // [\p{P}\$\+<=>\^~\|`]+, then GPT-2's, then [0-9][0-9][0-9]
  kDeepseekLlm,    // [\r\n], \s?[cased letters]+, \s?[ASCII and full-width punctuation]+, \s+$, [CJK]+, \p{N}+
  kDeepseekCoder,  // [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}
};

// The pre-tokenizer for a GGUF `tokenizer.ggml.pre` name (llama.cpp's names), or false.
bool pretokenizer_from_name(const char* name, size_t len, PreTokenizer* out);
const char* pretokenizer_name(PreTokenizer kind);

// Calls fn(user, offset, length) for each piece of text[0, n), in order; the pieces tile the text.
// Recursion depth is the number of stages (at most 6); no allocation.
typedef void (*PieceFn)(void* user, size_t offset, size_t length);
void pretokenize(PreTokenizer kind, const char* text, size_t n, PieceFn fn, void* user);

}  // namespace mcullm
