// The board HAL (src/board/hal.h) on ESP-IDF for the ESP32-S3:
//   partition  esp_partition_mmap of the model partition (data memory, read in place)
//   tiers      heap_caps_aligned_alloc: MALLOC_CAP_INTERNAL (SRAM) and MALLOC_CAP_SPIRAM (PSRAM),
//              each the largest free block minus what ESP-IDF keeps (menuconfig: mcullm)
//   serial     USB-Serial-JTAG (the board's USB port) or UART0, by menuconfig
//   SPI        SPI2 as master TX and SPI3 as slave RX, DMA, mode 0, the reference design's pins;
//              handshake lines: ours goes high while our RX transaction is armed, the next board's
//              rising edge lets our TX go (FACTS.md section 5)
//   GPIO       reset, ready, activity LED
//   cycles     esp_cpu_get_cycle_count (CCOUNT of core 0, widened to 64 bits)
//   worker     a task pinned to core 1 spinning on a flag
#pragma once
#include "board/hal.h"
#include "driver/spi_master.h"
#include "freertos/FreeRTOS.h"
#include "freertos/semphr.h"
#include "freertos/task.h"

namespace mcullm::board {

enum class Role { kSingle, kMaster, kNode };

class EspSerial final : public ByteStream {
 public:
  Status init();
  long read(uint8_t* buf, size_t cap, int timeout_ms) override;
  bool write(const uint8_t* data, size_t n) override;
};

class EspSpi final : public SpiLink {
 public:
  Status init();
  Status transmit(const uint8_t* data, size_t n, int timeout_ms) override;
  Status receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms) override;

 private:
  spi_device_handle_t tx_dev_ = nullptr;
  uint8_t* tx_dma_ = nullptr;  // internal DMA-capable buffers: the link's own, no allocation per transfer
  uint8_t* rx_dma_ = nullptr;
  bool rx_pending_ = false;    // an RX transaction is queued (armed) and not yet collected
};

class EspWorker final : public Worker {
 public:
  Status init();
  void start(Job job, void* arg) override;
  void wait() override;

 private:
  static void task(void* self);
  int flag_ = 0;  // 0 idle, 1 job handed over (read and written with __atomic builtins: C headers only)
  Job job_ = nullptr;
  void* arg_ = nullptr;
};

class Esp32s3Hal final : public Hal {
 public:
  // Installs the drivers the role needs (the SPI link only for master and node).
  Status init(Role role);
  Status map_partition(const char* label, const uint8_t** data, size_t* size) override;
  Status tier_memory(Tier tier, void** base, size_t* bytes) override;
  ByteStream& serial() override { return serial_; }
  SpiLink& spi() override { return spi_; }
  void gpio_write(Gpio line, bool high) override;
  bool gpio_read(Gpio line) override;
  uint64_t cycles() override;
  uint32_t cycles_per_us() override;
  Worker& worker() override { return worker_; }
  void log(const char* message) override;

 private:
  Role role_ = Role::kSingle;
  EspSerial serial_;
  EspSpi spi_;
  EspWorker worker_;
  bool tier_taken_[2] = {};
  uint32_t last_count_ = 0;
  uint64_t high_ = 0;
};

}  // namespace mcullm::board
