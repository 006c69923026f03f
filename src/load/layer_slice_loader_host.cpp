#include "load/layer_slice_loader_host.h"

#include <cstring>
#include <utility>
#include <vector>

#include "core/thread_pool_host.h"
#include "format/gguf.h"
#include "format/transformer_gguf.h"
#include "load/mapped_file_host.h"
#include "model/llama_slice.h"

namespace mcullm {

namespace {

size_t matrix_bytes(const MatRef& m) { return dtype_tensor_bytes(m.type, m.rows, m.cols); }

// Every tensor a (possibly partial) model holds, in model order: mat(MatRef&, class) for matrices,
// vec(const float*&, n) for norms and biases. M is TransformerModel or const TransformerModel.
template <class M, class MatFn, class VecFn>
void for_each_tensor(M& m, MatFn mat, VecFn vec) {
  const LlamaConfig& c = m.cfg;
  if (m.has_embedding) mat(m.tok_emb, TensorClass::kEmbedding);
  for (int l = m.first_layer; l < m.end_layer; ++l) {
    auto& L = m.layers[l - m.first_layer];
    vec(L.attn_norm, c.dim);
    vec(L.ffn_norm, c.dim);
    vec(L.bq, c.dim);
    vec(L.bk, c.kv_dim());
    vec(L.bv, c.kv_dim());
    mat(L.wq, TensorClass::kAttention);
    mat(L.wk, TensorClass::kAttention);
    mat(L.wv, TensorClass::kAttention);
    mat(L.wo, TensorClass::kAttention);
    mat(L.w1, TensorClass::kFfn);
    mat(L.w2, TensorClass::kFfn);
    mat(L.w3, TensorClass::kFfn);
  }
  if (m.has_head) {
    vec(m.out_norm, c.dim);
    mat(m.output, TensorClass::kHead);
  }
}

}  // namespace

Status load_slice_weights(const std::string& path, int first, int end, bool embedding, bool head,
                          std::unique_ptr<SliceWeights>* out) {
  auto w = std::make_unique<SliceWeights>();
  w->path = path;
  // The file is mapped while the slice's tensors are copied out, then unmapped: pages of other
  // layers are never read (the GGUF header is parsed from the first pages only).
  MappedFile file;
  MC_TRY(file.open(path));
  const size_t table_bytes = size_t{16} << 20;  // GGUF indexes; left uninitialised: only what is used is touched
  std::unique_ptr<uint8_t[]> table_memory(new uint8_t[table_bytes]);
  Arena tables(Tier::kHost, table_memory.get(), table_bytes);
  GgufFile gguf;
  TransformerModel part;
  Status st = gguf.open(file.data(), file.size(), tables);
  if (st.ok()) st = gguf_transformer_arch(gguf, ArchSlices::kRanges, &w->arch);  // an architecture a node reads by ranges
  if (st.ok()) st = transformer_part_from_gguf(gguf, tables, first, end, embedding, head, &part);
  if (!st.ok()) return st.prefix("%s: ", path.c_str());

  // Room for every held tensor (a tied head's matrix once) and the layer table.
  const size_t kAlign = 64;
  size_t need = static_cast<size_t>(end - first) * sizeof(TransformerLayer) + kAlign;
  bool tl = false;
  for_each_tensor(
      part, [&](const MatRef& m, TensorClass) { need += matrix_bytes(m) + kAlign; tl = tl || m.tl; },
      [&](const float*, int n) { need += static_cast<size_t>(n) * sizeof(float) + kAlign; });
  if (tl)
    return Status::Error(Code::kUnsupported, "%s: a slice of tl1 / tl2 matrices (convert the file to i2_s for a cluster)",
                         path.c_str());
  w->memory.reset(new uint8_t[need]);
  w->arena.reset(Tier::kHost, w->memory.get(), need);
  TransformerModel& m = w->model;
  m = part;
  if (end > first) {
    MC_TRY(w->arena.alloc_array(static_cast<size_t>(end - first), TensorClass::kOther, &m.layers));
    for (int i = 0; i < end - first; ++i) m.layers[i] = part.layers[i];
  }
  std::vector<std::pair<const void*, const void*>> copied;  // file bytes -> the slice's copy
  auto copy = [&](const void* src, size_t bytes, TensorClass cls, const void** dst) -> Status {
    for (const auto& p : copied)
      if (p.first == src) {
        *dst = p.second;
        return Status::Ok();
      }
    void* to = nullptr;
    MC_TRY(w->arena.alloc_checked(bytes, kAlign, cls, &to));
    std::memcpy(to, src, bytes);
    copied.emplace_back(src, to);
    w->tensor_bytes += bytes;
    *dst = to;
    return Status::Ok();
  };
  st = Status::Ok();
  for_each_tensor(
      m,
      [&](MatRef& x, TensorClass cls) {
        if (st.ok()) st = copy(x.data, matrix_bytes(x), cls, &x.data);
      },
      [&](const float*& v, int n) {
        const void* to = nullptr;
        if (st.ok()) st = copy(v, static_cast<size_t>(n) * sizeof(float), TensorClass::kNorm, &to);
        if (st.ok()) v = static_cast<const float*>(to);
      });
  if (st.ok()) st = m.check_shapes();
  if (!st.ok()) return st.prefix("%s: ", path.c_str());
  w->hash = slice_hash(m);
  *out = std::move(w);
  return Status::Ok();
}

Status make_slice_stream(const SliceWeights& w, const SliceOptions& opt, ThreadPool* pool, const KernelSet* kernels,
                         std::unique_ptr<SliceStream>* out) {
  const LlamaConfig& c = w.model.cfg;
  const int ctx = opt.ctx_len > 0 ? opt.ctx_len : c.seq_len;
  if (ctx > c.seq_len)
    return Status::Error(Code::kOutOfRange, "context %d is longer than the model's %d positions", ctx, c.seq_len);
  if (opt.batch < 0 || opt.batch > 4096) return Status::Error(Code::kInvalidArgument, "batch %d (0..4096)", opt.batch);
  const size_t layers = static_cast<size_t>(w.model.end_layer - w.model.first_layer);
  const size_t batch = static_cast<size_t>(opt.batch);
  const size_t widest = static_cast<size_t>(c.hidden_dim > c.dim ? c.hidden_dim : c.dim) + 64;
  const size_t bytes = layers * static_cast<size_t>(ctx) * kv_bytes_per_layer_position(c, opt.kv) +
                       (batch + 2) * 2 * static_cast<size_t>(c.kv_dim()) * sizeof(float) +  // int8 staging rows
                       (batch + 1) * (4ull * c.dim + 2ull * c.hidden_dim + static_cast<size_t>(c.vocab_size) + 2 * widest) *
                           sizeof(float) +
                       4ull * c.n_heads * static_cast<size_t>(ctx) * sizeof(float) + 4ull * c.dim + (64u << 10);
  auto s = std::make_unique<SliceStream>();
  s->memory.reset(new uint8_t[bytes]);
  s->work.reset(Tier::kHost, s->memory.get(), bytes);
  MC_TRY(s->qwen2.init(&w.model, ctx, s->work, pool, kernels, opt.kv));
  if (opt.batch > 0) MC_TRY(s->qwen2.enable_batch(opt.batch, s->work));
  *out = std::move(s);
  return Status::Ok();
}

Status load_layer_slice(const std::string& path, int first, int end, bool embedding, bool head, const SliceOptions& opt,
                        std::unique_ptr<LoadedSlice>* out) {
  if (opt.threads < 1 || opt.threads > 64) return Status::Error(Code::kInvalidArgument, "threads %d (1..64)", opt.threads);
  auto s = std::unique_ptr<LoadedSlice>(new LoadedSlice());
  MC_TRY(load_slice_weights(path, first, end, embedding, head, &s->weights_));
  s->pool_ = std::make_unique<HostThreadPool>(opt.threads, kHostMinParallelWork);
  MC_TRY(make_slice_stream(*s->weights_, opt, s->pool_.get(), opt.kernels ? opt.kernels : &kernels_best(), &s->stream_));
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace mcullm
