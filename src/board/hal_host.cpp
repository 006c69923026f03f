#include "board/hal_host.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mcullm::board {

namespace {
using Clock = std::chrono::steady_clock;
Clock::time_point deadline(int timeout_ms) {
  return timeout_ms < 0 ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
}
}  // namespace

// ---- byte streams ----

void HostByteQueue::push(const uint8_t* data, size_t n) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return;
    bytes_.insert(bytes_.end(), data, data + n);
  }
  cv_.notify_all();
}

long HostByteQueue::pop(uint8_t* buf, size_t cap, int timeout_ms) {
  std::unique_lock<std::mutex> l(mu_);
  const auto until = deadline(timeout_ms);
  const auto ready = [&] { return !bytes_.empty() || closed_; };
  if (timeout_ms < 0) cv_.wait(l, ready); else cv_.wait_until(l, until, ready);
  if (bytes_.empty()) return closed_ ? -1 : 0;
  const size_t n = bytes_.size() < cap ? bytes_.size() : cap;
  std::copy(bytes_.begin(), bytes_.begin() + static_cast<long>(n), buf);
  bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<long>(n));
  return static_cast<long>(n);
}

void HostByteQueue::close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool HostPipeEnd::write(const uint8_t* data, size_t n) {
  out_->push(data, n);
  return true;
}

std::string HostPipeEnd::read_all_available() {
  std::string s;
  uint8_t buf[4096];
  long n;
  while ((n = in_->pop(buf, sizeof buf, 0)) > 0) s.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  return s;
}

void make_host_pipe(std::unique_ptr<HostPipeEnd>* a, std::unique_ptr<HostPipeEnd>* b) {
  auto ab = std::make_shared<HostByteQueue>(), ba = std::make_shared<HostByteQueue>();
  *a = std::make_unique<HostPipeEnd>(ba, ab);
  *b = std::make_unique<HostPipeEnd>(ab, ba);
}

// ---- SPI ----

Status HostSpiChannel::transmit(const uint8_t* data, size_t n, int timeout_ms) {
  if (n == 0 || n % 4 != 0 || n > SpiLink::kMaxTransfer)
    return Status::Error(Code::kInvalidArgument, "spi: a transfer of %zu bytes (DMA: a multiple of 4, 4..%zu)", n, SpiLink::kMaxTransfer);
  std::unique_lock<std::mutex> l(mu_);
  const auto ready = [&] { return (armed_ && in_flight_.empty()) || closed_; };
  if (timeout_ms < 0) cv_.wait(l, ready); else cv_.wait_until(l, deadline(timeout_ms), ready);
  if (closed_) return Status::Error(Code::kIo, "spi: the wire is cut");
  if (!ready()) return Status::Error(Code::kOutOfRange, "spi: the receiver's handshake stayed low for %d ms", timeout_ms);
  std::vector<uint8_t> t(data, data + n);
  if (tamper_) tamper_(&t);
  ++transfers_;
  in_flight_.push_back(std::move(t));
  armed_ = false;  // the slave's DMA buffer is used up
  l.unlock();
  cv_.notify_all();
  return Status::Ok();
}

Status HostSpiChannel::receive(uint8_t* buf, size_t cap, size_t* n, int timeout_ms) {
  *n = 0;
  std::unique_lock<std::mutex> l(mu_);
  armed_ = true;
  cv_.notify_all();
  const auto ready = [&] { return !in_flight_.empty() || closed_; };
  if (timeout_ms < 0) cv_.wait(l, ready); else cv_.wait_until(l, deadline(timeout_ms), ready);
  if (in_flight_.empty()) {
    armed_ = false;
    return closed_ ? Status::Error(Code::kIo, "spi: the wire is cut") : Status::Ok();
  }
  std::vector<uint8_t> t = std::move(in_flight_.front());
  in_flight_.pop_front();
  *n = t.size() < cap ? t.size() : cap;
  if (*n) std::memcpy(buf, t.data(), *n);
  return Status::Ok();
}

void HostSpiChannel::set_tamper(Tamper t) {
  std::lock_guard<std::mutex> l(mu_);
  tamper_ = std::move(t);
}

void HostSpiChannel::close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

void make_host_spi_wire(std::unique_ptr<HostSpiEnd>* a, std::unique_ptr<HostSpiEnd>* b) {
  auto ab = std::make_shared<HostSpiChannel>(), ba = std::make_shared<HostSpiChannel>();
  *a = std::make_unique<HostSpiEnd>(ab, ba);
  *b = std::make_unique<HostSpiEnd>(ba, ab);
}

// ---- the second core ----

// Spins a while (the board's hand-off), then sleeps on the flag (C++20 atomic wait), so that idle host
// boards do not burn this machine's shared cores.
namespace {
constexpr int kSpins = 4096;
void await_change(std::atomic<int>& flag, int from) {
  for (int i = 0; i < kSpins; ++i) {
    if (flag.load(std::memory_order_acquire) != from) return;
    std::this_thread::yield();
  }
  while (flag.load(std::memory_order_acquire) == from) flag.wait(from, std::memory_order_acquire);
}
}  // namespace

HostWorker::HostWorker() {
  thread_ = std::thread([this] {
    for (;;) {
      await_change(flag_, 0);
      if (flag_.load(std::memory_order_acquire) == 2) return;
      job_(arg_);
      flag_.store(0, std::memory_order_release);
      flag_.notify_all();
    }
  });
}

HostWorker::~HostWorker() {
  wait();
  flag_.store(2, std::memory_order_release);
  flag_.notify_all();
  thread_.join();
}

void HostWorker::start(Job job, void* arg) {
  job_ = job;
  arg_ = arg;
  ++jobs_;
  flag_.store(1, std::memory_order_release);
  flag_.notify_all();
}

void HostWorker::wait() { await_change(flag_, 1); }

// ---- the board ----

HostBoard::HostBoard(const HostBoardConfig& cfg, ByteStream* serial, SpiLink* spi, HostGpioBus* bus)
    : cfg_(cfg), serial_(serial), spi_(spi), bus_(bus ? bus : &own_bus_) {}

HostBoard::~HostBoard() {
  for (auto& [label, p] : mapped_) std::free(p);
  for (void* p : tiers_) std::free(p);
}

Status HostBoard::map_partition(const char* label, const uint8_t** data, size_t* size) {
  const auto it = cfg_.partitions.find(label);
  if (it == cfg_.partitions.end()) return Status::Error(Code::kNotFound, "no partition labelled '%s'", label);
  if (mapped_.count(label)) return Status::Error(Code::kInvalidArgument, "partition '%s' is mapped already", label);
  FILE* f = std::fopen(it->second.c_str(), "rb");
  if (!f) return Status::Error(Code::kIo, "cannot open %s (partition '%s')", it->second.c_str(), label);
  std::fseek(f, 0, SEEK_END);
  const long n = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  const size_t bytes = n > 0 ? static_cast<size_t>(n) : 0;
  void* buf = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  const size_t got = buf ? std::fread(buf, 1, bytes, f) : 0;
  std::fclose(f);
  if (!buf || got != bytes) {
    std::free(buf);
    return Status::Error(Code::kIo, "cannot read %s (partition '%s')", it->second.c_str(), label);
  }
  mapped_[label] = buf;
  *data = static_cast<const uint8_t*>(buf);
  *size = bytes;
  return Status::Ok();
}

Status HostBoard::tier_memory(Tier tier, void** base, size_t* bytes) {
  if (tier != Tier::kSram && tier != Tier::kPsram) return Status::Error(Code::kInvalidArgument, "tier %s has no RAM", tier_name(tier));
  void*& t = tiers_[static_cast<int>(tier)];
  if (t) return Status::Error(Code::kInvalidArgument, "tier %s was handed out already", tier_name(tier));
  const size_t n = tier == Tier::kSram ? cfg_.sram_bytes : cfg_.psram_bytes;
  t = std::aligned_alloc(64, (n + 63) / 64 * 64 + 64);
  if (!t) return Status::Error(Code::kOutOfMemory, "no %zu bytes for tier %s", n, tier_name(tier));
  *base = t;
  *bytes = n;
  return Status::Ok();
}

void HostBoard::gpio_write(Gpio line, bool high) {
  const bool was = bus_->lines[static_cast<int>(line)].exchange(high);
  if (line == Gpio::kActivity && high && !was) ++bus_->activity_edges;
}

bool HostBoard::gpio_read(Gpio line) { return bus_->lines[static_cast<int>(line)].load(); }

uint64_t HostBoard::cycles() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

void HostBoard::log(const char* message) { log_.emplace_back(message); }

}  // namespace mcullm::board
