// Writes a board image (format/board_image.h) from a config and a list of tensors whose tiers are
// already decided: sorts them by id, lays out one section per tier, fills in the CRC.
#pragma once
#include <stdint.h>

#include <vector>

#include "format/board_image.h"

namespace mcullm {

struct BoardTensorSource {
  uint32_t id = 0;
  DType type = DType::kF32;
  uint32_t rows = 1, cols = 0;
  const void* data = nullptr;  // dtype_tensor_bytes(type, rows, cols) bytes
  TensorClass cls = TensorClass::kOther;
  Tier tier = Tier::kFlash;
};

// Duplicate ids, unknown types or shapes a type cannot hold are errors; so is an image past 4 GiB
// per section (offsets are 32-bit within a section). A slice that is not whole is recorded (version 2);
// else the image is a version-1 one.
Status write_board_image(const BoardImageConfig& cfg, std::vector<BoardTensorSource> tensors, std::vector<uint8_t>* out,
                         const BoardSlice& slice = BoardSlice());

}  // namespace mcullm
