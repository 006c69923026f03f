#include "format/gguf_writer_host.h"

#include "core/file_io_host.h"

#include <cstring>

namespace mcullm {

namespace {

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put_u64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
// A value of `size` bytes from its native (little-endian on every target we build for) bytes.
template <typename T>
std::vector<uint8_t> raw(T v) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}
std::vector<uint8_t> array_header(GgufType elem, uint64_t count) {
  std::vector<uint8_t> b;
  put_u32(b, static_cast<uint32_t>(elem));
  put_u64(b, count);
  return b;
}
void pad_to(std::vector<uint8_t>& b, uint64_t align) {
  while (b.size() % align != 0) b.push_back(0);
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufType type, std::vector<uint8_t> value) {
  for (Kv& kv : kvs_) {
    if (kv.key == key) {
      kv.type = type;
      kv.value = std::move(value);
      return;
    }
  }
  kvs_.push_back(Kv{key, type, std::move(value)});
}

void GgufWriter::set_u8(const std::string& key, uint8_t v) { set(key, GgufType::kU8, raw(v)); }
void GgufWriter::set_i8(const std::string& key, int8_t v) { set(key, GgufType::kI8, raw(v)); }
void GgufWriter::set_u16(const std::string& key, uint16_t v) { set(key, GgufType::kU16, raw(v)); }
void GgufWriter::set_i16(const std::string& key, int16_t v) { set(key, GgufType::kI16, raw(v)); }
void GgufWriter::set_u32(const std::string& key, uint32_t v) { set(key, GgufType::kU32, raw(v)); }
void GgufWriter::set_i32(const std::string& key, int32_t v) { set(key, GgufType::kI32, raw(v)); }
void GgufWriter::set_u64(const std::string& key, uint64_t v) { set(key, GgufType::kU64, raw(v)); }
void GgufWriter::set_i64(const std::string& key, int64_t v) { set(key, GgufType::kI64, raw(v)); }
void GgufWriter::set_f32(const std::string& key, float v) { set(key, GgufType::kF32, raw(v)); }
void GgufWriter::set_f64(const std::string& key, double v) { set(key, GgufType::kF64, raw(v)); }
void GgufWriter::set_bool(const std::string& key, bool v) { set(key, GgufType::kBool, raw<uint8_t>(v ? 1 : 0)); }

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  std::vector<uint8_t> b;
  put_str(b, v);
  set(key, GgufType::kString, std::move(b));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b = array_header(GgufType::kString, v.size());
  for (const std::string& s : v) put_str(b, s);
  set(key, GgufType::kArray, std::move(b));
}

Status GgufWriter::set_array(const std::string& key, GgufType elem_type, const void* elems, uint64_t count) {
  const uint32_t size = gguf_type_size(elem_type);
  if (size == 0)
    return Status::Error(Code::kInvalidArgument, "set_array('%s'): %s is not a fixed-size element type", key.c_str(),
                         gguf_type_name(elem_type));
  if (count > 0 && !elems) return Status::Error(Code::kInvalidArgument, "set_array('%s'): no elements", key.c_str());
  std::vector<uint8_t> b = array_header(elem_type, count);
  const uint8_t* p = static_cast<const uint8_t*>(elems);
  if (count > 0) b.insert(b.end(), p, p + count * size);
  set(key, GgufType::kArray, std::move(b));
  return Status::Ok();
}

void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  (void)set_array(key, GgufType::kF32, v.data(), v.size());
}

void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  (void)set_array(key, GgufType::kI32, v.data(), v.size());
}

Status GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* data,
                              size_t nbytes) {
  const DTypeInfo* info = dtype_info(type);
  if (!info)
    return Status::Error(Code::kInvalidArgument, "tensor '%s': unknown type id %u", name.c_str(),
                         static_cast<unsigned>(type));
  if (ne.empty() || ne.size() > 4)
    return Status::Error(Code::kInvalidArgument, "tensor '%s': %zu dimensions (must be 1..4)", name.c_str(), ne.size());
  int64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) return Status::Error(Code::kInvalidArgument, "tensor '%s': ne[%zu] = %lld", name.c_str(), d,
                                        static_cast<long long>(ne[d]));
    if (d > 0) {
      if (rows > INT64_MAX / ne[d]) return Status::Error(Code::kInvalidArgument, "tensor '%s': shape overflows", name.c_str());
      rows *= ne[d];
    }
  }
  if (!dtype_row_fits(type, ne[0]))
    return Status::Error(Code::kInvalidArgument, "tensor '%s': %lld columns cannot be stored as %s (blocks of %d)",
                         name.c_str(), static_cast<long long>(ne[0]), info->name, info->block);
  // A row holds at least ne[0] / block bytes: refuse shapes far larger than the data before
  // computing sizes that could overflow.
  const size_t row_bytes = ne[0] / info->block > static_cast<int64_t>(nbytes) ? 0 : dtype_row_bytes(type, ne[0]);
  const size_t tail = static_cast<size_t>(info->tensor_tail_bytes);
  if (row_bytes == 0 || static_cast<uint64_t>(rows) > SIZE_MAX / row_bytes || static_cast<size_t>(rows) * row_bytes + tail != nbytes)
    return Status::Error(Code::kInvalidArgument, "tensor '%s': %zu bytes given, the %s shape needs %lld rows of %zu bytes",
                         name.c_str(), nbytes, info->name, static_cast<long long>(rows), row_bytes);
  if (nbytes > 0 && !data) return Status::Error(Code::kInvalidArgument, "tensor '%s': no data", name.c_str());
  for (const Tensor& t : tensors_)
    if (t.name == name) return Status::Error(Code::kInvalidArgument, "tensor '%s' was already added", name.c_str());
  const uint8_t* p = static_cast<const uint8_t*>(data);
  tensors_.push_back(Tensor{name, type, std::move(ne), std::vector<uint8_t>(p, p + nbytes)});
  return Status::Ok();
}

Status GgufWriter::serialize(std::vector<uint8_t>* out) const {
  uint64_t align = GgufFile::kDefaultAlignment;
  for (const Kv& kv : kvs_) {
    if (kv.key != "general.alignment") continue;
    uint32_t v = 0;
    if (kv.type == GgufType::kU32) std::memcpy(&v, kv.value.data(), 4);
    if (kv.type != GgufType::kU32 || v == 0 || (v & (v - 1)) != 0)
      return Status::Error(Code::kInvalidArgument, "general.alignment must be a u32 power of two");
    align = v;
  }
  std::vector<uint8_t>& b = *out;
  b.clear();
  b.reserve(4096);
  put_u32(b, 0x46554747u);  // the magic: bytes 'G' 'G' 'U' 'F'
  put_u32(b, 3);
  put_u64(b, tensors_.size());
  put_u64(b, kvs_.size());
  for (const Kv& kv : kvs_) {
    put_str(b, kv.key);
    put_u32(b, static_cast<uint32_t>(kv.type));
    b.insert(b.end(), kv.value.begin(), kv.value.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_str(b, t.name);
    put_u32(b, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put_u64(b, static_cast<uint64_t>(n));
    put_u32(b, static_cast<uint32_t>(t.type));
    put_u64(b, offset);
    offset += (t.data.size() + align - 1) / align * align;
  }
  // Like gguf-py, a file without tensors ends right after its metadata (no padding).
  if (!tensors_.empty()) pad_to(b, align);
  for (const Tensor& t : tensors_) {
    b.insert(b.end(), t.data.begin(), t.data.end());
    pad_to(b, align);  // the data section starts aligned, so file alignment == offset alignment
  }
  return Status::Ok();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> b;
  if (!serialize(&b).ok()) b.clear();
  return b;
}

Status GgufWriter::write_file(const std::string& path) const {
  std::vector<uint8_t> bytes;
  Status s = serialize(&bytes);
  if (!s.ok()) return s.prefix("%s: ", path.c_str());
  return write_file_atomic(path, bytes.data(), bytes.size());
}

}  // namespace mcullm
