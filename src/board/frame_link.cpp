#include "board/frame_link.h"

namespace mcullm::board {

using namespace cluster;

Status FrameLink::init(SpiLink& spi, Arena& arena) {
  spi_ = &spi;
  void* tx = nullptr;
  void* rx = nullptr;
  MC_TRY(arena.alloc_checked(kMaxFrameBytes, 16, TensorClass::kScratch, &tx));
  MC_TRY(arena.alloc_checked(kMaxFrameBytes, 16, TensorClass::kScratch, &rx));
  tx_ = static_cast<uint8_t*>(tx);
  rx_ = static_cast<uint8_t*>(rx);
  return Status::Ok();
}

Status FrameLink::send(FrameType type, uint32_t stream, uint32_t pos, const uint8_t* payload, size_t len, int timeout_ms) {
  if (len > kMaxPayloadBytes) return Status::Error(Code::kInvalidArgument, "link: a payload of %zu bytes does not fit a frame", len);
  FrameHeader h;
  h.type = type;
  h.seq = seq_;
  h.stream = stream;
  h.pos = pos;
  h.payload_len = static_cast<uint32_t>(len);
  size_t n = 0;
  MC_TRY(encode_frame(h, payload, tx_, kMaxFrameBytes, &n));
  MC_TRY(spi_->transmit(tx_, n, timeout_ms));
  ++seq_;
  return Status::Ok();
}

Status FrameLink::send_error(const Status& why, uint32_t stream, uint32_t pos, int timeout_ms) {
  size_t len = 0;
  MC_TRY(encode_error(why, tx_ + kFrameHeaderBytes, kMaxPayloadBytes, &len));
  return send(FrameType::kError, stream, pos, tx_ + kFrameHeaderBytes, len, timeout_ms);
}

Status FrameLink::send_hidden(HiddenEncoding e, uint32_t stream, uint32_t pos, const float* x, uint32_t dim, int timeout_ms) {
  const uint32_t frames = hidden_frame_count(e, dim);
  if (frames == 0 || dim > kMaxHiddenDim)
    return Status::Error(Code::kInvalidArgument, "link: cannot send a hidden state of %u values in encoding %u", static_cast<unsigned>(dim), static_cast<unsigned>(e));
  for (uint32_t c = 0; c < frames; ++c) {
    size_t len = 0;  // encoded in place: encode_frame then copies nothing
    MC_TRY(encode_hidden_chunk(e, x, dim, c, tx_ + kFrameHeaderBytes, kMaxPayloadBytes, &len));
    MC_TRY(send(FrameType::kHidden, stream, pos, tx_ + kFrameHeaderBytes, len, timeout_ms));
  }
  return Status::Ok();
}

Status FrameLink::receive(Frame* out, bool* got, int timeout_ms) {
  *got = false;
  size_t n = 0;
  MC_TRY(spi_->receive(rx_, kMaxFrameBytes, &n, timeout_ms));
  if (n == 0) return Status::Ok();
  if (Status st = decode_frame(rx_, n, out); !st.ok()) {
    ++corrupt_;
    return Status::Error(Code::kCorrupt, "link: a transfer of %zu bytes is not a good frame: %s", n, st.message());
  }
  *got = true;
  return Status::Ok();
}

}  // namespace mcullm::board
