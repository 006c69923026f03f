#include "load/hf_checkpoint_host.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "format/safetensors_host.h"
#include "format/ternary_gguf_host.h"
#include "load/ternarize_host.h"
#include "load/tokenizer_loader_host.h"
#include "quant/dtype.h"

namespace mcullm {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

Status read_json(const std::string& path, json* out) {
  MappedFile f;
  MC_TRY(f.open(path));
  try {
    *out = json::parse(f.data(), f.data() + f.size());
  } catch (const json::exception& e) {
    return Status::Error(Code::kCorrupt, "%s is not valid JSON: %s", path.c_str(), e.what());
  }
  if (!out->is_object()) return Status::Error(Code::kCorrupt, "%s is not a JSON object", path.c_str());
  return Status::Ok();
}

// An integer key in [1, 2^30]; absent: `def` when def > 0, else an error.
Status int_key(const json& j, const std::string& file, const char* key, int def, int* out) {
  if (!j.contains(key) || j[key].is_null()) {
    if (def > 0) return *out = def, Status::Ok();
    return Status::Error(Code::kCorrupt, "%s: key '%s' is missing", file.c_str(), key);
  }
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 30))
    return Status::Error(Code::kCorrupt, "%s: key '%s' is not a positive integer", file.c_str(), key);
  *out = static_cast<int>(v.get<int64_t>());
  return Status::Ok();
}

Status float_key(const json& j, const std::string& file, const char* key, bool required, float def, float* out) {
  if (!j.contains(key) || j[key].is_null()) {
    if (!required) return *out = def, Status::Ok();
    return Status::Error(Code::kCorrupt, "%s: key '%s' is missing", file.c_str(), key);
  }
  const double v = j[key].is_number() ? j[key].get<double>() : NAN;
  if (!(std::fabs(v) < 1e30)) return Status::Error(Code::kCorrupt, "%s: key '%s' is not a finite number", file.c_str(), key);
  *out = static_cast<float>(v);
  return Status::Ok();
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The safetensors files of the folder and which holds each tensor.
struct Shards {
  std::vector<std::unique_ptr<MappedFile>> maps;
  std::vector<SafetensorsFile> files;
  std::map<std::string, int> where;  // tensor -> files index
  std::string index;                 // the index file's path, when sharded
};

Status open_shards(const std::string& dir, Shards* s) {
  auto open_one = [&](const std::string& path) -> Status {
    auto m = std::make_unique<MappedFile>();
    MC_TRY(m->open(path));
    SafetensorsFile f;
    MC_TRY(f.parse(m->data(), m->size(), path));
    s->maps.push_back(std::move(m));
    s->files.push_back(std::move(f));
    return Status::Ok();
  };
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (fs::exists(index)) {
    s->index = index;
    json j;
    MC_TRY(read_json(index, &j));
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      return Status::Error(Code::kCorrupt, "%s: no weight_map object", index.c_str());
    std::map<std::string, int> opened;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        return Status::Error(Code::kCorrupt, "%s: tensor '%.80s' maps to no file name", index.c_str(), it.key().c_str());
      const std::string name = it.value().get<std::string>();
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        return Status::Error(Code::kCorrupt, "%s: tensor '%.80s' names '%.80s', not a file of the folder", index.c_str(),
                             it.key().c_str(), name.c_str());
      auto o = opened.find(name);
      if (o == opened.end()) {
        const std::string path = dir + "/" + name;
        if (!fs::exists(path))
          return Status::Error(Code::kNotFound, "%s: tensor '%.80s' is in %s, which is missing", index.c_str(),
                               it.key().c_str(), path.c_str());
        MC_TRY(open_one(path));
        o = opened.emplace(name, static_cast<int>(s->files.size()) - 1).first;
      }
      if (!s->files[o->second].find(it.key()))
        return Status::Error(Code::kCorrupt, "%s: tensor '%.80s' is not in %s, which the index names", s->files[o->second].label().c_str(),
                             it.key().c_str(), name.c_str());
      s->where[it.key()] = o->second;
    }
    return Status::Ok();
  }
  if (!fs::exists(single))
    return Status::Error(Code::kNotFound, "%s: neither model.safetensors nor model.safetensors.index.json", dir.c_str());
  MC_TRY(open_one(single));
  for (const SafetensorsTensor& t : s->files[0].tensors()) s->where[t.name] = 0;
  return Status::Ok();
}

// GGUF's adjacent-pair order of a q / k matrix (or bias) with `heads` heads of `hd` rows, from HF's halves.
void unpermute_rows(float* m, int heads, int hd, int cols) {
  std::vector<float> tmp(static_cast<size_t>(hd) * cols);
  for (int h = 0; h < heads; ++h) {
    float* head = m + static_cast<size_t>(h) * hd * cols;
    for (int i = 0; i < hd / 2; ++i)
      for (int j = 0; j < 2; ++j)
        std::copy(head + static_cast<size_t>(j * hd / 2 + i) * cols, head + static_cast<size_t>(j * hd / 2 + i + 1) * cols,
                  tmp.begin() + static_cast<size_t>(2 * i + j) * cols);
    std::copy(tmp.begin(), tmp.end(), head);
  }
}

}  // namespace

Status load_hf_checkpoint(const std::string& dir, HfCheckpoint* ck) {
  ck->dir = dir;
  const std::string cfg_path = dir + "/config.json";
  if (!fs::exists(cfg_path)) return Status::Error(Code::kNotFound, "%s: no config.json (not a Hugging Face model folder)", dir.c_str());
  json j;
  MC_TRY(read_json(cfg_path, &j));
  const char* C = cfg_path.c_str();
  if (!j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string())
    return Status::Error(Code::kCorrupt, "%s: key 'architectures' is missing", C);
  ck->hf_arch = j["architectures"][0].get<std::string>();
  ck->arch = arch_info_by_hf_class(ck->hf_arch.c_str());
  if (!ck->arch) {
    std::string known;
    for (int i = 0; i < n_archs(); ++i)
      if (const char* h = arch_table()[i].hf_class) known += (known.empty() ? "" : ", ") + std::string(h);
    return Status::Error(Code::kUnsupported, "%s: architecture '%.60s' (we read %s)", C, ck->hf_arch.c_str(), known.c_str());
  }
  BlockSpec spec = ck->arch->spec;
  spec.ternary = false;  // a checkpoint's linear layers are float; convert --type i2_s makes them ternary
  LlamaConfig c;
  MC_TRY(int_key(j, cfg_path, "hidden_size", 0, &c.dim));
  MC_TRY(int_key(j, cfg_path, "intermediate_size", 0, &c.hidden_dim));
  MC_TRY(int_key(j, cfg_path, "num_hidden_layers", 0, &c.n_layers));
  MC_TRY(int_key(j, cfg_path, "num_attention_heads", 0, &c.n_heads));
  MC_TRY(int_key(j, cfg_path, "num_key_value_heads", c.n_heads, &c.n_kv_heads));
  MC_TRY(int_key(j, cfg_path, "vocab_size", 0, &c.vocab_size));
  MC_TRY(int_key(j, cfg_path, "max_position_embeddings", 0, &c.seq_len));
  MC_TRY(float_key(j, cfg_path, "rms_norm_eps", true, 0.0f, &c.norm_eps));
  MC_TRY(float_key(j, cfg_path, "rope_theta", false, 10000.0f, &c.rope_theta));  // Hugging Face's default
  bool tied = false;  // LlamaConfig's and Qwen2Config's default
  if (j.contains("tie_word_embeddings") && !j["tie_word_embeddings"].is_null()) {
    if (!j["tie_word_embeddings"].is_boolean()) return Status::Error(Code::kCorrupt, "%s: tie_word_embeddings is not a boolean", C);
    tied = j["tie_word_embeddings"].get<bool>();
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    return Status::Error(Code::kUnsupported, "%s: rope_scaling is not supported", C);
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    return Status::Error(Code::kUnsupported, "%s: hidden_act '%s' (we run silu)", C, j["hidden_act"].dump().c_str());
  if (j.contains("head_dim") && !j["head_dim"].is_null() &&
      (!j["head_dim"].is_number_integer() || c.dim % c.n_heads != 0 || j["head_dim"] != c.dim / c.n_heads))
    return Status::Error(Code::kUnsupported, "%s: head_dim %s is not hidden_size / num_attention_heads", C,
                         j["head_dim"].dump().c_str());
  for (const char* key : {"attention_bias", "mlp_bias", "use_sliding_window"})
    if (j.contains(key) && j[key] == true) return Status::Error(Code::kUnsupported, "%s: %s is not supported", C, key);
  if (Status st = c.validate(); !st.ok()) return st.prefix("%s: ", C);

  Shards sh;
  MC_TRY(open_shards(dir, &sh));
  ck->files = static_cast<int>(sh.files.size());
  std::map<std::string, bool> dtypes;
  auto get = [&](const std::string& name, std::vector<int64_t> shape, const float** out) -> Status {
    auto it = sh.where.find(name);
    if (it == sh.where.end())
      return Status::Error(Code::kNotFound, "%s: tensor '%s' is missing", sh.index.empty() ? sh.files[0].label().c_str() : sh.index.c_str(),
                           name.c_str());
    const SafetensorsFile& f = sh.files[it->second];
    const SafetensorsTensor* t = f.find(name);
    if (t->shape != shape)
      return Status::Error(Code::kCorrupt, "%s: tensor '%s' has shape %s, the config makes it %s", f.label().c_str(), name.c_str(),
                           shape_text(t->shape).c_str(), shape_text(shape).c_str());
    ck->store.emplace_back(static_cast<size_t>(t->elements()));
    MC_TRY(safetensors_to_f32(*t, f.label(), ck->store.back().data()));
    dtypes[t->dtype] = true;
    *out = ck->store.back().data();
    return Status::Ok();
  };
  auto mat = [&](const std::string& name, int rows, int cols, MatRef* m) -> Status {
    const float* p = nullptr;
    MC_TRY(get(name, {rows, cols}, &p));
    *m = f32_matrix(p, rows, cols);
    return Status::Ok();
  };
  auto vec = [&](const std::string& name, int n, const float** v) { return get(name, {n}, v); };

  ck->store.reserve(static_cast<size_t>(c.n_layers) * 12 + 3);  // pointers into it must stay put
  TransformerModel& m = ck->model;
  m.cfg = c;
  m.spec = spec;
  m.tied_output = tied;
  ck->layers.assign(static_cast<size_t>(c.n_layers), TransformerLayer());
  m.layers = ck->layers.data();
  MC_TRY(mat("model.embed_tokens.weight", c.vocab_size, c.dim, &m.tok_emb));
  MC_TRY(vec("model.norm.weight", c.dim, &m.out_norm));
  if (tied) m.output = m.tok_emb;
  else MC_TRY(mat("lm_head.weight", c.vocab_size, c.dim, &m.output));
  const int hd = c.head_dim();
  for (int l = 0; l < c.n_layers; ++l) {
    TransformerLayer& L = ck->layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    MC_TRY(vec(p + "input_layernorm.weight", c.dim, &L.attn_norm));
    MC_TRY(vec(p + "post_attention_layernorm.weight", c.dim, &L.ffn_norm));
    MC_TRY(mat(p + "self_attn.q_proj.weight", c.dim, c.dim, &L.wq));
    MC_TRY(mat(p + "self_attn.k_proj.weight", c.kv_dim(), c.dim, &L.wk));
    MC_TRY(mat(p + "self_attn.v_proj.weight", c.kv_dim(), c.dim, &L.wv));
    MC_TRY(mat(p + "self_attn.o_proj.weight", c.dim, c.dim, &L.wo));
    MC_TRY(mat(p + "mlp.gate_proj.weight", c.hidden_dim, c.dim, &L.w1));
    MC_TRY(mat(p + "mlp.down_proj.weight", c.dim, c.hidden_dim, &L.w2));
    MC_TRY(mat(p + "mlp.up_proj.weight", c.hidden_dim, c.dim, &L.w3));
    if (spec.qkv_bias) {
      MC_TRY(vec(p + "self_attn.q_proj.bias", c.dim, &L.bq));
      MC_TRY(vec(p + "self_attn.k_proj.bias", c.kv_dim(), &L.bk));
      MC_TRY(vec(p + "self_attn.v_proj.bias", c.kv_dim(), &L.bv));
    }
    if (spec.rope == RopeStyle::kAdjacent) {  // our storage: the rows are ours to reorder
      unpermute_rows(const_cast<float*>(static_cast<const float*>(L.wq.data)), c.n_heads, hd, c.dim);
      unpermute_rows(const_cast<float*>(static_cast<const float*>(L.wk.data)), c.n_kv_heads, hd, c.dim);
    }
  }
  for (const auto& d : dtypes) ck->dtypes += (ck->dtypes.empty() ? "" : ", ") + d.first;
  MC_TRY(m.check_shapes());

  const std::string tok_path = dir + "/tokenizer.json";
  if (fs::exists(tok_path)) {
    MappedFile f;
    MC_TRY(f.open(tok_path));
    Status st = bpe_vocab_from_hf_json(std::string_view(reinterpret_cast<const char*>(f.data()), f.size()), &ck->vocab);
    if (st.ok()) {  // the checks BpeTokenizer::load makes, on a copy
      BpeTokenizer tok;
      st = tok.load(ck->vocab);
    }
    if (!st.ok()) return st.prefix("%s: ", tok_path.c_str());
    if (ck->vocab.tokens.size() > static_cast<size_t>(c.vocab_size))
      return Status::Error(Code::kCorrupt, "%s: %zu tokens, more than vocab_size %d of %s", tok_path.c_str(),
                           ck->vocab.tokens.size(), c.vocab_size, C);
    ck->has_vocab = true;
  }
  return Status::Ok();
}

Status hf_ternarize(HfCheckpoint* ck) {
  if (!ck->arch->dense_or_ternary)
    return Status::Error(Code::kUnsupported, "%s (%s): our %s architecture has no ternary layers (ternary: Qwen2)",
                         ck->dir.c_str(), ck->hf_arch.c_str(), ck->arch->name);
  if (Status st = ternarize_layers(&ck->model, &ck->packed); !st.ok()) return st.prefix("%s: ", ck->dir.c_str());
  return Status::Ok();
}

}  // namespace mcullm
