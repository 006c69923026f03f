#include "board/transport_spi_link_host.h"

#include <vector>

namespace mcullm::board {

using cluster::LinkFailure;

Status TransportSpiLink::transmit(const uint8_t* data, size_t n, int timeout_ms) {
  if (n == 0 || n % 4 != 0 || n > kMaxTransfer)
    return Status::Error(Code::kInvalidArgument, "spi: a transfer of %zu bytes (DMA: a multiple of 4, 4..%zu)", n, kMaxTransfer);
  std::vector<uint8_t> flipped;
  if (flip_.exchange(false)) {  // a bit of the payload (or of the header for an empty one): only the CRC can tell
    flipped.assign(data, data + n);
    flipped[n > cluster::kFrameHeaderBytes ? cluster::kFrameHeaderBytes + (n - cluster::kFrameHeaderBytes) / 2 : 9] ^= 0x10;
    data = flipped.data();
  }
  LinkFailure why = LinkFailure::kNone;
  const Status st = tx_->send_bytes(data, n, timeout_ms, &why);
  if (st.ok()) return st;
  if (why == LinkFailure::kTimeout)
    return Status::Error(Code::kOutOfRange, "spi over %s: the next board took no transfer for %d ms: %s", tx_->describe(), timeout_ms,
                         st.message());
  return Status::Error(Code::kIo, "spi link: %s", st.message());
}

Status TransportSpiLink::receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms) {
  *n = 0;
  cluster::Frame f;
  LinkFailure why = LinkFailure::kNone;
  const Status st = rx_->receive(&f, timeout_ms, &why);
  if (!st.ok()) {
    if (why == LinkFailure::kTimeout) return Status::Ok();
    if (why == LinkFailure::kCorrupt) return Status::Error(Code::kCorrupt, "spi link: %s", st.message());
    return Status::Error(Code::kIo, "spi link: %s", st.message());
  }
  if (Status e = cluster::encode_frame(f.header, f.payload, buf, cap, n); !e.ok())
    return Status::Error(Code::kCorrupt, "spi over %s: a frame that does not fit the %zu-byte DMA buffer: %s", rx_->describe(), cap,
                         e.message());
  return Status::Ok();
}

void TransportSpiLink::close() {
  if (tx_) tx_->close();
  if (rx_) rx_->close();
}

}  // namespace mcullm::board
