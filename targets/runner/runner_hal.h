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
#include "platform.h"

namespace mcullm::runner {

// One SPI transfer = one whole frame (FrameLink's contract). A byte stream has no transfer boundaries,
// so each transfer goes out as its length (4 bytes, little endian) and its bytes, as the receiver's
// DMA would know them from the transfer's end. A transfer longer than the armed buffer is cut to it
// (the rest is read and dropped), as DMA would: FrameLink then reports a corrupt frame. Reads and
// writes block (the timeouts are not kept: a stopped neighbour stops the ring, and the script
// running it has its own timeout); the end of the input stream is kIo and closed() says so.
class FdSpiLink final : public board::SpiLink {
 public:
  void attach(int in_fd, int out_fd) {
    in_ = in_fd;
    out_ = out_fd;
  }
  Status transmit(const uint8_t* data, size_t n, int) override {
    if (n % 4 != 0 || n > kMaxTransfer) return Status::Error(Code::kInvalidArgument, "SPI transfer of %zu bytes", n);
    const uint8_t len[4] = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n >> 16), 0};
    if (!write_all(len, 4) || !write_all(data, n)) return Status::Error(Code::kIo, "the link to the next board is gone");
    return Status::Ok();
  }
  Status receive(uint8_t* buf, size_t cap, size_t* n, int) override {
    *n = 0;
    uint8_t len[4];
    if (!read_all(len, 4)) return closed_error();
    const size_t want = static_cast<size_t>(len[0]) | static_cast<size_t>(len[1]) << 8 | static_cast<size_t>(len[2]) << 16 |
                        static_cast<size_t>(len[3]) << 24;
    const size_t keep = want < cap ? want : cap;
    if (!read_all(buf, keep)) return closed_error();
    for (size_t left = want - keep; left > 0;) {  // past the armed buffer: dropped
      uint8_t sink[64];
      const size_t k = left < sizeof sink ? left : sizeof sink;
      if (!read_all(sink, k)) return closed_error();
      left -= k;
    }
    *n = keep;
    return Status::Ok();
  }
  bool closed() const { return closed_; }

 private:
  bool write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      const long w = write(out_, p, n);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  bool read_all(uint8_t* p, size_t n) {
    while (n > 0) {
      const long r = read(in_, p, n);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  Status closed_error() {
    closed_ = true;
    return Status::Error(Code::kIo, "the link from the previous board closed");
  }
  int in_ = -1, out_ = -1;
  bool closed_ = false;
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
