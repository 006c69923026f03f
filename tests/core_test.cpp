// Core: arenas, slice(), the host thread pool, the run fingerprint and Status.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/arena.h"
#include "core/fingerprint.h"
#include "core/thread_pool.h"
#include "core/thread_pool_host.h"
#include "mcullm/status.h"
#include "test_support.h"

namespace mcullm {
namespace {

// ---- Arena --------------------------------------------------------------------------------------

TEST(CoreArena, AlignmentAndAccounting) {
  alignas(64) static uint8_t buf[1024];
  Arena a(Tier::kSram, buf + 1, 1000);  // a misaligned base: alignment is of the address, not the offset
  EXPECT_EQ(a.tier(), Tier::kSram);
  EXPECT_EQ(a.stats().capacity, 1000u);
  void* p = a.alloc(3, 1, TensorClass::kNorm);
  ASSERT_EQ(p, buf + 1);
  void* q = a.alloc(10, 16, TensorClass::kFfn);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 16, 0u);
  EXPECT_EQ(q, buf + 16);  // 3 used at offset 1..3, next 16-aligned address
  void* r = a.alloc(1, 64, TensorClass::kFfn);
  EXPECT_EQ(r, buf + 64);
  EXPECT_EQ(a.stats().used, 64u);  // (buf+1) .. buf+65
  EXPECT_EQ(a.stats().by_class[static_cast<int>(TensorClass::kNorm)], 3u);
  EXPECT_EQ(a.stats().by_class[static_cast<int>(TensorClass::kFfn)], 61u);  // 12 pad + 10, 38 pad + 1
  size_t total = 0;
  for (size_t b : a.stats().by_class) total += b;
  EXPECT_EQ(total, a.stats().used) << "every byte used is accounted to a class";
  EXPECT_EQ(a.remaining(), 1000u - 64u);
  EXPECT_EQ(a.alloc(1, 3, TensorClass::kOther), nullptr) << "non power-of-two alignment";
  EXPECT_EQ(a.alloc(1, 0, TensorClass::kOther), nullptr);
  EXPECT_EQ(a.stats().used, 64u) << "failed allocations take nothing";
  // Distinct allocations do not overlap.
  std::memset(p, 1, 3);
  std::memset(q, 2, 10);
  EXPECT_EQ(static_cast<uint8_t*>(p)[2], 1);
}

TEST(CoreArena, OutOfMemory) {
  alignas(16) static uint8_t buf[256];
  Arena a(Tier::kPsram, buf, 256);
  ASSERT_NE(a.alloc(200, 16, TensorClass::kKvCache), nullptr);
  EXPECT_EQ(a.alloc(57, 1, TensorClass::kKvCache), nullptr);
  EXPECT_EQ(a.alloc(SIZE_MAX, 1, TensorClass::kKvCache), nullptr) << "no wrap-around";
  EXPECT_NE(a.alloc(56, 1, TensorClass::kKvCache), nullptr) << "the exact remainder fits";
  EXPECT_EQ(a.remaining(), 0u);
  void* out = reinterpret_cast<void*>(1);
  Status s = a.alloc_checked(100, 16, TensorClass::kActivations, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kOutOfMemory);
  EXPECT_EQ(out, nullptr);
  const std::string msg = s.message();
  EXPECT_NE(msg.find("psram"), std::string::npos) << msg;
  EXPECT_NE(msg.find("activations"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100"), std::string::npos) << msg;
  // Alignment padding alone can exhaust it.
  Arena b(Tier::kFlash, buf + 1, 20);
  EXPECT_EQ(b.alloc(8, 16, TensorClass::kOther), nullptr);  // 15 pad + 8 > 20
  EXPECT_NE(b.alloc(5, 16, TensorClass::kOther), nullptr);  // 15 pad + 5 == 20
  // An arena without memory refuses everything but says why.
  Arena none;
  none.reset(Tier::kHost, nullptr, 4096);
  EXPECT_EQ(none.stats().capacity, 0u);
  EXPECT_EQ(none.alloc(1, 1, TensorClass::kOther), nullptr);
  s = none.alloc_checked(8, 8, TensorClass::kHead, &out);
  EXPECT_EQ(s.code(), Code::kOutOfMemory);
  EXPECT_NE(std::string(s.message()).find("host"), std::string::npos) << s.message();
  EXPECT_NE(std::string(s.message()).find("head"), std::string::npos) << s.message();
}

TEST(CoreArena, AllocArray) {
  alignas(16) static uint8_t buf[512];
  Arena a(Tier::kHost, buf, 512);
  double* d = nullptr;
  ASSERT_TRUE(a.alloc_array(10, TensorClass::kScratch, &d).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 16, 0u);
  EXPECT_EQ(a.stats().by_class[static_cast<int>(TensorClass::kScratch)], 80u);
  uint64_t* big = nullptr;
  const Status s = a.alloc_array(SIZE_MAX / 4, TensorClass::kScratch, &big);
  EXPECT_EQ(s.code(), Code::kOutOfMemory);
  EXPECT_EQ(big, nullptr);
  EXPECT_EQ(a.stats().used, 80u);
}

TEST(CoreArena, PeakMarkRollbackAndMapped) {
  alignas(16) static uint8_t buf[1024];
  Arena a(Tier::kSram, buf, 1024);
  ASSERT_NE(a.alloc(100, 4, TensorClass::kAttention), nullptr);
  const Arena::Mark m = a.mark();
  void* s1 = a.alloc(300, 4, TensorClass::kScratch);
  ASSERT_NE(s1, nullptr);
  ASSERT_NE(a.alloc(50, 4, TensorClass::kAttention), nullptr);
  EXPECT_EQ(a.stats().used, 450u);  // 100 + 300 + 50, all 4-aligned
  EXPECT_EQ(a.stats().peak, 450u);
  a.rollback(m);
  EXPECT_EQ(a.stats().used, 100u);
  EXPECT_EQ(a.stats().peak, 450u) << "the peak survives a rollback";
  EXPECT_EQ(a.stats().by_class[static_cast<int>(TensorClass::kScratch)], 0u);
  EXPECT_EQ(a.stats().by_class[static_cast<int>(TensorClass::kAttention)], 100u);
  void* again = a.alloc(300, 4, TensorClass::kScratch);
  EXPECT_EQ(again, s1) << "rolled-back memory is reused";
  EXPECT_EQ(a.stats().peak, 450u);
  ASSERT_NE(a.alloc(200, 4, TensorClass::kFfn), nullptr);
  EXPECT_EQ(a.stats().peak, 600u);
  // Mapped bytes: reported, never taken from the arena.
  a.note_mapped(1u << 20, TensorClass::kEmbedding);
  a.note_mapped(1000, TensorClass::kFfn);
  a.note_mapped(24, TensorClass::kFfn);
  EXPECT_EQ(a.stats().mapped_by_class[static_cast<int>(TensorClass::kEmbedding)], 1u << 20);
  EXPECT_EQ(a.stats().mapped_by_class[static_cast<int>(TensorClass::kFfn)], 1024u);
  EXPECT_EQ(a.stats().mapped_total(), (1u << 20) + 1024u);
  EXPECT_EQ(a.stats().used, 600u);
  // reset() forgets everything.
  a.reset(Tier::kPsram, buf, 512);
  EXPECT_EQ(a.stats().used, 0u);
  EXPECT_EQ(a.stats().peak, 0u);
  EXPECT_EQ(a.stats().mapped_total(), 0u);
  EXPECT_EQ(a.tier(), Tier::kPsram);
}

TEST(CoreArena, Names) {
  EXPECT_STREQ(tier_name(Tier::kSram), "sram");
  EXPECT_STREQ(tier_name(Tier::kPsram), "psram");
  EXPECT_STREQ(tier_name(Tier::kFlash), "flash");
  EXPECT_STREQ(tier_name(Tier::kHost), "host");
  EXPECT_STREQ(tier_name(static_cast<Tier>(99)), "?");
  EXPECT_STREQ(tensor_class_name(TensorClass::kKvCache), "kv_cache");
  EXPECT_STREQ(tensor_class_name(TensorClass::kEmbedding), "embedding");
  EXPECT_STREQ(tensor_class_name(TensorClass::kOther), "other");
  EXPECT_STREQ(tensor_class_name(TensorClass::kCount), "?");
}

// ---- slice() ------------------------------------------------------------------------------------

TEST(CoreSlice, CoversEveryItemExactlyOnce) {
  for (int n = 0; n <= 100; ++n) {
    for (int nth = 1; nth <= 8; ++nth) {
      std::vector<int> seen(static_cast<size_t>(n), 0);
      int prev_end = 0, min_len = n + 1, max_len = -1;
      for (int ith = 0; ith < nth; ++ith) {
        int b = -1, e = -1;
        slice(n, ith, nth, &b, &e);
        ASSERT_EQ(b, prev_end) << "contiguous and in order: n=" << n << " nth=" << nth << " ith=" << ith;
        ASSERT_LE(b, e);
        ASSERT_LE(e, n);
        for (int i = b; i < e; ++i) ++seen[i];
        prev_end = e;
        min_len = std::min(min_len, e - b);
        max_len = std::max(max_len, e - b);
      }
      EXPECT_EQ(prev_end, n) << "n=" << n << " nth=" << nth;
      for (int i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "item " << i << " n=" << n << " nth=" << nth;
      EXPECT_LE(max_len - min_len, 1) << "balanced: n=" << n << " nth=" << nth;
    }
  }
}

// ---- HostThreadPool -----------------------------------------------------------------------------

// Lost work shows up as a hang (run() waits for it forever): a generous watchdog turns that into a
// failure with a message instead of a stuck test. It measures nothing.
class Watchdog {
 public:
  Watchdog(const char* what, int seconds) : thread_([this, what, seconds] {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
      std::fprintf(stderr, "FATAL: %s still running after %d s: the pool lost a task (hang)\n", what, seconds);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Counts the calls of every part of a task. A pool may cut a task into more parts than it has
// threads (HostThreadPool does), but every call of one task must name the same part count.
struct PoolCounters {
  static constexpr int kMaxParts = 64;
  std::atomic<int> calls[kMaxParts] = {};
  std::atomic<int> nth{0};  // the part count of the calls so far (0: none yet)
  std::atomic<int> bad{0};  // calls with an out-of-range part or a part count unlike the others'
  std::vector<int> shared = std::vector<int>(kMaxParts, 0);  // plain memory each part writes: visible after run()
  int parts() const { return nth.load(); }
};

void count_task(void* p, int ith, int nth) {
  PoolCounters* c = static_cast<PoolCounters*>(p);
  int seen = 0;
  if (!c->nth.compare_exchange_strong(seen, nth) && seen != nth) c->bad.fetch_add(1);
  if (nth > PoolCounters::kMaxParts || ith < 0 || ith >= nth) {
    c->bad.fetch_add(1);
    return;
  }
  c->calls[ith].fetch_add(1);
  c->shared[static_cast<size_t>(ith)] += 1;
}

TEST(CoreThreadPool, EveryPartRunsOncePerTask) {
  Watchdog watchdog("CoreThreadPool.EveryPartRunsOncePerTask", 120);
  for (int n : {1, 2, 3, 4}) {
    HostThreadPool pool(n);
    ASSERT_EQ(pool.size(), n);
    PoolCounters c;
    const int runs = n <= 2 ? 5000 : 2000;  // more threads than this machine's cores is slow
    for (int run = 1; run <= runs; ++run) {
      pool.run(count_task, &c);
      // run() returns only when every part of this task has finished, once.
      ASSERT_GE(c.parts(), n) << "fewer parts than threads";
      for (int t = 0; t < c.parts(); ++t) {
        ASSERT_EQ(c.calls[t].load(), run) << "part " << t << " of " << c.parts() << " after run " << run;
        ASSERT_EQ(c.shared[static_cast<size_t>(t)], run) << "part " << t << "'s writes not visible after run " << run;
      }
    }
    EXPECT_EQ(c.bad.load(), 0);
    for (int t = c.parts(); t < PoolCounters::kMaxParts; ++t) EXPECT_EQ(c.calls[t].load(), 0);
  }
}

// A worker the OS has descheduled (here: one that waits inside its part) must not hold back the
// task's other parts: the threads still running take them over. With parts assigned to threads in
// advance this test hangs (the stalled worker waits for parts that only it would run; the watchdog
// fails it), and with one part per thread there is nothing to take over (the part count check).
struct StallCtx {
  std::thread::id caller;
  std::atomic<int> by_caller{0};
  std::atomic<int> parts{0};
};

void stall_task(void* p, int ith, int nth) {
  StallCtx* c = static_cast<StallCtx*>(p);
  (void)ith;
  c->parts.store(nth);
  if (std::this_thread::get_id() == c->caller) {
    c->by_caller.fetch_add(1);
    return;
  }
  // A worker: stay in this part until the caller has run every other one.
  while (c->by_caller.load() < nth - 1) std::this_thread::yield();
}

TEST(CoreThreadPool, OthersTakeOverAStalledWorkersParts) {
  Watchdog watchdog("CoreThreadPool.OthersTakeOverAStalledWorkersParts", 120);
  HostThreadPool pool(2);
  for (int run = 0; run < 200; ++run) {
    StallCtx c;
    c.caller = std::this_thread::get_id();
    pool.run(stall_task, &c);
    ASSERT_GT(c.parts.load(), 2) << "one part per thread: nothing to take over";
    // The worker ran at most one part (it waits in it until the caller has run all the others).
    ASSERT_GE(c.by_caller.load(), c.parts.load() - 1) << "run " << run;
  }
}

TEST(CoreThreadPool, FirstRunRightAfterConstruction) {
  // Workers may not even have started when the first task is posted: none may miss it.
  Watchdog watchdog("CoreThreadPool.FirstRunRightAfterConstruction", 120);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + trial % 3;
    PoolCounters c;
    HostThreadPool pool(n);
    pool.run(count_task, &c);
    ASSERT_GE(c.parts(), n);
    for (int t = 0; t < c.parts(); ++t) ASSERT_EQ(c.calls[t].load(), 1) << "trial " << trial << " part " << t;
    pool.run(count_task, &c);
    for (int t = 0; t < c.parts(); ++t) ASSERT_EQ(c.calls[t].load(), 2) << "trial " << trial << " part " << t;
    EXPECT_EQ(c.bad.load(), 0);
  }
}

// Threads of this process (the entries of /proc/self/task), or -1 where there is no /proc.
int process_threads() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

TEST(CoreThreadPool, StartsItsWorkersWithTheFirstHandedOffTask) {
  // A small model's matrices all stay on the calling thread (run_sized below min_parallel_work):
  // its process must not pay for threads it never uses. The first task handed off starts them all.
  Watchdog watchdog("CoreThreadPool.StartsItsWorkersWithTheFirstHandedOffTask", 120);
  const int before = process_threads();
  if (before < 0) GTEST_SKIP() << "no /proc/self/task";
  HostThreadPool pool(4, 1000);
  PoolCounters small;
  for (int i = 0; i < 10; ++i) pool.run_sized(count_task, &small, 999);
  EXPECT_EQ(small.parts(), 1);
  EXPECT_EQ(small.calls[0].load(), 10);
  EXPECT_EQ(process_threads(), before) << "a pool whose tasks all stayed on the caller started threads";
  PoolCounters big;
  pool.run_sized(count_task, &big, 1000);
  ASSERT_GE(big.parts(), 4);
  for (int t = 0; t < big.parts(); ++t) EXPECT_EQ(big.calls[t].load(), 1) << "part " << t;
  EXPECT_EQ(process_threads(), before + 3);
  pool.run(count_task, &big);  // the same workers again, none started twice
  for (int t = 0; t < big.parts(); ++t) EXPECT_EQ(big.calls[t].load(), 2) << "part " << t;
  EXPECT_EQ(process_threads(), before + 3);
  EXPECT_EQ(small.bad.load() + big.bad.load(), 0);
}

TEST(CoreThreadPool, WakesSleepingWorkersAndDestroysWhileIdle) {
  Watchdog watchdog("CoreThreadPool.WakesSleepingWorkersAndDestroysWhileIdle", 120);
  HostThreadPool pool(3);
  PoolCounters c;
  for (int round = 1; round <= 3; ++round) {
    // Long enough for the workers to give up spinning and block on the counter.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    pool.run(count_task, &c);
    ASSERT_GE(c.parts(), 3);
    for (int t = 0; t < c.parts(); ++t) ASSERT_EQ(c.calls[t].load(), round) << "part " << t;
  }
  EXPECT_EQ(c.bad.load(), 0);
  // Pools that never ran and pools left idle (sleeping) are destroyed cleanly (a hang fails by timeout).
  for (int n : {1, 2, 4}) {
    HostThreadPool never(n);
  }
  {
    HostThreadPool idle(4);
    PoolCounters d;
    idle.run(count_task, &d);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  HostThreadPool clamped(0);
  EXPECT_EQ(clamped.size(), 1);
}

// run_sized: below the pool's threshold the caller alone runs the task as part 0 of 1; at or
// above it the task is handed off in parts; threshold 0 (the default) always hands off.
TEST(CoreThreadPool, RunSizedKeepsSmallWorkOnTheCaller) {
  Watchdog watchdog("CoreThreadPool.RunSizedKeepsSmallWorkOnTheCaller", 120);
  HostThreadPool pool(3, 1000);
  EXPECT_EQ(pool.min_parallel_work(), 1000u);
  PoolCounters small;
  pool.run_sized(count_task, &small, 999);
  EXPECT_EQ(small.parts(), 1);
  EXPECT_EQ(small.calls[0].load(), 1);
  PoolCounters big;
  pool.run_sized(count_task, &big, 1000);
  ASSERT_GE(big.parts(), 3);
  for (int t = 0; t < big.parts(); ++t) EXPECT_EQ(big.calls[t].load(), 1) << "part " << t;
  HostThreadPool always(2);
  EXPECT_EQ(always.min_parallel_work(), 0u);
  PoolCounters tiny;
  always.run_sized(count_task, &tiny, 0);
  EXPECT_GE(tiny.parts(), 2);
  EXPECT_EQ(small.bad.load() + big.bad.load() + tiny.bad.load(), 0);
}

// run_slices hands every item to exactly one slice, in whole granules, for any pool size.
TEST(CoreThreadPool, RunSlicesCoversEveryItemOnce) {
  for (int threads : {1, 2, 3, 4}) {
    HostThreadPool pool(threads, 0);
    for (int n : {0, 1, 15, 16, 17, 100, 1000}) {
      for (int granule : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> misaligned{0};
        run_slices(pool, n, granule, 1u << 30, [&](int b, int e) {
          if (b % granule != 0 || b >= e || e > n) ++misaligned;
          for (int i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
        });
        EXPECT_EQ(misaligned.load(), 0) << threads << " " << n << " " << granule;
        for (int i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " " << n << " " << i;
      }
    }
  }
}

TEST(CoreThreadPool, SerialPoolRunsOnce) {
  SerialPool pool;
  PoolCounters c;
  pool.run(count_task, &c);
  EXPECT_EQ(pool.size(), 1);
  EXPECT_EQ(c.parts(), 1);
  EXPECT_EQ(c.calls[0].load(), 1);
}

// ---- Fingerprint --------------------------------------------------------------------------------

// FNV-1a 64 written from its definition (offset basis 14695981039346656037, prime 1099511628211).
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 14695981039346656037ull) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
void le32(uint32_t v, uint8_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t fbits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float ffrom(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

TEST(CoreFingerprint, MatchesFnv1a64) {
  // The helper against published FNV-1a 64 test vectors.
  ASSERT_EQ(fnv1a("", 0), 0xcbf29ce484222325ull);
  ASSERT_EQ(fnv1a("a", 1), 0xaf63dc4c8601ec8cull);
  ASSERT_EQ(fnv1a("foobar", 6), 0x85944171f73967e8ull);

  Fingerprint fp;
  EXPECT_EQ(fp.tokens(), 0xcbf29ce484222325ull);
  EXPECT_EQ(fp.logits(), 0xcbf29ce484222325ull);
  std::vector<uint8_t> bytes;
  for (int32_t id : {1, 0, 31999, -1, 0x12345678}) {
    fp.add_token(id);
    uint8_t b[4];
    le32(static_cast<uint32_t>(id), b);
    bytes.insert(bytes.end(), b, b + 4);
  }
  EXPECT_EQ(fp.tokens(), fnv1a(bytes.data(), bytes.size()));
  // Token ids 'a','b','c','d' packed little-endian are the bytes "abcd".
  Fingerprint abcd;
  abcd.add_token(0x64636261);
  EXPECT_EQ(abcd.tokens(), fnv1a("abcd", 4));

  const float logits[4] = {1.0f, -2.5f, 3.25e-8f, 1e30f};
  fp.add_logits(logits, 4);
  std::vector<uint8_t> lb;
  for (float f : logits) {
    uint8_t b[4];
    le32(fbits(f), b);
    lb.insert(lb.end(), b, b + 4);
  }
  EXPECT_EQ(fp.logits(), fnv1a(lb.data(), lb.size()));
  // combined(): the token hash continued with the logit hash as two little-endian 32-bit words.
  uint8_t c[8];
  le32(static_cast<uint32_t>(fp.logits()), c);
  le32(static_cast<uint32_t>(fp.logits() >> 32), c + 4);
  EXPECT_EQ(fp.combined(), fnv1a(c, 8, fp.tokens()));
}

TEST(CoreFingerprint, OrderSensitive) {
  Fingerprint a, b;
  a.add_token(1);
  a.add_token(2);
  b.add_token(2);
  b.add_token(1);
  EXPECT_NE(a.tokens(), b.tokens());
  EXPECT_NE(a.combined(), b.combined());
  const float x[2] = {1.0f, 2.0f}, y[2] = {2.0f, 1.0f};
  Fingerprint c, d;
  c.add_logits(x, 2);
  d.add_logits(y, 2);
  EXPECT_NE(c.logits(), d.logits());
  EXPECT_NE(c.combined(), d.combined());
  // Split calls hash the same as one call.
  Fingerprint e;
  e.add_logits(x, 1);
  e.add_logits(x + 1, 1);
  EXPECT_EQ(e.logits(), c.logits());
}

TEST(CoreFingerprint, NanCanonicalisedButZerosAndInfinitiesDistinct) {
  auto hash = [](float v) {
    Fingerprint f;
    f.add_logits(&v, 1);
    return f.logits();
  };
  const uint64_t nan = hash(ffrom(0x7FC00000u));
  EXPECT_EQ(hash(ffrom(0xFFC00000u)), nan) << "negative quiet NaN";
  EXPECT_EQ(hash(ffrom(0x7FC12345u)), nan) << "NaN with a payload";
  EXPECT_EQ(hash(ffrom(0x7F800001u)), nan) << "signalling NaN";
  EXPECT_EQ(hash(ffrom(0xFFFFFFFFu)), nan);
  EXPECT_NE(hash(INFINITY), nan);
  EXPECT_NE(hash(-INFINITY), hash(INFINITY));
  EXPECT_NE(hash(0.0f), hash(-0.0f)) << "+0 and -0 are different logits";
  EXPECT_NE(hash(ffrom(0x00000001u)), hash(0.0f)) << "the smallest subnormal is not zero";
}

// ---- Status -------------------------------------------------------------------------------------

TEST(CoreStatus, OkAndFormatting) {
  const Status ok = Status::Ok();
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), Code::kOk);
  EXPECT_STREQ(ok.message(), "");
  const Status e = Status::Error(Code::kCorrupt, "tensor %s at %d of %zu", "wq", 7, size_t{9});
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.code(), Code::kCorrupt);
  EXPECT_STREQ(e.message(), "tensor wq at 7 of 9");
  EXPECT_EQ(Status::Error(Code::kOk, "x").code(), Code::kInternal) << "an error is never ok";
  EXPECT_FALSE(Status::Error(Code::kOk, "x").ok());
  EXPECT_STREQ(code_name(Code::kOutOfMemory), "out of memory");
  EXPECT_STREQ(code_name(Code::kIo), "i/o error");
  EXPECT_STREQ(code_name(static_cast<Code>(200)), "unknown");
}

TEST(CoreStatus, LongMessagesAreTruncated) {
  const std::string long_text(1000, 'x');
  const Status e = Status::Error(Code::kIo, "%s!", long_text.c_str());
  EXPECT_EQ(std::strlen(e.message()), Status::kMaxMessage - 1);
  EXPECT_EQ(std::string(e.message()), long_text.substr(0, Status::kMaxMessage - 1));
}

Status fails_inside() {
  MC_TRY(Status::Ok());
  MC_TRY(Status::Error(Code::kNotFound, "missing %s", "tok_embeddings"));
  return Status::Error(Code::kInternal, "not reached");
}

TEST(CoreStatus, PrefixAndTry) {
  Status s = fails_inside();
  EXPECT_EQ(s.code(), Code::kNotFound);
  s.prefix("loading %s: ", "model.gguf");
  EXPECT_STREQ(s.message(), "loading model.gguf: missing tok_embeddings");
  EXPECT_EQ(s.code(), Code::kNotFound) << "prefix keeps the code";
  s.prefix("[%d] ", 2).prefix("a ");
  EXPECT_STREQ(s.message(), "a [2] loading model.gguf: missing tok_embeddings");
  // A long prefix and a long message: cut to the limit, the prefix first.
  Status l = Status::Error(Code::kCorrupt, "%s", std::string(200, 'm').c_str());
  l.prefix("%s: ", std::string(100, 'p').c_str());
  const std::string got = l.message();
  ASSERT_EQ(got.size(), Status::kMaxMessage - 1);
  EXPECT_EQ(got, std::string(100, 'p') + ": " + std::string(Status::kMaxMessage - 1 - 102, 'm'));
  // A prefix longer than the whole limit.
  Status h = Status::Error(Code::kCorrupt, "tail");
  h.prefix("%s", std::string(500, 'h').c_str());
  EXPECT_EQ(std::string(h.message()), std::string(Status::kMaxMessage - 1, 'h'));
}

}  // namespace
}  // namespace mcullm
