#include "format/esp32ai.h"

#include <string.h>

#include "quant/q4e.h"

namespace mcullm {

namespace {

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
int32_t read_i32(const uint8_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

// Walks the tensors in file order, each bounded by the file's end.
struct Cursor {
  const uint8_t* base;
  size_t size;
  size_t off;
  Arena* tables;

  Status quant(const char* what, int layer, int64_t rows, int64_t cols, MatRef* out) {
    if (size - off < 4)
      return Status::Error(Code::kCorrupt, "%s (layer %d): file ends at byte %zu, before its group size", what, layer, size);
    const int32_t group = read_i32(base + off);
    if (group <= 0 || group > (1 << 20))
      return Status::Error(Code::kCorrupt, "%s (layer %d): group size %d at byte %zu", what, layer, group, off);
    const uint64_t bytes = q4e_tensor_bytes(rows, cols, group);
    if (bytes > size - off)
      return Status::Error(Code::kCorrupt, "%s (layer %d): %llu bytes at offset %zu run past the file's %zu", what, layer,
                           static_cast<unsigned long long>(bytes), off, size);
    q4e_bind(base + off, static_cast<int>(rows), static_cast<int>(cols), out);
    off += static_cast<size_t>(bytes);
    return Status::Ok();
  }

  // Norm weights: copied into the tables (the file gives no alignment).
  Status norm(const char* what, int layer, int n, const float** out) {
    const size_t bytes = static_cast<size_t>(n) * 4;
    if (bytes > size - off)
      return Status::Error(Code::kCorrupt, "%s (layer %d): %zu bytes at offset %zu run past the file's %zu", what, layer, bytes,
                           off, size);
    float* dst = nullptr;
    MC_TRY(tables->alloc_array(static_cast<size_t>(n), TensorClass::kNorm, &dst));
    memcpy(dst, base + off, bytes);
    off += bytes;
    *out = dst;
    return Status::Ok();
  }
};

}  // namespace

bool esp32ai_is_model(const uint8_t* data, size_t size) {
  if (size < 4) return false;
  const uint32_t magic = read_u32(data);
  return magic == kEsp32aiMagicV0 || magic == kEsp32aiMagicV1;
}

Status esp32ai_read_config(const uint8_t* data, size_t size, PleConfig* cfg, int* header_bytes) {
  if (!esp32ai_is_model(data, size)) return Status::Error(Code::kCorrupt, "not an esp32-ai model (bad magic)");
  PleConfig c;
  const uint32_t magic = read_u32(data);
  if (magic == kEsp32aiMagicV0) {
    if (size < static_cast<size_t>(kEsp32aiHeaderV0Bytes))
      return Status::Error(Code::kCorrupt, "esp32-ai v0 header needs %d bytes, the file has %zu", kEsp32aiHeaderV0Bytes, size);
    c.version = 0;
    c.input_vocab = c.output_vocab = read_i32(data + 4);
    c.dim = read_i32(data + 8);
    c.n_layers = read_i32(data + 12);
    c.n_heads = read_i32(data + 16);
    c.ffn = read_i32(data + 20);
    c.ple_dim = read_i32(data + 24);
    c.seq_len = read_i32(data + 28);
    c.group = read_i32(data + 32);
    memcpy(&c.rope_theta, data + 36, 4);
    c.tied_head = true;
    *header_bytes = kEsp32aiHeaderV0Bytes;
  } else {
    if (size < static_cast<size_t>(kEsp32aiHeaderV1Bytes))
      return Status::Error(Code::kCorrupt, "esp32-ai v1 header needs %d bytes, the file has %zu", kEsp32aiHeaderV1Bytes, size);
    const uint32_t version = read_u32(data + 4), hbytes = read_u32(data + 8), flags = read_u32(data + 12);
    if (version != 1) return Status::Error(Code::kUnsupported, "esp32-ai header version %u (1 is read)", version);
    if (hbytes < static_cast<uint32_t>(kEsp32aiHeaderV1Bytes) || hbytes > size)
      return Status::Error(Code::kCorrupt, "esp32-ai header_bytes %u (at least %d, at most the file's %zu)", hbytes,
                           kEsp32aiHeaderV1Bytes, size);
    c.version = 1;
    c.tied_head = (flags & 1u) != 0;
    c.input_vocab = static_cast<int32_t>(read_u32(data + 16));
    c.output_vocab = static_cast<int32_t>(read_u32(data + 20));
    c.dim = read_i32(data + 24);
    c.n_layers = read_i32(data + 28);
    c.n_heads = read_i32(data + 32);
    c.ffn = read_i32(data + 36);
    c.ple_dim = read_i32(data + 40);
    c.seq_len = read_i32(data + 44);
    c.group = read_i32(data + 48);
    memcpy(&c.rope_theta, data + 52, 4);
    *header_bytes = static_cast<int>(hbytes);
  }
  MC_TRY(c.validate());
  *cfg = c;
  return Status::Ok();
}

Status esp32ai_load(const uint8_t* data, size_t size, Arena& tables, PleModel* out) {
  PleModel m;
  int header_bytes = 0;
  MC_TRY(esp32ai_read_config(data, size, &m.cfg, &header_bytes));
  const PleConfig& c = m.cfg;
  const int64_t V = c.input_vocab, D = c.dim, L = c.n_layers, P = c.ple_dim, F = c.ffn;
  MC_TRY(tables.alloc_array(static_cast<size_t>(L), TensorClass::kOther, &m.layers));
  for (int l = 0; l < L; ++l) m.layers[l] = PleLayer();
  Cursor cur{data, size, static_cast<size_t>(header_bytes), &tables};
  MC_TRY(cur.quant("tok_emb", -1, V, D, &m.tok_emb));
  MC_TRY(cur.quant("ple_model_proj", -1, L * P, D, &m.ple_model_proj));
  MC_TRY(cur.norm("ple_proj_norm", -1, static_cast<int>(P), &m.ple_proj_norm));
  MC_TRY(cur.quant("ple_table", -1, V, L * P, &m.ple_table));
  for (int l = 0; l < L; ++l) {
    PleLayer& Ly = m.layers[l];
    MC_TRY(cur.norm("attn_norm", l, static_cast<int>(D), &Ly.attn_norm));
    MC_TRY(cur.quant("qkv", l, 3 * D, D, &Ly.qkv));
    MC_TRY(cur.quant("attn_proj", l, D, D, &Ly.attn_proj));
    MC_TRY(cur.norm("ffn_norm", l, static_cast<int>(D), &Ly.ffn_norm));
    MC_TRY(cur.quant("gate", l, F, D, &Ly.gate));
    MC_TRY(cur.quant("up", l, F, D, &Ly.up));
    MC_TRY(cur.quant("down", l, D, F, &Ly.down));
    MC_TRY(cur.quant("ple_gate", l, P, D, &Ly.ple_gate));
    MC_TRY(cur.quant("ple_proj", l, D, P, &Ly.ple_proj));
    MC_TRY(cur.norm("ple_norm", l, static_cast<int>(D), &Ly.ple_norm));
  }
  MC_TRY(cur.norm("out_norm", -1, static_cast<int>(D), &m.out_norm));
  if (c.tied_head) {
    m.output = m.tok_emb;
    m.output.rows = c.output_vocab;  // the first output_vocab rows (validate: <= input_vocab)
  } else {
    MC_TRY(cur.quant("head", -1, c.output_vocab, D, &m.output));
  }
  m.split_qkv();
  MC_TRY(m.check_shapes());
  *out = m;
  return Status::Ok();
}

}  // namespace mcullm
