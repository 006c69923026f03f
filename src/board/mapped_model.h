// A board's model: the board image mapped from its partition (read in place), the SRAM and PSRAM
// sections copied into the tiers' arenas (the placement the image carries), the model built over
// it. The single board, the cluster master and the node all start here.
#pragma once
#include "board/hal.h"
#include "format/board_image.h"
#include "format/board_image_model.h"

namespace mcullm::board {

class MappedModel {
 public:
  // Errors name the partition, the step and the tier that did not fit.
  Status init(Hal& hal, const char* partition);
  const BoardImage& image() const { return image_; }
  const BoardModel& model() const { return model_; }
  Arena& arena(Tier t) { return arenas_[static_cast<int>(t)]; }
  // The gate-first sparse FFN's column copies of a ReLU model's down matrices, in the PSRAM tier
  // (board_model_build_sparse_ffn; *bytes 0 for a model without one). After init.
  Status build_sparse_ffn(size_t* bytes) {
    return board_model_build_sparse_ffn(&model_, arena(Tier::kPsram), bytes);
  }
  // The llama-family model (llama, bitnet, bitnet-25, qwen2) for the cluster roles (others are refused).
  Status llama(const LlamaModel** out) const;

 private:
  Arena arenas_[kTierCount];
  BoardImage image_;
  BoardModel model_;
};

}  // namespace mcullm::board
