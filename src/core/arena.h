// Arenas: one per memory tier, handed in by the caller. Every allocation names a tensor class so
// that a run can report bytes per tier and per class, and the peak. No heap after init.
// Weights that stay where they are (mmap on a PC, flash mapping on a board) are not allocated:
// they are recorded with note_mapped() so that the same report covers them.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "mcullm/status.h"

namespace mcullm {

enum class Tier : uint8_t { kSram = 0, kPsram, kFlash, kHost, kCount };
enum class TensorClass : uint8_t {
  kEmbedding = 0, kAttention, kFfn, kNorm, kHead, kKvCache, kActivations, kScratch, kOther, kCount
};

const char* tier_name(Tier tier);
const char* tensor_class_name(TensorClass cls);

constexpr int kTierCount = static_cast<int>(Tier::kCount);
constexpr int kClassCount = static_cast<int>(TensorClass::kCount);

struct ArenaStats {
  size_t capacity = 0;
  size_t used = 0;
  size_t peak = 0;
  size_t by_class[kClassCount] = {};   // allocated bytes per class (including alignment padding)
  size_t mapped_by_class[kClassCount] = {};  // bytes left in place (mmap / flash) per class
  size_t mapped_total() const;
};

class Arena {
 public:
  Arena() = default;
  Arena(Tier tier, void* base, size_t capacity) { reset(tier, base, capacity); }
  void reset(Tier tier, void* base, size_t capacity);

  // Aligned allocation (align a power of two); nullptr when the arena is full.
  void* alloc(size_t bytes, size_t align, TensorClass cls);
  // Same, with an error that says which arena ran out and by how much.
  Status alloc_checked(size_t bytes, size_t align, TensorClass cls, void** out);
  template <typename T>
  Status alloc_array(size_t count, TensorClass cls, T** out) {
    if (count > SIZE_MAX / sizeof(T)) return Status::Error(Code::kOutOfMemory, "array of %zu elements overflows", count);
    void* p = nullptr;
    MC_TRY(alloc_checked(count * sizeof(T), alignof(T) < 16 ? 16 : alignof(T), cls, &p));
    *out = static_cast<T*>(p);
    return Status::Ok();
  }

  void note_mapped(size_t bytes, TensorClass cls);

  // Scratch use: take a mark, allocate, roll back (class counters roll back too).
  struct Mark { size_t used; size_t by_class[kClassCount]; };
  Mark mark() const;
  void rollback(const Mark& m);

  Tier tier() const { return tier_; }
  const ArenaStats& stats() const { return stats_; }
  size_t remaining() const { return stats_.capacity - stats_.used; }

 private:
  Tier tier_ = Tier::kHost;
  uint8_t* base_ = nullptr;
  ArenaStats stats_;
};

}  // namespace mcullm
