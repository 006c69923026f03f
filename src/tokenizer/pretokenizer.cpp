#include "tokenizer/pretokenizer.h"

#include <string.h>

namespace mcullm {

namespace {

#include "tokenizer/unicode_classes.inc"

// ASCII fast path: the class of every byte below 0x80.
struct AsciiTable {
  uint8_t cls[128];
};
constexpr AsciiTable make_ascii_table() {
  AsciiTable t{};
  for (int c = 0; c < 128; ++c) {
    uint8_t k = 0;  // other (controls, symbols)
    if ((c >= 9 && c <= 13) || c == ' ') k = 4;
    else if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) k = 1;
    else if (c >= '0' && c <= '9') k = 2;
    // \p{P} in ASCII: !"#%&'()*,-./:;?@[\]_{}  ($+<=>^`|~ are symbols)
    else if (c == '!' || c == '"' || c == '#' || c == '%' || c == '&' || c == '\'' || c == '(' || c == ')' ||
             c == '*' || c == ',' || c == '-' || c == '.' || c == '/' || c == ':' || c == ';' || c == '?' ||
             c == '@' || c == '[' || c == '\\' || c == ']' || c == '_' || c == '{' || c == '}')
      k = 3;
    t.cls[c] = k;
  }
  return t;
}
constexpr AsciiTable kAscii = make_ascii_table();

// A class of code points given as sorted, inclusive ranges.
struct Range {
  uint32_t lo, hi;
};

bool in_ranges(const Range* r, size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (cp < r[mid].lo) hi = mid;
    else if (cp > r[mid].hi) lo = mid + 1;
    else return true;
  }
  return false;
}

// DeepSeek LLM's letter class (cased letters of many scripts), as code point ranges.
constexpr Range kDeepseekLetters[] = {
    {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},   {0x00D8, 0x00F6},
    {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},   {0x0295, 0x02AF},   {0x0370, 0x0373},
    {0x0376, 0x0377},   {0x037B, 0x037D},   {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},
    {0x038C, 0x038C},   {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
    {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// DeepSeek LLM's punctuation class: [!-/:-~！-／：-～‘-‟　-。]
constexpr Range kDeepseekPunct[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};
// DeepSeek's CJK class [一-龥ࠀ-一가-퟿] = U+0800..U+9FA5 and U+AC00..U+D7FF.
bool is_deepseek_cjk(uint32_t cp) { return (cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF); }

template <size_t N>
bool in(const Range (&r)[N], uint32_t cp) {
  return in_ranges(r, N, cp);
}

// --- characters of a piece ---------------------------------------------------------------------------

// A piece under scan: text[begin, end); positions are byte offsets into text.
struct Text {
  const uint8_t* s;
  size_t end;
  // Code point at i (< end) and its length.
  uint32_t at(size_t i, size_t* len) const {
    if (s[i] < 0x80) {
      *len = 1;
      return s[i];
    }
    return utf8_decode(s + i, end - i, len);
  }
};

inline UnicodeClass cls_of(uint32_t cp) {
  return cp < 128 ? static_cast<UnicodeClass>(kAscii.cls[cp]) : unicode_class(cp);
}
inline bool is_space(uint32_t cp) { return cls_of(cp) == UnicodeClass::kSpace; }
inline bool is_letter(uint32_t cp) { return cls_of(cp) == UnicodeClass::kLetter; }
inline bool is_number(uint32_t cp) { return cls_of(cp) == UnicodeClass::kNumber; }
inline bool is_punct(uint32_t cp) { return cls_of(cp) == UnicodeClass::kPunct; }
// [^\s\p{L}\p{N}]
inline bool is_other(uint32_t cp) {
  const UnicodeClass k = cls_of(cp);
  return k == UnicodeClass::kOther || k == UnicodeClass::kPunct;
}
inline bool is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }
// Falcon's [\p{P}\$\+<=>\^~\|`]
inline bool is_falcon_punct(uint32_t cp) {
  return is_punct(cp) || cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' || cp == '^' || cp == '~' ||
         cp == '|' || cp == '`';
}
inline bool is_deepseek_letter(uint32_t cp) { return in(kDeepseekLetters, cp); }
inline bool is_deepseek_punct(uint32_t cp) { return in(kDeepseekPunct, cp); }

typedef bool (*ClassFn)(uint32_t);

// End of the run of `pred` characters starting at i (i itself when none).
inline size_t run_end(const Text& t, size_t i, ClassFn pred) {
  while (i < t.end) {
    size_t len;
    if (!pred(t.at(i, &len))) break;
    i += len;
  }
  return i;
}

// `P?C+` where P is a one-character class: length matched at i, or 0.
inline size_t opt_prefix_run(const Text& t, size_t i, bool prefix_ok, size_t prefix_len, ClassFn pred,
                             uint32_t first) {
  if (prefix_ok && i + prefix_len < t.end) {
    size_t len;
    if (pred(t.at(i + prefix_len, &len))) return run_end(t, i + prefix_len, pred) - i;
  }
  if (pred(first)) return run_end(t, i, pred) - i;
  return 0;
}

// ` ?C+`
inline size_t opt_space_run(const Text& t, size_t i, uint32_t c0, ClassFn pred) {
  return opt_prefix_run(t, i, c0 == ' ', 1, pred, c0);
}

// `\s+(?!\S)|\s+` at i (c0 is whitespace): the whole run when it reaches the end of the piece or is
// one character long; otherwise the run minus its last character (which stays for the next piece).
inline size_t space_run(const Text& t, size_t i) {
  size_t j = i, last = i;
  while (j < t.end) {
    size_t len;
    if (!is_space(t.at(j, &len))) break;
    last = j;
    j += len;
  }
  if (j == t.end || last == i) return j - i;
  return last - i;
}

// 's|'t|'re|'ve|'m|'ll|'d, case-sensitive (GPT-2) or not (Llama-3: (?i:...), where U+017F LATIN
// SMALL LETTER LONG S folds to s). Length matched at i (s[i] == '\'').
inline size_t contraction(const Text& t, size_t i, bool ignore_case) {
  if (i + 1 >= t.end) return 0;
  size_t len1;
  uint32_t c1 = t.at(i + 1, &len1);
  if (ignore_case) {
    if (c1 == 0x17F) c1 = 's';
    else if (c1 >= 'A' && c1 <= 'Z') c1 += 32;
  }
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 1 + len1;
  if (c1 != 'r' && c1 != 'v' && c1 != 'l') return 0;
  if (i + 2 >= t.end) return 0;
  uint32_t c2 = t.s[i + 2];
  if (ignore_case && c2 >= 'A' && c2 <= 'Z') c2 += 32;
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// --- the patterns: each returns the length of the match at i, or 0 -----------------------------------

typedef size_t (*Matcher)(const Text& t, size_t i);

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const Text& t, size_t i) {
  size_t l0;
  const uint32_t c0 = t.at(i, &l0);
  if (c0 == '\'') {
    if (size_t m = contraction(t, i, false)) return m;
  }
  if (size_t m = opt_space_run(t, i, c0, is_letter)) return m;
  if (size_t m = opt_space_run(t, i, c0, is_number)) return m;
  if (size_t m = opt_space_run(t, i, c0, is_other)) return m;
  return is_space(c0) ? space_run(t, i) : 0;
}

// Llama-3 / Qwen2 (max_digits 3 / 1).
template <int max_digits>
size_t match_llama3(const Text& t, size_t i) {
  size_t l0;
  const uint32_t c0 = t.at(i, &l0);
  if (c0 == '\'') {
    if (size_t m = contraction(t, i, true)) return m;
  }
  const UnicodeClass k0 = cls_of(c0);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (size_t m = opt_prefix_run(t, i, k0 != UnicodeClass::kLetter && k0 != UnicodeClass::kNumber && !is_newline(c0),
                                l0, is_letter, c0))
    return m;
  // \p{N}{1,max_digits}
  if (k0 == UnicodeClass::kNumber) {
    size_t j = i + l0;
    for (int d = 1; d < max_digits && j < t.end; ++d) {
      size_t len;
      if (!is_number(t.at(j, &len))) break;
      j += len;
    }
    return j - i;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  if (size_t m = opt_space_run(t, i, c0, is_other)) {
    size_t j = i + m;
    while (j < t.end && (t.s[j] == '\r' || t.s[j] == '\n')) ++j;
    return j - i;
  }
  if (k0 != UnicodeClass::kSpace) return 0;
  // \s*[\r\n]+ : up to and including the last newline of the whitespace run
  size_t j = i, after_newline = 0;
  while (j < t.end) {
    size_t len;
    const uint32_t c = t.at(j, &len);
    if (!is_space(c)) break;
    j += len;
    if (is_newline(c)) after_newline = j;
  }
  if (after_newline) return after_newline - i;
  // \s+(?!\S)|\s+
  return space_run(t, i);
}

// StarCoder's and DeepSeek Coder's \p{N}
size_t match_one_number(const Text& t, size_t i) {
  size_t l0;
  return is_number(t.at(i, &l0)) ? l0 : 0;
}

// \p{N}+
size_t match_numbers(const Text& t, size_t i) { return run_end(t, i, is_number) - i; }

// Falcon's [\p{P}\$\+<=>\^~\|`]+
size_t match_falcon_punct(const Text& t, size_t i) { return run_end(t, i, is_falcon_punct) - i; }

// [0-9][0-9][0-9]
size_t match_three_digits(const Text& t, size_t i) {
  if (i + 3 > t.end) return 0;
  for (size_t k = 0; k < 3; ++k)
    if (t.s[i + k] < '0' || t.s[i + k] > '9') return 0;
  return 3;
}

// [\r\n]
size_t match_newline(const Text& t, size_t i) { return t.s[i] == '\r' || t.s[i] == '\n' ? 1 : 0; }

// \s?C+
template <ClassFn pred>
size_t match_opt_space_run(const Text& t, size_t i) {
  size_t l0;
  const uint32_t c0 = t.at(i, &l0);
  return opt_prefix_run(t, i, is_space(c0), l0, pred, c0);
}

// \s+$
size_t match_trailing_space(const Text& t, size_t i) {
  const size_t j = run_end(t, i, is_space);
  return j > i && j == t.end ? j - i : 0;
}

// [一-龥ࠀ-一가-퟿]+
size_t match_deepseek_cjk(const Text& t, size_t i) { return run_end(t, i, is_deepseek_cjk) - i; }

constexpr int kMaxStages = 6;
struct Stages {
  int n;
  Matcher m[kMaxStages];
};

constexpr Stages kStagesGpt2{1, {match_gpt2}};
constexpr Stages kStagesLlama3{1, {match_llama3<3>}};
constexpr Stages kStagesQwen2{1, {match_llama3<1>}};
constexpr Stages kStagesStarcoder{2, {match_one_number, match_gpt2}};
constexpr Stages kStagesFalcon{3, {match_falcon_punct, match_gpt2, match_three_digits}};
constexpr Stages kStagesDeepseekLlm{6,
                                    {match_newline, match_opt_space_run<is_deepseek_letter>,
                                     match_opt_space_run<is_deepseek_punct>, match_trailing_space, match_deepseek_cjk,
                                     match_numbers}};
constexpr Stages kStagesDeepseekCoder{5,
                                      {match_newline, match_opt_space_run<is_letter>, match_opt_space_run<is_punct>,
                                       match_deepseek_cjk, match_one_number}};

const Stages& stages_of(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kGpt2: return kStagesGpt2;
    case PreTokenizer::kLlama3: return kStagesLlama3;
    case PreTokenizer::kQwen2: return kStagesQwen2;
    case PreTokenizer::kStarcoder: return kStagesStarcoder;
    case PreTokenizer::kFalcon: return kStagesFalcon;
    case PreTokenizer::kDeepseekLlm: return kStagesDeepseekLlm;
    case PreTokenizer::kDeepseekCoder: return kStagesDeepseekCoder;
  }
  return kStagesGpt2;
}

struct Splitter {
  const Stages* st;
  const uint8_t* s;
  PieceFn fn;
  void* user;

  void split(int stage, size_t begin, size_t end) const {
    if (stage >= st->n || stage >= kMaxStages) {
      fn(user, begin, end - begin);
      return;
    }
    const Text t{s, end};
    const Matcher m = st->m[stage];
    size_t gap = begin, i = begin;
    while (i < end) {
      const size_t len = m(t, i);
      if (len == 0) {
        size_t cl;
        t.at(i, &cl);
        i += cl;
        continue;
      }
      if (gap < i) split(stage + 1, gap, i);
      split(stage + 1, i, i + len);
      i += len;
      gap = i;
    }
    if (gap < end) split(stage + 1, gap, end);
  }
};

}  // namespace

UnicodeClass unicode_class(uint32_t cp) {
  if (cp < 128) return static_cast<UnicodeClass>(kAscii.cls[cp]);
  if (cp >= 0x110000) return UnicodeClass::kOther;
  // Last break point <= cp.
  size_t lo = 0, hi = sizeof(kClassBreaks) / sizeof(kClassBreaks[0]);
  const uint32_t key = (cp << 3) | 7;
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (kClassBreaks[mid] <= key) lo = mid;
    else hi = mid;
  }
  return static_cast<UnicodeClass>(kClassBreaks[lo] & 7);
}

const char* unicode_tables_version() { return MC_UNICODE_VERSION; }

size_t utf8_encode(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  const size_t n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (size_t i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  out[0] = static_cast<uint8_t>(lead[n] | cp);
  return n;
}

uint32_t utf8_decode(const uint8_t* s, size_t n, size_t* len) {
  const uint8_t b0 = s[0];
  *len = 1;
  if (b0 < 0x80) return b0;
  uint32_t need, cp, lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return kInvalidCodePoint + b0;
  }
  if (n < need + 1) return kInvalidCodePoint + b0;
  for (uint32_t k = 1; k <= need; ++k) {
    const uint8_t c = s[k];
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return kInvalidCodePoint + b0;
    cp = (cp << 6) | (c & 0x3F);
  }
  *len = need + 1;
  return cp;
}

bool utf8_valid(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    if (utf8_decode(s + i, n - i, &len) >= kInvalidCodePoint) return false;
    i += len;
  }
  return true;
}

bool pretokenizer_from_name(const char* name, size_t len, PreTokenizer* out) {
  struct Entry {
    const char* name;
    PreTokenizer kind;
  };
  static const Entry kNames[] = {
      {"gpt-2", PreTokenizer::kGpt2},          {"gpt2", PreTokenizer::kGpt2},
      {"mpt", PreTokenizer::kGpt2},            {"olmo", PreTokenizer::kGpt2},
      {"llama3", PreTokenizer::kLlama3},       {"llama-v3", PreTokenizer::kLlama3},
      {"llama-bpe", PreTokenizer::kLlama3},    {"dbrx", PreTokenizer::kLlama3},
      {"smaug-bpe", PreTokenizer::kLlama3},    {"qwen2", PreTokenizer::kQwen2},
      {"stablelm2", PreTokenizer::kQwen2},     {"starcoder", PreTokenizer::kStarcoder},
      {"refact", PreTokenizer::kStarcoder},    {"command-r", PreTokenizer::kStarcoder},
      {"smollm", PreTokenizer::kStarcoder},    {"codeshell", PreTokenizer::kStarcoder},
      {"falcon", PreTokenizer::kFalcon},       {"deepseek-llm", PreTokenizer::kDeepseekLlm},
      {"deepseek-coder", PreTokenizer::kDeepseekCoder},
  };
  for (const Entry& e : kNames) {
    if (strlen(e.name) == len && memcmp(e.name, name, len) == 0) {
      *out = e.kind;
      return true;
    }
  }
  return false;
}

const char* pretokenizer_name(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kGpt2: return "gpt-2";
    case PreTokenizer::kLlama3: return "llama3";
    case PreTokenizer::kQwen2: return "qwen2";
    case PreTokenizer::kStarcoder: return "starcoder";
    case PreTokenizer::kFalcon: return "falcon";
    case PreTokenizer::kDeepseekLlm: return "deepseek-llm";
    case PreTokenizer::kDeepseekCoder: return "deepseek-coder";
  }
  return "?";
}

void pretokenize(PreTokenizer kind, const char* text, size_t n, PieceFn fn, void* user) {
  if (n == 0) return;
  const Splitter sp{&stages_of(kind), reinterpret_cast<const uint8_t*>(text), fn, user};
  sp.split(0, 0, n);
}

}  // namespace mcullm
