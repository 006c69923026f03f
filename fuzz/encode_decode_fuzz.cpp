// Any bytes through real tokenizers (Qwen's tokenizer.json, GPT-2's and DeepSeek LLM's GGUF, Llama-2's
// tokenizer.bin): encode must succeed or refuse a byte the vocabulary lacks, every id must be in the
// vocabulary, and decode must give the bytes back (SentencePiece: after its dummy-prefix space; Qwen
// normalizes to NFC: its decoded text must encode to the same ids).
// The same bytes read as ids are decoded too (out-of-range ids are skipped, never a crash).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "load/tokenizer_loader_host.h"

using namespace mcullm;

namespace {
std::vector<std::unique_ptr<Tokenizer>>* g_toks;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_toks = new std::vector<std::unique_ptr<Tokenizer>>;
  for (const char* rel : {"tokenizers/qwen/tokenizer.json", "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf",
                          "tokenizers/vocab-gguf/ggml-vocab-deepseek-llm.gguf", "tokenizers/llama2-32k/tokenizer.bin"}) {
    std::unique_ptr<Tokenizer> t;
    const Status st = load_tokenizer_file(fuzz::shared_path(rel), &t);
    if (!st.ok()) {
      std::fprintf(stderr, "encode_decode_fuzz: %s\n", st.message());
      std::abort();
    }
    g_toks->push_back(std::move(t));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& t : *g_toks) {
    for (const bool special : {false, true}) {
      std::vector<int> ids;
      EncodeOptions o;
      o.parse_special = special;
      const Status st = t->encode(text, o, &ids);
      if (!st.ok()) {
        FUZZ_CHECK(st.code() == Code::kUnsupported);  // a byte without a token
        continue;
      }
      for (const int id : ids) FUZZ_CHECK(id >= 0 && id < t->vocab_size());
      std::string back = t->decode(ids);
      if (std::strcmp(t->kind(), "llama2c-spm") == 0 && !text.empty()) {
        FUZZ_CHECK(!back.empty() && back[0] == ' ');
        back.erase(0, 1);
      }
      if (t->describe().find(", NFC") == std::string::npos) {
        FUZZ_CHECK(back == text);
      } else {  // normalized text: encoding it again gives the same ids
        std::vector<int> again;
        FUZZ_CHECK(t->encode(back, o, &again).ok());
        FUZZ_CHECK(again == ids);
      }
    }
    std::vector<int> ids;
    for (size_t i = 0; i + 4 <= size; i += 4) {
      int32_t v;
      std::memcpy(&v, data + i, 4);
      ids.push_back(v);
    }
    (void)t->decode(ids);
  }
  return 0;
}
