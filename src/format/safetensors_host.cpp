#include "format/safetensors_host.h"

#include <string.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "quant/f16.h"

namespace mcullm {

namespace {

// Bytes per element of the dtypes safetensors defines; 0 for a name it does not.
size_t dtype_size(const std::string& d, StDType* type) {
  *type = StDType::kOther;
  if (d == "F32") return *type = StDType::kF32, 4;
  if (d == "F16") return *type = StDType::kF16, 2;
  if (d == "BF16") return *type = StDType::kBF16, 2;
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "I32" || d == "U32") return 4;
  if (d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

// A JSON integer in [0, 2^62] (larger ones cannot describe bytes of a file we map).
bool small_count(const nlohmann::json& v, uint64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else {
    const int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    *out = static_cast<uint64_t>(s);
  }
  return *out <= (uint64_t{1} << 62);
}

}  // namespace

Status SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& label) {
  label_ = label;
  tensors_.clear();
  const char* L = label.c_str();
  if (size < 8) return Status::Error(Code::kCorrupt, "%s: %zu bytes, too short for a safetensors header length", L, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > size - 8)
    return Status::Error(Code::kCorrupt, "%s: header length %llu runs past the end of the file (%zu bytes)", L,
                         static_cast<unsigned long long>(n), size);
  const uint8_t* body = data + 8 + n;
  const uint64_t body_size = size - 8 - n;
  using nlohmann::json;
  json j;
  try {
    j = json::parse(data + 8, data + 8 + n);
  } catch (const json::exception& e) {
    return Status::Error(Code::kCorrupt, "%s: the safetensors header is not valid JSON: %s", L, e.what());
  }
  if (!j.is_object()) return Status::Error(Code::kCorrupt, "%s: the safetensors header is not a JSON object", L);
  std::vector<uint64_t> begins;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const char* T = it.key().c_str();
    const json& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': not {dtype, shape, data_offsets: [begin, end]}", L, T);
    SafetensorsTensor t;
    t.name = it.key();
    t.dtype = e["dtype"].get<std::string>();
    const size_t esize = dtype_size(t.dtype, &t.type);
    if (esize == 0) return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': unknown dtype '%.20s'", L, T, t.dtype.c_str());
    uint64_t count = 1;
    for (const json& d : e["shape"]) {
      uint64_t v;
      if (!small_count(d, &v) || v > (uint64_t{1} << 40))
        return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': a dimension is not a small non-negative integer", L, T);
      t.shape.push_back(static_cast<int64_t>(v));
      if (v != 0 && count > (uint64_t{1} << 62) / v)
        return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': its shape holds too many elements", L, T);
      count *= v;
    }
    uint64_t begin, end;
    if (!small_count(e["data_offsets"][0], &begin) || !small_count(e["data_offsets"][1], &end) || begin > end)
      return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': data_offsets are not 0 <= begin <= end", L, T);
    if (end > body_size)
      return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': bytes [%llu, %llu) run past the data (%llu bytes)", L, T,
                           static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
                           static_cast<unsigned long long>(body_size));
    if (count > (uint64_t{1} << 62) / esize || end - begin != count * esize)
      return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': %llu bytes for %llu %s elements", L, T,
                           static_cast<unsigned long long>(end - begin), static_cast<unsigned long long>(count),
                           t.dtype.c_str());
    t.data = body + begin;
    t.nbytes = static_cast<size_t>(end - begin);
    tensors_.push_back(std::move(t));
    begins.push_back(begin);
  }
  // No two byte ranges overlap (empty ones take no bytes).
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return begins[a] < begins[b]; });
  uint64_t reach = 0;
  const SafetensorsTensor* last = nullptr;
  for (size_t i : order) {
    const SafetensorsTensor& t = tensors_[i];
    if (t.nbytes == 0) continue;
    if (begins[i] < reach)
      return Status::Error(Code::kCorrupt, "%s: tensor '%.80s': its bytes overlap those of '%.80s'", L, t.name.c_str(),
                           last->name.c_str());
    reach = begins[i] + t.nbytes;
    last = &t;
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const SafetensorsTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Status safetensors_to_f32(const SafetensorsTensor& t, const std::string& label, float* out) {
  const size_t n = static_cast<size_t>(t.elements());
  switch (t.type) {
    case StDType::kF32:
      memcpy(out, t.data, n * 4);
      return Status::Ok();
    case StDType::kF16:
      for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(static_cast<uint16_t>(t.data[2 * i] | (t.data[2 * i + 1] << 8)));
      return Status::Ok();
    case StDType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t bits = (static_cast<uint32_t>(t.data[2 * i]) | (static_cast<uint32_t>(t.data[2 * i + 1]) << 8)) << 16;
        memcpy(&out[i], &bits, 4);
      }
      return Status::Ok();
    case StDType::kOther:
      break;
  }
  return Status::Error(Code::kUnsupported, "%s: tensor '%.80s' has dtype %s (we convert F32, F16 and BF16)", label.c_str(),
                       t.name.c_str(), t.dtype.c_str());
}

}  // namespace mcullm
