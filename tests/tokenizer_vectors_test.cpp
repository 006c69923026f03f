// llama.cpp's tokenizer test vectors (../shared/tokenizers/vectors, made with Hugging Face
// tokenizers) through the Tokenizer interface and load_tokenizer_file(): every case must give the
// same ids. Plus decode(encode(x)) == x on the shared texts for every tokenizer.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "load/tokenizer_loader_host.h"

namespace mcullm {
namespace {

using test::read_text;
using test::shared_path;

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t at = s.find(sep, pos);
    if (at == std::string::npos) {
      out.push_back(s.substr(pos));
      return out;
    }
    out.push_back(s.substr(pos, at - pos));
    pos = at + sep.size();
  }
}

struct VectorCase {
  const char* name;       // ggml-vocab-<name>.gguf.inp / .out
  const char* tokenizer;  // file under ../shared
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
    {"bert-bge", "tokenizers/vocab-gguf/ggml-vocab-bert-bge.gguf"},
};

// One loaded tokenizer per file, shared by the tests of this executable; nullptr (and a failure)
// when it does not load.
const Tokenizer* load(const std::string& relative) {
  static std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> cache;
  for (auto& [name, tok] : cache)
    if (name == relative) return tok.get();
  std::unique_ptr<Tokenizer> tok;
  const Status st = load_tokenizer_file(shared_path(relative), &tok);
  if (!st.ok()) ADD_FAILURE() << relative << ": " << st.message();
  return cache.emplace_back(relative, std::move(tok)).second.get();
}

class Vectors : public testing::TestWithParam<VectorCase> {};

TEST_P(Vectors, EveryCasePasses) {
  MC_REQUIRE_SHARED();
  const VectorCase& c = GetParam();
  const std::string stem = std::string("tokenizers/vectors/ggml-vocab-") + c.name + ".gguf";
  std::vector<std::string> inputs = split(read_text(shared_path(stem + ".inp")), "\n__ggml_vocab_test__\n");
  ASSERT_FALSE(inputs.empty());
  ASSERT_EQ(inputs.back(), "");
  inputs.pop_back();
  std::vector<std::string> lines = split(read_text(shared_path(stem + ".out")), "\n");
  ASSERT_EQ(lines.back(), "");
  lines.pop_back();
  ASSERT_EQ(inputs.size(), lines.size());
  ASSERT_GE(inputs.size(), 40u);
  const Tokenizer* tok = load(c.tokenizer);
  ASSERT_NE(tok, nullptr);
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int> want;
    std::istringstream ls(lines[i]);
    int id;
    while (ls >> id) want.push_back(id);
    std::vector<int> got;
    const Status st = tok->encode(inputs[i], EncodeOptions{}, &got);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(got, want) << c.name << " case " << i << ": [" << inputs[i] << "]";
    passed += got == want;
    // Byte-level BPE gives the text back exactly (SentencePiece adds its dummy-prefix space).
    if (std::string(tok->kind()) == "bpe") {
      EXPECT_EQ(tok->decode(got), inputs[i]) << c.name << " case " << i;
    }
  }
  std::printf("%s vectors: %d of %zu pass (%s)\n", c.name, passed, inputs.size(), tok->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, Vectors, testing::ValuesIn(kCases), [](const testing::TestParamInfo<VectorCase>& info) {
  std::string n = info.param.name;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

}  // namespace
}  // namespace mcullm
