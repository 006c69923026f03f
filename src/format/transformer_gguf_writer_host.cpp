#include "format/transformer_gguf_writer_host.h"

#include "format/transformer_gguf.h"
#include "quant/blocks.h"
#include "tokenizer/pretokenizer.h"

namespace mcullm {

namespace {

std::string to_spm_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ') out += "\xE2\x96\x81";
    else out.push_back(c);
  }
  return out;
}

bool is_byte_piece(const std::string& p) {
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>';
}

Status add_matrix(GgufWriter* w, const std::string& name, const MatRef& m, DType want, GgufExportReport* report) {
  if (m.type == DType::kI2_S || m.type == DType::kTL1 || m.type == DType::kTL2) {  // ternary: the bytes as read
    const size_t nbytes = dtype_tensor_bytes(m.type, m.rows, m.cols);
    ++report->matrices;
    report->weight_bytes += nbytes;
    return w->add_tensor(name, m.type, {m.cols, m.rows}, m.data, nbytes);
  }
  DType type = want;
  if (!dtype_row_fits(type, m.cols)) {
    report->notes.push_back(name + ": " + std::to_string(m.cols) + " columns do not fill whole " +
                            dtype_info(want)->name + " blocks, kept f32");
    ++report->kept_f32;
    type = DType::kF32;
  }
  const size_t row_bytes = dtype_row_bytes(type, m.cols);
  std::vector<uint8_t> data(row_bytes * static_cast<size_t>(m.rows));
  std::vector<float> row(static_cast<size_t>(m.cols));
  for (int r = 0; r < m.rows; ++r) {
    if (!dequantize_row_any(m.type, m.row(r), row.data(), m.cols) ||
        !quantize_row(type, row.data(), data.data() + row_bytes * static_cast<size_t>(r), m.cols))
      return Status::Error(Code::kUnsupported, "%s: cannot convert rows of type %u", name.c_str(), static_cast<unsigned>(m.type));
  }
  ++report->matrices;
  report->weight_bytes += data.size();
  return w->add_tensor(name, type, {m.cols, m.rows}, data.data(), data.size());
}

Status add_vector(GgufWriter* w, const std::string& name, const float* v, int n) {
  return w->add_tensor(name, DType::kF32, {n}, v, static_cast<size_t>(n) * 4);
}

}  // namespace

Status add_llama_vocab(GgufWriter* w, const Llama2cTokenizer& tok, int vocab_size) {
  if (tok.vocab_size() != vocab_size)
    return Status::Error(Code::kInvalidArgument, "tokenizer has %d tokens, the model %d", tok.vocab_size(), vocab_size);
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int i = 0; i < tok.vocab_size(); ++i) {
    pieces.push_back(to_spm_spaces(tok.piece(i)));
    scores.push_back(tok.score(i));
    // llama.cpp token types: 1 normal, 2 unknown, 3 control, 6 byte
    types.push_back(i == 0 ? 2 : (i == tok.bos_id() || i == tok.eos_id()) ? 3 : is_byte_piece(tok.piece(i)) ? 6 : 1);
  }
  w->set_string("tokenizer.ggml.model", "llama");
  w->set_string_array("tokenizer.ggml.tokens", pieces);
  w->set_f32_array("tokenizer.ggml.scores", scores);
  w->set_i32_array("tokenizer.ggml.token_type", types);
  w->set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tok.bos_id()));
  w->set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tok.eos_id()));
  w->set_u32("tokenizer.ggml.unknown_token_id", 0);
  w->set_bool("tokenizer.ggml.add_bos_token", true);
  return Status::Ok();
}

Status add_bpe_vocab(GgufWriter* w, const BpeVocab& v, int vocab_size) {
  if (v.tokens.size() > static_cast<size_t>(vocab_size))
    return Status::Error(Code::kInvalidArgument, "tokenizer has %zu tokens, the model %d", v.tokens.size(), vocab_size);
  std::vector<int32_t> types;
  for (size_t i = 0; i < v.tokens.size(); ++i)
    types.push_back(static_cast<int32_t>(v.types.empty() ? TokenType::kNormal : v.types[i]));
  std::vector<std::string> merges;
  merges.reserve(v.merges.size());
  for (const auto& m : v.merges) merges.push_back(m.first + " " + m.second);
  w->set_string("tokenizer.ggml.model", "gpt2");
  w->set_string("tokenizer.ggml.pre", pretokenizer_name(v.pre));
  w->set_string_array("tokenizer.ggml.tokens", v.tokens);
  w->set_i32_array("tokenizer.ggml.token_type", types);
  w->set_string_array("tokenizer.ggml.merges", merges);
  if (v.bos >= 0) w->set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  if (v.eos >= 0) w->set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (v.eot >= 0) w->set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(v.eot));
  w->set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (v.nfc) w->set_bool("mcullm.tokenizer.nfc", true);  // read back by load/tokenizer_loader_host.cpp
  return Status::Ok();
}

Status export_transformer_gguf(const TransformerModel& model, const Llama2cTokenizer* tok, const GgufExportOptions& opt,
                               GgufWriter* w, GgufExportReport* report) {
  MC_TRY(model.check_shapes());
  const GgufArchKeys* keys = gguf_arch_keys(opt.gguf_arch);
  if (!keys) return Status::Error(Code::kInvalidArgument, "architecture %s is not one of the llama family", opt.gguf_arch);
  if (!model.whole()) return Status::Error(Code::kInvalidArgument, "only a whole model is written");
  *report = GgufExportReport();
  const LlamaConfig& c = model.cfg;
  const std::string p = std::string(opt.gguf_arch) + ".";
  w->set_string("general.architecture", opt.gguf_arch);
  w->set_string("general.name", opt.name);
  w->set_u32("general.quantization_version", 2);
  w->set_u32(p + "context_length", static_cast<uint32_t>(c.seq_len));
  w->set_u32(p + "embedding_length", static_cast<uint32_t>(c.dim));
  w->set_u32(p + "feed_forward_length", static_cast<uint32_t>(c.hidden_dim));
  w->set_u32(p + "block_count", static_cast<uint32_t>(c.n_layers));
  w->set_u32(p + "attention.head_count", static_cast<uint32_t>(c.n_heads));
  w->set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w->set_u32(p + "rope.dimension_count", static_cast<uint32_t>(c.head_dim()));
  w->set_f32(p + "attention.layer_norm_rms_epsilon", c.norm_eps);
  w->set_f32(p + "rope.freq_base", c.rope_theta);
  w->set_u32(p + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  w->set_string("mcullm.weight_type", dtype_info(model.spec.ternary ? model.layers[0].wq.type : opt.weight_type)->name);
  if (keys->ffn_act_key && model.spec.act == FfnAct::kRelu) w->set_string(kLlamaFfnKey, "relu");
  if (!opt.source.empty()) w->set_string("mcullm.source", opt.source);

  if (tok) MC_TRY(add_llama_vocab(w, *tok, c.vocab_size));

  const bool four_bit = opt.weight_type == DType::kQ4_0 || opt.weight_type == DType::kQ4G64;
  const DType embd = opt.has_embedding_type ? opt.embedding_type : four_bit ? DType::kQ8_0 : opt.weight_type;
  MC_TRY(add_matrix(w, "token_embd.weight", model.tok_emb, embd, report));
  if (!model.tied_output) MC_TRY(add_matrix(w, "output.weight", model.output, embd, report));
  MC_TRY(add_vector(w, "output_norm.weight", model.out_norm, c.dim));
  int count = 0;
  const LayerTensor* tensors = transformer_layer_tensors(&count);
  char name[64];
  for (int l = 0; l < c.n_layers; ++l) {
    const TransformerLayer& L = model.layers[l];
    for (int i = 0; i < count; ++i) {
      const LayerTensor& t = tensors[i];
      if (!t.in(model.spec)) continue;
      llama_tensor_name(name, sizeof name, l, t.suffix);
      MC_TRY(t.mat ? add_matrix(w, name, L.*t.mat, opt.weight_type, report) : add_vector(w, name, L.*t.vec, t.length(c)));
    }
  }
  return Status::Ok();
}

}  // namespace mcullm
