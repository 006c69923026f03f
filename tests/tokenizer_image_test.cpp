// The board tokenizer image (tokenizer/tokenizer_image.h): written from every SentencePiece-style and
// byte-level BPE tokenizer we load, its in-place encoder gives llama.cpp's test vector ids and the
// host tokenizer's ids on the TinyStories and Shakespeare texts, decodes as the host does, and
// hostile images (truncated, corrupt offsets, oversized counts, flipped bytes) are refused or at
// least never crash.
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/tokenizer_image.h"
#include "tokenizer/tokenizer_image_writer_host.h"
#include "load/tokenizer_loader_host.h"

namespace mcullm {
namespace {

using test::read_text;
using test::shared_path;

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kTextLimit = 60000;  // bounded time in the sanitizer run
#else
constexpr size_t kTextLimit = size_t{1} << 30;
#endif

// An image in 8-byte aligned memory, opened.
struct Image {
  std::vector<uint64_t> words;
  size_t size = 0;
  TokenizerImage img;
  Status load(const std::vector<uint8_t>& bytes) {
    size = bytes.size();
    words.assign((bytes.size() + 7) / 8 + 1, 0);
    if (!bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
    return img.open(words.data(), size);
  }
  uint8_t* data() { return reinterpret_cast<uint8_t*>(words.data()); }
};

std::vector<int> image_encode(const TokenizerImage& img, const std::string& text, bool bos = false, bool special = false) {
  std::vector<int32_t> ids(text.size() + 3), work(text.size() + 3);
  size_t n = 0;
  const Status st = img.encode(text.data(), text.size(), bos, false, special, ids.data(), work.data(), ids.size(), &n);
  EXPECT_TRUE(st.ok()) << st.message();
  return std::vector<int>(ids.begin(), ids.begin() + static_cast<long>(n));
}

std::string image_decode(const TokenizerImage& img, const std::vector<int>& ids) {
  std::string out;
  int prev = -1;
  for (int id : ids) {
    size_t len;
    const char* s = img.decode_step(prev, id, &len);
    out.append(s, len);
    prev = id;
  }
  return out;
}

struct Loaded {
  std::unique_ptr<Tokenizer> tok;
  Image image;
};

const Loaded& load(const std::string& relative) {
  static std::vector<std::pair<std::string, std::unique_ptr<Loaded>>> cache;
  for (auto& [name, l] : cache)
    if (name == relative) return *l;
  auto l = std::make_unique<Loaded>();
  Status st = load_tokenizer_file(shared_path(relative), &l->tok);
  std::vector<uint8_t> bytes;
  if (st.ok()) st = write_tokenizer_image(*l->tok, &bytes);
  if (st.ok()) st = l->image.load(bytes);
  EXPECT_TRUE(st.ok()) << relative << ": " << st.message();
  return *cache.emplace_back(relative, std::move(l)).second;
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t at; (at = s.find(sep, pos)) != std::string::npos; pos = at + sep.size()) out.push_back(s.substr(pos, at - pos));
  out.push_back(s.substr(pos));
  return out;
}

struct VectorCase {
  const char* name;
  const char* tokenizer;
};
const VectorCase kCases[] = {
    {"qwen2", "tokenizers/qwen/tokenizer.json"},
    {"llama-spm", "tokenizers/llama2-32k/tokenizer.bin"},
    {"gpt-2", "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf"},
    {"falcon", "tokenizers/vocab-gguf/ggml-vocab-falcon.gguf"},
    {"mpt", "tokenizers/vocab-gguf/ggml-vocab-mpt.gguf"},
    {"starcoder", "tokenizers/vocab-gguf/ggml-vocab-starcoder.gguf"},
    {"refact", "tokenizers/vocab-gguf/ggml-vocab-refact.gguf"},
    {"deepseek-llm", "tokenizers/vocab-gguf/ggml-vocab-deepseek-llm.gguf"},
    {"deepseek-coder", "tokenizers/vocab-gguf/ggml-vocab-deepseek-coder.gguf"},
};

class ImageVectors : public testing::TestWithParam<VectorCase> {};

TEST_P(ImageVectors, InPlaceEncoderGivesTheVectorIds) {
  MC_REQUIRE_SHARED();
  const VectorCase& c = GetParam();
  const Loaded& l = load(c.tokenizer);
  ASSERT_TRUE(l.image.img.is_open());
  const std::string stem = std::string("tokenizers/vectors/ggml-vocab-") + c.name + ".gguf";
  std::vector<std::string> inputs = split(read_text(shared_path(stem + ".inp")), "\n__ggml_vocab_test__\n");
  inputs.pop_back();
  const std::vector<std::string> lines = split(read_text(shared_path(stem + ".out")), "\n");
  ASSERT_GE(lines.size(), inputs.size());
  int compared = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int> want;
    std::istringstream in(lines[i]);
    for (int id; in >> id;) want.push_back(id);
    const std::vector<int> got = image_encode(l.image.img, inputs[i]);
    // The image encoder does not NFC-normalize: where the source does and the text changes under
    // it (the expected ids then decode to other text), the ids may differ.
    if (got != want && (l.image.img.flags() & kTokImageNfc) && l.tok->decode(want) != inputs[i]) continue;
    EXPECT_EQ(got, want) << c.name << " case " << i << ": [" << inputs[i] << "]";
    EXPECT_EQ(image_decode(l.image.img, got), l.tok->decode(got)) << c.name << " case " << i;
    ++compared;
  }
  EXPECT_GE(compared, static_cast<int>(inputs.size()) - 3) << c.name;
}

INSTANTIATE_TEST_SUITE_P(All, ImageVectors, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<VectorCase>& info) {
                           std::string s = info.param.name;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// Line by line over the shared texts: the image's ids equal the host tokenizer's, and decode back.
TEST(TokenizerImage, EqualsHostOnTinyStoriesAndShakespeare) {
  MC_REQUIRE_SHARED();
  for (const char* tk : {"tokenizers/qwen/tokenizer.json", "tokenizers/llama2-32k/tokenizer.bin", "models/stories260K/tok512.bin",
                         "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf", "tokenizers/vocab-gguf/ggml-vocab-deepseek-llm.gguf"}) {
    const Loaded& l = load(tk);
    ASSERT_TRUE(l.image.img.is_open()) << tk;
    for (const char* text_file : {"data/tinystories_val_head794k.txt", "data/tinyshakespeare.txt"}) {
      const std::string text = read_text(shared_path(text_file)).substr(0, kTextLimit);
      size_t lines = 0, mismatches = 0;
      std::vector<int> host;
      for (const std::string& line : split(text, "\n")) {
        ASSERT_TRUE(l.tok->encode(line, EncodeOptions{}, &host).ok());
        const std::vector<int> got = image_encode(l.image.img, line);
        if (got != host && ++mismatches <= 3) ADD_FAILURE() << tk << " " << text_file << ": [" << line << "]";
        if (image_decode(l.image.img, got) != l.tok->decode(got) && ++mismatches <= 3)
          ADD_FAILURE() << tk << " decode differs: [" << line << "]";
        ++lines;
      }
      EXPECT_EQ(mismatches, 0u) << tk << " " << text_file << " over " << lines << " lines";
    }
  }
}

TEST(TokenizerImage, SpecialTokensBosEosAndBuffers) {
  MC_REQUIRE_SHARED();
  const Loaded& q = load("tokenizers/qwen/tokenizer.json");
  const std::string chat = "<|im_start|>user\nHi<|im_end|>\n";
  std::vector<int> host;
  EncodeOptions special;
  special.parse_special = true;
  ASSERT_TRUE(q.tok->encode(chat, special, &host).ok());
  EXPECT_EQ(image_encode(q.image.img, chat, false, true), host);
  ASSERT_TRUE(q.tok->encode(chat, EncodeOptions{}, &host).ok());
  EXPECT_EQ(image_encode(q.image.img, chat, false, false), host);
  EXPECT_EQ(q.image.img.eot_id(), q.tok->eot_id());

  const Loaded& s = load("tokenizers/llama2-32k/tokenizer.bin");
  EncodeOptions bos;
  bos.add_bos = true;
  ASSERT_TRUE(s.tok->encode("Hello world", bos, &host).ok());
  EXPECT_EQ(image_encode(s.image.img, "Hello world", true), host);
  EXPECT_EQ(image_decode(s.image.img, host), s.tok->decode(host));
  // A buffer too small: kOutOfRange, never a write past it.
  std::vector<int32_t> ids(4), work(4);
  size_t n = 99;
  const std::string text = "a long enough sentence";
  EXPECT_EQ(s.image.img.encode(text.data(), text.size(), false, false, false, ids.data(), work.data(), ids.size(), &n).code(),
            Code::kOutOfRange);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(q.image.img.encode(text.data(), text.size(), false, false, false, ids.data(), work.data(), ids.size(), &n).code(),
            Code::kOutOfRange);
  // Ids out of range decode to nothing.
  size_t len = 7;
  s.image.img.decode_step(-1, -5, &len);
  EXPECT_EQ(len, 0u);
  s.image.img.decode_step(-1, s.image.img.vocab_size(), &len);
  EXPECT_EQ(len, 0u);
}

TEST(TokenizerImage, WordPieceIsRefused) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<Tokenizer> t;
  ASSERT_TRUE(load_tokenizer_file(shared_path("tokenizers/vocab-gguf/ggml-vocab-bert-bge.gguf"), &t).ok());
  std::vector<uint8_t> bytes;
  EXPECT_EQ(write_tokenizer_image(*t, &bytes).code(), Code::kUnsupported);
}

// The CLI writes an image that `mcullm tokenize` then uses like any tokenizer file.
TEST(TokenizerImage, ConvertTokenizerCli) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  for (const char* tk : {"tokenizers/qwen/tokenizer.json", "models/stories260K/stories260K.bin"}) {
    const auto w = test::run_cli({"convert-tokenizer", "-m", shared_path(tk), "-o", dir + "/t.mctk"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_NE(w.err.find("board image"), std::string::npos) << w.err;
    const std::string text = "Once upon a time, <|im_start|>Lily saw 123 birds.\n";
    const auto a = test::run_cli({"tokenize", "-m", shared_path(tk), "-p", text, "--ids"});
    const auto b = test::run_cli({"tokenize", "-m", dir + "/t.mctk", "-p", text, "--ids"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out) << tk;
    const auto d = test::run_cli({"detokenize", "-m", dir + "/t.mctk", "-p", b.out});
    const auto e = test::run_cli({"detokenize", "-m", shared_path(tk), "-p", b.out});
    EXPECT_EQ(d.out, e.out) << tk;  // SentencePiece keeps its dummy-prefix space (no BOS here)
    EXPECT_NE(d.out.find(text), std::string::npos) << tk;
  }
  const auto bad = test::run_cli({"convert-tokenizer", "-m", shared_path("tokenizers/vocab-gguf/ggml-vocab-bert-bge.gguf"), "-o", dir + "/b.mctk"});
  EXPECT_NE(bad.exit_code, 0);
  test::write_file(dir + "/cut.mctk", std::vector<uint8_t>{'M', 'C', 'T', 'K', 1, 0, 0, 0});
  const auto cut = test::run_cli({"tokenize", "-m", dir + "/cut.mctk", "-p", "x"});
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.err.find("tokenizer image"), std::string::npos) << cut.err;
}

// ---- hostile images ------------------------------------------------------------------------------

std::vector<uint8_t> small_image(const char* relative) {
  const Loaded& l = load(relative);
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(write_tokenizer_image(*l.tok, &bytes).ok());
  return bytes;
}

void exercise(const TokenizerImage& img) {
  // Whatever opened must encode and decode without a crash (ASan watches).
  const std::string text = "Hello, world! 123 \xE6\x88\x91 <|im_end|> \xff\n";
  std::vector<int32_t> ids(text.size() + 3), work(text.size() + 3);
  size_t n = 0;
  if (img.encode(text.data(), text.size(), true, true, true, ids.data(), work.data(), ids.size(), &n).ok()) {
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(ids[i] >= 0 && ids[i] < img.vocab_size());
  }
  for (int id = -1; id < img.vocab_size() && id < 600; ++id) {
    size_t len;
    img.decode_step(id - 1, id, &len);
  }
}

TEST(TokenizerImageHostile, TruncatedImagesAreRefused) {
  MC_REQUIRE_SHARED();
  for (const char* tk : {"models/stories260K/tok512.bin", "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf"}) {
    const std::vector<uint8_t> bytes = small_image(tk);
    std::mt19937 rng(3);
    std::vector<size_t> cuts = {0, 1, 4, 8, 87, 88, 89, 200, bytes.size() - 8, bytes.size() - 1};
    for (int i = 0; i < 40; ++i) cuts.push_back(rng() % bytes.size());
    for (size_t cut : cuts) {
      Image im;
      const Status st = im.load(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
      EXPECT_FALSE(st.ok()) << tk << " cut at " << cut;
      EXPECT_NE(st.message()[0], '\0');
    }
    Image whole;
    EXPECT_TRUE(whole.load(bytes).ok());
  }
}

TEST(TokenizerImageHostile, CorruptHeaderFieldsAreRefused) {
  MC_REQUIRE_SHARED();
  for (const char* tk : {"models/stories260K/tok512.bin", "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf"}) {
    const std::vector<uint8_t> bytes = small_image(tk);
    // Every 32-bit header field set to values that break it: huge, misaligned, zero, all ones.
    for (size_t field = 0; field < sizeof(TokImageHeader) / 4; ++field) {
      for (uint32_t v : {0xffffffffu, 0x7fffffffu, 0x10000000u, 3u, 0u}) {
        std::vector<uint8_t> b = bytes;
        uint32_t old;
        std::memcpy(&old, b.data() + field * 4, 4);
        if (old == v) continue;
        std::memcpy(b.data() + field * 4, &v, 4);
        Image im;
        const Status st = im.load(b);
        // A few fields accept other values (an unused eot = -1, an offset of an empty section):
        // what opens must still be safe to use.
        if (st.ok()) exercise(im.img);
        else EXPECT_NE(st.message()[0], '\0');
      }
    }
    // Oversized counts and out-of-range sections are named errors.
    auto with = [&](size_t offset, uint32_t v) {
      std::vector<uint8_t> b = bytes;
      std::memcpy(b.data() + offset, &v, 4);
      Image im;
      return im.load(b);
    };
    EXPECT_EQ(with(offsetof(TokImageHeader, n_tokens), 0xffffffffu).code(), Code::kCorrupt);
    EXPECT_EQ(with(offsetof(TokImageHeader, n_tokens), 0).code(), Code::kCorrupt);
    EXPECT_EQ(with(offsetof(TokImageHeader, strings_bytes), 0x7fffffffu).code(), Code::kCorrupt);
    EXPECT_EQ(with(offsetof(TokImageHeader, off_sorted), 0x7ffffff8u).code(), Code::kCorrupt);
    EXPECT_EQ(with(offsetof(TokImageHeader, off_byte_ids), 12).code(), Code::kCorrupt);  // inside the header, misaligned
    EXPECT_EQ(with(offsetof(TokImageHeader, version), 2).code(), Code::kUnsupported);
    EXPECT_EQ(with(offsetof(TokImageHeader, magic), 0).code(), Code::kCorrupt);
    EXPECT_EQ(with(offsetof(TokImageHeader, bos), 100000).code(), Code::kCorrupt);
  }
  // Misaligned bytes are refused, not read.
  const std::vector<uint8_t> bytes = small_image("models/stories260K/tok512.bin");
  std::vector<uint64_t> words(bytes.size() / 8 + 2);
  std::memcpy(reinterpret_cast<uint8_t*>(words.data()) + 4, bytes.data(), bytes.size());
  TokenizerImage img;
  EXPECT_EQ(img.open(reinterpret_cast<uint8_t*>(words.data()) + 4, bytes.size()).code(), Code::kInvalidArgument);
  EXPECT_EQ(img.open(nullptr, 0).code(), Code::kInvalidArgument);
}

TEST(TokenizerImageHostile, CorruptTablesAreRefusedOrSafe) {
  MC_REQUIRE_SHARED();
  for (const char* tk : {"models/stories260K/tok512.bin", "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf"}) {
    const std::vector<uint8_t> bytes = small_image(tk);
    TokImageHeader h;
    std::memcpy(&h, bytes.data(), sizeof h);
    // An unsorted index, a string offset that goes back, an id out of range in each table.
    auto patched = [&](uint32_t offset, uint32_t v) {
      std::vector<uint8_t> b = bytes;
      std::memcpy(b.data() + offset, &v, 4);
      Image im;
      return im.load(b);
    };
    EXPECT_EQ(patched(h.off_sorted, h.n_tokens - 1).code(), Code::kCorrupt);
    EXPECT_EQ(patched(h.off_sorted + 4, h.n_tokens).code(), Code::kCorrupt);
    EXPECT_EQ(patched(h.off_str + 8, 0xfffffff0u).code(), Code::kCorrupt);
    EXPECT_EQ(patched(h.off_byte_ids + 40, h.n_tokens).code(), Code::kCorrupt);
    if (h.n_merges) {
      EXPECT_EQ(patched(h.off_merges + 12, h.n_tokens + 5).code(), Code::kCorrupt);  // a merge's result
      EXPECT_EQ(patched(h.off_merges + 16, 0xffff).code(), Code::kCorrupt);        // out of order / range
    }
    // Random byte flips anywhere: refused, or an image that encodes and decodes without a crash.
    std::mt19937 rng(11);
    int opened = 0;
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<uint8_t> b = bytes;
      for (int k = 0; k < 1 + trial % 4; ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      Image im;
      if (im.load(b).ok()) {
        ++opened;
        exercise(im.img);
      }
    }
    std::printf("%s: %d of 300 flipped images opened (flips in strings and scores keep it well-formed)\n", tk, opened);
  }
}

}  // namespace
}  // namespace mcullm
