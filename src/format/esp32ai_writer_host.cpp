#include "format/esp32ai_writer_host.h"

#include <cstring>

#include "format/transformer_gguf.h"
#include "quant/q4e.h"

namespace mcullm {

namespace {

void put32(std::vector<uint8_t>* b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_bytes(std::vector<uint8_t>* b, const void* p, size_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(p);
  b->insert(b->end(), s, s + n);
}

std::vector<PleSlot> slots_of(PleModel& m) {
  std::vector<PleSlot> s(static_cast<size_t>(ple_slot_capacity(m.cfg)));
  s.resize(static_cast<size_t>(ple_slots(m, s.data())));
  return s;
}

size_t scale_bytes(const MatRef& w) { return static_cast<size_t>(w.rows) * q4e_groups(w.cols, w.group) * 2; }

}  // namespace

Status esp32ai_write_bytes(const PleModel& model, std::vector<uint8_t>* out) {
  PleModel m = model;
  MC_TRY(m.check_shapes());
  const PleConfig& c = m.cfg;
  out->clear();
  if (c.version == 0) {
    if (!c.tied_head || c.input_vocab != c.output_vocab)
      return Status::Error(Code::kUnsupported, "an esp32-ai v0 header holds only a tied head over the whole vocabulary");
    if (c.relu_ffn) return Status::Error(Code::kUnsupported, "an esp32-ai v0 header has no room for a ReLU FFN (v1 has)");
    put32(out, kEsp32aiMagicV0);
    for (int v : {c.input_vocab, c.dim, c.n_layers, c.n_heads, c.ffn, c.ple_dim, c.seq_len, c.group}) put32(out, static_cast<uint32_t>(v));
  } else {
    put32(out, kEsp32aiMagicV1);
    put32(out, 1);
    put32(out, static_cast<uint32_t>(kEsp32aiHeaderV1Bytes));
    put32(out, (c.tied_head ? kEsp32aiFlagTied : 0u) | (c.relu_ffn ? kEsp32aiFlagReluFfn : 0u));
    for (int v : {c.input_vocab, c.output_vocab, c.dim, c.n_layers, c.n_heads, c.ffn, c.ple_dim, c.seq_len, c.group})
      put32(out, static_cast<uint32_t>(v));
  }
  put_bytes(out, &c.rope_theta, 4);
  for (const PleSlot& s : slots_of(m)) {
    if (!s.quant) {
      put_bytes(out, *s.norm, static_cast<size_t>(s.cols) * 4);
      continue;
    }
    const MatRef& w = *s.mat;
    put32(out, static_cast<uint32_t>(w.group));
    put_bytes(out, w.data, static_cast<size_t>(w.rows) * w.row_bytes);
    put_bytes(out, w.scales, scale_bytes(w));
  }
  return Status::Ok();
}

Status export_ple_gguf(const PleModel& model, const std::string& source, GgufWriter* w) {
  PleModel m = model;
  MC_TRY(m.check_shapes());
  const PleConfig& c = m.cfg;
  w->set_string("general.architecture", kPleGgufArch);
  w->set_string("general.name", "esp32-ai PLE model");
  if (!source.empty()) w->set_string("mcullm.source", source);
  w->set_u32("ple.header_version", static_cast<uint32_t>(c.version));
  w->set_bool("ple.tied_head", c.tied_head);
  w->set_i32("ple.input_vocab", c.input_vocab);
  w->set_i32("ple.output_vocab", c.output_vocab);
  w->set_i32("ple.embedding_length", c.dim);
  w->set_i32("ple.block_count", c.n_layers);
  w->set_i32("ple.attention.head_count", c.n_heads);
  w->set_i32("ple.feed_forward_length", c.ffn);
  w->set_i32("ple.per_layer_length", c.ple_dim);
  w->set_i32("ple.context_length", c.seq_len);
  w->set_i32("ple.group_size", c.group);
  w->set_f32("ple.rope.freq_base", c.rope_theta);
  if (c.relu_ffn) w->set_string(kLlamaFfnKey, "relu");
  for (const PleSlot& s : slots_of(m)) {
    if (!s.quant) {
      MC_TRY(w->add_tensor(s.name, DType::kF32, {s.cols}, *s.norm, static_cast<size_t>(s.cols) * 4));
      continue;
    }
    const MatRef& q = *s.mat;
    if (q.group != c.group)
      return Status::Error(Code::kUnsupported, "%s has group size %d, the model %d: GGUF keeps one group size", s.name, q.group,
                           c.group);
    MC_TRY(w->add_tensor(s.name, DType::kQ4E, {q.cols, q.rows}, q.data, static_cast<size_t>(q.rows) * q.row_bytes));
    MC_TRY(w->add_tensor(std::string(s.name) + ".scales", DType::kF16, {q4e_groups(q.cols, q.group), q.rows}, q.scales,
                         scale_bytes(q)));
  }
  return Status::Ok();
}

}  // namespace mcullm
