#include "format/esp32ai.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format/transformer_gguf.h"
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

  Status quant(const char* what, int layer, int64_t rows, int64_t cols, MatRef* out, TensorClass cls) {
    if (size - off < 4)
      return Status::Error(Code::kCorrupt, "%s (layer %d): file ends at byte %zu, before its group size", what, layer, size);
    const int32_t group = read_i32(base + off);
    if (group <= 0 || group > (1 << 20))
      return Status::Error(Code::kCorrupt, "%s (layer %d): group size %" PRId32 " at byte %zu", what, layer, group, off);
    const uint64_t bytes = q4e_tensor_bytes(rows, cols, group);
    if (bytes > size - off)
      return Status::Error(Code::kCorrupt, "%s (layer %d): %llu bytes at offset %zu run past the file's %zu", what, layer,
                           static_cast<unsigned long long>(bytes), off, size);
    q4e_bind(base + off, static_cast<int>(rows), static_cast<int>(cols), out);
    tables->note_mapped(static_cast<size_t>(bytes), cls);  // read in place, not copied
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
    if (version != 1) return Status::Error(Code::kUnsupported, "esp32-ai header version %" PRIu32 " (1 is read)", version);
    if (hbytes < static_cast<uint32_t>(kEsp32aiHeaderV1Bytes) || hbytes > size)
      return Status::Error(Code::kCorrupt, "esp32-ai header_bytes %" PRIu32 " (at least %d, at most the file's %zu)", hbytes,
                           kEsp32aiHeaderV1Bytes, size);
    c.version = 1;
    if (flags & ~(kEsp32aiFlagTied | kEsp32aiFlagReluFfn))
      return Status::Error(Code::kUnsupported, "esp32-ai header flags 0x%" PRIx32 " (bits 0 and 1 are read)", flags);
    c.tied_head = (flags & kEsp32aiFlagTied) != 0;
    c.relu_ffn = (flags & kEsp32aiFlagReluFfn) != 0;
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

TensorClass ple_slot_class(const PleSlot& s) {
  if (!s.quant) return TensorClass::kNorm;
  if (strncmp(s.name, "token_embd", 10) == 0) return TensorClass::kEmbedding;
  if (strncmp(s.name, "output", 6) == 0) return TensorClass::kHead;
  const char* local = s.layer < 0 ? s.name : strchr(s.name + 4, '.') + 1;  // past "blk.N."
  if (strncmp(local, "attn_", 5) == 0) return TensorClass::kAttention;
  if (strncmp(local, "ffn_", 4) == 0) return TensorClass::kFfn;
  return TensorClass::kOther;  // the PLE table, projections and gates
}

int ple_slot_capacity(const PleConfig& c) { return 10 * c.n_layers + 6; }

int ple_slots(PleModel& m, PleSlot* out) {
  const PleConfig& c = m.cfg;
  const int D = c.dim, LP = c.n_layers * c.ple_dim, P = c.ple_dim, F = c.ffn;
  int n = 0;
  auto quant = [&](const char* name, int layer, int rows, int cols, MatRef* mat) {
    PleSlot& s = out[n++];
    if (layer < 0) snprintf(s.name, sizeof s.name, "%s.weight", name);
    else snprintf(s.name, sizeof s.name, "blk.%d.%s.weight", layer, name);
    s.layer = layer;
    s.quant = true;
    s.rows = rows;
    s.cols = cols;
    s.mat = mat;
    s.norm = nullptr;
  };
  auto norm = [&](const char* name, int layer, int size, const float** v) {
    quant(name, layer, 1, size, nullptr);
    out[n - 1].quant = false;
    out[n - 1].norm = v;
  };
  quant("token_embd", -1, c.input_vocab, D, &m.tok_emb);
  quant("ple_model_proj", -1, LP, D, &m.ple_model_proj);
  norm("ple_proj_norm", -1, P, &m.ple_proj_norm);
  quant("ple_table", -1, c.input_vocab, LP, &m.ple_table);
  for (int l = 0; l < c.n_layers; ++l) {
    PleLayer& L = m.layers[l];
    norm("attn_norm", l, D, &L.attn_norm);
    quant("attn_qkv", l, 3 * D, D, &L.qkv);
    quant("attn_output", l, D, D, &L.attn_proj);
    norm("ffn_norm", l, D, &L.ffn_norm);
    quant("ffn_gate", l, F, D, &L.gate);
    quant("ffn_up", l, F, D, &L.up);
    quant("ffn_down", l, D, F, &L.down);
    quant("ple_gate", l, P, D, &L.ple_gate);
    quant("ple_proj", l, D, P, &L.ple_proj);
    norm("ple_norm", l, D, &L.ple_norm);
  }
  norm("output_norm", -1, D, &m.out_norm);
  if (!c.tied_head) quant("output", -1, c.output_vocab, D, &m.output);
  return n;
}

namespace {
// Layers and slots from the tables, for a model whose cfg is set.
Status alloc_slots(PleModel* m, Arena& tables, PleSlot** slots, int* n) {
  MC_TRY(tables.alloc_array(static_cast<size_t>(m->cfg.n_layers), TensorClass::kOther, &m->layers));
  for (int l = 0; l < m->cfg.n_layers; ++l) m->layers[l] = PleLayer();
  MC_TRY(tables.alloc_array(static_cast<size_t>(ple_slot_capacity(m->cfg)), TensorClass::kOther, slots));
  *n = ple_slots(*m, *slots);
  return Status::Ok();
}

Status finish(PleModel* m) {
  if (m->cfg.tied_head) {
    m->output = m->tok_emb;
    m->output.rows = m->cfg.output_vocab;  // the first output_vocab rows (validate: <= input_vocab)
  }
  m->split_qkv();
  return m->check_shapes();
}
}  // namespace

Status esp32ai_load(const uint8_t* data, size_t size, Arena& tables, PleModel* out) {
  PleModel m;
  int header_bytes = 0;
  MC_TRY(esp32ai_read_config(data, size, &m.cfg, &header_bytes));
  PleSlot* slots = nullptr;
  int n = 0;
  MC_TRY(alloc_slots(&m, tables, &slots, &n));
  Cursor cur{data, size, static_cast<size_t>(header_bytes), &tables};
  for (int i = 0; i < n; ++i) {
    const PleSlot& s = slots[i];
    if (s.quant) MC_TRY(cur.quant(s.name, s.layer, s.rows, s.cols, s.mat, ple_slot_class(s)));
    else MC_TRY(cur.norm(s.name, s.layer, s.cols, s.norm));
  }
  MC_TRY(finish(&m));
  *out = m;
  return Status::Ok();
}

namespace {
// GGUF's int32 into an int (int32_t is `long` on some MCU toolchains).
Status get_int(const GgufFile& f, const char* key, int* out) {
  int32_t v = 0;
  MC_TRY(f.get_i32(key, &v));
  *out = static_cast<int>(v);
  return Status::Ok();
}
}  // namespace

Status ple_from_gguf(const GgufFile& f, Arena& tables, PleModel* out) {
  PleModel m;
  PleConfig& c = m.cfg;
  uint32_t version = 0;
  bool tied = true;
  MC_TRY(f.get_u32("ple.header_version", &version));
  MC_TRY(f.get_bool("ple.tied_head", &tied));
  MC_TRY(get_int(f, "ple.input_vocab", &c.input_vocab));
  MC_TRY(get_int(f, "ple.output_vocab", &c.output_vocab));
  MC_TRY(get_int(f, "ple.embedding_length", &c.dim));
  MC_TRY(get_int(f, "ple.block_count", &c.n_layers));
  MC_TRY(get_int(f, "ple.attention.head_count", &c.n_heads));
  MC_TRY(get_int(f, "ple.feed_forward_length", &c.ffn));
  MC_TRY(get_int(f, "ple.per_layer_length", &c.ple_dim));
  MC_TRY(get_int(f, "ple.context_length", &c.seq_len));
  MC_TRY(get_int(f, "ple.group_size", &c.group));
  MC_TRY(f.get_f32("ple.rope.freq_base", &c.rope_theta));
  MC_TRY(gguf_read_ffn_relu(f, &c.relu_ffn));
  if (version > 1) return Status::Error(Code::kUnsupported, "ple.header_version %" PRIu32 " (0 or 1)", version);
  c.version = static_cast<int>(version);
  c.tied_head = tied;
  MC_TRY(c.validate());
  if (c.group <= 0 || c.group > (1 << 20)) return Status::Error(Code::kCorrupt, "ple.group_size %d", c.group);
  PleSlot* slots = nullptr;
  int n = 0;
  MC_TRY(alloc_slots(&m, tables, &slots, &n));
  for (int i = 0; i < n; ++i) {
    const PleSlot& s = slots[i];
    const GgufTensor* t = f.find_tensor(s.name);
    if (!t) return Status::Error(Code::kNotFound, "tensor %s is missing", s.name);
    if (!s.quant) {
      if (t->type != DType::kF32 || t->n_dims != 1 || t->ne[0] != s.cols)
        return Status::Error(Code::kCorrupt, "tensor %s should be %d f32 values", s.name, s.cols);
      float* v = nullptr;
      MC_TRY(tables.alloc_array(static_cast<size_t>(s.cols), TensorClass::kNorm, &v));
      memcpy(v, t->data, static_cast<size_t>(s.cols) * 4);
      *s.norm = v;
      continue;
    }
    char sname[64];
    snprintf(sname, sizeof sname, "%s.scales", s.name);
    const GgufTensor* st = f.find_tensor(sname);
    if (!st) return Status::Error(Code::kNotFound, "tensor %s is missing", sname);
    const int ng = q4e_groups(s.cols, c.group);
    if (t->type != DType::kQ4E || t->n_dims != 2 || t->ne[0] != s.cols || t->ne[1] != s.rows)
      return Status::Error(Code::kCorrupt, "tensor %s should be q4e [%d, %d]", s.name, s.cols, s.rows);
    if (st->type != DType::kF16 || st->n_dims != 2 || st->ne[0] != ng || st->ne[1] != s.rows)
      return Status::Error(Code::kCorrupt, "tensor %s should be f16 [%d, %d]", sname, ng, s.rows);
    MatRef& mr = *s.mat;
    mr.type = DType::kQ4E;
    mr.data = t->data;
    mr.rows = s.rows;
    mr.cols = s.cols;
    mr.row_bytes = static_cast<size_t>((s.cols + 1) / 2);
    mr.group = c.group;
    mr.scales = st->data;
    tables.note_mapped(static_cast<size_t>(t->nbytes + st->nbytes), ple_slot_class(s));
  }
  MC_TRY(finish(&m));
  *out = m;
  return Status::Ok();
}

}  // namespace mcullm
