// Cluster link frames (cluster/frame.h) over the HAL's SPI link: one SPI transfer carries one whole
// frame, so each transfer is decoded on its own (decode_frame); a transfer that is not exactly one
// good frame (a flipped bit, a cut, garbage) is reported as kCorrupt and the link stays usable.
// The TX and RX buffers (one kMaxFrameBytes frame each, word-aligned for DMA) come from an arena.
#pragma once
#include "board/hal.h"
#include "cluster/frame.h"
#include "core/arena.h"

namespace mcullm::board {

class FrameLink {
 public:
  Status init(SpiLink& spi, Arena& arena);
  // Sends one frame with the next sequence number.
  Status send(cluster::FrameType type, uint32_t stream, uint32_t pos, const uint8_t* payload, size_t len, int timeout_ms);
  Status send_error(const Status& why, uint32_t stream, uint32_t pos, int timeout_ms);
  // The hidden state x[dim] as hidden frames (cluster/hidden_codec.h's encoding e).
  Status send_hidden(cluster::HiddenEncoding e, uint32_t stream, uint32_t pos, const float* x, uint32_t dim, int timeout_ms);
  // Waits at most timeout_ms for one transfer. Ok with *got false: nothing came. Ok with *got true:
  // *out is a good frame (its payload valid until the next receive). kCorrupt: the transfer was not
  // one good frame (the message says why).
  Status receive(cluster::Frame* out, bool* got, int timeout_ms);
  uint32_t corrupt_received() const { return corrupt_; }

 private:
  SpiLink* spi_ = nullptr;
  uint8_t* tx_ = nullptr;
  uint8_t* rx_ = nullptr;
  uint32_t seq_ = 0;
  uint32_t corrupt_ = 0;
};

}  // namespace mcullm::board
