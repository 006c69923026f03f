// GGUF v3 writer (host only). Keys keep the order of their first insertion; setting a key again
// replaces its value in place. Tensor data is copied, laid out in add order, each tensor aligned
// to general.alignment (32 unless set with set_u32) and padded to it, as llama.cpp does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "mcullm/status.h"
#include "quant/dtype.h"

namespace mcullm {

class GgufWriter {
 public:
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // Any fixed-size element type (numbers, bool): `count` elements stored little-endian at `elems`.
  // Returns kInvalidArgument for kString/kArray.
  Status set_array(const std::string& key, GgufType elem_type, const void* elems, uint64_t count);
  // A value already encoded as the file stores it (arrays: element type, count, elements), e.g.
  // copied from another file (format/ternary_gguf_host.h).
  void set_raw(const std::string& key, GgufType type, std::vector<uint8_t> value) { set(key, type, std::move(value)); }

  // Copies the bytes. Checks: 1..4 dimensions, each >= 1, a known type that can store ne[0]
  // columns, nbytes == rows * dtype_row_bytes(type, ne[0]) + tensor_tail_bytes (i2_s: 32), a name not used before.
  Status add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* data, size_t nbytes);

  size_t kv_count() const { return kvs_.size(); }
  size_t tensor_count() const { return tensors_.size(); }

  // Writes path + ".tmp" then renames it over path: an error never leaves a partial file at path.
  Status write_file(const std::string& path) const;
  // The whole file; empty when it cannot be laid out (general.alignment not a u32 power of two:
  // write_file reports that case).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Kv {
    std::string key;
    GgufType type;
    std::vector<uint8_t> value;  // encoded value (for arrays: element type, count, elements)
  };
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  void set(const std::string& key, GgufType type, std::vector<uint8_t> value);
  Status serialize(std::vector<uint8_t>* out) const;

  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace mcullm
