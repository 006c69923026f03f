// The HAL's SPI link (board/hal.h) over PC transports (cluster/transport.h): the one adapter that
// lets the board's ring logic (board/master.h, board/node.h: the code the firmware runs) run in PC
// processes (`mcullm node --ring`, `mcullm cluster --topology ring`). A board has an SPI TX to the
// next board and an SPI RX from the previous one; here each is a transport (TCP on a PC), one used
// only to send, the other only to receive.
//   transmit  one transfer = one whole encoded frame (what FrameLink hands the SPI master): its bytes
//             go out as they are; the peer's transport decodes them.
//   receive   the next frame the RX transport decoded, encoded again into the DMA buffer (the same
//             bytes, CRC included), so FrameLink decodes it as it decodes an SPI transfer.
// What SPI cannot say, a transport can: a frame the transport found corrupt is kCorrupt (FrameLink's
// code for a transfer that was not one good frame: the node answers with an error frame, the master
// resends); a link that closed or failed is kIo (the ring is broken). No handshake line: TCP's own
// flow control holds a sender back. A receive timeout is Ok with *n 0, as on SPI.
#pragma once
#include <atomic>
#include <memory>

#include "board/hal.h"
#include "cluster/transport.h"

namespace mcullm::board {

class TransportSpiLink final : public SpiLink {
 public:
  // tx: to the next board (nothing is read from it); rx: from the previous one (nothing is sent on it).
  TransportSpiLink(std::unique_ptr<cluster::Transport> tx, std::unique_ptr<cluster::Transport> rx)
      : tx_(std::move(tx)), rx_(std::move(rx)) {}
  ~TransportSpiLink() { close(); }
  Status transmit(const uint8_t* data, size_t n, int timeout_ms) override;
  Status receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms) override;
  // Closes both transports (the neighbours see their links close); wakes a blocked transmit or receive.
  void close();
  // Test hook (`mcullm node --ring --fault flip`): the next transfer goes out with one payload bit flipped.
  void flip_next() { flip_ = true; }
  const char* describe_tx() const { return tx_->describe(); }
  const char* describe_rx() const { return rx_->describe(); }

 private:
  std::unique_ptr<cluster::Transport> tx_, rx_;
  std::atomic<bool> flip_{false};
};

}  // namespace mcullm::board
