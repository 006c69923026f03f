// The board HAL on a PC (board/hal.h), for the host tests and for trying the firmware's logic:
//   partitions  files (read into a 64-byte aligned buffer: the "flash mapping")
//   tiers       malloc'd blocks of a chosen budget per tier (the board's SRAM / PSRAM sizes)
//   serial      HostPipe: an in-memory byte stream pair (what one end writes the other reads)
//   SPI         HostSpiWire: two boards' SPI masters and slaves joined, with the receiver's
//               handshake (a transfer waits until the receiver has armed its buffer) and a hook
//               that may tamper with transfers (tests: flipped bits, cut frames, garbage)
//   GPIO        HostGpioBus: lines shared by the boards on one bus (reset, ready, activity)
//   cycles      steady_clock nanoseconds (cycles_per_us 1000)
//   worker      a std::thread spinning on an atomic flag, then sleeping on it (this machine's cores are shared)
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "board/hal.h"

namespace mcullm::board {

// One direction of bytes between two ends.
class HostByteQueue {
 public:
  void push(const uint8_t* data, size_t n);
  long pop(uint8_t* buf, size_t cap, int timeout_ms);  // as ByteStream::read
  void close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint8_t> bytes_;
  bool closed_ = false;
};

// One end of an in-memory serial line: reads from `in`, writes to `out`.
class HostPipeEnd final : public ByteStream {
 public:
  HostPipeEnd(std::shared_ptr<HostByteQueue> in, std::shared_ptr<HostByteQueue> out) : in_(std::move(in)), out_(std::move(out)) {}
  long read(uint8_t* buf, size_t cap, int timeout_ms) override { return in_->pop(buf, cap, timeout_ms); }
  bool write(const uint8_t* data, size_t n) override;
  // Closes what this end writes: the peer reads what is left, then sees the stream closed.
  void close_writer() { out_->close(); }
  std::string read_all_available();  // tests: what has arrived so far

 private:
  std::shared_ptr<HostByteQueue> in_, out_;
};
// A connected pair: a.write -> b.read and b.write -> a.read.
void make_host_pipe(std::unique_ptr<HostPipeEnd>* a, std::unique_ptr<HostPipeEnd>* b);

// SPI transfers in one direction: the receiver arms a buffer (its handshake line goes high), the
// sender waits for that, then its bytes land in the buffer (cut to the buffer's size, as a slave's
// DMA would cut them).
class HostSpiChannel {
 public:
  using Tamper = std::function<void(std::vector<uint8_t>* transfer)>;
  Status transmit(const uint8_t* data, size_t n, int timeout_ms);
  Status receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms);
  void set_tamper(Tamper t);
  void close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;  // the receiver's handshake line
  std::deque<std::vector<uint8_t>> in_flight_;
  Tamper tamper_;
  uint64_t transfers_ = 0;
  bool closed_ = false;
};

class HostSpiEnd final : public SpiLink {
 public:
  HostSpiEnd(std::shared_ptr<HostSpiChannel> tx, std::shared_ptr<HostSpiChannel> rx) : tx_(std::move(tx)), rx_(std::move(rx)) {}
  Status transmit(const uint8_t* data, size_t n, int timeout_ms) override { return tx_->transmit(data, n, timeout_ms); }
  Status receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms) override { return rx_->receive(buf, cap, n, timeout_ms); }
  HostSpiChannel& tx() { return *tx_; }

 private:
  std::shared_ptr<HostSpiChannel> tx_, rx_;
};
// Two boards wired as in the reference design: a's master TX -> b's slave RX, b's TX -> a's RX.
void make_host_spi_wire(std::unique_ptr<HostSpiEnd>* a, std::unique_ptr<HostSpiEnd>* b);

struct HostGpioBus {
  std::atomic<bool> lines[static_cast<int>(Gpio::kCount)] = {};
  std::atomic<uint32_t> activity_edges{0};  // rising edges of the activity LED
};

class HostWorker final : public Worker {
 public:
  HostWorker();
  ~HostWorker();
  void start(Job job, void* arg) override;
  void wait() override;
  uint64_t jobs() const { return jobs_; }

 private:
  std::atomic<int> flag_{0};  // 0 idle, 1 job handed over, 2 quit
  Job job_ = nullptr;
  void* arg_ = nullptr;
  uint64_t jobs_ = 0;
  std::thread thread_;
};

struct HostBoardConfig {
  std::map<std::string, std::string> partitions;  // label -> file
  size_t sram_bytes = 320 * 1024;                 // the ESP32-S3's free internal RAM, roughly
  size_t psram_bytes = 8 * 1024 * 1024;
};

class HostBoard final : public Hal {
 public:
  // serial / spi may be null when the caller does not use them; bus null: lines of its own.
  HostBoard(const HostBoardConfig& cfg, ByteStream* serial, SpiLink* spi, HostGpioBus* bus);
  ~HostBoard();
  Status map_partition(const char* label, const uint8_t** data, size_t* size) override;
  Status tier_memory(Tier tier, void** base, size_t* bytes) override;
  ByteStream& serial() override { return *serial_; }
  SpiLink& spi() override { return *spi_; }
  void gpio_write(Gpio line, bool high) override;
  bool gpio_read(Gpio line) override;
  uint64_t cycles() override;
  uint32_t cycles_per_us() override { return 1000; }
  Worker& worker() override { return worker_; }
  void log(const char* message) override;
  const std::vector<std::string>& logged() const { return log_; }
  HostGpioBus& bus() { return *bus_; }

 private:
  HostBoardConfig cfg_;
  ByteStream* serial_;
  SpiLink* spi_;
  HostGpioBus* bus_;
  HostGpioBus own_bus_;
  HostWorker worker_;
  std::map<std::string, void*> mapped_;  // label -> aligned buffer
  void* tiers_[kTierCount] = {};
  std::vector<std::string> log_;
};

}  // namespace mcullm::board
