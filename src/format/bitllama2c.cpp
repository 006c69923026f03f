#include "format/bitllama2c.h"

#include <inttypes.h>
#include <string.h>

#include "format/llama2c.h"

namespace mcullm {

namespace {

constexpr size_t kHeaderBytes = 256;

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

struct MatShape {
  const char* name;
  int rows, cols;
  TensorClass cls;
};

// The seven matrices in file order.
void shapes_of(const LlamaConfig& c, MatShape out[7]) {
  const int d = c.dim, kv = c.kv_dim(), h = c.hidden_dim;
  out[0] = {"wq", d, d, TensorClass::kAttention};
  out[1] = {"wk", kv, d, TensorClass::kAttention};
  out[2] = {"wv", kv, d, TensorClass::kAttention};
  out[3] = {"wo", d, d, TensorClass::kAttention};
  out[4] = {"w1", h, d, TensorClass::kFfn};
  out[5] = {"w2", d, h, TensorClass::kFfn};
  out[6] = {"w3", h, d, TensorClass::kFfn};
}

MatRef* layer_matrix(BitLlama2cLayer& L, int i) {
  MatRef* const mats[7] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3};
  return mats[i];
}

}  // namespace

namespace {

// Magic, version, config and the size a ternary file with this header has (not yet compared).
Status parse_header(const uint8_t* data, size_t size, BitLlama2cInfo* info) {
  *info = BitLlama2cInfo();
  if (size < kHeaderBytes)
    return Status::Error(Code::kCorrupt, "file of %zu bytes is too short for a bitllama2.c header (256)", size);
  uint32_t magic;
  memcpy(&magic, data, 4);
  if (magic != kLlama2cMagic) return Status::Error(Code::kCorrupt, "not an ak42 file (magic %08" PRIx32 ")", magic);
  const int32_t version = read_i32(data + 4);
  if (version != 1) return Status::Error(Code::kUnsupported, "bitllama2.c files are ak42 version 1, this is %" PRId32, version);
  LlamaConfig& c = info->cfg;
  c.dim = read_i32(data + 8);
  c.hidden_dim = read_i32(data + 12);
  c.n_layers = read_i32(data + 16);
  c.n_heads = read_i32(data + 20);
  c.n_kv_heads = read_i32(data + 24);
  c.vocab_size = read_i32(data + 28);
  c.seq_len = read_i32(data + 32);
  c.norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  Status st = c.validate();
  if (!st.ok()) return st.prefix("bitllama2.c header: ");
  MatShape shapes[7];
  shapes_of(c, shapes);
  uint64_t bytes = kHeaderBytes + 4ull * static_cast<uint64_t>(c.dim) * (1ull + static_cast<uint64_t>(c.vocab_size));
  for (const MatShape& s : shapes) {
    if ((static_cast<uint64_t>(s.rows) * static_cast<uint64_t>(s.cols)) % 4 != 0)
      return Status::Error(Code::kCorrupt, "bitllama2.c %s has %dx%d weights, not a whole number of bytes", s.name, s.rows,
                           s.cols);
    bytes += static_cast<uint64_t>(c.n_layers) * (4 + static_cast<uint64_t>(s.rows) * static_cast<uint64_t>(s.cols) / 4);
  }
  info->expected_size = bytes;
  return Status::Ok();
}

}  // namespace

Status bitllama2c_read_header(const uint8_t* data, size_t size, BitLlama2cInfo* info) {
  MC_TRY(parse_header(data, size, info));
  if (info->expected_size != size)
    return Status::Error(Code::kCorrupt, "bitllama2.c file has %zu bytes, its header implies %llu", size,
                         static_cast<unsigned long long>(info->expected_size));
  if (data[36] != 1)
    return Status::Error(data[36] == 0 ? Code::kUnsupported : Code::kCorrupt,
                         "bitllama2.c shared_classifier flag is %u (only tied classifiers, 1, exist)", data[36]);
  return Status::Ok();
}

bool bitllama2c_is_ternary(const uint8_t* data, size_t size) {
  BitLlama2cInfo info;
  return parse_header(data, size, &info).ok() && info.expected_size == size;
}

Status bitllama2c_load(const uint8_t* data, size_t size, TernaryLayout order, Arena& arena, BitLlama2cModel* model) {
  if (order != TernaryLayout::kBitllama2cMsb && order != TernaryLayout::kBitllama2cLsb)
    return Status::Error(Code::kInvalidArgument, "bitllama2.c bit order must be msb or lsb, not %s", ternary_layout_name(order));
  BitLlama2cInfo info;
  MC_TRY(bitllama2c_read_header(data, size, &info));
  const LlamaConfig& c = info.cfg;
  if (c.dim % 128 != 0 || c.hidden_dim % 128 != 0)
    return Status::Error(Code::kUnsupported,
                         "bitllama2.c model with dim %d and hidden %d: the i2_s kernels need multiples of 128", c.dim,
                         c.hidden_dim);
  *model = BitLlama2cModel();
  model->cfg = c;
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_layers), TensorClass::kOther, &model->layers));
  for (int l = 0; l < c.n_layers; ++l) model->layers[l] = BitLlama2cLayer();

  size_t pos = kHeaderBytes;  // read_header checked the total size, so every offset below is in range
  model->out_norm = reinterpret_cast<const float*>(data + pos);
  pos += 4 * static_cast<size_t>(c.dim);
  model->tok_emb = f32_matrix(reinterpret_cast<const float*>(data + pos), c.vocab_size, c.dim);
  model->output = model->tok_emb;
  pos += 4 * static_cast<size_t>(c.vocab_size) * static_cast<size_t>(c.dim);
  arena.note_mapped(4 * static_cast<size_t>(c.dim), TensorClass::kNorm);
  arena.note_mapped(4 * static_cast<size_t>(c.vocab_size) * static_cast<size_t>(c.dim), TensorClass::kEmbedding);

  MatShape shapes[7];
  shapes_of(c, shapes);
  const int widest = c.hidden_dim > c.dim ? c.hidden_dim : c.dim;
  int8_t* scratch = nullptr;  // one unpacked row (small; it stays with the model's tables)
  MC_TRY(arena.alloc_array(static_cast<size_t>(widest), TensorClass::kScratch, &scratch));
  for (int i = 0; i < 7; ++i) {
    const MatShape& s = shapes[i];
    const size_t in_row = ternary_row_bytes(order, s.cols);
    const size_t out_row = ternary_row_bytes(TernaryLayout::kI2S, s.cols);
    for (int l = 0; l < c.n_layers; ++l) {
      float scale;
      memcpy(&scale, data + pos, 4);
      pos += 4;
      if (!(scale >= 0.0f && scale < 1e30f))
        return Status::Error(Code::kCorrupt, "bitllama2.c %s (layer %d) has scale %g", s.name, l, scale);
      uint8_t* packed = nullptr;
      MC_TRY(arena.alloc_array(static_cast<size_t>(s.rows) * out_row, s.cls, &packed));
      for (int r = 0; r < s.rows; ++r)
        if (!ternary_convert_row(order, data + pos + static_cast<size_t>(r) * in_row, TernaryLayout::kI2S,
                                 packed + static_cast<size_t>(r) * out_row, s.cols, scratch))
          return Status::Error(Code::kCorrupt, "bitllama2.c %s (layer %d) row %d holds the invalid code 10", s.name, l, r);
      pos += static_cast<size_t>(s.rows) * in_row;
      MatRef& m = *layer_matrix(model->layers[l], i);
      m.type = DType::kI2_S;
      m.data = packed;
      m.rows = s.rows;
      m.cols = s.cols;
      m.row_bytes = out_row;
      m.scale = scale;
    }
  }
  return model->check_shapes();
}

}  // namespace mcullm
