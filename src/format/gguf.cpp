#include "format/gguf.h"

#include <float.h>
#include <inttypes.h>
#include <string.h>

namespace mcullm {

namespace {

constexpr uint32_t kMaxTypeId = static_cast<uint32_t>(GgufType::kF64);
// Smallest possible encodings, used to refuse counts the remaining bytes cannot hold before
// allocating tables for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, type, a one-byte value
constexpr uint64_t kMinTensorBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, one ne, type, offset
constexpr uint64_t kMinNestedArrayBytes = 4 + 8;         // element type, count
constexpr uint64_t kMaxEntries = 1u << 30;               // keeps the hash index sizes in uint32_t
constexpr int kNameShown = 64;                           // bytes of a key/name quoted in messages

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }
// printf precision for quoting a (not NUL-terminated) name.
int shown(const GgufStr& s) { return s.size < kNameShown ? static_cast<int>(s.size) : kNameShown; }

// Bounds-checked cursor over the file.
struct Reader {
  const uint8_t* base;
  size_t size;
  size_t pos;

  size_t remaining() const { return size - pos; }
  const uint8_t* here() const { return base + pos; }

  Status need(uint64_t n, const char* what) const {
    if (n > remaining())
      return Status::Error(Code::kCorrupt, "truncated: %s at byte %zu needs %llu bytes, %zu left", what, pos, ull(n),
                           remaining());
    return Status::Ok();
  }
  Status u32(const char* what, uint32_t* out) {
    MC_TRY(need(4, what));
    *out = gguf_load_u32(here());
    pos += 4;
    return Status::Ok();
  }
  Status u64(const char* what, uint64_t* out) {
    MC_TRY(need(8, what));
    *out = gguf_load_u64(here());
    pos += 8;
    return Status::Ok();
  }
  Status str(const char* what, GgufStr* out) {
    const size_t at = pos;
    uint64_t len = 0;
    MC_TRY(u64(what, &len));
    if (len > remaining())
      return Status::Error(Code::kCorrupt, "%s at byte %zu has length %llu but only %zu bytes follow", what, at,
                           ull(len), remaining());
    out->data = reinterpret_cast<const char*>(here());
    out->size = len;
    pos += static_cast<size_t>(len);
    return Status::Ok();
  }
  Status type(const char* what, GgufType* out) {
    const size_t at = pos;
    uint32_t id = 0;
    MC_TRY(u32(what, &id));
    if (id > kMaxTypeId) return Status::Error(Code::kCorrupt, "%s at byte %zu is %" PRIu32 ", not a GGUF value type", what, at, id);
    *out = static_cast<GgufType>(id);
    return Status::Ok();
  }
};

uint32_t hash_bytes(const char* s, uint64_t n) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (uint64_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(s[i])) * 16777619u;
  return h;
}

bool str_eq(const GgufStr& a, const GgufStr& b) {
  return a.size == b.size && (a.size == 0 || memcmp(a.data, b.data, static_cast<size_t>(a.size)) == 0);
}

// Index capacity: a power of two at least twice the count (load factor <= 1/2).
uint32_t index_capacity(uint64_t count) {
  uint32_t cap = 8;
  while (cap < 2 * count) cap <<= 1;
  return cap;
}

// Inserts entry `i` named `name` (names(j) gives entry j's name). Returns false when the name is
// already present, with the earlier index in *dup.
template <typename NameOf>
bool index_insert(uint32_t* index, uint32_t cap, const GgufStr& name, uint32_t i, NameOf names, uint32_t* dup) {
  for (uint32_t slot = hash_bytes(name.data, name.size) & (cap - 1);; slot = (slot + 1) & (cap - 1)) {
    if (index[slot] == 0) {
      index[slot] = i + 1;
      return true;
    }
    if (str_eq(names(index[slot] - 1), name)) {
      *dup = index[slot] - 1;
      return false;
    }
  }
}

template <typename NameOf>
int64_t index_find(const uint32_t* index, uint32_t cap, const char* key, NameOf names) {
  if (!index || !key) return -1;
  const GgufStr want{key, strlen(key)};
  for (uint32_t slot = hash_bytes(want.data, want.size) & (cap - 1); index[slot] != 0; slot = (slot + 1) & (cap - 1))
    if (str_eq(names(index[slot] - 1), want)) return index[slot] - 1;
  return -1;
}

Status check_bools(const Reader& r, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i)
    if (r.here()[i] > 1)
      return Status::Error(Code::kCorrupt, "bool at byte %zu is %u (must be 0 or 1)", r.pos + static_cast<size_t>(i),
                           r.here()[i]);
  return Status::Ok();
}

// Skips `count` elements of `elem` type, checking each; depth counts enclosing arrays.
Status skip_elements(Reader& r, GgufType elem, uint64_t count, int depth) {
  const uint32_t size = gguf_type_size(elem);
  if (size != 0) {
    if (count > r.remaining() / size)
      return Status::Error(Code::kCorrupt, "array of %llu %s at byte %zu needs more than the %zu bytes left", ull(count),
                           gguf_type_name(elem), r.pos, r.remaining());
    if (elem == GgufType::kBool) MC_TRY(check_bools(r, count));
    r.pos += static_cast<size_t>(count * size);
    return Status::Ok();
  }
  if (elem == GgufType::kString) {
    if (count > r.remaining() / 8)
      return Status::Error(Code::kCorrupt, "array of %llu strings at byte %zu needs more than the %zu bytes left",
                           ull(count), r.pos, r.remaining());
    GgufStr s;
    for (uint64_t i = 0; i < count; ++i) MC_TRY(r.str("string array element", &s));
    return Status::Ok();
  }
  // Nested arrays: each element is (element type, count, elements).
  if (depth >= GgufFile::kMaxArrayDepth)
    return Status::Error(Code::kUnsupported, "arrays nested deeper than %d levels at byte %zu",
                         GgufFile::kMaxArrayDepth, r.pos);
  if (count > r.remaining() / kMinNestedArrayBytes)
    return Status::Error(Code::kCorrupt, "array of %llu arrays at byte %zu needs more than the %zu bytes left",
                         ull(count), r.pos, r.remaining());
  for (uint64_t i = 0; i < count; ++i) {
    GgufType inner = GgufType::kU8;
    uint64_t inner_count = 0;
    MC_TRY(r.type("nested array element type", &inner));
    MC_TRY(r.u64("nested array count", &inner_count));
    MC_TRY(skip_elements(r, inner, inner_count, depth + 1));
  }
  return Status::Ok();
}

Status parse_kv(Reader& r, GgufKv* kv) {
  MC_TRY(r.str("key", &kv->key));
  Status s = [&]() -> Status {
    MC_TRY(r.type("value type", &kv->type));
    kv->array_type = kv->type;
    kv->array_count = 0;
    if (kv->type == GgufType::kArray) {
      MC_TRY(r.type("array element type", &kv->array_type));
      MC_TRY(r.u64("array count", &kv->array_count));
      kv->value = r.here();
      return skip_elements(r, kv->array_type, kv->array_count, 1);
    }
    kv->value = r.here();
    return skip_elements(r, kv->type, 1, 0);
  }();
  if (!s.ok()) s.prefix("key '%.*s': ", shown(kv->key), kv->key.data);
  return s;
}

Status parse_tensor_info(Reader& r, GgufTensor* t) {
  MC_TRY(r.str("tensor name", &t->name));
  const int nlen = shown(t->name);
  const char* name = t->name.data;
  const size_t dims_at = r.pos;
  Status s = r.u32("n_dims", &t->n_dims);
  if (s.ok() && (t->n_dims < 1 || t->n_dims > 4))
    s = Status::Error(Code::kCorrupt, "n_dims at byte %zu is %" PRIu32 " (must be 1..4)", dims_at, t->n_dims);
  int64_t elements = 1;
  for (uint32_t d = 0; s.ok() && d < 4; ++d) {
    t->ne[d] = 1;
    if (d >= t->n_dims) continue;
    const size_t at = r.pos;
    uint64_t ne = 0;
    s = r.u64("dimension", &ne);
    if (s.ok() && (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX)))
      s = Status::Error(Code::kCorrupt, "dimension %" PRIu32 " at byte %zu is %llu", d, at, ull(ne));
    else if (s.ok() && static_cast<int64_t>(ne) > INT64_MAX / elements)
      s = Status::Error(Code::kCorrupt, "element count overflows at dimension %" PRIu32 " (byte %zu)", d, at);
    if (s.ok()) {
      t->ne[d] = static_cast<int64_t>(ne);
      elements *= t->ne[d];
    }
  }
  uint32_t type_id = 0;
  const size_t type_at = r.pos;
  if (s.ok()) s = r.u32("tensor type", &type_id);
  if (s.ok() && !dtype_info_by_id(type_id))
    return Status::Error(Code::kUnsupported, "tensor '%.*s' has unknown tensor type id %" PRIu32 " (byte %zu)", nlen, name,
                         type_id, type_at);
  if (s.ok()) s = r.u64("tensor offset", &t->offset);
  if (!s.ok()) return s.prefix("tensor '%.*s': ", nlen, name);
  t->type = static_cast<DType>(type_id);
  const DTypeInfo* info = dtype_info(t->type);
  if (!dtype_row_fits(t->type, t->ne[0]))
    return Status::Error(Code::kCorrupt, "tensor '%.*s': %lld columns cannot be stored as %s (blocks of %d)", nlen,
                         name, static_cast<long long>(t->ne[0]), info->name, info->block);
  // Row and tensor sizes, checked against the file size before any multiplication can overflow.
  const uint64_t cols = static_cast<uint64_t>(t->ne[0]);
  const uint64_t blocks = cols / info->block + (cols % info->block != 0);
  if (blocks > r.size / static_cast<uint64_t>(info->block_bytes))
    return Status::Error(Code::kCorrupt, "tensor '%.*s': a row of %llu columns is larger than the file", nlen, name,
                         ull(cols));
  const uint64_t row_bytes = dtype_row_bytes(t->type, t->ne[0]);
  const uint64_t rows = static_cast<uint64_t>(t->rows());
  if (rows > r.size / row_bytes)
    return Status::Error(Code::kCorrupt, "tensor '%.*s': %llu rows of %llu bytes are larger than the file", nlen,
                         name, ull(rows), ull(row_bytes));
  // Types with data after the rows (i2_s: one f32 scale per tensor, padded to 32 bytes).
  const uint64_t tail = static_cast<uint64_t>(info->tensor_tail_bytes);
  if (rows * row_bytes > r.size - (tail < r.size ? tail : r.size))
    return Status::Error(Code::kCorrupt, "tensor '%.*s': %llu rows of %llu bytes and a %llu-byte tail are larger than the file",
                         nlen, name, ull(rows), ull(row_bytes), ull(tail));
  t->nbytes = rows * row_bytes + tail;
  t->data = nullptr;
  return Status::Ok();
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  static const char* const kNames[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  const uint32_t id = static_cast<uint32_t>(type);
  return id <= kMaxTypeId ? kNames[id] : "?";
}

uint32_t gguf_type_size(GgufType type) {
  switch (type) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    case GgufType::kString: case GgufType::kArray: break;
  }
  return 0;
}

bool GgufStr::equals(const char* s) const {
  if (!s) return false;
  const size_t n = strlen(s);
  return n == size && (n == 0 || memcmp(data, s, n) == 0);
}

int64_t GgufTensor::rows() const {
  int64_t r = 1;
  for (uint32_t d = 1; d < n_dims && d < 4; ++d) r *= ne[d];
  return r;
}

void GgufFile::clear() { *this = GgufFile(); }

Status GgufFile::open(const uint8_t* data, size_t size, Arena& arena) {
  clear();
  data_ = data;
  size_ = size;
  const Arena::Mark mark = arena.mark();
  Status s = (data || size == 0) ? parse(arena) : Status::Error(Code::kInvalidArgument, "no bytes to read");
  if (!s.ok()) {
    clear();
    arena.rollback(mark);
    return s.prefix("GGUF: ");
  }
  return s;
}

Status GgufFile::parse(Arena& arena) {
  Reader r{data_, size_, 0};
  MC_TRY(r.need(4, "magic"));
  if (memcmp(data_, "GGUF", 4) != 0)
    return Status::Error(Code::kCorrupt, "not a GGUF file: magic is %02x %02x %02x %02x, expected 47 47 55 46 ('GGUF')",
                         data_[0], data_[1], data_[2], data_[3]);
  r.pos = 4;
  MC_TRY(r.u32("version", &version_));
  if (version_ != 2 && version_ != 3) {
    const uint32_t v = version_;
    if (v == 0x02000000u || v == 0x03000000u)
      return Status::Error(Code::kUnsupported, "big-endian GGUF files are not supported");
    return Status::Error(Code::kUnsupported, "GGUF version %" PRIu32 " is not supported (only 2 and 3)", v);
  }
  MC_TRY(r.u64("tensor_count", &tensor_count_));
  MC_TRY(r.u64("kv_count", &kv_count_));
  const uint64_t left = r.remaining();
  if (tensor_count_ > left / kMinTensorBytes || tensor_count_ > kMaxEntries)
    return Status::Error(Code::kCorrupt,
                         "tensor_count %llu (byte 8) cannot fit in the %llu bytes after the header (truncated or corrupt)",
                         ull(tensor_count_), ull(left));
  if (kv_count_ > (left - tensor_count_ * kMinTensorBytes) / kMinKvBytes || kv_count_ > kMaxEntries)
    return Status::Error(Code::kCorrupt,
                         "kv_count %llu (byte 16) cannot fit in the %llu bytes after the header (truncated or corrupt)",
                         ull(kv_count_), ull(left));
  const uint64_t n_kv = kv_count_, n_tensors = tensor_count_;
  // Entries become visible only as they are parsed; the counts are restored at the end.
  kv_count_ = tensor_count_ = 0;

  if (n_kv > 0) {
    kv_index_cap_ = index_capacity(n_kv);
    MC_TRY(arena.alloc_array(static_cast<size_t>(n_kv), TensorClass::kOther, &kvs_));
    MC_TRY(arena.alloc_array(kv_index_cap_, TensorClass::kOther, &kv_index_));
    memset(kv_index_, 0, sizeof(uint32_t) * kv_index_cap_);
  }
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = r.pos;
    Status s = parse_kv(r, &kvs_[i]);
    if (!s.ok()) return s.prefix("kv %llu (byte %zu): ", ull(i), at);
    uint32_t dup = 0;
    if (!index_insert(kv_index_, kv_index_cap_, kvs_[i].key, static_cast<uint32_t>(i),
                      [this](uint32_t j) { return kvs_[j].key; }, &dup))
      return Status::Error(Code::kCorrupt, "duplicate key '%.*s' at byte %zu (first is kv %" PRIu32 ")", shown(kvs_[i].key),
                           kvs_[i].key.data, at, dup);
    kv_count_ = i + 1;
  }

  if (find_kv("general.alignment")) {
    uint32_t align = 0;
    MC_TRY(get_u32("general.alignment", &align));
    if (align == 0 || (align & (align - 1)) != 0)
      return Status::Error(Code::kCorrupt, "general.alignment is %" PRIu32 ", not a power of two", align);
    alignment_ = align;
  }

  if (n_tensors > 0) {
    tensor_index_cap_ = index_capacity(n_tensors);
    MC_TRY(arena.alloc_array(static_cast<size_t>(n_tensors), TensorClass::kOther, &tensors_));
    MC_TRY(arena.alloc_array(tensor_index_cap_, TensorClass::kOther, &tensor_index_));
    memset(tensor_index_, 0, sizeof(uint32_t) * tensor_index_cap_);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t at = r.pos;
    Status s = parse_tensor_info(r, &tensors_[i]);
    if (!s.ok()) return s.prefix("tensor info %llu (byte %zu): ", ull(i), at);
    uint32_t dup = 0;
    const GgufStr& name = tensors_[i].name;
    if (!index_insert(tensor_index_, tensor_index_cap_, name, static_cast<uint32_t>(i),
                      [this](uint32_t j) { return tensors_[j].name; }, &dup))
      return Status::Error(Code::kCorrupt, "duplicate tensor name '%.*s' at byte %zu (first is tensor %" PRIu32 ")",
                           shown(name), name.data, at, dup);
    tensor_count_ = i + 1;
  }

  // The data section starts at the next multiple of the alignment (pos <= size, so no overflow).
  data_offset_ = (static_cast<uint64_t>(r.pos) + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors == 0) {  // files without tensors may end before the padding
    if (data_offset_ > size_) data_offset_ = size_;
    return Status::Ok();
  }
  if (data_offset_ > size_)
    return Status::Error(Code::kCorrupt, "truncated: the data section starts at byte %llu, past the end (%zu bytes)",
                         ull(data_offset_), size_);
  const uint64_t data_size = size_ - data_offset_;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor& t = tensors_[i];
    if (t.offset % alignment_ != 0)
      return Status::Error(Code::kCorrupt, "tensor '%.*s': offset %llu is not a multiple of the alignment %llu",
                           shown(t.name), t.name.data, ull(t.offset), ull(alignment_));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      return Status::Error(Code::kCorrupt,
                           "tensor '%.*s': %llu bytes at data offset %llu end past the end of the file (%llu data bytes "
                           "from byte %llu)",
                           shown(t.name), t.name.data, ull(t.nbytes), ull(t.offset), ull(data_size), ull(data_offset_));
    t.data = data_ + data_offset_ + t.offset;
  }
  return Status::Ok();
}

const GgufKv* GgufFile::find_kv(const char* key) const {
  const int64_t i = index_find(kv_index_, kv_index_cap_, key, [this](uint32_t j) { return kvs_[j].key; });
  return i < 0 || static_cast<uint64_t>(i) >= kv_count_ ? nullptr : &kvs_[i];
}

const GgufTensor* GgufFile::find_tensor(const char* name) const {
  const int64_t i =
      index_find(tensor_index_, tensor_index_cap_, name, [this](uint32_t j) { return tensors_[j].name; });
  return i < 0 || static_cast<uint64_t>(i) >= tensor_count_ ? nullptr : &tensors_[i];
}

Status GgufFile::lookup(const char* key, const GgufKv** out) const {
  if (!key) return Status::Error(Code::kInvalidArgument, "null key");
  *out = find_kv(key);
  if (!*out) return Status::Error(Code::kNotFound, "key '%s' is missing", key);
  return Status::Ok();
}

Status GgufFile::get_integer(const char* key, const GgufKv** kv, bool* negative, uint64_t* magnitude) const {
  MC_TRY(lookup(key, kv));
  const uint8_t* v = (*kv)->value;
  int64_t sv = 0;
  *negative = false;
  switch ((*kv)->type) {
    case GgufType::kU8: *magnitude = v[0]; return Status::Ok();
    case GgufType::kU16: *magnitude = gguf_load_u16(v); return Status::Ok();
    case GgufType::kU32: *magnitude = gguf_load_u32(v); return Status::Ok();
    case GgufType::kU64: *magnitude = gguf_load_u64(v); return Status::Ok();
    case GgufType::kI8: sv = static_cast<int8_t>(v[0]); break;
    case GgufType::kI16: sv = static_cast<int16_t>(gguf_load_u16(v)); break;
    case GgufType::kI32: sv = static_cast<int32_t>(gguf_load_u32(v)); break;
    case GgufType::kI64: sv = static_cast<int64_t>(gguf_load_u64(v)); break;
    default:
      return Status::Error(Code::kCorrupt, "key '%s' is %s, expected an integer", key, gguf_type_name((*kv)->type));
  }
  *negative = sv < 0;
  // Magnitude without negating INT64_MIN.
  *magnitude = sv < 0 ? static_cast<uint64_t>(-(sv + 1)) + 1 : static_cast<uint64_t>(sv);
  return Status::Ok();
}

namespace {
Status does_not_fit(const char* key, bool negative, uint64_t magnitude, const char* want) {
  return Status::Error(Code::kCorrupt, "key '%s' = %s%llu does not fit %s", key, negative ? "-" : "", ull(magnitude),
                       want);
}
}  // namespace

Status GgufFile::get_u32(const char* key, uint32_t* out) const {
  const GgufKv* kv;
  bool neg = false;
  uint64_t mag = 0;
  MC_TRY(get_integer(key, &kv, &neg, &mag));
  if (neg || mag > UINT32_MAX) return does_not_fit(key, neg, mag, "u32");
  *out = static_cast<uint32_t>(mag);
  return Status::Ok();
}

Status GgufFile::get_i32(const char* key, int32_t* out) const {
  const GgufKv* kv;
  bool neg = false;
  uint64_t mag = 0;
  MC_TRY(get_integer(key, &kv, &neg, &mag));
  if (neg ? mag > 0x80000000ull : mag > INT32_MAX) return does_not_fit(key, neg, mag, "i32");
  *out = neg ? static_cast<int32_t>(-static_cast<int64_t>(mag)) : static_cast<int32_t>(mag);
  return Status::Ok();
}

Status GgufFile::get_u64(const char* key, uint64_t* out) const {
  const GgufKv* kv;
  bool neg = false;
  uint64_t mag = 0;
  MC_TRY(get_integer(key, &kv, &neg, &mag));
  if (neg) return does_not_fit(key, neg, mag, "u64");
  *out = mag;
  return Status::Ok();
}

Status GgufFile::get_i64(const char* key, int64_t* out) const {
  const GgufKv* kv;
  bool neg = false;
  uint64_t mag = 0;
  MC_TRY(get_integer(key, &kv, &neg, &mag));
  const uint64_t limit = static_cast<uint64_t>(INT64_MAX);
  if (neg ? mag > limit + 1 : mag > limit) return does_not_fit(key, neg, mag, "i64");
  *out = !neg ? static_cast<int64_t>(mag) : mag == limit + 1 ? INT64_MIN : -static_cast<int64_t>(mag);
  return Status::Ok();
}

Status GgufFile::get_f32(const char* key, float* out) const {
  const GgufKv* kv;
  MC_TRY(lookup(key, &kv));
  if (kv->type == GgufType::kF32) {
    const uint32_t bits = gguf_load_u32(kv->value);
    memcpy(out, &bits, 4);
    return Status::Ok();
  }
  if (kv->type == GgufType::kF64) {
    const uint64_t bits = gguf_load_u64(kv->value);
    double d;
    memcpy(&d, &bits, 8);
    // Converting a finite double outside float's range is undefined behaviour: refuse it.
    if (d == d && d - d == 0.0 && (d > FLT_MAX || d < -FLT_MAX))
      return Status::Error(Code::kCorrupt, "key '%s' = %g does not fit f32", key, d);
    *out = static_cast<float>(d);
    return Status::Ok();
  }
  return Status::Error(Code::kCorrupt, "key '%s' is %s, expected f32 or f64", key, gguf_type_name(kv->type));
}

Status GgufFile::get_bool(const char* key, bool* out) const {
  const GgufKv* kv;
  MC_TRY(lookup(key, &kv));
  if (kv->type != GgufType::kBool)
    return Status::Error(Code::kCorrupt, "key '%s' is %s, expected bool", key, gguf_type_name(kv->type));
  *out = kv->value[0] != 0;  // open() checked it is 0 or 1
  return Status::Ok();
}

Status GgufFile::get_string(const char* key, GgufStr* out) const {
  const GgufKv* kv;
  MC_TRY(lookup(key, &kv));
  if (kv->type != GgufType::kString)
    return Status::Error(Code::kCorrupt, "key '%s' is %s, expected string", key, gguf_type_name(kv->type));
  out->size = gguf_load_u64(kv->value);  // open() checked the length against the file
  out->data = reinterpret_cast<const char*>(kv->value + 8);
  return Status::Ok();
}

Status GgufFile::get_array(const char* key, GgufType elem_type, const uint8_t** elems, uint64_t* count) const {
  if (gguf_type_size(elem_type) == 0)
    return Status::Error(Code::kInvalidArgument, "get_array('%s'): element type %s is not numeric (use "
                         "get_string_array for strings)", key ? key : "(null)", gguf_type_name(elem_type));
  const GgufKv* kv;
  MC_TRY(lookup(key, &kv));
  if (kv->type != GgufType::kArray || kv->array_type != elem_type)
    return Status::Error(Code::kCorrupt, "key '%s' is %s%s%s, expected an array of %s", key, gguf_type_name(kv->type),
                         kv->type == GgufType::kArray ? " of " : "",
                         kv->type == GgufType::kArray ? gguf_type_name(kv->array_type) : "", gguf_type_name(elem_type));
  *elems = kv->value;
  *count = kv->array_count;
  return Status::Ok();
}

Status GgufFile::get_string_array(const char* key, Arena& arena, GgufStr** out, uint64_t* count) const {
  const GgufKv* kv;
  MC_TRY(lookup(key, &kv));
  if (kv->type != GgufType::kArray || kv->array_type != GgufType::kString)
    return Status::Error(Code::kCorrupt, "key '%s' is %s%s%s, expected an array of strings", key,
                         gguf_type_name(kv->type), kv->type == GgufType::kArray ? " of " : "",
                         kv->type == GgufType::kArray ? gguf_type_name(kv->array_type) : "");
  *out = nullptr;
  *count = 0;
  const uint64_t n = kv->array_count;  // open() checked n <= file size / 8, so it fits size_t
  if (n == 0) return Status::Ok();
  GgufStr* strs = nullptr;
  MC_TRY(arena.alloc_array(static_cast<size_t>(n), TensorClass::kOther, &strs));
  // Walk again with the bounds-checked reader (open() already validated these bytes).
  Reader r{data_, size_, static_cast<size_t>(kv->value - data_)};
  for (uint64_t i = 0; i < n; ++i) {
    Status s = r.str("string array element", &strs[i]);
    if (!s.ok()) return s.prefix("key '%s': ", key);
  }
  *out = strs;
  *count = n;
  return Status::Ok();
}

}  // namespace mcullm
