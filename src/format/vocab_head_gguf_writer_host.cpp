#include "format/vocab_head_gguf_writer_host.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/arena.h"
#include "quant/f16.h"
#include "quant/q4e.h"

namespace mcullm {

namespace {

size_t scalar_bytes(GgufType t) { return gguf_type_size(t); }

std::string str_of(const uint8_t* p) {  // a GGUF string: u64 length, bytes
  uint64_t n;
  std::memcpy(&n, p, 8);
  return std::string(reinterpret_cast<const char*>(p + 8), static_cast<size_t>(n));
}

Status copy_kv(const GgufFile& in, const GgufKv& kv, GgufWriter* w) {
  const std::string key(kv.key.data, kv.key.size);
  if (kv.type == GgufType::kString) {
    w->set_string(key, str_of(kv.value));
    return Status::Ok();
  }
  if (kv.type == GgufType::kArray) {
    if (kv.array_type == GgufType::kString) {
      std::vector<uint8_t> mem(64 + kv.array_count * sizeof(GgufStr) + 64);
      Arena scratch(Tier::kHost, mem.data(), mem.size());
      GgufStr* s = nullptr;
      uint64_t n = 0;
      MC_TRY(in.get_string_array(key.c_str(), scratch, &s, &n));
      std::vector<std::string> v;
      for (uint64_t i = 0; i < n; ++i) v.emplace_back(s[i].data, s[i].size);
      w->set_string_array(key, v);
      return Status::Ok();
    }
    if (scalar_bytes(kv.array_type) == 0)
      return Status::Error(Code::kUnsupported, "key %s: arrays of %s are not copied", key.c_str(), gguf_type_name(kv.array_type));
    return w->set_array(key, kv.array_type, kv.value, kv.array_count);
  }
  if (scalar_bytes(kv.type) == 0) return Status::Error(Code::kCorrupt, "key %s has type %u", key.c_str(), static_cast<unsigned>(kv.type));
  // A scalar: a one-element array has the same bytes; write it back through the typed setters.
  uint64_t u = 0;
  std::memcpy(&u, kv.value, scalar_bytes(kv.type));
  switch (kv.type) {
    case GgufType::kU8: w->set_u8(key, static_cast<uint8_t>(u)); break;
    case GgufType::kI8: w->set_i8(key, static_cast<int8_t>(u)); break;
    case GgufType::kBool: w->set_bool(key, u != 0); break;
    case GgufType::kU16: w->set_u16(key, static_cast<uint16_t>(u)); break;
    case GgufType::kI16: w->set_i16(key, static_cast<int16_t>(u)); break;
    case GgufType::kU32: w->set_u32(key, static_cast<uint32_t>(u)); break;
    case GgufType::kI32: w->set_i32(key, static_cast<int32_t>(u)); break;
    case GgufType::kU64: w->set_u64(key, u); break;
    case GgufType::kI64: w->set_i64(key, static_cast<int64_t>(u)); break;
    case GgufType::kF32: { float f; std::memcpy(&f, kv.value, 4); w->set_f32(key, f); break; }
    case GgufType::kF64: { double d; std::memcpy(&d, kv.value, 8); w->set_f64(key, d); break; }
    default: break;
  }
  return Status::Ok();
}

}  // namespace

Status copy_gguf(const GgufFile& in, GgufWriter* w) {
  for (uint64_t i = 0; i < in.kv_count(); ++i) {
    const GgufKv& kv = *in.kv(i);
    if (std::string(kv.key.data, kv.key.size).rfind("head_groups.", 0) == 0) continue;
    MC_TRY(copy_kv(in, kv, w));
  }
  for (uint64_t i = 0; i < in.tensor_count(); ++i) {
    const GgufTensor& t = *in.tensor(i);
    const std::string name(t.name.data, t.name.size);
    if (name.rfind("head_groups.", 0) == 0) continue;
    MC_TRY(w->add_tensor(name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, static_cast<size_t>(t.nbytes)));
  }
  return Status::Ok();
}

Status add_vocab_head(const VocabHead& h, GgufWriter* w, HeadMode mode, int top) {
  if (mode != HeadMode::kFull) w->set_string("head_groups.default_mode", head_mode_name(mode));
  if (top > 0) w->set_u32("head_groups.default_top", static_cast<uint32_t>(top));
  const MatRef& r = h.rows;
  const int V = r.rows, D = r.cols, K = h.n_groups;
  MC_TRY(w->add_tensor("head_groups.rows", r.type, {D, V}, r.data, static_cast<size_t>(V) * r.row_bytes));
  if (r.type == DType::kQ4E) {
    const int ng = q4e_groups(D, r.group);
    MC_TRY(w->add_tensor("head_groups.rows.scales", DType::kF16, {ng, V}, r.scales, static_cast<size_t>(V) * ng * 2));
  }
  std::vector<uint16_t> cent(static_cast<size_t>(K) * D);
  for (size_t i = 0; i < cent.size(); ++i) cent[i] = f32_to_f16(h.centroids[i]);  // f16 values already: exact
  MC_TRY(w->add_tensor("head_groups.centroids", DType::kF16, {D, K}, cent.data(), cent.size() * 2));
  w->set_i32_array("head_groups.token_of_row", std::vector<int32_t>(h.token_of_row, h.token_of_row + V));
  w->set_i32_array("head_groups.group_start", std::vector<int32_t>(h.group_start, h.group_start + K + 1));
  w->set_f32_array("head_groups.radius", std::vector<float>(h.radius, h.radius + K));
  w->set_f32_array("head_groups.row_norm_max", std::vector<float>(h.row_norm_max, h.row_norm_max + K));
  if (h.router) {
    MC_TRY(w->set_array("head_groups.router", GgufType::kI8, h.router, static_cast<uint64_t>(K) * D));
    w->set_f32_array("head_groups.router_scale", std::vector<float>(h.router_scale, h.router_scale + K));
    w->set_f32_array("head_groups.router_bias", std::vector<float>(h.router_bias, h.router_bias + K));
  }
  return Status::Ok();
}

}  // namespace mcullm
