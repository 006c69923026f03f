// What the generation loop, the evaluator and the server need from any model architecture: feed
// one token at a position, get the next token's logits. Each architecture's context implements it
// (LlamaContext today; BitNet, PLE and Qwen2 contexts as they land).
#pragma once
#include "mcullm/status.h"

namespace mcullm {

class Decoder {
 public:
  // Feeds `token` at `pos` (positions in order from 0; a smaller pos rewinds the cache) and
  // computes the logits of the next token; *logits stays valid until the next call.
  virtual Status forward(int token, int pos, const float** logits) = 0;
  virtual int vocab_size() const = 0;
  virtual int ctx_len() const = 0;

 protected:
  // Not virtual and not public: nothing deletes a decoder through this interface (a virtual
  // destructor would pull operator delete into the freestanding core).
  ~Decoder() = default;
};

}  // namespace mcullm
