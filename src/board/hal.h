// The board HAL: everything the firmware's logic (board/line_server.h, board/node.h,
// board/master_link.h) needs from a board, and nothing more. Two implementations:
//   host     board/hal_host.h: files for partitions, malloc'd tiers with budgets, in-memory byte
//            streams, std::thread spinning on an atomic flag, a virtual SPI wire and GPIO lines
//            joining two host "boards" (the host tests drive the firmware logic through it)
//   ESP-IDF  firmware/esp32s3/main/hal_esp32s3.cpp: esp_partition_mmap, heap_caps_malloc, USB-CDC /
//            UART, spi_master / spi_slave with DMA, gpio, esp_cpu_get_cycle_count, a task on core 1
// Freestanding: no heap after init (the tiers are handed out once), no exceptions, no RTTI, C headers
// only. The interfaces have protected non-virtual destructors: nothing deletes a HAL object through
// them (a virtual destructor would pull operator delete into the core).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "mcullm/status.h"

namespace mcullm::board {

// A byte stream: the serial port (USB-CDC or UART) or one direction pair of a pipe.
class ByteStream {
 public:
  // Reads up to cap bytes, waiting at most timeout_ms (< 0: no limit) for the first one. Returns the
  // bytes read (> 0), 0 on timeout, -1 when the stream is closed for good (the host pipe's peer hung
  // up; a board's USB port never closes).
  virtual long read(uint8_t* buf, size_t cap, int timeout_ms) = 0;
  // Writes all n bytes (waiting while the port is full); false when the stream is gone.
  virtual bool write(const uint8_t* data, size_t n) = 0;

 protected:
  ~ByteStream() = default;
};

// The SPI link of the cluster's reference design (FACTS.md section 5): each board has an SPI master
// that transmits to the next board and an SPI slave that receives from the previous one, with DMA
// (word-aligned buffers, lengths a multiple of 4, at most 32 KB per transfer) and a handshake GPIO:
// the receiver raises it when a DMA buffer is armed, the sender waits for it before clocking.
// One transfer carries one whole link frame (cluster/frame.h), whatever its length.
class SpiLink {
 public:
  static constexpr size_t kMaxTransfer = 32768;
  // Master TX: waits at most timeout_ms for the receiver's handshake, then clocks n bytes out
  // (n a multiple of 4, <= kMaxTransfer). Errors: kOutOfRange (timeout), kInvalidArgument (length).
  virtual Status transmit(const uint8_t* data, size_t n, int timeout_ms) = 0;
  // Slave RX: arms buf[cap] (cap a multiple of 4), raises the handshake, waits at most timeout_ms for
  // a transfer; *n = bytes clocked in (0 on timeout: Ok with *n 0).
  virtual Status receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms) = 0;

 protected:
  ~SpiLink() = default;
};

// The control lines of the reference design (FACTS.md section 5) plus the SPI handshakes.
enum class Gpio : uint8_t {
  kReset = 0,   // master output: held low resets the nodes (daisy-chained into EN)
  kReady,       // from the chain's end back to the master: every node is ready
  kActivity,    // the activity LED (on while a token is computed)
  kCount,
};

// The second core: a worker spinning on a flag (FACTS.md section 6: 83-93 cycles per hand-off on
// the ESP32-S3, ~34 us with a FreeRTOS notification instead). One job at a time.
class Worker {
 public:
  using Job = void (*)(void* arg);
  // Hands job(arg) to the second core and returns at once.
  virtual void start(Job job, void* arg) = 0;
  // Spins until the job handed over last has finished.
  virtual void wait() = 0;

 protected:
  ~Worker() = default;
};

class Hal {
 public:
  // The model partition mapped read-only (flash mmap on a board, a file on the host); the mapping
  // stays valid for the life of the HAL. label: the partition's name in partitions.csv ("model").
  virtual Status map_partition(const char* label, const uint8_t** data, size_t* size) = 0;
  // The whole memory budget of a tier (kSram: internal RAM, kPsram: PSRAM) as one block, handed out
  // once (a second call for the same tier fails): the caller makes an Arena of it.
  virtual Status tier_memory(Tier tier, void** base, size_t* bytes) = 0;
  virtual ByteStream& serial() = 0;
  virtual SpiLink& spi() = 0;
  virtual void gpio_write(Gpio line, bool high) = 0;
  virtual bool gpio_read(Gpio line) = 0;
  // A free-running cycle counter (CCOUNT at the CPU clock on the ESP32-S3) and its rate.
  virtual uint64_t cycles() = 0;
  virtual uint32_t cycles_per_us() = 0;
  virtual Worker& worker() = 0;
  // A short message for a person watching the board's log (not the serial protocol's stream).
  virtual void log(const char* message) = 0;

 protected:
  ~Hal() = default;
};

// An Arena over a tier's whole budget.
Status tier_arena(Hal& hal, Tier tier, Arena* out);

}  // namespace mcullm::board
