#include "format/bitnet_gguf_writer_host.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "format/transformer_gguf_writer_host.h"
#include "format/ternary_gguf_host.h"
#include "model/arch.h"
#include "model/sampler.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm {

const std::vector<BitnetLayout>& bitnet_layouts() {
  static const std::vector<BitnetLayout> layouts = {
      // name     arch         dim   hidden layers heads kv  vocab  seq   rope theta
      {"125M", "bitnet", 768, 3072, 11, 12, 12, 32002, 2048, 10000.0f},
      {"350M", "bitnet", 1024, 3072, 24, 16, 16, 32002, 2048, 10000.0f},
      {"1B", "bitnet", 2048, 3584, 24, 32, 32, 32002, 2048, 10000.0f},
      {"1.5B", "bitnet", 1536, 9216, 28, 32, 32, 32002, 2048, 10000.0f},
      {"2.7B", "bitnet", 3072, 7680, 24, 32, 32, 32002, 2048, 10000.0f},
      {"3.8B", "bitnet", 3840, 8192, 24, 32, 32, 32002, 2048, 10000.0f},
      {"7B", "bitnet", 4096, 12032, 32, 32, 32, 32002, 2048, 10000.0f},
      {"large", "bitnet", 1536, 4096, 24, 16, 16, 32002, 2048, 10000.0f},
      {"2B-4T", "bitnet-25", 2560, 6912, 30, 20, 5, 128256, 4096, 500000.0f},
      {"tiny", "bitnet", 256, 512, 2, 4, 2, 0, 256, 10000.0f},
      {"tiny-25", "bitnet-25", 256, 384, 2, 4, 1, 0, 256, 500000.0f},
  };
  return layouts;
}

const BitnetLayout* bitnet_layout_by_name(const std::string& name) {
  for (const BitnetLayout& l : bitnet_layouts())
    if (l.name == name) return &l;
  return nullptr;
}

namespace {

// Random ternary matrix [rows, cols] (the same draws whatever the type it is packed as).
std::vector<int8_t> random_ternary(uint64_t* state, int rows, int cols) {
  std::vector<int8_t> w(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(xorshift_u32(state) % 3u) - 1);
  return w;
}

}  // namespace

Status write_bitnet_dummy(const BitnetDummyOptions& opt, const Llama2cTokenizer& tok, GgufWriter* w,
                          BitnetDummyReport* report) {
  const BitnetLayout& L = opt.layout;
  const ArchInfo* arch = arch_info_by_gguf(L.arch.c_str());
  if (!arch || arch->family != ArchFamily::kTransformer || !arch->spec.sub_norms)  // the BitNet b1.58 block
    return Status::Error(Code::kInvalidArgument, "layout %s: architecture '%s' (bitnet or bitnet-25)", L.name.c_str(), L.arch.c_str());
  const int vocab = L.vocab > 0 ? L.vocab : tok.vocab_size();
  if (tok.vocab_size() != vocab)
    return Status::Error(Code::kInvalidArgument, "layout %s has %d tokens, the tokenizer %d", L.name.c_str(), vocab, tok.vocab_size());
  if (L.dim <= 0 || L.hidden <= 0 || L.layers <= 0 || L.heads <= 0 || L.kv_heads <= 0 || L.dim % L.heads != 0 ||
      L.heads % L.kv_heads != 0 || (L.dim / L.heads) % 2 != 0)
    return Status::Error(Code::kInvalidArgument, "layout %s: inconsistent sizes", L.name.c_str());
  if (L.dim % 128 != 0 || L.hidden % 128 != 0)
    return Status::Error(Code::kInvalidArgument, "layout %s: i2_s rows need widths that are multiples of 128 (dim %d, hidden %d)",
                         L.name.c_str(), L.dim, L.hidden);
  const DType et = opt.embedding_type;
  if (et != DType::kF32 && et != DType::kF16 && et != DType::kQ8_0)
    return Status::Error(Code::kInvalidArgument, "embedding type %s (f32, f16 or q8_0)", dtype_info(et) ? dtype_info(et)->name : "?");
  *report = BitnetDummyReport();
  const std::string p = L.arch + ".";
  w->set_string("general.architecture", L.arch);
  w->set_string("general.name", opt.name);
  w->set_u32(p + "block_count", static_cast<uint32_t>(L.layers));
  w->set_u32(p + "context_length", static_cast<uint32_t>(L.seq_len));
  w->set_u32(p + "embedding_length", static_cast<uint32_t>(L.dim));
  w->set_u32(p + "feed_forward_length", static_cast<uint32_t>(L.hidden));
  w->set_u32(p + "attention.head_count", static_cast<uint32_t>(L.heads));
  w->set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(L.kv_heads));
  w->set_f32(p + "rope.freq_base", L.rope_theta);
  w->set_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  w->set_u32(p + "vocab_size", static_cast<uint32_t>(vocab));
  w->set_string("mcullm.source", "mcullm dummy --arch " + L.arch + " --layout " + L.name + " --seed " + std::to_string(opt.seed));
  MC_TRY(add_llama_vocab(w, tok, vocab));

  uint64_t state = opt.seed ? opt.seed : 1;
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> ne, const std::vector<uint8_t>& data,
                 uint64_t params, bool ternary) -> Status {
    report->params += params;
    if (ternary) report->ternary_params += params;
    report->weight_bytes += data.size();
    return w->add_tensor(name, type, std::move(ne), data.data(), data.size());
  };
  {  // token embedding (also the head)
    const size_t row_bytes = dtype_row_bytes(et, L.dim);
    std::vector<uint8_t> data(row_bytes * static_cast<size_t>(vocab));
    std::vector<float> row(static_cast<size_t>(L.dim));
    for (int t = 0; t < vocab; ++t) {
      for (float& x : row) x = (xorshift_f32(&state) * 2.0f - 1.0f) * 0.15f;
      quantize_row(et, row.data(), data.data() + row_bytes * static_cast<size_t>(t), L.dim);
    }
    MC_TRY(add("token_embd.weight", et, {L.dim, vocab}, data, static_cast<uint64_t>(vocab) * L.dim, false));
  }
  auto ones = [](int n) {
    std::vector<uint8_t> d(static_cast<size_t>(n) * 4);
    const float one = 1.0f;
    for (int i = 0; i < n; ++i) std::memcpy(d.data() + 4 * i, &one, 4);
    return d;
  };
  const int kv = L.dim / L.heads * L.kv_heads;
  char name[64];
  for (int l = 0; l < L.layers; ++l) {
    struct { const char* suffix; int rows, cols; } mats[] = {
        {"attn_q", L.dim, L.dim},      {"attn_k", kv, L.dim},        {"attn_v", kv, L.dim},
        {"attn_output", L.dim, L.dim}, {"ffn_gate", L.hidden, L.dim}, {"ffn_up", L.hidden, L.dim},
        {"ffn_down", L.dim, L.hidden},
    };
    struct { const char* suffix; int n; } norms[] = {
        {"attn_norm", L.dim}, {"attn_sub_norm", L.dim}, {"ffn_norm", L.dim}, {"ffn_sub_norm", L.hidden}};
    for (auto& n : norms) {
      std::snprintf(name, sizeof name, "blk.%d.%s.weight", l, n.suffix);
      MC_TRY(add(name, DType::kF32, {n.n}, ones(n.n), static_cast<uint64_t>(n.n), false));
    }
    for (auto& m : mats) {
      std::snprintf(name, sizeof name, "blk.%d.%s.weight", l, m.suffix);
      const std::vector<int8_t> tw = random_ternary(&state, m.rows, m.cols);
      std::vector<uint8_t> packed;
      DType written;
      std::string note;
      MC_TRY(ternary_tensor_pack(opt.ternary_type, tw.data(), m.rows, m.cols, 1.0f / std::sqrt(static_cast<float>(m.cols)),
                                 &packed, &written, &note));
      if (!note.empty()) report->notes.push_back(std::string(name) + ": " + note);
      MC_TRY(add(name, written, {m.cols, m.rows}, packed, static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols), true));
    }
  }
  MC_TRY(add("output_norm.weight", DType::kF32, {L.dim}, ones(L.dim), static_cast<uint64_t>(L.dim), false));
  return Status::Ok();
}

}  // namespace mcullm
