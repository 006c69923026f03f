#include "format/qwen2_gguf_writer_host.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "format/transformer_gguf_writer_host.h"
#include "format/transformer_gguf.h"
#include "format/ternary_gguf_host.h"
#include "model/sampler.h"
#include "quant/blocks.h"

namespace mcullm {

const std::vector<Qwen2Layout>& qwen2_layouts() {
  static const std::vector<Qwen2Layout> layouts = {
      // name   dim  hidden layers heads kv vocab  seq
      {"ref", 896, 4864, 24, 14, 2, 32000, 512},
      {"small", 256, 768, 8, 4, 2, 0, 256},
      {"tiny", 128, 384, 4, 4, 2, 0, 128},
  };
  return layouts;
}

const Qwen2Layout* qwen2_layout_by_name(const std::string& name) {
  for (const Qwen2Layout& l : qwen2_layouts())
    if (l.name == name) return &l;
  return nullptr;
}

std::string qwen2_layout_names() {
  std::string s;
  for (const Qwen2Layout& l : qwen2_layouts()) s += (s.empty() ? "" : ", ") + l.name;
  return s;
}

namespace {

float uniform(uint64_t* state, float a) { return (xorshift_f32(state) * 2.0f - 1.0f) * a; }

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> d(v.size() * 4);
  std::memcpy(d.data(), v.data(), d.size());
  return d;
}

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

bool is_dense(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4G64;
}

}  // namespace

Status write_qwen2_dummy(const Qwen2DummyOptions& opt, const Llama2cTokenizer& tok, GgufWriter* w,
                         Qwen2DummyReport* report) {
  const Qwen2Layout& L = opt.layout;
  const int vocab = L.vocab > 0 ? L.vocab : tok.vocab_size();
  if (tok.vocab_size() != vocab)
    return Status::Error(Code::kInvalidArgument, "layout %s has %d tokens, the tokenizer %d", L.name.c_str(), vocab,
                         tok.vocab_size());
  if (L.dim <= 0 || L.hidden <= 0 || L.layers <= 0 || L.heads <= 0 || L.kv_heads <= 0 || L.dim % L.heads != 0 ||
      L.heads % L.kv_heads != 0 || (L.dim / L.heads) % 2 != 0)
    return Status::Error(Code::kInvalidArgument, "layout %s: inconsistent sizes", L.name.c_str());
  const bool ternary = is_ternary_matrix_type(opt.linear_type);
  if (!ternary && !is_dense(opt.linear_type))
    return Status::Error(Code::kInvalidArgument, "linear type %s (i2_s, tl1, tl2, f32, f16, q8_0, q4_0 or q4g64)",
                         dtype_info(opt.linear_type) ? dtype_info(opt.linear_type)->name : "?");
  if (ternary && (L.dim % 128 != 0 || L.hidden % 128 != 0))
    return Status::Error(Code::kInvalidArgument, "layout %s: i2_s rows need widths that are multiples of 128 (dim %d, hidden %d)",
                         L.name.c_str(), L.dim, L.hidden);
  if (!ternary && (!dtype_row_fits(opt.linear_type, L.dim) || !dtype_row_fits(opt.linear_type, L.hidden)))
    return Status::Error(Code::kInvalidArgument, "rows of %d or %d weights do not fit %s", L.dim, L.hidden,
                         dtype_info(opt.linear_type)->name);
  if (!is_dense(opt.embedding_type) || !dtype_row_fits(opt.embedding_type, L.dim))
    return Status::Error(Code::kInvalidArgument, "embedding type %s (a dense type that holds rows of %d)",
                         dtype_info(opt.embedding_type) ? dtype_info(opt.embedding_type)->name : "?", L.dim);
  *report = Qwen2DummyReport();
  const std::string p = std::string("qwen2.");
  w->set_string("general.architecture", "qwen2");
  w->set_string("general.name", opt.name);
  w->set_u32(p + "block_count", static_cast<uint32_t>(L.layers));
  w->set_u32(p + "context_length", static_cast<uint32_t>(L.seq_len));
  w->set_u32(p + "embedding_length", static_cast<uint32_t>(L.dim));
  w->set_u32(p + "feed_forward_length", static_cast<uint32_t>(L.hidden));
  w->set_u32(p + "attention.head_count", static_cast<uint32_t>(L.heads));
  w->set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(L.kv_heads));
  w->set_f32(p + "rope.freq_base", 1000000.0f);
  w->set_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  w->set_string("mcullm.source", "mcullm dummy --arch qwen2 --layout " + L.name + " --seed " + std::to_string(opt.seed));
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
  auto vec = [&](int n, float center, float a) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = center + uniform(&state, a);
    return f32_bytes(v);
  };
  const DType et = opt.embedding_type;
  MC_TRY(add("token_embd.weight", et, {L.dim, vocab}, dense_tensor(&state, et, vocab, L.dim, 0.15f), false));
  const int kv = L.dim / L.heads * L.kv_heads;
  char name[64];
  for (int l = 0; l < L.layers; ++l) {
    auto blk = [&](const char* suffix) {
      std::snprintf(name, sizeof name, "blk.%d.%s", l, suffix);
      return std::string(name);
    };
    MC_TRY(add(blk("attn_norm.weight"), DType::kF32, {L.dim}, vec(L.dim, 1.0f, 0.2f), false));
    struct { const char* suffix; int rows, cols; bool bias; } mats[] = {
        {"attn_q", L.dim, L.dim, true},        {"attn_k", kv, L.dim, true},           {"attn_v", kv, L.dim, true},
        {"attn_output", L.dim, L.dim, false}, {"ffn_gate", L.hidden, L.dim, false}, {"ffn_up", L.hidden, L.dim, false},
        {"ffn_down", L.dim, L.hidden, false},
    };
    for (auto& m : mats) {
      const std::string wname = blk((std::string(m.suffix) + ".weight").c_str());
      const float a = 1.0f / std::sqrt(static_cast<float>(m.cols));
      if (ternary) {
        std::vector<int8_t> tw(static_cast<size_t>(m.rows) * static_cast<size_t>(m.cols));
        for (int8_t& v : tw) v = static_cast<int8_t>(static_cast<int>(xorshift_u32(&state) % 3u) - 1);
        std::vector<uint8_t> packed;
        DType written;
        std::string note;
        MC_TRY(ternary_tensor_pack(opt.linear_type, tw.data(), m.rows, m.cols, a, &packed, &written, &note));
        if (!note.empty()) report->notes.push_back(wname + ": " + note);
        MC_TRY(add(wname, written, {m.cols, m.rows}, packed, true));
      } else {
        MC_TRY(add(wname, opt.linear_type, {m.cols, m.rows},
                   dense_tensor(&state, opt.linear_type, m.rows, m.cols, a), true));
      }
      if (m.bias) MC_TRY(add(blk((std::string(m.suffix) + ".bias").c_str()), DType::kF32, {m.rows}, vec(m.rows, 0.0f, 0.5f), false));
    }
    MC_TRY(add(blk("ffn_norm.weight"), DType::kF32, {L.dim}, vec(L.dim, 1.0f, 0.2f), false));
  }
  MC_TRY(add("output_norm.weight", DType::kF32, {L.dim}, vec(L.dim, 1.0f, 0.2f), false));
  if (!opt.tied_head)
    MC_TRY(add("output.weight", et, {L.dim, vocab}, dense_tensor(&state, et, vocab, L.dim, 0.15f), false));
  return Status::Ok();
}

}  // namespace mcullm
