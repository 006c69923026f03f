// The board HAL (board/hal.h) of the board runner's cluster roles (role=master / role=node): the
// image read from a file as the model partition, the runner's SRAM and PSRAM blocks as the tiers, the
// target's second core as the worker, and the SPI link as two byte streams (FdSpiLink). On an emulated
// MCU the streams are host files reached through semihosting (named pipes: tools/run_chain.sh wires
// seven emulators into the reference design's ring with them); on a host, the same pipes.
#pragma once
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "board/hal.h"
#include "cluster/frame.h"
#include "platform.h"

namespace mcullm::runner {

// One SPI transfer = one whole frame (FrameLink's contract). On a byte stream the frames follow one
// another as the PC's transports send them (cluster/transport.h: the encoded frame, which carries its
// own length and CRC), so a board here and a PC process (`mcullm node --ring`, `mcullm cluster
// --topology ring`) can be joined by a byte pipe (socat between a named pipe and TCP). Received
// bytes go through the one stream decoder (cluster/frame.h FrameDecoder); its frame is encoded again
// into the armed buffer, as TransportSpiLink does, so FrameLink decodes it as an SPI transfer; garbage
// or a corrupt frame is one kCorrupt transfer (the node answers with an error frame, the master
// resends). Reads and writes block (the timeouts are not kept: a stopped neighbour stops the ring,
// and the script running it has its own timeout); the end of the input stream is kIo and closed()
// says so.
class FdSpiLink final : public board::SpiLink {
 public:
  void attach(int in_fd, int out_fd) {
    in_ = in_fd;
    out_ = out_fd;
  }
  Status transmit(const uint8_t* data, size_t n, int) override {
    if (n % 4 != 0 || n > kMaxTransfer) return Status::Error(Code::kInvalidArgument, "SPI transfer of %zu bytes", n);
    for (const uint8_t* p = data; n > 0;) {
      const long w = write(out_, p, n);
      if (w <= 0) return Status::Error(Code::kIo, "the link to the next board is gone");
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::Ok();
  }
  Status receive(uint8_t* buf, size_t cap, size_t* n, int) override {
    *n = 0;
    for (;;) {
      if (rx_pos_ == rx_len_) {
        const long r = read(in_, rx_, sizeof rx_);
        if (r <= 0) {
          closed_ = true;
          return Status::Error(Code::kIo, "the link from the previous board closed");
        }
        rx_pos_ = 0;
        rx_len_ = static_cast<size_t>(r);
      }
      cluster::DecodeEvent ev;
      rx_pos_ += decoder_.feed(rx_ + rx_pos_, rx_len_ - rx_pos_, &ev);
      if (ev == cluster::DecodeEvent::kNeedMore) continue;
      if (ev == cluster::DecodeEvent::kError) return Status::Error(Code::kCorrupt, "%s", decoder_.error().message());
      const cluster::Frame& f = decoder_.frame();
      return cluster::encode_frame(f.header, f.payload, buf, cap, n);
    }
  }
  bool closed() const { return closed_; }

 private:
  int in_ = -1, out_ = -1;
  bool closed_ = false;
  cluster::FrameDecoder decoder_;
  uint8_t rx_[4096];
  size_t rx_pos_ = 0, rx_len_ = 0;
};

// The line protocol's serial port is not used by the runner's roles: nothing comes, writes vanish.
class NoSerial final : public board::ByteStream {
 public:
  long read(uint8_t*, size_t, int) override { return -1; }
  bool write(const uint8_t*, size_t) override { return true; }
};

class RunnerHal final : public board::Hal {
 public:
  RunnerHal(const uint8_t* image, size_t image_size, void* sram, size_t sram_bytes, void* psram, size_t psram_bytes,
            FdSpiLink& link, board::Worker& worker)
      : image_(image), image_size_(image_size), worker_(worker), link_(link) {
    tiers_[0] = {sram, sram_bytes};
    tiers_[1] = {psram, psram_bytes};
  }
  Status map_partition(const char*, const uint8_t** data, size_t* size) override {
    *data = image_;
    *size = image_size_;
    return Status::Ok();
  }
  Status tier_memory(Tier tier, void** base, size_t* bytes) override {
    const int t = tier == Tier::kSram ? 0 : tier == Tier::kPsram ? 1 : -1;
    if (t < 0 || !tiers_[t].base) return Status::Error(Code::kInvalidArgument, "tier %s: no RAM, or handed out already", tier_name(tier));
    *base = tiers_[t].base;
    *bytes = tiers_[t].bytes;
    tiers_[t].base = nullptr;
    return Status::Ok();
  }
  board::ByteStream& serial() override { return serial_; }
  board::SpiLink& spi() override { return link_; }
  FdSpiLink& link() { return link_; }
  void gpio_write(board::Gpio, bool) override {}
  bool gpio_read(board::Gpio) override { return true; }
  uint64_t cycles() override { return board_counter(); }
  uint32_t cycles_per_us() override { return 1; }  // not used by the roles (the line server's times only)
  board::Worker& worker() override { return worker_; }
  void log(const char* message) override { printf("board: %s\n", message); }

 private:
  struct Block {
    void* base;
    size_t bytes;
  };
  const uint8_t* image_;
  size_t image_size_;
  Block tiers_[2];
  board::Worker& worker_;
  FdSpiLink& link_;
  NoSerial serial_;
};

}  // namespace mcullm::runner
