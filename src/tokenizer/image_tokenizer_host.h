// The board tokenizer image (tokenizer/tokenizer_image.h) behind the host Tokenizer interface, so that
// `mcullm tokenize -m tok.mctk`, the loaders and the fuzzers take an image like any tokenizer file.
// Host code: keeps its own aligned copy of the bytes.
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer_image.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

class ImageTokenizer : public Tokenizer {
 public:
  Status load(const uint8_t* data, size_t size);
  const TokenizerImage& image() const { return img_; }

  const char* kind() const override;
  std::string describe() const override;
  int vocab_size() const override { return img_.vocab_size(); }
  int bos_id() const override { return img_.bos_id(); }
  int eos_id() const override { return img_.eos_id(); }
  int eot_id() const override { return img_.eot_id(); }
  bool wants_bos() const override { return (img_.flags() & kTokImageAddBos) && bos_id() >= 0; }
  std::string token_text(int id) const override;
  Status encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const override;
  std::string decode_step(int prev, int id) const override;

 private:
  std::vector<uint64_t> storage_;  // 8-byte aligned copy of the image
  TokenizerImage img_;
};

}  // namespace mcullm
