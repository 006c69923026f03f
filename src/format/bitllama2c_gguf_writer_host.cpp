#include "format/bitllama2c_gguf_writer_host.h"

#include <cstring>
#include <vector>

#include "format/bitllama2c_gguf.h"
#include "format/gguf_model.h"
#include "format/transformer_gguf.h"
#include "format/transformer_gguf_writer_host.h"
#include "quant/ternary.h"

namespace mcullm {

namespace {

Status add_i2s(GgufWriter* w, const std::string& name, const MatRef& m, BitLlama2cExportReport* report) {
  if (m.type != DType::kI2_S) return Status::Error(Code::kInvalidArgument, "%s is not i2_s", name.c_str());
  const size_t row_bytes = dtype_row_bytes(m.type, m.cols);
  std::vector<uint8_t> data(dtype_tensor_bytes(m.type, m.rows, m.cols), 0);
  for (int r = 0; r < m.rows; ++r) std::memcpy(data.data() + row_bytes * static_cast<size_t>(r), m.row(r), row_bytes);
  std::memcpy(data.data() + row_bytes * static_cast<size_t>(m.rows), &m.scale, 4);  // the tail: the tensor's scale
  ++report->matrices;
  report->weight_bytes += data.size();
  return w->add_tensor(name, m.type, {m.cols, m.rows}, data.data(), data.size());
}

}  // namespace

Status export_bitllama2c_gguf(const BitLlama2cModel& model, const Llama2cTokenizer* tok, const std::string& source,
                              GgufWriter* w, BitLlama2cExportReport* report) {
  MC_TRY(model.check_shapes());
  *report = BitLlama2cExportReport();
  const LlamaConfig& c = model.cfg;
  const std::string a = kBitLlama2cArch;
  w->set_string("general.architecture", a);
  w->set_string("general.name", "bitllama2.c ternary model");
  w->set_u32("general.quantization_version", 2);
  w->set_u32(a + ".context_length", static_cast<uint32_t>(c.seq_len));
  w->set_u32(a + ".embedding_length", static_cast<uint32_t>(c.dim));
  w->set_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.hidden_dim));
  w->set_u32(a + ".block_count", static_cast<uint32_t>(c.n_layers));
  w->set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  w->set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w->set_f32(a + ".attention.layer_norm_rms_epsilon", c.norm_eps);
  w->set_f32(a + ".rope.freq_base", c.rope_theta);
  w->set_u32(a + ".vocab_size", static_cast<uint32_t>(c.vocab_size));
  w->set_string("mcullm.weight_type", "i2_s");
  if (!source.empty()) w->set_string("mcullm.source", source);
  if (tok) MC_TRY(add_llama_vocab(w, *tok, c.vocab_size));

  MC_TRY(w->add_tensor("token_embd.weight", DType::kF32, {c.dim, c.vocab_size}, model.tok_emb.data,
                       static_cast<size_t>(c.dim) * static_cast<size_t>(c.vocab_size) * 4));
  MC_TRY(w->add_tensor("output_norm.weight", DType::kF32, {c.dim}, model.out_norm, static_cast<size_t>(c.dim) * 4));
  char name[64];
  for (int l = 0; l < c.n_layers; ++l) {
    const BitLlama2cLayer& L = model.layers[l];
    const struct { const char* suffix; const MatRef* m; } mats[] = {
        {"attn_q.weight", &L.wq},   {"attn_k.weight", &L.wk},   {"attn_v.weight", &L.wv}, {"attn_output.weight", &L.wo},
        {"ffn_gate.weight", &L.w1}, {"ffn_down.weight", &L.w2}, {"ffn_up.weight", &L.w3},
    };
    for (const auto& m : mats) {
      llama_tensor_name(name, sizeof name, l, m.suffix);
      MC_TRY(add_i2s(w, name, *m.m, report));
    }
  }
  return Status::Ok();
}

}  // namespace mcullm
