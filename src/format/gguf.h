// GGUF v2/v3 reader over a byte range (mmap on a PC, flash mapping on a board).
// Freestanding: no heap, no exceptions, C headers only; the kv/tensor tables and the name indexes
// come from an Arena. Every read is bounds-checked; a file that contradicts itself gets a kCorrupt
// status naming what and at which byte offset. Values stay in the file: GgufStr and the element
// pointers point into the caller's bytes, which must outlive the GgufFile.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "mcullm/status.h"
#include "quant/dtype.h"

namespace mcullm {

enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12
};

// "u8", "string", ...; "?" for ids outside the enum.
const char* gguf_type_name(GgufType type);
// Bytes of one value of a fixed-size type; 0 for kString, kArray and unknown ids.
uint32_t gguf_type_size(GgufType type);

// Little-endian loads from possibly unaligned bytes (array elements are not aligned in the file).
inline uint16_t gguf_load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t gguf_load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
inline uint64_t gguf_load_u64(const uint8_t* p) {
  return static_cast<uint64_t>(gguf_load_u32(p)) | (static_cast<uint64_t>(gguf_load_u32(p + 4)) << 32);
}

// A string inside the file: not NUL-terminated.
struct GgufStr {
  const char* data;
  uint64_t size;
  bool equals(const char* s) const;
};

struct GgufKv {
  GgufStr key;
  GgufType type;
  GgufType array_type;   // element type when type == kArray; equal to `type` otherwise
  uint64_t array_count;  // element count when type == kArray; 0 otherwise
  // First byte of the value. Strings: their u64 length prefix. Arrays: the first element
  // (for arrays of strings or arrays, the first element's own header).
  const uint8_t* value;
};

struct GgufTensor {
  GgufStr name;
  uint32_t n_dims;
  int64_t ne[4];  // ne[0] = innermost (columns); unused dimensions are 1
  DType type;
  uint64_t offset;        // relative to the data section
  const uint8_t* data;    // first byte of the tensor in the caller's buffer
  uint64_t nbytes;        // rows() * dtype_row_bytes(type, ne[0]) + the type's tensor_tail_bytes
  int64_t rows() const;   // product of ne[1..]
};

class GgufFile {
 public:
  static constexpr uint64_t kDefaultAlignment = 32;
  static constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are refused

  // Parses and checks the whole header and every tensor's bounds. On failure the object is left
  // empty and the arena is rolled back to where it was.
  Status open(const uint8_t* data, size_t size, Arena& arena);

  uint32_t version() const { return version_; }
  uint64_t kv_count() const { return kv_count_; }
  uint64_t tensor_count() const { return tensor_count_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section in the file

  const GgufKv* kv(uint64_t i) const { return i < kv_count_ ? &kvs_[i] : nullptr; }
  const GgufTensor* tensor(uint64_t i) const { return i < tensor_count_ ? &tensors_[i] : nullptr; }
  const GgufKv* find_kv(const char* key) const;
  const GgufTensor* find_tensor(const char* name) const;

  // Typed getters: kNotFound if missing; kCorrupt naming the key when the stored type or value
  // does not fit the request.
  Status get_u32(const char* key, uint32_t* out) const;  // any integer type whose value fits
  Status get_i32(const char* key, int32_t* out) const;   // any integer type whose value fits
  Status get_u64(const char* key, uint64_t* out) const;  // any integer type whose value fits
  Status get_i64(const char* key, int64_t* out) const;   // any integer type whose value fits
  Status get_f32(const char* key, float* out) const;     // f32 or f64
  Status get_bool(const char* key, bool* out) const;
  Status get_string(const char* key, GgufStr* out) const;

  // Numeric (or bool) arrays: pointer to the element bytes (possibly unaligned: read them with
  // gguf_load_* or memcpy) and the count. elem_type kString/kArray -> kInvalidArgument.
  Status get_array(const char* key, GgufType elem_type, const uint8_t** elems, uint64_t* count) const;
  // Arrays of strings: an index of `count` GgufStr allocated in `arena` (nullptr when count is 0).
  Status get_string_array(const char* key, Arena& arena, GgufStr** out, uint64_t* count) const;

 private:
  void clear();
  Status parse(Arena& arena);
  Status lookup(const char* key, const GgufKv** out) const;
  // The value of an integer-typed key as sign and magnitude (every integer type fits).
  Status get_integer(const char* key, const GgufKv** kv, bool* negative, uint64_t* magnitude) const;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  GgufKv* kvs_ = nullptr;
  GgufTensor* tensors_ = nullptr;
  // Open-addressing hash indexes (slot = entry index + 1, 0 = empty); capacity a power of two.
  uint32_t* kv_index_ = nullptr;
  uint32_t* tensor_index_ = nullptr;
  uint32_t kv_index_cap_ = 0;
  uint32_t tensor_index_cap_ = 0;
};

}  // namespace mcullm
