#include "dummy_gguf.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "format/ternary_gguf_host.h"
#include "format/transformer_gguf.h"
#include "format/transformer_gguf_writer_host.h"
#include "model/sampler.h"
#include "quant/blocks.h"

namespace mcullm {

namespace {

// Per architecture: the order its layer tensors are written in (suffixes of format/transformer_gguf.h's
// table, which says the shapes), and how it fills them.
struct DummyArch {
  const char* gguf_arch;
  const char* default_name;
  const char* order[12];
  bool random_vectors;   // norms 1 +- 0.2 and biases +-0.5 (else norms 1.0)
  bool vocab_key;        // <arch>.vocab_size
  bool dense_linear;     // dense linear layers too
  bool any_embedding;    // any dense embedding type (else f32, f16 or q8_0)
};
#define MC_BITNET_ORDER                                                                                      \
  {"attn_norm.weight", "attn_sub_norm.weight", "ffn_norm.weight", "ffn_sub_norm.weight", "attn_q.weight",   \
   "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}
const DummyArch kDummyArchs[] = {
    {"bitnet", "mcullm dummy bitnet", MC_BITNET_ORDER, false, true, false, false},
    {"bitnet-25", "mcullm dummy bitnet", MC_BITNET_ORDER, false, true, false, false},
    {"qwen2", "mcullm dummy qwen2",
     {"attn_norm.weight", "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias", "attn_v.weight", "attn_v.bias",
      "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_norm.weight"},
     true, false, true, true},
};
#undef MC_BITNET_ORDER

float uniform(uint64_t* state, float a) { return (xorshift_f32(state) * 2.0f - 1.0f) * a; }

// rows x cols random weights as `type`, row by row.
std::vector<uint8_t> dense_tensor(uint64_t* state, DType type, int rows, int cols, float a) {
  const size_t row_bytes = dtype_row_bytes(type, cols);
  std::vector<uint8_t> data(row_bytes * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    for (float& x : row) x = uniform(state, a);
    quantize_row(type, row.data(), data.data() + row_bytes * static_cast<size_t>(r), cols);
  }
  return data;
}

std::vector<uint8_t> vector_bytes(uint64_t* state, int n, float center, float a) {
  std::vector<float> v(static_cast<size_t>(n), center);
  if (a > 0)
    for (float& x : v) x = center + uniform(state, a);
  std::vector<uint8_t> d(v.size() * 4);
  std::memcpy(d.data(), v.data(), d.size());
  return d;
}

bool is_dense(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4G64;
}

const char* type_name(DType t) { return dtype_info(t) ? dtype_info(t)->name : "?"; }

}  // namespace

Status write_gguf_dummy(const GgufDummyOptions& opt, const Llama2cTokenizer& tok, GgufWriter* w, GgufDummyReport* report) {
  const ModelLayout& L = opt.layout;
  const DummyArch* da = nullptr;
  for (const DummyArch& d : kDummyArchs)
    if (L.arch == d.gguf_arch) da = &d;
  const ArchInfo* arch = arch_info_by_gguf(L.arch.c_str());
  if (!da || !arch)
    return Status::Error(Code::kInvalidArgument, "layout %s: architecture '%s' (bitnet, bitnet-25 or qwen2)", L.name.c_str(),
                         L.arch.c_str());
  const int vocab = L.vocab > 0 ? L.vocab : tok.vocab_size();
  if (tok.vocab_size() != vocab)
    return Status::Error(Code::kInvalidArgument, "layout %s has %d tokens, the tokenizer %d", L.name.c_str(), vocab,
                         tok.vocab_size());
  if (L.dim <= 0 || L.hidden <= 0 || L.layers <= 0 || L.heads <= 0 || L.kv_heads <= 0 || L.dim % L.heads != 0 ||
      L.heads % L.kv_heads != 0 || (L.dim / L.heads) % 2 != 0)
    return Status::Error(Code::kInvalidArgument, "layout %s: inconsistent sizes", L.name.c_str());
  const DType lt = opt.linear_type, et = opt.embedding_type;
  const bool ternary = is_ternary_matrix_type(lt);
  if (!ternary && !(da->dense_linear && is_dense(lt)))
    return Status::Error(Code::kInvalidArgument, "linear type %s (i2_s, tl1, tl2%s)", type_name(lt),
                         da->dense_linear ? ", f32, f16, q8_0, q4_0 or q4g64" : "");
  if (ternary && (L.dim % 128 != 0 || L.hidden % 128 != 0))
    return Status::Error(Code::kInvalidArgument, "layout %s: i2_s rows need widths that are multiples of 128 (dim %d, hidden %d)",
                         L.name.c_str(), L.dim, L.hidden);
  if (!ternary && (!dtype_row_fits(lt, L.dim) || !dtype_row_fits(lt, L.hidden)))
    return Status::Error(Code::kInvalidArgument, "rows of %d or %d weights do not fit %s", L.dim, L.hidden, type_name(lt));
  if (!da->any_embedding && et != DType::kF32 && et != DType::kF16 && et != DType::kQ8_0)
    return Status::Error(Code::kInvalidArgument, "embedding type %s (f32, f16 or q8_0)", type_name(et));
  if (!is_dense(et) || !dtype_row_fits(et, L.dim))
    return Status::Error(Code::kInvalidArgument, "embedding type %s (a dense type that holds rows of %d)", type_name(et), L.dim);
  *report = GgufDummyReport();
  const std::string p = L.arch + ".";
  w->set_string("general.architecture", L.arch);
  w->set_string("general.name", opt.name.empty() ? da->default_name : opt.name);
  w->set_u32(p + "block_count", static_cast<uint32_t>(L.layers));
  w->set_u32(p + "context_length", static_cast<uint32_t>(L.seq_len));
  w->set_u32(p + "embedding_length", static_cast<uint32_t>(L.dim));
  w->set_u32(p + "feed_forward_length", static_cast<uint32_t>(L.hidden));
  w->set_u32(p + "attention.head_count", static_cast<uint32_t>(L.heads));
  w->set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(L.kv_heads));
  w->set_f32(p + "rope.freq_base", L.rope_theta);
  w->set_f32(p + "attention.layer_norm_rms_epsilon", gguf_arch_keys(da->gguf_arch)->norm_eps);
  if (da->vocab_key) w->set_u32(p + "vocab_size", static_cast<uint32_t>(vocab));
  if (opt.relu_ffn) {
    if (!gguf_arch_keys(da->gguf_arch)->ffn_act_key)
      return Status::Error(Code::kInvalidArgument, "a ReLU FFN needs --arch qwen2 (%s files hold no activation key)", da->gguf_arch);
    w->set_string(kLlamaFfnKey, "relu");
  }
  w->set_string("mcullm.source", "mcullm dummy --arch " + L.arch + " --layout " + L.name + " --seed " + std::to_string(opt.seed));
  MC_TRY(add_llama_vocab(w, tok, vocab));

  uint64_t state = opt.seed ? opt.seed : 1;
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> ne, const std::vector<uint8_t>& data,
                 bool linear) -> Status {
    uint64_t params = 1;
    for (int64_t n : ne) params *= static_cast<uint64_t>(n);
    report->params += params;
    if (linear) report->linear_params += params;
    report->weight_bytes += data.size();
    return w->add_tensor(name, type, std::move(ne), data.data(), data.size());
  };
  auto norm = [&](int n) { return vector_bytes(&state, n, 1.0f, da->random_vectors ? 0.2f : 0.0f); };
  MC_TRY(add("token_embd.weight", et, {L.dim, vocab}, dense_tensor(&state, et, vocab, L.dim, 0.15f), false));
  LlamaConfig c;
  c.dim = L.dim;
  c.hidden_dim = L.hidden;
  c.n_heads = L.heads;
  c.n_kv_heads = L.kv_heads;
  int count = 0;
  const LayerTensor* tensors = transformer_layer_tensors(&count);
  char name[64];
  for (int l = 0; l < L.layers; ++l) {
    for (const char* suffix : da->order) {
      if (!suffix) break;
      const LayerTensor* t = tensors;
      while (t < tensors + count && std::strcmp(t->suffix, suffix) != 0) ++t;
      std::snprintf(name, sizeof name, "blk.%d.%s", l, suffix);
      const int rows = t->length(c), cols = LayerTensor::width(t->cols, c);
      if (t->vec) {
        const bool bias = t->need == LayerTensor::kQkvBias;
        MC_TRY(add(name, DType::kF32, {rows}, bias ? vector_bytes(&state, rows, 0.0f, 0.5f) : norm(rows), false));
        continue;
      }
      const float a = 1.0f / std::sqrt(static_cast<float>(cols));
      if (!ternary) {
        MC_TRY(add(name, lt, {cols, rows}, dense_tensor(&state, lt, rows, cols, a), true));
        continue;
      }
      std::vector<int8_t> tw(static_cast<size_t>(rows) * static_cast<size_t>(cols));
      for (int8_t& v : tw) v = static_cast<int8_t>(static_cast<int>(xorshift_u32(&state) % 3u) - 1);
      std::vector<uint8_t> packed;
      DType written;
      std::string note;
      MC_TRY(ternary_tensor_pack(lt, tw.data(), rows, cols, a, &packed, &written, &note));
      if (!note.empty()) report->notes.push_back(std::string(name) + ": " + note);
      MC_TRY(add(name, written, {cols, rows}, packed, true));
    }
  }
  MC_TRY(add("output_norm.weight", DType::kF32, {L.dim}, norm(L.dim), false));
  if (!opt.tied_head)
    MC_TRY(add("output.weight", et, {L.dim, vocab}, dense_tensor(&state, et, vocab, L.dim, 0.15f), false));
  return Status::Ok();
}

}  // namespace mcullm
