#include "hal_esp32s3.h"

#include <string.h>

#include "driver/gpio.h"
#include "driver/spi_slave.h"
#include "driver/uart.h"
#include "driver/usb_serial_jtag.h"
#include "esp_cpu.h"
#include "esp_heap_caps.h"
#include "esp_log.h"
#include "esp_partition.h"
#include "esp_timer.h"
#include "sdkconfig.h"

namespace mcullm::board {

namespace {

const char* const kTag = "mcullm";
constexpr spi_host_device_t kTxHost = SPI2_HOST;
constexpr spi_host_device_t kRxHost = SPI3_HOST;
SemaphoreHandle_t g_peer_ready = nullptr;  // given on each rising edge of the next board's handshake

TickType_t ticks(int timeout_ms) { return timeout_ms < 0 ? portMAX_DELAY : pdMS_TO_TICKS(timeout_ms); }

Status esp_error(const char* what, esp_err_t e) { return Status::Error(Code::kIo, "%s: %s", what, esp_err_to_name(e)); }

gpio_num_t pin(Gpio line) {
  switch (line) {
    case Gpio::kReset: return static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_RESET);
    case Gpio::kReady: return static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_READY);
    case Gpio::kActivity: return static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_LED);
    case Gpio::kCount: break;
  }
  return GPIO_NUM_NC;
}

// The slave's callbacks (ISR context): the handshake is high exactly while a transaction is loaded.
void IRAM_ATTR rx_armed(spi_slave_transaction_t*) { gpio_set_level(static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_HANDSHAKE_OUT), 1); }
void IRAM_ATTR rx_done(spi_slave_transaction_t*) { gpio_set_level(static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_HANDSHAKE_OUT), 0); }
void IRAM_ATTR peer_ready_isr(void*) {
  BaseType_t woken = pdFALSE;
  xSemaphoreGiveFromISR(g_peer_ready, &woken);
  if (woken) portYIELD_FROM_ISR();
}

}  // namespace

// ---- serial ----

Status EspSerial::init() {
#if CONFIG_MCULLM_SERIAL_UART
  uart_config_t c = {};
  c.baud_rate = CONFIG_MCULLM_UART_BAUD;
  c.data_bits = UART_DATA_8_BITS;
  c.parity = UART_PARITY_DISABLE;
  c.stop_bits = UART_STOP_BITS_1;
  c.flow_ctrl = UART_HW_FLOWCTRL_DISABLE;
  c.source_clk = UART_SCLK_DEFAULT;
  if (esp_err_t e = uart_driver_install(UART_NUM_0, 4096, 4096, 0, nullptr, 0); e != ESP_OK) return esp_error("uart_driver_install", e);
  if (esp_err_t e = uart_param_config(UART_NUM_0, &c); e != ESP_OK) return esp_error("uart_param_config", e);
#else
  usb_serial_jtag_driver_config_t c = {};
  c.tx_buffer_size = 4096;
  c.rx_buffer_size = 4096;
  if (esp_err_t e = usb_serial_jtag_driver_install(&c); e != ESP_OK) return esp_error("usb_serial_jtag_driver_install", e);
#endif
  return Status::Ok();
}

long EspSerial::read(uint8_t* buf, size_t cap, int timeout_ms) {
#if CONFIG_MCULLM_SERIAL_UART
  // uart_read_bytes waits until all `cap` bytes came (or the timeout), unlike ByteStream::read, which
  // returns what is there once the first byte is: wait for one byte, then take only what is buffered.
  // (Found on the QEMU fork: a 16-byte G line sat unanswered until 256 bytes had arrived.)
  if (cap == 0) return 0;
  int n = uart_read_bytes(UART_NUM_0, buf, 1, ticks(timeout_ms));
  size_t more = 0;
  if (n == 1 && uart_get_buffered_data_len(UART_NUM_0, &more) == ESP_OK && more > 0) {
    const size_t take = more < cap - 1 ? more : cap - 1;
    const int k = uart_read_bytes(UART_NUM_0, buf + 1, static_cast<uint32_t>(take), 0);
    if (k > 0) n += k;
  }
#else
  const int n = usb_serial_jtag_read_bytes(buf, static_cast<uint32_t>(cap), ticks(timeout_ms));
#endif
  return n < 0 ? 0 : n;  // the port never closes: an error is "nothing yet"
}

bool EspSerial::write(const uint8_t* data, size_t n) {
  while (n > 0) {
#if CONFIG_MCULLM_SERIAL_UART
    const int k = uart_write_bytes(UART_NUM_0, data, n);
#else
    const int k = usb_serial_jtag_write_bytes(data, n, portMAX_DELAY);
#endif
    if (k < 0) return false;
    data += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// ---- SPI link ----

Status EspSpi::init() {
  tx_dma_ = static_cast<uint8_t*>(heap_caps_aligned_alloc(16, kMaxTransfer, MALLOC_CAP_DMA | MALLOC_CAP_INTERNAL));
  rx_dma_ = static_cast<uint8_t*>(heap_caps_aligned_alloc(16, kMaxTransfer, MALLOC_CAP_DMA | MALLOC_CAP_INTERNAL));
  if (!tx_dma_ || !rx_dma_) return Status::Error(Code::kOutOfMemory, "spi: no internal DMA memory for two %zu-byte buffers", kMaxTransfer);

  spi_bus_config_t tx_bus = {};
  tx_bus.mosi_io_num = CONFIG_MCULLM_PIN_TX_MOSI;
  tx_bus.miso_io_num = -1;
  tx_bus.sclk_io_num = CONFIG_MCULLM_PIN_TX_CLK;
  tx_bus.quadwp_io_num = -1;
  tx_bus.quadhd_io_num = -1;
  tx_bus.max_transfer_sz = kMaxTransfer;
  if (esp_err_t e = spi_bus_initialize(kTxHost, &tx_bus, SPI_DMA_CH_AUTO); e != ESP_OK) return esp_error("spi_bus_initialize (TX)", e);
  spi_device_interface_config_t dev = {};
  dev.mode = 0;
  dev.clock_speed_hz = CONFIG_MCULLM_SPI_MHZ * 1000 * 1000;
  dev.spics_io_num = CONFIG_MCULLM_PIN_TX_CS;
  dev.queue_size = 1;
  if (esp_err_t e = spi_bus_add_device(kTxHost, &dev, &tx_dev_); e != ESP_OK) return esp_error("spi_bus_add_device", e);

  spi_bus_config_t rx_bus = {};
  rx_bus.mosi_io_num = CONFIG_MCULLM_PIN_RX_MOSI;
  rx_bus.miso_io_num = -1;
  rx_bus.sclk_io_num = CONFIG_MCULLM_PIN_RX_CLK;
  rx_bus.quadwp_io_num = -1;
  rx_bus.quadhd_io_num = -1;
  rx_bus.max_transfer_sz = kMaxTransfer;
  spi_slave_interface_config_t slv = {};
  slv.mode = 0;
  slv.spics_io_num = CONFIG_MCULLM_PIN_RX_CS;
  slv.queue_size = 1;
  slv.post_setup_cb = rx_armed;
  slv.post_trans_cb = rx_done;
  if (esp_err_t e = spi_slave_initialize(kRxHost, &rx_bus, &slv, SPI_DMA_CH_AUTO); e != ESP_OK) return esp_error("spi_slave_initialize (RX)", e);

  gpio_config_t out = {};
  out.pin_bit_mask = 1ull << CONFIG_MCULLM_PIN_HANDSHAKE_OUT;
  out.mode = GPIO_MODE_OUTPUT;
  gpio_config(&out);
  gpio_set_level(static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_HANDSHAKE_OUT), 0);
  gpio_config_t in = {};
  in.pin_bit_mask = 1ull << CONFIG_MCULLM_PIN_HANDSHAKE_IN;
  in.mode = GPIO_MODE_INPUT;
  in.pull_down_en = GPIO_PULLDOWN_ENABLE;
  in.intr_type = GPIO_INTR_POSEDGE;
  gpio_config(&in);
  g_peer_ready = xSemaphoreCreateBinary();
  if (esp_err_t e = gpio_install_isr_service(0); e != ESP_OK && e != ESP_ERR_INVALID_STATE) return esp_error("gpio_install_isr_service", e);
  gpio_isr_handler_add(static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_HANDSHAKE_IN), peer_ready_isr, nullptr);
  if (gpio_get_level(static_cast<gpio_num_t>(CONFIG_MCULLM_PIN_HANDSHAKE_IN))) xSemaphoreGive(g_peer_ready);  // armed before we looked
  return Status::Ok();
}

Status EspSpi::transmit(const uint8_t* data, size_t n, int timeout_ms) {
  if (n == 0 || n % 4 != 0 || n > kMaxTransfer)
    return Status::Error(Code::kInvalidArgument, "spi: a transfer of %zu bytes (DMA: a multiple of 4, 4..%zu)", n, kMaxTransfer);
  if (xSemaphoreTake(g_peer_ready, ticks(timeout_ms)) != pdTRUE)
    return Status::Error(Code::kOutOfRange, "spi: the receiver's handshake stayed low for %d ms", timeout_ms);
  memcpy(tx_dma_, data, n);
  spi_transaction_t t = {};
  t.length = n * 8;
  t.tx_buffer = tx_dma_;
  if (esp_err_t e = spi_device_transmit(tx_dev_, &t); e != ESP_OK) return esp_error("spi_device_transmit", e);
  return Status::Ok();
}

Status EspSpi::receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms) {
  *n = 0;
  static spi_slave_transaction_t t;  // stays queued across calls until a master clocks it
  if (!rx_pending_) {
    t = spi_slave_transaction_t();
    t.length = kMaxTransfer * 8;
    t.rx_buffer = rx_dma_;
    if (esp_err_t e = spi_slave_queue_trans(kRxHost, &t, portMAX_DELAY); e != ESP_OK) return esp_error("spi_slave_queue_trans", e);
    rx_pending_ = true;
  }
  spi_slave_transaction_t* done = nullptr;
  if (spi_slave_get_trans_result(kRxHost, &done, ticks(timeout_ms)) != ESP_OK) return Status::Ok();  // nothing yet
  rx_pending_ = false;
  const size_t got = done->trans_len / 8;
  *n = got < cap ? got : cap;
  memcpy(buf, rx_dma_, *n);
  return Status::Ok();
}

// ---- the second core ----

void EspWorker::task(void* self) {
  EspWorker* w = static_cast<EspWorker*>(self);
  bool first = true;
  for (;;) {
    while (__atomic_load_n(&w->flag_, __ATOMIC_ACQUIRE) != 1) {
    }
    // Once, on the console: which core computes the second share (rung 5 of docs/firmware.md).
    if (first) ESP_LOGI(kTag, "worker: first share on core %d", esp_cpu_get_core_id());
    first = false;
    w->job_(w->arg_);
    __atomic_store_n(&w->flag_, 0, __ATOMIC_RELEASE);
  }
}

Status EspWorker::init() {
  // Highest priority on core 1: nothing else is scheduled there (its idle task is not watched).
  if (xTaskCreatePinnedToCore(&EspWorker::task, "mcullm_core1", 8192, this, configMAX_PRIORITIES - 1, nullptr, 1) != pdPASS)
    return Status::Error(Code::kOutOfMemory, "cannot start the worker task on core 1");
  return Status::Ok();
}

void EspWorker::start(Job job, void* arg) {
  job_ = job;
  arg_ = arg;
  __atomic_store_n(&flag_, 1, __ATOMIC_RELEASE);
}

void EspWorker::wait() {
  while (__atomic_load_n(&flag_, __ATOMIC_ACQUIRE) == 1) {
  }
}

// ---- the board ----

Status Esp32s3Hal::init(Role role) {
  role_ = role;
  gpio_config_t led = {};
  led.pin_bit_mask = 1ull << CONFIG_MCULLM_PIN_LED;
  led.mode = GPIO_MODE_OUTPUT;
  gpio_config(&led);
  if (role != Role::kSingle) {
    gpio_config_t ctl = {};
    // The master drives reset and reads ready; a node drives ready (its reset is its EN pin).
    ctl.pin_bit_mask = role == Role::kMaster ? 1ull << CONFIG_MCULLM_PIN_RESET : 1ull << CONFIG_MCULLM_PIN_READY;
    ctl.mode = GPIO_MODE_OUTPUT;
    gpio_config(&ctl);
    if (role == Role::kMaster) {
      gpio_config_t rd = {};
      rd.pin_bit_mask = 1ull << CONFIG_MCULLM_PIN_READY;
      rd.mode = GPIO_MODE_INPUT;
      rd.pull_down_en = GPIO_PULLDOWN_ENABLE;
      gpio_config(&rd);
    }
    MC_TRY(spi_.init());
  }
  if (role != Role::kNode) MC_TRY(serial_.init());
#if CONFIG_MCULLM_SECOND_CORE
  return worker_.init();
#else
  return Status::Ok();  // core 0 alone (menuconfig): no task spinning on core 1
#endif
}

Status Esp32s3Hal::map_partition(const char* label, const uint8_t** data, size_t* size) {
  const esp_partition_t* p = esp_partition_find_first(ESP_PARTITION_TYPE_DATA, ESP_PARTITION_SUBTYPE_ANY, label);
  if (!p) return Status::Error(Code::kNotFound, "no data partition labelled '%s' (partitions.csv)", label);
  // Map the image's bytes only (its header says how many), not the whole partition.
  uint8_t head[24];
  if (esp_err_t e = esp_partition_read(p, 0, head, sizeof head); e != ESP_OK) return esp_error("esp_partition_read", e);
  uint64_t total = 0;
  for (int i = 0; i < 8; ++i) total |= static_cast<uint64_t>(head[16 + i]) << (8 * i);
  if (total == 0 || total > p->size)
    return Status::Error(Code::kCorrupt, "the image header says %llu bytes, the partition holds %lu (was the image written?)",
                         static_cast<unsigned long long>(total), static_cast<unsigned long>(p->size));
  const void* ptr = nullptr;
  esp_partition_mmap_handle_t handle;
  if (esp_err_t e = esp_partition_mmap(p, 0, static_cast<size_t>(total), ESP_PARTITION_MMAP_DATA, &ptr, &handle); e != ESP_OK)
    return esp_error("esp_partition_mmap", e);
  *data = static_cast<const uint8_t*>(ptr);
  *size = static_cast<size_t>(total);
  return Status::Ok();
}

Status Esp32s3Hal::tier_memory(Tier tier, void** base, size_t* bytes) {
  if (tier != Tier::kSram && tier != Tier::kPsram) return Status::Error(Code::kInvalidArgument, "tier %s has no RAM", tier_name(tier));
  const int i = static_cast<int>(tier);
  if (tier_taken_[i]) return Status::Error(Code::kInvalidArgument, "tier %s was handed out already", tier_name(tier));
  const uint32_t caps = tier == Tier::kSram ? (MALLOC_CAP_INTERNAL | MALLOC_CAP_8BIT) : (MALLOC_CAP_SPIRAM | MALLOC_CAP_8BIT);
  const size_t reserve = 1024u * (tier == Tier::kSram ? CONFIG_MCULLM_SRAM_RESERVE_KB : CONFIG_MCULLM_PSRAM_RESERVE_KB);
  const size_t largest = heap_caps_get_largest_free_block(caps);
  const size_t n = largest > reserve + 64 ? (largest - reserve) & ~static_cast<size_t>(63) : 0;
  void* p = n ? heap_caps_aligned_alloc(64, n, caps) : nullptr;
  if (!p) return Status::Error(Code::kOutOfMemory, "tier %s: no block left after the %zu-byte reserve (largest free %zu)", tier_name(tier), reserve, largest);
  tier_taken_[i] = true;
  *base = p;
  *bytes = n;
  return Status::Ok();
}

void Esp32s3Hal::gpio_write(Gpio line, bool high) { gpio_set_level(pin(line), high ? 1 : 0); }

bool Esp32s3Hal::gpio_read(Gpio line) { return gpio_get_level(pin(line)) != 0; }

uint64_t Esp32s3Hal::cycles() {
  // CCOUNT wraps every 2^32 cycles (17.9 s at 240 MHz): widened here, which holds as long as two calls
  // are less than that apart (the generation loop reads it at every token).
  const uint32_t c = static_cast<uint32_t>(esp_cpu_get_cycle_count());
  if (c < last_count_) high_ += 1ull << 32;
  last_count_ = c;
  return high_ | c;
}

uint32_t Esp32s3Hal::cycles_per_us() { return CONFIG_ESP_DEFAULT_CPU_FREQ_MHZ; }

void Esp32s3Hal::log(const char* message) { ESP_LOGI(kTag, "%s", message); }

}  // namespace mcullm::board
