// Any bytes as a board tokenizer image (tokenizer/tokenizer_image.h): open() must refuse it or give an
// image that encodes and decodes without a crash, every id in range. With MCULLM_FUZZ_SEEDS=DIR
// set, images of llama2.c's tok512.bin and of a small byte-level BPE vocabulary are written there
// first.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/tokenizer_image.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/tokenizer_image_writer_host.h"
#include "load/tokenizer_loader_host.h"

using namespace mcullm;

namespace {

void write_seed(const std::string& path, const Tokenizer& tok) {
  std::vector<uint8_t> image;
  if (!write_tokenizer_image(tok, &image).ok()) return;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
}

void write_seeds(const std::string& dir) {
  std::unique_ptr<Tokenizer> spm;
  if (load_tokenizer_file(fuzz::shared_path("models/stories260K/tok512.bin"), &spm).ok()) write_seed(dir + "/tok512", *spm);
  BpeVocab v;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    byte_level_append(static_cast<uint8_t>(b), &s);
    v.tokens.push_back(s);
  }
  v.tokens.insert(v.tokens.end(), {"he", "hel", "Ġw", "<|endoftext|>"});
  v.types.assign(v.tokens.size(), TokenType::kNormal);
  v.types.back() = TokenType::kControl;
  v.merges = {{"h", "e"}, {"he", "l"}, {"Ġ", "w"}};
  v.pre = PreTokenizer::kQwen2;
  v.eos = static_cast<int>(v.tokens.size()) - 1;
  BpeTokenizer bpe;
  if (bpe.load(v).ok()) write_seed(dir + "/bpe", bpe);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("MCULLM_FUZZ_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> aligned(size / 8 + 1);
  if (size) std::memcpy(aligned.data(), data, size);
  TokenizerImage img;
  const Status st = img.open(aligned.data(), size);
  if (!st.ok()) {
    FUZZ_CHECK(st.message()[0] != '\0');
    return 0;
  }
  const char text[] = "Hello, world! help 123 \xE6\x88\x91 <|endoftext|>\xff\n  x";
  const size_t n = sizeof text - 1;
  int32_t ids[n + 3], work[n + 3];
  size_t count = 0;
  if (img.encode(text, n, true, true, true, ids, work, n + 3, &count).ok())
    for (size_t i = 0; i < count; ++i) FUZZ_CHECK(ids[i] >= 0 && ids[i] < img.vocab_size());
  for (int id = -1; id <= img.vocab_size() && id < 2000; ++id) {
    size_t len = 0;
    const char* s = img.decode_step(id - 1, id, &len);
    if (len) FUZZ_CHECK(s[0] == s[0] && s[len - 1] == s[len - 1]);  // readable (ASan checks the bounds)
  }
  return 0;
}
