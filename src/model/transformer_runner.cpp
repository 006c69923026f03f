#include "model/transformer_runner.h"

#include "kernels/ref/dot_order.h"
#include "model/sparse_ffn.h"
#include "quant/blocks.h"

namespace mcullm {

namespace {

bool is_ternary_type(const MatRef& m) { return m.type == DType::kI2_S || m.type == DType::kTL1 || m.type == DType::kTL2; }

Status check_vector(const float* v, const char* what, int layer) {
  if (!v) return Status::Error(Code::kNotFound, "%s of layer %d is missing", what, layer);
  return Status::Ok();
}

void add_bias(float* x, const float* b, int n) {
  for (int i = 0; i < n; ++i) x[i] += b[i];
}

int act_block(const MatRef& m) {
  const DTypeInfo* info = dtype_info(m.type);
  return info ? info->act_block : 0;
}

}  // namespace

Status TransformerModel::check_shapes() const {
  const LlamaConfig& c = cfg;
  MC_TRY(c.validate());
  if (spec.act != FfnAct::kSilu && spec.act != FfnAct::kRelu && spec.act != FfnAct::kReluSqr)
    return Status::Error(Code::kUnsupported, "unknown FFN activation");
  if (spec.rope != RopeStyle::kNeox && spec.rope != RopeStyle::kAdjacent)
    return Status::Error(Code::kUnsupported, "unknown RoPE style");
  if (first_layer < 0 || end() < first_layer || end() > c.n_layers)
    return Status::Error(Code::kInvalidArgument, "layer range [%d, %d) is not inside the model's %d layers", first_layer,
                         end(), c.n_layers);
  const int d = c.dim, kv = c.kv_dim(), h = c.hidden_dim;
  if (has_embedding) MC_TRY(check_dense_matrix(tok_emb, "token embedding", -1, c.vocab_size, d));
  if (has_head) {
    MC_TRY(check_dense_matrix(output, "output head", -1, c.vocab_size, d));
    if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  }
  if (end() > first_layer && !layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = first_layer; l < end(); ++l) {
    const TransformerLayer& L = layer(l);
    MC_TRY(check_vector(L.attn_norm, "attn_norm", l));
    MC_TRY(check_vector(L.ffn_norm, "ffn_norm", l));
    if (spec.sub_norms) {
      MC_TRY(check_vector(L.attn_sub_norm, "attn_sub_norm", l));
      MC_TRY(check_vector(L.ffn_sub_norm, "ffn_sub_norm", l));
    }
    if (spec.qkv_bias) {
      MC_TRY(check_vector(L.bq, "attn_q bias", l));
      MC_TRY(check_vector(L.bk, "attn_k bias", l));
      MC_TRY(check_vector(L.bv, "attn_v bias", l));
    }
    const MatRef* mats[7] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3};
    const char* names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};
    const int rows[7] = {d, kv, kv, d, h, d, h};
    const int cols[7] = {d, d, d, d, d, h, d};
    for (int i = 0; i < 7; ++i) {
      if (spec.ternary) {
        MC_TRY(check_ternary_matrix(*mats[i], names[i], l, rows[i], cols[i]));
      } else {
        if (is_ternary_type(*mats[i]))
          return Status::Error(Code::kUnsupported, "%s (layer %d) is ternary and the other linear layers dense", names[i], l);
        MC_TRY(check_matrix(*mats[i], names[i], l, rows[i], cols[i]));
      }
    }
  }
  return Status::Ok();
}

namespace {
// A layer whose FFN can run gate first: ReLU (not the sub-norm archs' ReLU^2), gate and up of one
// type (read with one quantized input), down [dim, hidden]. Ternary: i2_s only (tl1 / tl2 gate and
// up rows are read in BM-row tiles through a LUT per token, so single live rows cannot be picked out).
bool gate_first_layer(const TransformerModel& m, const TransformerLayer& L) {
  if (m.spec.act != FfnAct::kRelu || m.spec.sub_norms) return false;
  if (L.w1.type != L.w3.type || L.w2.rows != m.cfg.dim || L.w2.cols != m.cfg.hidden_dim) return false;
  return !m.spec.ternary || (L.w1.type == DType::kI2_S && L.w2.type == DType::kI2_S);
}
// ... with a quantized down matrix (ffn_relu_sparse_q: its column copy, or its rows where none is built).
bool gate_first_quantized(const TransformerModel& m, const TransformerLayer& L) {
  return gate_first_layer(m, L) && gate_first_down_type(L.w2.type);
}
}  // namespace

Status build_sparse_ffn(TransformerModel* m, Arena& arena) {
  const int dim = m->cfg.dim, hidden = m->cfg.hidden_dim;
  for (int l = m->first_layer; l < m->end(); ++l) {
    TransformerLayer& L = m->layers[l - m->first_layer];
    if (!gate_first_layer(*m, L)) continue;
    if (L.w2.type != DType::kF32) {
      MC_TRY(build_down_cols(L.w2, arena, &L.w2_cols));
      continue;
    }
    float* t = nullptr;
    MC_TRY(arena.alloc_array(static_cast<size_t>(dim) * static_cast<size_t>(hidden), TensorClass::kFfn, &t));
    for (int d = 0; d < dim; ++d) {
      const float* row = reinterpret_cast<const float*>(L.w2.row(d));
      for (int i = 0; i < hidden; ++i) t[static_cast<size_t>(i) * dim + d] = row[i];
    }
    L.w2_t = t;
  }
  return Status::Ok();
}

// ---- TransformerRunner ----

Status TransformerRunner::init(const TransformerModel* model, int first, int end, bool master, int ctx_len, Arena& arena,
                               ThreadPool* pool, const KernelSet* kernels, KvType kv) {
  MC_TRY(model->check_shapes());
  if (first < model->first_layer || end > model->end() || first > end)
    return Status::Error(Code::kInvalidArgument, "layers [%d, %d) are not held (this part holds [%d, %d))", first, end,
                         model->first_layer, model->end());
  cache_cfg_ = model->cfg;
  cache_cfg_.n_layers = end - first;
  MC_TRY(s_.init(cache_cfg_, ctx_len, arena, kv));
  b_.view(model->cfg, s_);
  const TransformerLayer* held = end > first ? &model->layer(first) : nullptr;
  MC_TRY(tl_lut_buffer_for_layers(held, end - first, 1, arena, &lut_));
  bool sparse_f32 = false, sparse_q = false;
  for (int l = first; l < end; ++l) {
    sparse_f32 = sparse_f32 || model->layer(l).w2_t;
    sparse_q = sparse_q || gate_first_quantized(*model, model->layer(l));
  }
  if (model->spec.act == FfnAct::kRelu && (sparse_f32 || sparse_q)) {
    const TensorClass act = TensorClass::kActivations;
    if (sparse_f32) MC_TRY(arena.alloc_array(static_cast<size_t>(model->cfg.dim) * kF32Lanes, act, &ffn_lanes_));
    if (sparse_q) MC_TRY(arena.alloc_array(static_cast<size_t>(model->cfg.hidden_dim), act, &ffn_live_));
    MC_TRY(arena.alloc_array(static_cast<size_t>(model->cfg.hidden_dim), act, &ffn_h_));
    MC_TRY(arena.alloc_array(static_cast<size_t>(model->cfg.dim), act, &ffn_y_));
  }
  model_ = model;
  first_ = first;
  end_ = end;
  master_ = master;
  pool_ = pool;
  kernels_ = kernels;
  return Status::Ok();
}

Status TransformerRunner::enable_batch(int cap, Arena& arena) {
  MC_TRY(b_.init(model_->cfg, cap, arena));
  MC_TRY(s_.reserve_stage(cap, arena));
  const TransformerLayer* held = end_ > first_ ? &model_->layer(first_) : nullptr;
  return tl_lut_buffer_for_layers(held, end_ - first_, cap, arena, &lut_);
}

bool TransformerRunner::ffn_counts(FfnCounts* counts) const {
  if (model_->spec.act != FfnAct::kRelu) return false;
  *counts = ffn_;
  return true;
}

void TransformerRunner::linear(const MatRef* const* mats, float* const* outs, const size_t* strides, int count,
                               const float* x, size_t x_stride, int n_vals, int n) {
  if (model_->spec.ternary)
    run_ternary_matmats(*pool_, *kernels_, mats, outs, strides, count, x, x_stride, n_vals, n, b_, &lut_);
  else
    run_dense_matmats(*pool_, *kernels_, mats, outs, strides, count, x, x_stride, n_vals, n, b_);
}

Status TransformerRunner::embed(const int* tokens, int n) {
  const TransformerModel& m = *model_;
  if (!has_embedding()) return Status::Error(Code::kInvalidArgument, "this slice holds no token embedding");
  if (n < 1 || n > max_batch())
    return Status::Error(Code::kInvalidArgument, "a batch of %d tokens (this decoder takes 1..%d)", n, max_batch());
  const size_t D = static_cast<size_t>(m.cfg.dim);
  for (int i = 0; i < n; ++i) {
    MC_TRY(check_token_pos(m.cfg, s_.ctx_len, tokens[i], 0));
    if (!dequantize_row_any(m.tok_emb.type, m.tok_emb.row(tokens[i]), b_.x + i * D, m.cfg.dim))
      return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));
  }
  return Status::Ok();
}

void TransformerRunner::activate(float* g, const float* u, int n) {
  const int hidden = model_->cfg.hidden_dim, total = n * hidden;  // n contiguous columns
  const KernelSet& k = *kernels_;
  const size_t work = static_cast<size_t>(total) * kElementWork;
  switch (model_->spec.act) {
    case FfnAct::kSilu: run_slices(*pool_, total, 16, work, [&](int b, int e) { k.silu_mul(g + b, u + b, e - b); }); return;
    case FfnAct::kRelu:
      ffn_.neurons += static_cast<unsigned long long>(total);
      ffn_.live += static_cast<unsigned long long>(relu_mul(g, u, g, total));
      return;
    case FfnAct::kReluSqr:
      run_slices(*pool_, total, 16, work, [&](int b, int e) {
        for (int i = b; i < e; ++i) {
          const float v = g[i] > 0.0f ? g[i] : 0.0f;
          g[i] = (v * v) * u[i];
        }
      });
      return;
  }
}

bool TransformerRunner::sparse_ffn(const TransformerLayer& L) {
  if (model_->spec.act != FfnAct::kRelu || !sparse_on_) return false;
  const bool f32 = L.w2_t && ffn_lanes_, q = gate_first_quantized(*model_, L) && ffn_live_;
  if (!f32 && !q) return false;
  const int dim = model_->cfg.dim;
  ActVec act;
  act.f = b_.xb;
  if (model_->spec.ternary) {  // run_ternary_matmats's input: one int8 vector with one scale (I8_S)
    kernels_->quantize_i8s(b_.xb, dim, b_.act_q, b_.act_scales);
    act.q = b_.act_q;
    act.scales = b_.act_scales;
    act.block = dim;
  } else if (const int block = act_block(L.w1); block > 0) {
    kernels_->quantize_blocks(b_.xb, dim, block, b_.act_q, b_.act_scales);
    act.q = b_.act_q;
    act.scales = b_.act_scales;
    act.block = block;
  }
  FfnStats st;
  if (f32) {
    const ReluFfn f{L.w1, L.w3, L.w2, L.w2_t};
    ffn_relu_sparse(*kernels_, f, act, b_.hb, b_.hb2, ffn_h_, ffn_y_, ffn_lanes_, &st);
  } else {
    const ReluFfnQ f{L.w1, L.w3, L.w2_cols, L.w2, sparse_max_live_};
    // b_.act_scales holds x's scales until the gate and up rows are done; h's go to the same buffer after.
    const FfnScratchQ sc{b_.hb, b_.hb2, ffn_h_, b_.act_q, b_.act_scales, ffn_live_};
    ffn_relu_sparse_q(*pool_, *kernels_, f, act, sc, ffn_y_, &st);
  }
  ffn_.neurons += static_cast<unsigned long long>(st.neurons);
  ffn_.live += static_cast<unsigned long long>(st.live);
  ffn_.skipped += static_cast<unsigned long long>(st.skipped);
  for (int i = 0; i < dim; ++i) b_.x[i] += ffn_y_[i];
  return true;
}

// The one layer loop, for any n: per column the same float operations in the same order.
Status TransformerRunner::layers(int l0, int l1, int pos0, int n) {
  const TransformerModel& m = *model_;
  const LlamaConfig& c = m.cfg;
  const BlockSpec& spec = m.spec;
  if (l0 < first_ || l1 > end_ || l0 > l1)
    return Status::Error(Code::kInvalidArgument, "layers [%d, %d) are not held (this part holds [%d, %d))", l0, l1,
                         first_, end_);
  if (n < 1 || n > max_batch())
    return Status::Error(Code::kInvalidArgument, "a batch of %d tokens (this decoder takes 1..%d)", n, max_batch());
  if (pos0 < 0 || pos0 > s_.ctx_len - n)
    return Status::Error(Code::kOutOfRange, "positions %d..%d are outside the context of %d tokens", pos0, pos0 + n - 1,
                         s_.ctx_len);
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const size_t D = static_cast<size_t>(dim), H = static_cast<size_t>(hidden), KV = static_cast<size_t>(kv_dim);
  const KernelSet& k = *kernels_;
  float *const x = b_.x, *const xb = b_.xb, *const q = b_.q, *const att_out = b_.att_out;
  float *const hb = b_.hb, *const hb2 = b_.hb2;
  const float *const cos_ = s_.rope_cos_at(pos0), *const sin_ = s_.rope_sin_at(pos0);
  auto norm = [&](float* out, const float* in, const float* w, int width) {
    const size_t W = static_cast<size_t>(width);
    for (int i = 0; i < n; ++i) rmsnorm(k, out + i * W, in + i * W, w, width, c.norm_eps);
  };
  for (int l = l0; l < l1; ++l) {
    const TransformerLayer& L = m.layer(l);
    const int cl = l - first_;  // the layer's place in this runner's KV cache
    float* keys = s_.new_keys(cl, pos0);
    float* values = s_.new_values(cl, pos0);

    norm(xb, x, L.attn_norm, dim);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {q, keys, values};
      const size_t strides[3] = {D, KV, KV};
      linear(mats, outs, strides, 3, xb, D, dim, n);
    }
    if (spec.qkv_bias) {
      for (int i = 0; i < n; ++i) {
        add_bias(q + i * D, L.bq, dim);
        add_bias(keys + i * KV, L.bk, kv_dim);
        add_bias(values + i * KV, L.bv, kv_dim);
      }
    }
    rope_rotate_batch(*pool_, RopeColumns{q, dim, D, keys, kv_dim, KV}, hs, n, cos_, sin_, spec.rope);
    attend(*pool_, k, cache_cfg_, s_, cl, pos0, n, q, att_out);
    if (spec.sub_norms) norm(att_out, att_out, L.attn_sub_norm, dim);
    linear(L.wo, xb, D, att_out, D, dim, n);
    for (size_t i = 0; i < n * D; ++i) x[i] += xb[i];

    norm(xb, x, L.ffn_norm, dim);
    if (n == 1 && sparse_ffn(L)) continue;
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {hb, hb2};
      const size_t strides[2] = {H, H};
      linear(mats, outs, strides, 2, xb, D, dim, n);
    }
    activate(hb, hb2, n);
    if (spec.sub_norms) norm(hb, hb, L.ffn_sub_norm, hidden);
    linear(L.w2, xb, D, hb, H, hidden, n);
    for (size_t i = 0; i < n * D; ++i) x[i] += xb[i];
  }
  return Status::Ok();
}

Status TransformerRunner::set_head(const HeadChoice& c, Arena& arena) {
  if (!has_head()) return Status::Error(Code::kInvalidArgument, "this slice holds no output head");
  return apply_head_choice(c, model_->output, arena, &head_rows_, &head_);
}

void TransformerRunner::head(int n) {
  const TransformerModel& m = *model_;
  const size_t D = static_cast<size_t>(m.cfg.dim), V = static_cast<size_t>(m.cfg.vocab_size);
  for (int i = 0; i < n; ++i) rmsnorm(*kernels_, b_.x + i * D, b_.x + i * D, m.out_norm, m.cfg.dim, m.cfg.norm_eps);
  head_visit_.n = -1;
  if (!head_.grouped()) {
    const MatRef* mats[1] = {&m.output};
    run_dense_matmats(*pool_, *kernels_, mats, &b_.logits, &V, 1, b_.x, D, m.cfg.dim, n, b_);
    return;
  }
  for (int i = 0; i < n; ++i)  // column by column: each the bits of a single token's head
    grouped_head_logits(*pool_, *kernels_, head_, b_.x + i * D, m.cfg.dim, false, b_.act_q, b_.act_scales, head_rows_,
                        b_.logits + i * V, &head_visit_);
}

// ---- TransformerContext ----

Status TransformerContext::init(const TransformerModel* model, int ctx_len, Arena& arena, ThreadPool* pool,
                                const KernelSet* kernels, KvType kv) {
  if (!model->whole())
    return Status::Error(Code::kInvalidArgument, "a decoder needs the whole model (this one holds layers [%d, %d)%s%s)",
                         model->first_layer, model->end(), model->has_embedding ? "" : ", no embedding",
                         model->has_head ? "" : ", no head");
  return r_.init(model, 0, model->cfg.n_layers, true, ctx_len, arena, pool, kernels, kv);
}

Status TransformerContext::forward(int token, int pos, const float** logits) {
  return prefill(&token, 1, pos, logits);
}

Status TransformerContext::prefill(const int* tokens, int n, int pos0, const float** logits) {
  MC_TRY(r_.embed(tokens, n));  // checks n and the tokens; layers() the positions
  MC_TRY(r_.layers(0, r_.model().cfg.n_layers, pos0, n));
  if (logits) {
    r_.head(n);
    *logits = r_.logits();
  }
  return Status::Ok();
}

// ---- TransformerSlice ----

Status check_slice_range(const LlamaConfig& c, const SliceRange& r) {
  if (r.first < 0 || r.end < r.first || r.end > c.n_layers)
    return Status::Error(Code::kInvalidArgument, "layers %d:%d are not a range inside the model's %d layers", r.first, r.end,
                         c.n_layers);
  if (r.first == r.end && !r.master) return Status::Error(Code::kInvalidArgument, "the slice %d:%d has no layers", r.first, r.end);
  return Status::Ok();
}

Status check_layer_split(const SliceRange* ranges, int count, int n_layers, Code code) {
  int next = 0;
  for (int k = 0; k < count; ++k) {
    const SliceRange& r = ranges[k];
    if (r.first != next || r.end <= r.first || r.end > n_layers || r.master)
      return Status::Error(code, "node %d's layers %d:%d do not continue a split of %d layers at layer %d", k + 1, r.first, r.end,
                           n_layers, next);
    next = r.end;
  }
  if (count > 0 && next != n_layers)
    return Status::Error(code, "the nodes hold layers 0:%d of %d (the last node must end at the last layer)", next, n_layers);
  return Status::Ok();
}

Status TransformerSlice::init(const TransformerModel* model, int ctx_len, Arena& arena, ThreadPool* pool,
                              const KernelSet* kernels, KvType kv) {
  return r_.init(model, model->first_layer, model->end(), true, ctx_len, arena, pool, kernels, kv);
}

Status TransformerSlice::init(const TransformerModel* model, const SliceRange& range, int ctx_len, Arena& arena,
                              ThreadPool* pool, const KernelSet* kernels, KvType kv) {
  MC_TRY(check_slice_range(model->cfg, range));
  return r_.init(model, range.first, range.end, range.master, ctx_len, arena, pool, kernels, kv);
}

Status TransformerSlice::embed(int token, float* hidden) {
  MC_TRY(r_.embed(&token, 1));
  const float* x = r_.x();
  for (int i = 0; i < dim(); ++i) hidden[i] = x[i];
  return Status::Ok();
}

Status TransformerSlice::run_layers_batch(float* hidden, int n, int pos0) {
  if (n < 1 || n > max_batch())
    return Status::Error(Code::kInvalidArgument, "a batch of %d positions (this slice takes 1..%d)", n, max_batch());
  const size_t total = static_cast<size_t>(n) * static_cast<size_t>(dim());
  float* x = r_.x();
  for (size_t i = 0; i < total; ++i) x[i] = hidden[i];
  MC_TRY(r_.layers(first_layer(), end_layer(), pos0, n));
  for (size_t i = 0; i < total; ++i) hidden[i] = x[i];
  return Status::Ok();
}

Status TransformerSlice::head(const float* hidden, const float** logits) {
  if (!has_head()) return Status::Error(Code::kInvalidArgument, "this slice holds no output head");
  float* x = r_.x();
  for (int i = 0; i < dim(); ++i) x[i] = hidden[i];
  r_.head(1);
  *logits = r_.logits();
  return Status::Ok();
}

}  // namespace mcullm
