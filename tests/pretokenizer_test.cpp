// The hand-written pre-tokenizers (src/tokenizer/pretokenizer.cpp) against PCRE2 (UTF + UCP) running
// the regular expressions they implement, over large texts (../shared/data) and adversarial Unicode:
// the pieces must be the same, byte for byte. Also: every code point's class against PCRE2, pieces
// always tile the input (invalid UTF-8 included), and pretokenize() never allocates.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_host.h"

// Counts heap allocations made by this executable, to check that pretokenize() makes none.
namespace {
std::atomic<long> g_allocations{0};
}
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace mcullm {
namespace {

using test::read_text;
using test::shared_path;

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kTextLimit = 200000;  // bounded time in the sanitizer run
constexpr int kRandomStrings = 3000;
#else
constexpr size_t kTextLimit = 1u << 30;
constexpr int kRandomStrings = 30000;
#endif

// Unicode White_Space, which is what \s means for Hugging Face's regex engine and llama.cpp. PCRE2's
// own \s (UCP) also matches U+180E MONGOLIAN VOWEL SEPARATOR, for Perl compatibility: the reference
// patterns spell the class out instead (and ClassesMatchPcre2 checks that this is the only difference).
#define WS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define S_ "[" WS "]"
#define NS_ "[^" WS "]"

const char* const kGpt2[] = {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" S_ "+(?!" NS_ ")|" S_ "+"};
const char* const kLlama3[] = {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS
                               "\\p{L}\\p{N}]+[\\r\\n]*|" S_ "*[\\r\\n]+|" S_ "+(?!" NS_ ")|" S_ "+"};
const char* const kQwen2[] = {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS
                              "\\p{L}\\p{N}]+[\\r\\n]*|" S_ "*[\\r\\n]+|" S_ "+(?!" NS_ ")|" S_ "+"};
const char* const kStarcoder[] = {"\\p{N}", kGpt2[0]};
// llama.cpp's second Falcon pattern is GPT-2's without the final |\s+ (the same pieces).
const char* const kFalcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+",
                               "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" S_ "+(?!" NS_ ")",
                               "[0-9][0-9][0-9]"};
const char* const kDeepseekLlm[] = {
    "[\\r\\n]",
    "" S_ "?["
    "\\x{41}-\\x{5A}\\x{61}-\\x{7A}\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-"
    "\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
    "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"
    "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-"
    "\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-"
    "\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-"
    "\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
    "]+",
    "" S_ "?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "" S_ "+$",
    "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
};
const char* const kDeepseekCoder[] = {"[\\r\\n]", "" S_ "?\\p{L}+", "" S_ "?\\p{P}+",
                                      "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"};

struct Kind {
  PreTokenizer kind;
  const char* const* patterns;
  size_t count;
};
template <size_t N>
Kind kind(PreTokenizer k, const char* const (&p)[N]) {
  return Kind{k, p, N};
}
const Kind kKinds[] = {
    kind(PreTokenizer::kGpt2, kGpt2),           kind(PreTokenizer::kLlama3, kLlama3),
    kind(PreTokenizer::kQwen2, kQwen2),         kind(PreTokenizer::kStarcoder, kStarcoder),
    kind(PreTokenizer::kFalcon, kFalcon),       kind(PreTokenizer::kDeepseekLlm, kDeepseekLlm),
    kind(PreTokenizer::kDeepseekCoder, kDeepseekCoder),
};

struct Piece {
  size_t off, len;
  bool operator==(const Piece& o) const { return off == o.off && len == o.len; }
};

// The reference: each PCRE2 pattern splits every piece of the previous stage (matches and the gaps
// between them become pieces), as llama.cpp and Hugging Face's Split(behavior = Isolated) do.
class Reference {
 public:
  explicit Reference(const Kind& k) {
    for (size_t i = 0; i < k.count; ++i) {
      int err;
      PCRE2_SIZE at;
      pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(k.patterns[i]), PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at, nullptr);
      if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        ADD_FAILURE() << "pattern " << i << " of " << pretokenizer_name(k.kind) << " at " << at << ": " << msg;
        continue;
      }
      pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // faster when available; same results
      codes_.push_back(code);
    }
    md_ = pcre2_match_data_create(4, nullptr);
  }
  ~Reference() {
    for (pcre2_code* c : codes_) pcre2_code_free(c);
    pcre2_match_data_free(md_);
  }
  std::vector<Piece> split(const std::string& text) const {
    // PCRE2 would check the UTF-8 of the whole subject at every call (quadratic): check it once.
    EXPECT_TRUE(utf8_valid(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    std::vector<Piece> pieces{{0, text.size()}};
    if (text.empty()) pieces.clear();
    for (pcre2_code* code : codes_) {
      std::vector<Piece> next;
      for (const Piece& p : pieces) {
        const PCRE2_SPTR s = reinterpret_cast<PCRE2_SPTR>(text.data() + p.off);
        size_t start = 0, gap = 0;
        while (start < p.len) {
          const int rc = pcre2_match(code, s, p.len, start, PCRE2_NO_UTF_CHECK, md_, nullptr);
          if (rc < 0) break;
          const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
          if (ov[1] == ov[0]) {  // none of these patterns matches empty; be safe anyway
            ADD_FAILURE() << "empty match";
            break;
          }
          if (gap < ov[0]) next.push_back({p.off + gap, ov[0] - gap});
          next.push_back({p.off + ov[0], ov[1] - ov[0]});
          start = gap = ov[1];
        }
        if (gap < p.len) next.push_back({p.off + gap, p.len - gap});
      }
      pieces.swap(next);
    }
    return pieces;
  }

 private:
  std::vector<pcre2_code*> codes_;
  pcre2_match_data* md_ = nullptr;
};

std::vector<Piece> ours(PreTokenizer k, const std::string& text) {
  std::vector<Piece> out;
  pretokenize(
      k, text.data(), text.size(),
      [](void* user, size_t off, size_t len) { static_cast<std::vector<Piece>*>(user)->push_back({off, len}); }, &out);
  return out;
}

std::string show(const std::string& text, const std::vector<Piece>& pieces, size_t around) {
  std::string s;
  for (size_t i = around > 3 ? around - 3 : 0; i < pieces.size() && i < around + 4; ++i)
    s += "[" + text.substr(pieces[i].off, pieces[i].len) + "]";
  return s;
}

// Compares the two; on a difference, reports the first one with some context.
void expect_same(const Kind& k, const Reference& ref, const std::string& text, const std::string& what) {
  const std::vector<Piece> want = ref.split(text);
  const std::vector<Piece> got = ours(k.kind, text);
  if (want == got) return;
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  ADD_FAILURE() << pretokenizer_name(k.kind) << " on " << what << ": first difference at piece " << i << "\n  PCRE2: "
                << show(text, want, i) << "\n  ours:  " << show(text, got, i);
}


// Code points where the patterns' decisions turn: every kind of space and newline, apostrophes
// and contraction letters (and U+017F LONG S, which (?i) folds to s; U+212A KELVIN SIGN), digits
// of several scripts and number classes, punctuation vs symbols, combining marks (not \p{L}),
// the edges of DeepSeek's letter, punctuation and CJK ranges, emoji and joiners.
const uint32_t kInteresting[] = {
    ' ', ' ', ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0, 0x1680, 0x180E, 0x2000, 0x200A, 0x200B, 0x2028, 0x2029,
    0x202F, 0x205F, 0x3000, 0xFEFF, '\'', '\'', 's', 'S', 't', 'T', 'r', 'R', 'e', 'E', 'v', 'V', 'm', 'M', 'l',
    'L', 'd', 'D', 'a', 'z', 0x17F, 0x212A, 0x130, 0x131, '0', '5', '9', 0x663, 0x966, 0xFF10, 0x216B, 0xBD, 0xB2,
    0x1D7CE, '!', '"', '#', '$', '%', '+', '<', '=', '>', '^', '`', '|', '~', '-', '_', '.', ',', ';', 0x2014,
    0x2018, 0x201F, 0x2020, 0x3001, 0x3002, 0x3003, 0xFF01, 0xFF0F, 0xFF10, 0xFF1A, 0xFF5E, 0xFF5F, 0x301,
    0x36F, 0x0E31, 0x17B6, 0x7FF, 0x800, 0x4E00, 0x9FA5, 0x9FA6, 0xAC00, 0xD7A3, 0xD7FF, 0xE000, 0x3042,
    0x30A2, 0xB5, 0xC0, 0xD7, 0xF7, 0x1BB, 0x2B0, 0x1F5E, 0x1F5F, 0x1F7D, 0x1F7E, 0x1FBE, 0x2126, 0x2127,
    0x10400, 0x1044F, 0x1E943, 0x1E944, 0x1F600, 0x1F999, 0x200D, 0xFE0F, 0x1F3FB, 0x0410, 0x044F, 0x05D0,
    0x0627, 0x0660, 0x10FFFF, 0xFFFD, 0x1, 0x7F, 0x9F,
};

std::string random_string(std::mt19937& rng) {
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 24);
  for (int i = 0; i < n; ++i) {
    uint32_t cp;
    const uint32_t r = rng() % 10;
    if (r < 7) {
      cp = kInteresting[rng() % (sizeof(kInteresting) / sizeof(kInteresting[0]))];
    } else if (r < 8) {
      cp = 0x20 + rng() % 0x5F;
    } else {
      do cp = rng() % 0x110000;
      while (cp >= 0xD800 && cp < 0xE000);
    }
    append_utf8(cp, &s);
  }
  return s;
}

TEST(Pretokenizer, ClassesMatchPcre2ForEveryCodePoint) {
  int err;
  PCRE2_SIZE at;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>("^(?:(\\p{L})|(\\p{N})|(\\p{P})|(\\s))"),
                                   PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
  ASSERT_NE(code, nullptr);
  pcre2_match_data* md = pcre2_match_data_create(8, nullptr);
  int mismatches = 0;
  std::string s;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    s.clear();
    append_utf8(cp, &s);
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr);
    UnicodeClass want = UnicodeClass::kOther;
    if (rc > 1) {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      for (int g = 1; g <= 4; ++g)
        if (g < rc && ov[2 * g] != PCRE2_UNSET) want = static_cast<UnicodeClass>(g);
    }
    if (cp == 0x180E) {  // Perl's \s, not Unicode White_Space (see WS above)
      EXPECT_EQ(want, UnicodeClass::kSpace);
      want = UnicodeClass::kOther;
    }
    if (unicode_class(cp) != want && ++mismatches <= 10)
      ADD_FAILURE() << "U+" << std::hex << cp << ": ours " << static_cast<int>(unicode_class(cp)) << ", PCRE2 "
                    << static_cast<int>(want);
  }
  EXPECT_EQ(mismatches, 0);
  pcre2_match_data_free(md);
  pcre2_code_free(code);
}

TEST(Pretokenizer, MatchesPcre2OnSharedTexts) {
  MC_REQUIRE_SHARED();
  for (const char* file : {"data/tinystories_val_head794k.txt", "data/tinyshakespeare.txt", "data/cs336_tinystories_sample.txt"}) {
    std::string text = read_text(shared_path(file));
    if (text.size() > kTextLimit) text.resize(kTextLimit);
    ASSERT_FALSE(text.empty()) << file;
    for (const Kind& k : kKinds) {
      const Reference ref(k);
      expect_same(k, ref, text, file);
    }
  }
}

TEST(Pretokenizer, MatchesPcre2OnTestVectorInputs) {
  MC_REQUIRE_SHARED();
  const std::string text = read_text(shared_path("tokenizers/vectors/ggml-vocab-qwen2.gguf.inp"));
  for (const Kind& k : kKinds) {
    const Reference ref(k);
    size_t pos = 0;
    const std::string sep = "\n__ggml_vocab_test__\n";
    while (pos < text.size()) {
      size_t at = text.find(sep, pos);
      if (at == std::string::npos) at = text.size();
      expect_same(k, ref, text.substr(pos, at - pos), "a vector input");
      pos = at + sep.size();
    }
    expect_same(k, ref, text, "all vector inputs at once");
  }
}

TEST(Pretokenizer, MatchesPcre2OnAdversarialUnicode) {
  std::mt19937 rng(20261129);
  std::vector<std::string> strings;
  for (int i = 0; i < kRandomStrings; ++i) strings.push_back(random_string(rng));
  std::string all;
  for (const std::string& s : strings) all += s;
  for (const Kind& k : kKinds) {
    const Reference ref(k);
    for (size_t i = 0; i < strings.size() && !HasFailure(); ++i) expect_same(k, ref, strings[i], "random string");
    expect_same(k, ref, all, "all random strings at once");
  }
}

TEST(Pretokenizer, PiecesTileInvalidUtf8) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const uint32_t r = rng() % 4;
      if (r == 0) s.push_back(static_cast<char>(rng() & 0xFF));  // any byte: stray continuations, C0, F5-FF
      else if (r == 1) s.push_back(" \n'"[rng() % 3]);
      else append_utf8(kInteresting[rng() % (sizeof(kInteresting) / sizeof(kInteresting[0]))], &s);
    }
    // Cut multi-byte sequences short now and then.
    if (!s.empty() && rng() % 2) s.pop_back();
    for (const Kind& k : kKinds) {
      const std::vector<Piece> got = ours(k.kind, s);
      size_t at = 0;
      for (const Piece& p : got) {
        ASSERT_EQ(p.off, at) << pretokenizer_name(k.kind);
        ASSERT_GT(p.len, 0u);
        at += p.len;
      }
      ASSERT_EQ(at, s.size()) << pretokenizer_name(k.kind);
      if (utf8_valid(reinterpret_cast<const uint8_t*>(s.data()), s.size())) {
        const Reference ref(k);
        expect_same(k, ref, s, "a valid string of the invalid-UTF-8 round");
      }
    }
  }
}

TEST(Pretokenizer, NeverAllocates) {
  const std::string text = "Hello, y'all! 3333 \n\n  \t 我想在apple工作 ------ 🦙🦙 \xff\xfe end  ";
  for (const Kind& k : kKinds) {
    size_t pieces = 0;
    const long before = g_allocations.load();
    pretokenize(
        k.kind, text.data(), text.size(), [](void* user, size_t, size_t) { ++*static_cast<size_t*>(user); }, &pieces);
    EXPECT_EQ(g_allocations.load(), before) << pretokenizer_name(k.kind);
    EXPECT_GT(pieces, 5u);
  }
}

// Every Unicode scalar value encodes to well-formed UTF-8 of the length its range implies (RFC 3629)
// and decodes back to itself.
TEST(Utf8, EncodeRoundTripsEveryScalarValue) {
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // surrogates are not scalar values
    uint8_t b[4];
    const size_t n = utf8_encode(cp, b);
    const size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    ASSERT_EQ(n, want) << std::hex << cp;
    ASSERT_TRUE(utf8_valid(b, n)) << std::hex << cp;
    size_t len = 0;
    ASSERT_EQ(utf8_decode(b, n, &len), cp);
    ASSERT_EQ(len, n);
  }
  std::string s;
  append_utf8(0x20AC, &s);  // the euro sign
  EXPECT_EQ(s, "\xE2\x82\xAC");
}

TEST(Pretokenizer, NamesRoundTrip) {
  for (const Kind& k : kKinds) {
    const char* name = pretokenizer_name(k.kind);
    PreTokenizer back;
    ASSERT_TRUE(pretokenizer_from_name(name, std::string(name).size(), &back)) << name;
    EXPECT_EQ(back, k.kind);
  }
  PreTokenizer p;
  EXPECT_TRUE(pretokenizer_from_name("llama-bpe", 9, &p));
  EXPECT_EQ(p, PreTokenizer::kLlama3);
  EXPECT_FALSE(pretokenizer_from_name("no-such", 7, &p));
  EXPECT_STREQ(unicode_tables_version(), "14.0.0");
}

}  // namespace
}  // namespace mcullm
