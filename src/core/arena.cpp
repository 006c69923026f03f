#include "core/arena.h"

#include <string.h>

namespace mcullm {

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::kSram: return "sram";
    case Tier::kPsram: return "psram";
    case Tier::kFlash: return "flash";
    case Tier::kHost: return "host";
    case Tier::kCount: break;
  }
  return "?";
}

const char* tensor_class_name(TensorClass cls) {
  static const char* const kNames[kClassCount] = {"embedding", "attention", "ffn", "norm", "head",
                                                  "kv_cache", "activations", "scratch", "other"};
  const int i = static_cast<int>(cls);
  return i >= 0 && i < kClassCount ? kNames[i] : "?";
}

size_t ArenaStats::mapped_total() const {
  size_t t = 0;
  for (size_t b : mapped_by_class) t += b;
  return t;
}

void Arena::reset(Tier tier, void* base, size_t capacity) {
  tier_ = tier;
  base_ = static_cast<uint8_t*>(base);
  stats_ = ArenaStats();
  stats_.capacity = base ? capacity : 0;
}

void* Arena::alloc(size_t bytes, size_t align, TensorClass cls) {
  if (align == 0 || (align & (align - 1)) != 0) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(base_) + stats_.used;
  const size_t pad = static_cast<size_t>((align - (start & (align - 1))) & (align - 1));
  if (pad > remaining() || bytes > remaining() - pad) return nullptr;
  uint8_t* p = base_ + stats_.used + pad;
  stats_.used += pad + bytes;
  stats_.by_class[static_cast<int>(cls)] += pad + bytes;
  if (stats_.used > stats_.peak) stats_.peak = stats_.used;
  return p;
}

Status Arena::alloc_checked(size_t bytes, size_t align, TensorClass cls, void** out) {
  *out = alloc(bytes, align, cls);
  if (*out == nullptr && bytes > 0)
    return Status::Error(Code::kOutOfMemory, "%s arena: %zu bytes for %s do not fit (%zu of %zu bytes free)",
                         tier_name(tier_), bytes, tensor_class_name(cls), remaining(), stats_.capacity);
  return Status::Ok();
}

void Arena::note_mapped(size_t bytes, TensorClass cls) { stats_.mapped_by_class[static_cast<int>(cls)] += bytes; }

Arena::Mark Arena::mark() const {
  Mark m;
  m.used = stats_.used;
  memcpy(m.by_class, stats_.by_class, sizeof(m.by_class));
  return m;
}

void Arena::rollback(const Mark& m) {
  stats_.used = m.used;
  memcpy(stats_.by_class, m.by_class, sizeof(m.by_class));
}

}  // namespace mcullm
