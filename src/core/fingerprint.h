// The run fingerprint: FNV-1a 64 over token ids and over logit bits (NaNs canonicalised), so that
// two runs on any targets can be compared with one line.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace mcullm {

class Fingerprint {
 public:
  void add_token(int32_t id);
  void add_logits(const float* logits, size_t n);
  uint64_t tokens() const { return tokens_; }
  uint64_t logits() const { return logits_; }
  // Both hashes folded into one value (what `--fingerprint` prints first).
  uint64_t combined() const;

 private:
  static constexpr uint64_t kOffset = 0xcbf29ce484222325ull;
  uint64_t tokens_ = kOffset;
  uint64_t logits_ = kOffset;
};

}  // namespace mcullm
