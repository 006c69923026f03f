#include "format/transformer_gguf.h"

#include <string.h>

namespace mcullm {

namespace {

// Per GGUF architecture: its defaults (Qwen2's configs: rms_norm_eps 1e-6, rope_theta 1e6).
constexpr GgufArchKeys kArchKeys[] = {
    // gguf_arch   eps    theta     ffn_act_key
    {"llama",     1e-5f, 10000.0f, true},
    {"bitnet",    1e-5f, 10000.0f, false},
    {"bitnet-25", 1e-5f, 10000.0f, false},
    {"qwen2",     1e-6f, 1e6f,     true},   // mcullm's key too: a ReLU-gated qwen2 (train/, mcullm dummy --ffn relu)
};

using L = LayerTensor;
constexpr LayerTensor kLayerTensors[] = {
    // suffix                 matrix                vector                              rows / length cols
    {"attn_q.weight",        &TransformerLayer::wq, nullptr,                          L::kDim,    L::kDim,    L::kAlways,   TensorClass::kAttention},
    {"attn_k.weight",        &TransformerLayer::wk, nullptr,                          L::kKvDim,  L::kDim,    L::kAlways,   TensorClass::kAttention},
    {"attn_v.weight",        &TransformerLayer::wv, nullptr,                          L::kKvDim,  L::kDim,    L::kAlways,   TensorClass::kAttention},
    {"attn_output.weight",   &TransformerLayer::wo, nullptr,                          L::kDim,    L::kDim,    L::kAlways,   TensorClass::kAttention},
    {"ffn_gate.weight",      &TransformerLayer::w1, nullptr,                          L::kHidden, L::kDim,    L::kAlways,   TensorClass::kFfn},
    {"ffn_down.weight",      &TransformerLayer::w2, nullptr,                          L::kDim,    L::kHidden, L::kAlways,   TensorClass::kFfn},
    {"ffn_up.weight",        &TransformerLayer::w3, nullptr,                          L::kHidden, L::kDim,    L::kAlways,   TensorClass::kFfn},
    {"attn_norm.weight",     nullptr, &TransformerLayer::attn_norm,                   L::kDim,    L::kDim,    L::kAlways,   TensorClass::kNorm},
    {"attn_sub_norm.weight", nullptr, &TransformerLayer::attn_sub_norm,               L::kDim,    L::kDim,    L::kSubNorms, TensorClass::kNorm},
    {"ffn_norm.weight",      nullptr, &TransformerLayer::ffn_norm,                    L::kDim,    L::kDim,    L::kAlways,   TensorClass::kNorm},
    {"ffn_sub_norm.weight",  nullptr, &TransformerLayer::ffn_sub_norm,                L::kHidden, L::kDim,    L::kSubNorms, TensorClass::kNorm},
    {"attn_q.bias",          nullptr, &TransformerLayer::bq,                          L::kDim,    L::kDim,    L::kQkvBias,  TensorClass::kNorm},
    {"attn_k.bias",          nullptr, &TransformerLayer::bk,                          L::kKvDim,  L::kDim,    L::kQkvBias,  TensorClass::kNorm},
    {"attn_v.bias",          nullptr, &TransformerLayer::bv,                          L::kKvDim,  L::kDim,    L::kQkvBias,  TensorClass::kNorm},
};

bool is_ternary(DType t) { return t == DType::kI2_S || t == DType::kTL1 || t == DType::kTL2; }

}  // namespace

const GgufArchKeys* gguf_arch_keys(const char* gguf_arch) {
  for (const GgufArchKeys& k : kArchKeys)
    if (strcmp(k.gguf_arch, gguf_arch) == 0) return &k;
  return nullptr;
}

const LayerTensor* transformer_layer_tensors(int* count) {
  *count = static_cast<int>(sizeof kLayerTensors / sizeof kLayerTensors[0]);
  return kLayerTensors;
}

Status gguf_read_ffn_relu(const GgufFile& f, bool* relu) {
  if (!f.find_kv(kLlamaFfnKey)) return Status::Ok();
  GgufStr act{"", 0};
  MC_TRY(f.get_string(kLlamaFfnKey, &act));
  if (act.equals("relu"))
    *relu = true;
  else if (act.equals("silu") || act.equals("swiglu"))
    *relu = false;
  else
    return Status::Error(Code::kUnsupported, "%s \"%.*s\": only relu and silu FFNs exist", kLlamaFfnKey,
                         act.size > 32 ? 32 : static_cast<int>(act.size), act.data);
  return Status::Ok();
}

Status gguf_transformer_arch(const GgufFile& f, ArchSlices slices, const ArchInfo** out) {
  const char* names[8];
  const ArchInfo* rows[8];
  int n = 0;
  for (int i = 0; i < n_archs() && n < 8; ++i) {
    const ArchInfo& a = arch_table()[i];
    if (a.family != ArchFamily::kTransformer || !gguf_arch_keys(a.gguf_arch)) continue;
    if (slices != ArchSlices::kNone && a.slices != slices) continue;
    rows[n] = &a;
    names[n++] = a.gguf_arch;
  }
  int which = 0;
  MC_TRY(gguf_expect_arch(f, names, n, &which));
  *out = rows[which];
  return Status::Ok();
}

Status transformer_from_gguf(const GgufFile& f, Arena& arena, TransformerModel* model) {
  MC_TRY(transformer_part_from_gguf(f, arena, 0, -1, true, true, model));
  return build_sparse_ffn(model, arena);
}

Status transformer_part_from_gguf(const GgufFile& f, Arena& arena, int first, int end, bool embedding, bool head,
                                  TransformerModel* model) {
  const ArchInfo* arch = nullptr;
  MC_TRY(gguf_transformer_arch(f, ArchSlices::kNone, &arch));
  const GgufArchKeys& keys = *gguf_arch_keys(arch->gguf_arch);
  *model = TransformerModel();
  model->spec = arch->spec;
  LlamaConfig& c = model->cfg;
  c.norm_eps = keys.norm_eps;
  c.rope_theta = keys.rope_theta;
  MC_TRY(gguf_read_config(f, arch->gguf_arch, &c));
  if (keys.ffn_act_key) {
    bool relu = false;
    MC_TRY(gguf_read_ffn_relu(f, &relu));
    if (relu) model->spec.act = FfnAct::kRelu;
  }
  if (end < 0) end = c.n_layers;
  if (first < 0 || end < first || end > c.n_layers)
    return Status::Error(Code::kInvalidArgument, "layer range [%d, %d) is not inside the model's %d layers", first, end,
                         c.n_layers);
  model->first_layer = first;
  model->end_layer = end;
  model->has_embedding = embedding;
  model->has_head = head;
  if (embedding || head) {  // the embedding is read only when asked for, or for a tied head
    const bool tied = f.find_tensor("output.weight") == nullptr;
    MatRef emb;
    if (embedding || tied) MC_TRY(gguf_matrix(f, "token_embd.weight", arena, TensorClass::kEmbedding, &emb));
    if (embedding) model->tok_emb = emb;
    if (head) {
      model->tied_output = tied;
      if (tied)
        model->output = emb;
      else
        MC_TRY(gguf_matrix(f, "output.weight", arena, TensorClass::kHead, &model->output));
      MC_TRY(gguf_norm(f, "output_norm.weight", c.dim, arena, &model->out_norm));
    }
  }
  const int n = end - first;
  if (n > 0) MC_TRY(arena.alloc_array(static_cast<size_t>(n), TensorClass::kOther, &model->layers));
  char name[64];
  for (int l = first; l < end; ++l) {
    TransformerLayer& layer = model->layers[l - first];
    layer = TransformerLayer();
    for (const LayerTensor& t : kLayerTensors) {
      if (!t.in(model->spec)) continue;
      llama_tensor_name(name, sizeof name, l, t.suffix);
      if (t.mat)
        MC_TRY(gguf_matrix(f, name, arena, t.cls, &(layer.*t.mat)));
      else
        MC_TRY(gguf_norm(f, name, t.length(c), arena, &(layer.*t.vec)));
    }
  }
  // Files that choose dense or ternary layers: the kind of the first held layer's wq (check_shapes
  // wants them all alike).
  if (arch->dense_or_ternary) model->spec.ternary = n == 0 || is_ternary(model->layers[0].wq.type);
  return model->check_shapes();
}

}  // namespace mcullm
