// The pieces every transformer here is built from: the llama-style config, the per-generation
// state (activations and KV cache from one arena), RMSNorm, RoPE, matrices handed to the thread
// pool, and attention over the cache. Architectures (llama, bitnet, ...) compose these; a piece
// that must compute differently for one model (bitllama2.c's scalar attention) stays in its file.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "mcullm/status.h"

namespace mcullm {

struct LlamaConfig {
  int dim = 0;
  int hidden_dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;
  int seq_len = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;

  int head_dim() const { return dim / n_heads; }
  int kv_dim() const { return head_dim() * n_kv_heads; }
  // Room for the quantized copy of a matvec input (and its scales): the widest input, padded to the largest block.
  int act_width() const { return (hidden_dim > dim ? hidden_dim : dim) + 64; }
  // Positive sizes, heads that divide dim, even head size, limits that keep every product in range.
  Status validate() const;
};

// Which pairs RoPE rotates in each head: (2i, 2i+1) as llama2.c / llama.cpp's NORM mode, or
// (i, i + head_dim/2) as llama.cpp's NEOX mode.
enum class RopeStyle : uint8_t { kNeox = 0, kAdjacent };

// Present, of the shape the config implies, rows that fit the type. `layer` < 0: a model-wide matrix.
Status check_matrix(const MatRef& m, const char* what, int layer, int rows, int cols);
// check_matrix, and the type is one the dense kernels read (f32, f16, q8_0, q4_0, q4g64).
Status check_dense_matrix(const MatRef& m, const char* what, int layer, int rows, int cols);
// check_matrix, and i2_s with a finite non-negative per-tensor scale.
Status check_ternary_matrix(const MatRef& m, const char* what, int layer, int rows, int cols);

// How the KV cache stores keys and values: f32, or int8 with one f32 scale per head per position
// (quantize_activations with the head size as block; attention then runs the kernels' *_q8 forms).
enum class KvType : uint8_t { kF32 = 0, kInt8 };
// "f32" / "int8"; false for anything else.
bool parse_kv_type(const char* name, KvType* out);
const char* kv_type_name(KvType t);
// Bytes of one position's keys and values in one layer.
size_t kv_bytes_per_layer_position(const LlamaConfig& c, KvType t);

// Activations and KV cache of one generation, all from one arena.
struct DecoderState {
  int ctx_len = 0;
  int kv_dim = 0;
  int head_dim = 0;
  int n_kv_heads = 0;
  KvType kv_type = KvType::kF32;
  float* x = nullptr;        // residual stream [dim]
  float* xb = nullptr;       // normed input / branch output [dim]
  float* q = nullptr;        // [dim]
  float* att_out = nullptr;  // [dim]
  float* hb = nullptr;       // [hidden]
  float* hb2 = nullptr;      // [hidden]
  float* att = nullptr;      // [n_heads, ctx_len] attention scores
  // RoPE's angles of every position: [ctx_len, head_dim / 2], computed once by init (on a board each
  // angle is double-precision software: computed per token they were ~5% of a token's instructions);
  // null for a slice without layers. rope_cos_at(pos) is position pos's row.
  float* rope_cos = nullptr;
  float* rope_sin = nullptr;
  float* logits = nullptr;   // [vocab]
  float* key_cache = nullptr;    // f32 cache: [layers, ctx_len, kv_dim]
  float* value_cache = nullptr;
  int8_t* key_q = nullptr;       // int8 cache: [layers, ctx_len, kv_dim]
  int8_t* value_q = nullptr;
  float* key_s = nullptr;        // int8 cache scales: [layers, ctx_len, n_kv_heads]
  float* value_s = nullptr;
  float* key_new = nullptr;      // int8 cache: this step's keys / values in f32 [stage_rows, kv_dim]
  float* value_new = nullptr;
  int stage_rows = 0;
  int8_t* q_q = nullptr;         // int8 cache: the query per head [n_heads * head_dim]
  int8_t* act_q = nullptr;   // quantized copy of a matvec input [max(dim, hidden) + 64]
  float* act_scales = nullptr;

  // ctx_len 0 means the model's seq_len; longer than seq_len is refused.
  Status init(const LlamaConfig& c, int ctx_len, Arena& arena, KvType kv = KvType::kF32);
  // Room for the keys and values of `rows` positions computed together (batched prefill); int8 only.
  Status reserve_stage(int rows, Arena& arena);
  size_t cache_index(int layer, int pos) const { return static_cast<size_t>(layer) * ctx_len + pos; }
  // (null without a table: a slice of no layers never rotates.)
  const float* rope_cos_at(int pos) const { return rope_cos ? rope_cos + static_cast<size_t>(pos) * (head_dim / 2) : nullptr; }
  const float* rope_sin_at(int pos) const { return rope_sin ? rope_sin + static_cast<size_t>(pos) * (head_dim / 2) : nullptr; }
  // Where the projections write the keys / values of positions pos0, pos0 + 1, ... (rows kv_dim
  // apart): the f32 cache itself, or (int8) the staging rows that store_kv quantizes.
  float* new_keys(int layer, int pos0) { return kv_type == KvType::kF32 ? key_cache + cache_index(layer, pos0) * kv_dim : key_new; }
  float* new_values(int layer, int pos0) {
    return kv_type == KvType::kF32 ? value_cache + cache_index(layer, pos0) * kv_dim : value_new;
  }
  // After RoPE: the int8 cache quantizes the n staged rows into positions pos0..; f32 does nothing.
  void store_kv(ThreadPool& pool, const KernelSet& k, int layer, int pos0, int n);  // heads split over the pool
};

// Activations of up to `cap` tokens evaluated together (batched prefill): column i of each buffer
// starts at i times its width (dim, hidden, vocab; `widest`, a multiple of 16, for the quantized copies
// and scales).
struct BatchState {
  int cap = 0;
  int widest = 0;
  float* x = nullptr;        // [cap, dim]
  float* xb = nullptr;       // [cap, dim]
  float* q = nullptr;        // [cap, dim]
  float* att_out = nullptr;  // [cap, dim]
  float* hb = nullptr;       // [cap, hidden]
  float* hb2 = nullptr;      // [cap, hidden]
  float* logits = nullptr;   // [cap, vocab]
  int8_t* act_q = nullptr;   // [cap, widest]
  float* act_scales = nullptr;  // [cap, widest]

  Status init(const LlamaConfig& c, int cap, Arena& arena);
  // One token (cap 1) on the single-token buffers of s: nothing allocated.
  void view(const LlamaConfig& c, const DecoderState& s);
};

// A token id inside the vocabulary and a position inside the context.
Status check_token_pos(const LlamaConfig& c, int ctx_len, int token, int pos);

// RMSNorm: out = w * (x * (1 / sqrt(mean(x^2) + eps))), the sum of squares in kernels.h's lane order.
void rmsnorm(const KernelSet& k, float* out, const float* x, const float* w, int n, float eps);

// RoPE. The angles of positions 0 .. n - 1 into rows of head_dim / 2, as llama2.c computes them:
// freq = 1 / theta^(2i / hs) in float, angle = pos * freq in float, then cos / sin correctly rounded
// (own double routines): DecoderState's table, once.
void rope_angles(float theta, int head_dim, int n, float* cos_, float* sin_);
// Bytes of DecoderState's angle table for ctx_len positions.
size_t rope_table_bytes(const LlamaConfig& c, int ctx_len);
// Split over the pool (every head on its own: the same bits for any split): rotates every head of n columns of q (q_width values, stride q_stride) and of keys, each column by
// its row of angles.
struct RopeColumns {
  float* q;
  int q_width;
  size_t q_stride;
  float* keys;
  int k_width;
  size_t k_stride;
};
void rope_rotate_batch(ThreadPool& pool, const RopeColumns& c, int head_dim, int n, const float* cos_, const float* sin_,
                       RopeStyle style);

// run_sized's weight of one value of an elementwise step (an activation with exp / erf, quantizing
// one value), in multiply-adds.
constexpr size_t kElementWork = 16;

// Multiply-adds of `count` matrices times n columns: the work ThreadPool::run_sized weighs.
size_t mats_work(const MatRef* const* mats, int count, int n);
// Rows of each matrix split over the pool's threads, all reading the same input `act`, in one hand-off.
void run_matvecs(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs, int count,
                 const ActVec& act);
// The same for the n columns of `act` (output m of column i at outs[m] + i * out_strides[m]; n = 1
// runs the matvecs): kernels.h matmat, every column with the matvec's bits.
void run_matmats(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                 const size_t* out_strides, int count, const ActMat& act, int n);

// Matrices reading n columns (column i of the input at x + i * x_stride, n_vals values; of output
// m at outs[m] + i * out_strides[m]), one hand-off to the pool: each weight matrix is read once for
// the n columns (kernels.h matmat: every column gets the matvec's bits); n = 1 runs the matvecs.
// The caller's thread first quantizes the columns. Ternary (i2_s, or tl1 / tl2 when `lut`
// (model/ternary_lut.h) has room for n columns): each column as bitnet.cpp's I8_S (quantize_i8s).
// Dense: per the weights' block, once per run of matrices with the same block.
struct TlLutBuffer;
void run_ternary_matmats(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                         const size_t* out_strides, int count, const float* x, size_t x_stride, int n_vals, int n,
                         BatchState& b, const TlLutBuffer* lut = nullptr);
void run_dense_matmats(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                       const size_t* out_strides, int count, const float* x, size_t x_stride, int n_vals, int n,
                       BatchState& b);

// One layer's attention at one position, as the pool's tasks read it.
struct AttentionJob {
  const KernelSet* kernels;
  const LlamaConfig* cfg;
  const float* q;
  const float* key_rows;  // this layer's f32 cache: [ctx_len, kv_dim]; nullptr with an int8 cache
  const float* value_rows;
  const int8_t* key_q;    // this layer's int8 cache [ctx_len, kv_dim] and scales [ctx_len, n_kv_heads]
  const int8_t* value_q;
  const float* key_s;
  const float* value_s;
  int8_t* q_q;            // int8 cache: the quantized query, [n_heads * head_dim]
  float* att;             // [n_heads, ctx_len]
  float* out;             // [dim]
  int ctx_len;
  int pos;
};
AttentionJob attention_job(const KernelSet* k, const LlamaConfig& c, DecoderState& s, int layer, int pos);

// Multi-head (grouped-query) attention of layer `layer` at positions pos0 .. pos0 + n - 1 in order:
// query i at q + i * dim against the cached keys and values of positions 0..pos0 + i, into
// out + i * dim; heads split over the pool's threads, one hand-off for all n. Stores the new keys
// and values first (store_kv). With an int8 cache each head's query is quantized (one scale).
void attend(ThreadPool& pool, const KernelSet& k, const LlamaConfig& c, DecoderState& s, int layer, int pos0, int n,
            const float* q, float* out);

}  // namespace mcullm
