// Any bytes as a tokenizer file: the first byte picks the reader (0: GGUF, 1: tokenizer.json,
// 2: llama2.c tokenizer.bin; the rest of the input is the file), which must return an error or a
// tokenizer that then encodes and decodes without a crash. With MCULLM_FUZZ_SEEDS=DIR set, a seed
// of each kind is written there first (a small GGUF of each vocabulary type, a tokenizer.json,
// llama2.c's tok512.bin from ../shared).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf_writer_host.h"
#include "fuzz_support.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "load/tokenizer_loader_host.h"

using namespace mcullm;

namespace {

void write_seeds(const std::string& dir) {
  // Byte-level BPE: the 256 byte tokens, two merges, one control token.
  GgufWriter bpe;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    byte_level_append(static_cast<uint8_t>(b), &s);
    tokens.push_back(s);
    types.push_back(1);
  }
  tokens.push_back("he");
  tokens.push_back("hel");
  tokens.push_back("<|endoftext|>");
  types.insert(types.end(), {1, 1, 3});
  bpe.set_string("tokenizer.ggml.model", "gpt2");
  bpe.set_string("tokenizer.ggml.pre", "qwen2");
  bpe.set_string_array("tokenizer.ggml.tokens", tokens);
  bpe.set_i32_array("tokenizer.ggml.token_type", types);
  bpe.set_string_array("tokenizer.ggml.merges", {"h e", "he l"});
  bpe.set_u32("tokenizer.ggml.eos_token_id", 258);
  fuzz::write_seed(dir + "/gguf_bpe", 0, bpe.to_bytes());
  // SentencePiece: <unk>, BOS, EOS, 256 byte pieces, a few words.
  GgufWriter spm;
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
  }
  for (const char* w : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"}) pieces.push_back(w);
  std::vector<float> scores(pieces.size(), 0.0f);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  spm.set_string("tokenizer.ggml.model", "llama");
  spm.set_string_array("tokenizer.ggml.tokens", pieces);
  spm.set_f32_array("tokenizer.ggml.scores", scores);
  fuzz::write_seed(dir + "/gguf_spm", 0, spm.to_bytes());
  const std::string json = R"({"added_tokens": [{"id": 7, "content": "<|end|>", "special": true}],
    "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4, "c": 5, "abc": 6},
              "merges": ["a b", ["Ġ", "ab"], "ab c"]}})";
  fuzz::write_seed(dir + "/json", 1, std::vector<uint8_t>(json.begin(), json.end()));
  fuzz::write_seed(dir + "/tok512", 2, fuzz::read_all(fuzz::shared_path("models/stories260K/tok512.bin")));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("MCULLM_FUZZ_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t kind = data[0] % 3;
  std::vector<uint8_t> file(data + 1, data + size);
  if (kind == 0 && (file.size() < 4 || std::memcmp(file.data(), "GGUF", 4) != 0)) return 0;
  if (kind == 1 && (file.empty() || file[0] != '{')) return 0;
  if (kind == 2 && (!file.empty() && (file[0] == '{' || (file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0))))
    return 0;
  std::unique_ptr<Tokenizer> t;
  const Status st = load_tokenizer_bytes(file.data(), file.size(), &t);
  if (!st.ok()) {
    FUZZ_CHECK(st.message()[0] != '\0');
    return 0;
  }
  FUZZ_CHECK(t->vocab_size() > 0);
  std::vector<int> ids;
  EncodeOptions o;
  o.parse_special = true;
  if (t->encode("Hello, world! ab abc 123 \xE6\x88\x91 <|end|>\n", o, &ids).ok())
    for (const int id : ids) FUZZ_CHECK(id >= 0 && id < t->vocab_size());
  (void)t->decode(ids);
  for (int id = -1; id <= t->vocab_size() && id < 2000; ++id) (void)t->decode_step(id - 1, id);
  return 0;
}
