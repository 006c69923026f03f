#include "format/ternary_gguf_host.h"

#include <cstring>

#include "kernels/tl_tuning.h"

namespace mcullm {

bool is_ternary_matrix_type(DType type) { return type == DType::kI2_S || type == DType::kTL1 || type == DType::kTL2; }

Status ternary_tensor_unpack(const std::string& name, DType type, const uint8_t* data, size_t nbytes, int rows, int cols,
                             std::vector<int8_t>* w, float* scale) {
  if (!is_ternary_matrix_type(type) || rows <= 0 || cols <= 0 || nbytes != dtype_tensor_bytes(type, rows, cols))
    return Status::Error(Code::kInvalidArgument, "tensor %s: not a %dx%d ternary tensor of %zu bytes", name.c_str(), rows,
                         cols, nbytes);
  w->assign(static_cast<size_t>(rows) * static_cast<size_t>(cols), 0);
  if (type == DType::kI2_S) {
    const size_t row_bytes = dtype_row_bytes(type, cols);
    for (int r = 0; r < rows; ++r)
      if (!ternary_unpack_row(TernaryLayout::kI2S, data + row_bytes * static_cast<size_t>(r), cols,
                              w->data() + static_cast<size_t>(r) * cols))
        return Status::Error(Code::kCorrupt, "tensor %s: row %d holds an invalid i2_s code", name.c_str(), r);
    *scale = i2s_tensor_scale(data, rows, cols);
    return Status::Ok();
  }
  TlType tl;
  tl_dtype_type(type, &tl);
  TlTiling t;
  const size_t packed = nbytes - kTlFileTailBytes;
  if (!tl_file_tail_read(data + packed, tl, rows, cols, scale, &t))
    return Status::Error(Code::kCorrupt, "tensor %s: the %s tail does not describe a tiling of %dx%d", name.c_str(),
                         tl_type_name(tl), rows, cols);
  if (!tl_unpack(tl, t, data, rows, cols, w->data()))
    return Status::Error(Code::kCorrupt, "tensor %s: an index out of range for %s", name.c_str(), tl_type_name(tl));
  return Status::Ok();
}

Status ternary_tensor_pack(DType to, const int8_t* w, int rows, int cols, float scale, std::vector<uint8_t>* out,
                           DType* written, std::string* note) {
  note->clear();
  TlType tl;
  if (tl_dtype_type(to, &tl)) {
    const TlTiling t = tl_file_tiling(tl, rows, cols, tl_tiling_for(tl, rows, cols));
    if (t.BM > 0) {
      const size_t packed = tl_packed_bytes(tl, rows, cols, t);
      out->assign(packed + kTlFileTailBytes, 0);
      if (!tl_pack(tl, t, w, rows, cols, out->data()))
        return Status::Error(Code::kInvalidArgument, "a %dx%d matrix holds values outside {-1, 0, 1}", rows, cols);
      tl_file_tail_write(out->data() + packed, scale, t);
      *written = to;
      return Status::Ok();
    }
    *note = "no " + std::string(tl_type_name(tl)) + " tiling holds " + std::to_string(rows) + "x" + std::to_string(cols) +
            " (quant/ternary.h tl_tiling_valid): written as i2_s";
    to = DType::kI2_S;
  }
  if (to != DType::kI2_S) return Status::Error(Code::kInvalidArgument, "%s is not a ternary type", dtype_info(to)->name);
  if (!ternary_row_fits(TernaryLayout::kI2S, cols))
    return Status::Error(Code::kInvalidArgument, "a %dx%d matrix: i2_s rows need a multiple of 128 columns%s", rows, cols,
                         note->empty() ? "" : " (and no TL layout holds it either)");
  const size_t row_bytes = ternary_row_bytes(TernaryLayout::kI2S, cols);
  out->assign(i2s_tensor_bytes(rows, cols), 0);
  for (int r = 0; r < rows; ++r)
    if (!ternary_pack_row(TernaryLayout::kI2S, w + static_cast<size_t>(r) * cols, cols, out->data() + row_bytes * r))
      return Status::Error(Code::kInvalidArgument, "a %dx%d matrix holds values outside {-1, 0, 1}", rows, cols);
  std::memcpy(out->data() + row_bytes * static_cast<size_t>(rows), &scale, 4);
  *written = DType::kI2_S;
  return Status::Ok();
}

namespace {

// A key's encoded value as GgufWriter stores it (arrays: element type, count, elements): from its
// first byte to where the next key (or the first tensor's info) begins.
Status raw_value(const GgufFile& in, uint64_t i, const uint8_t** begin, size_t* size) {
  const GgufKv& kv = *in.kv(i);
  const uint8_t* b = kv.type == GgufType::kArray ? kv.value - 12 : kv.value;
  const uint8_t* e = nullptr;
  if (i + 1 < in.kv_count()) e = reinterpret_cast<const uint8_t*>(in.kv(i + 1)->key.data) - 8;
  else if (in.tensor_count() > 0) e = reinterpret_cast<const uint8_t*>(in.tensor(0)->name.data) - 8;
  if (!e || e < b)
    return Status::Error(Code::kUnsupported, "key %.*s: cannot copy the last key of a file without tensors",
                         static_cast<int>(kv.key.size), kv.key.data);
  *begin = b;
  *size = static_cast<size_t>(e - b);
  return Status::Ok();
}

}  // namespace

Status retype_ternary_gguf(const GgufFile& in, DType to, GgufWriter* out, TernaryRetypeReport* report) {
  *report = TernaryRetypeReport();
  for (uint64_t i = 0; i < in.kv_count(); ++i) {
    const uint8_t* v = nullptr;
    size_t n = 0;
    MC_TRY(raw_value(in, i, &v, &n));
    const GgufKv& kv = *in.kv(i);
    out->set_raw(std::string(kv.key.data, kv.key.size), kv.type, std::vector<uint8_t>(v, v + n));
  }
  std::vector<int8_t> w;
  std::vector<uint8_t> packed;
  for (uint64_t i = 0; i < in.tensor_count(); ++i) {
    const GgufTensor& t = *in.tensor(i);
    const std::string name(t.name.data, t.name.size);
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (!is_ternary_matrix_type(t.type) || t.n_dims != 2) {
      MC_TRY(out->add_tensor(name, t.type, ne, t.data, static_cast<size_t>(t.nbytes)));
      continue;
    }
    const int rows = static_cast<int>(t.ne[1]), cols = static_cast<int>(t.ne[0]);
    float scale = 0.0f;
    MC_TRY(ternary_tensor_unpack(name, t.type, t.data, static_cast<size_t>(t.nbytes), rows, cols, &w, &scale));
    DType written;
    std::string note;
    if (Status st = ternary_tensor_pack(to, w.data(), rows, cols, scale, &packed, &written, &note); !st.ok())
      return st.prefix("tensor %s: ", name.c_str());
    if (!note.empty()) report->notes.push_back(name + ": " + note);
    (written == to ? report->repacked : report->fell_back) += 1;
    report->ternary_bytes += packed.size();
    MC_TRY(out->add_tensor(name, written, ne, packed.data(), packed.size()));
  }
  return Status::Ok();
}

}  // namespace mcullm
