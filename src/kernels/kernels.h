// Matrix-vector kernels behind one table, with a scalar reference beside each optimized variant.
//
// The reduction-order contract (what makes every variant bit-exact with the reference):
//  * f32 / f16 dot products use 16 lanes: acc[j % 16] += a[j] * b[j] in increasing j (a product is
//    rounded, then added: no fma), then the lanes are folded as a tree: for s = 8, 4, 2, 1:
//    acc[i] += acc[i + s] for i < s. The result is acc[0].
//  * Quantized dot products (weights in blocks, activations int8 in blocks of the same size) form
//    one exact int32 sum per block, then acc[b % 8] += (float)isum_b * (d_w_b * d_x_b) in increasing
//    block order, folded as a tree for s = 4, 2, 1.
//  * Ternary weights (i2_s rows, see quant/ternary.h) times int8 activations with ONE scale for the
//    whole vector (BitLinear, quantize_bitlinear): one exact int32 sum per row, then
//    y = (float)isum * (w.scale * xs[0]). Types without an integer kernel (tq1_0, tq2_0, i2_s with f32
//    input) go through one scalar path shared by every table: rows expanded to f32, then the f32
//    16-lane order above.
//  * TL1 / TL2 LUT kernels (bitnet.cpp's tiled layouts, quant/ternary.h; see "LUT kernels" below):
//    activations quantized to int8 in [-127, 127] with s = (float)(127 / max(max|x|, 1e-5)) per token
//    or per tensor, q = round-half-away(x * s); one LUT per token of the int16 partial sums of every
//    weight group; each row's dot product is one exact int32 sum (the tilings bound a K block's int16
//    partial sums below 2^15, so SIMD int16 accumulation inside a block is exact too). The only float
//    step: y[n][r] = (float)isum * (w.scale * inv_s[n]) with inv_s = (float)(1.0 / s), the product
//    w.scale * inv_s rounded to f32 first. Any order of integer adds gives the same bits.
//  * esp32-ai int4 (q4e, quant/q4e.h), in esp32-ai's own order so that its C core can be matched:
//    f32 activations: per group g = sum of (float)w_j * x_j in increasing j (rounded product, then
//    add), acc += g * d_group in increasing group order from 0, y = acc.
//    int8 activations (one scale xs[0] for the whole vector, q4e_quantize_activations): one exact
//    int32 sum per group, acc += (float)isum * d_group in increasing group order, y = acc * xs[0].
//  * int8 KV cache (attn_scores_q8 / attn_values_q8): keys, values and the query are int8 with one
//    f32 scale per head (per position for keys and values). score_t = ((float)isum_t * (qs * ks_t)) /
//    scale with isum_t the exact int32 dot product; out[i] = sum over t in increasing t of
//    (att[t] * vs_t) * (float)v_t[i] (each product rounded, then added, from +0).
//  * q4g64 with int8 activations quantized per 64-value block (quantize_activations, called once
//    per token and input vector) follows the quantized-block rule above: int32 group sums, then
//    one f32 multiply-add per group, (float)isum * (d_w * d_x), into 8 lanes folded as a tree.
// Rows are independent, so any split of rows among threads gives the same bits.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "quant/blocks.h"
#include "quant/dtype.h"
#include "quant/mat_ref.h"
#include "quant/q4e.h"
#include "quant/ternary.h"

namespace mcullm {

// ---- LUT kernels (TL1 / TL2) ----
// How a model layer uses a TL1 / TL2 weight (GGUF types kGgmlTypeTL1 / kGgmlTypeTL2, quant/ternary.h):
//  1. at load: TlTiling t = tl_tiling_for(type, M, K) (kernels/tl_tuning.h: --use-pretuned's stored
//     tiling, else the default; it must be the tiling the file was packed with), then
//     tl_tensor_init(&tensor, type, data, nbytes, M, K, t) once (the f32 scale is read at
//     tl_scale_offset; a file that stores it elsewhere, e.g. bitnet.cpp's `<name>_scale` tensor, sets
//     tensor.scale afterwards); reserve tl_workspace_bytes(tensor, max_tokens) from the arena;
//  2. per matmul: tl_mul_mat(kernels, tensor, x, n_tokens, y, work, work_bytes, pool) (x, y row-major
//     by token; tl_applicable tells whether bitnet.cpp would route the call here);
//  3. at unload: tl_tensor_free(&tensor).
// Our GGUF types tl1 / tl2 (quant/ternary.h) carry their tiling: format/gguf_model.h gguf_tl_matrix
// does step 1 with tl_tensor_init_packed, and model/ternary_lut.h does step 2 for groups of matrices
// that share one input (one LUT per column for all of them).
// A TL1 / TL2 weight tensor as the kernels read it: pointers into the file's bytes (no copy), the
// three parts of TL2 (triple indices, sign words, pair indices; quant/ternary.h) and the tensor scale.
struct TlTensor {
  TlType type = TlType::kTL2;
  TlTiling tiling;
  int rows = 0, cols = 0;
  int three_k = 0;                  // TL2: columns stored as triples; TL1: cols
  const uint8_t* index = nullptr;   // TL1: all indices; TL2: triple indices
  const uint8_t* sign = nullptr;    // TL2 only
  const uint8_t* pairs = nullptr;   // TL2 only (nullptr when three_k == cols)
  float scale = 0.0f;
  bool ready = false;
};

// The per-tensor cache: validates shape, tiling and size (bytes >= tl_tensor_bytes), finds the parts
// and reads the f32 scale at tl_scale_offset. Idempotent: a second call with the same arguments
// returns true and changes nothing; a call on a ready tensor with other arguments returns false
// (free it first). tl_tensor_free clears it (also idempotent). No allocation.
bool tl_tensor_init(TlTensor* t, TlType type, const void* data, size_t bytes, int M, int K, const TlTiling& tiling);
void tl_tensor_free(TlTensor* t);
// The same for a tensor whose scale is stored elsewhere (our GGUF tl1 / tl2 types, quant/ternary.h):
// `bytes` >= tl_packed_bytes, the scale given.
bool tl_tensor_init_packed(TlTensor* t, TlType type, const void* data, size_t bytes, int M, int K,
                           const TlTiling& tiling, float scale);

// bitnet.cpp's applicability rule: TL weights, f32 activations and f32 output; TL1 only for one
// column (n_tokens <= 1: its v1.0 ARM kernel's limit). Our kernels compute any n_tokens for both, so
// callers of TL1 with a batch either loop over tokens or call tl_mul_mat anyway.
bool tl_applicable(TlType weights, DType activations, DType output, int n_tokens);

enum class TlActQuant : uint8_t { kPerToken, kPerTensor };
// x: n_tokens rows of K floats; q: n_tokens rows of K int8, q_stride apart; inv_scales[n] = (float)(1.0 / s_n) (see
// the contract above). Non-finite input gives q = 0 and inv_scale = 0 for the tokens it touches.
void tl_quantize_activations(const float* x, int n_tokens, int K, TlActQuant mode, int8_t* q, size_t q_stride,
                             float* inv_scales);

// Bytes of one token's LUT: 32 per weight group (16 low bytes, then 16 high bytes of the int16 sums
// of the group's index patterns: TL2 triples |v| = 0..13, pairs 3a + b + 4 = 0..8, the rest 0).
size_t tl_lut_bytes(const TlTensor& w);
// Workspace of tl_mul_mat for n_tokens, rounded up to 64 bytes: scales, int8 activations, LUTs.
size_t tl_workspace_bytes(const TlTensor& w, int n_tokens);

struct KernelSet;
class ThreadPool;
// y (n_tokens rows of w.rows floats) = w times x (n_tokens rows of w.cols floats). Thread 0 (the
// caller) quantizes the activations and builds every token's LUT, then every pool thread computes
// its share of the tiles (whole BM-row tiles, slice() order). pool may be nullptr (one thread).
// False (y untouched) when w is not ready or the workspace is too small.
bool tl_mul_mat(const KernelSet& k, const TlTensor& w, const float* x, int n_tokens, float* y, void* work,
                size_t work_bytes, ThreadPool* pool, TlActQuant mode = TlActQuant::kPerToken);

// Attention of heads [h0, h1) at one position over an f32 KV cache (KernelSet::attn_heads).
struct AttnHeads {
  const float* q;        // head h's query at q + h * hs
  const float* keys;     // KV head g's key of position t at keys + t * stride + g * hs
  const float* values;   // the same layout as keys
  size_t stride;
  float* att;            // head h's n scores, then its attention weights, at att + h * att_stride
  size_t att_stride;
  float* out;            // head h's output at out + h * hs
  int n;                 // positions
  int hs;                // head size
  int group;             // query heads per KV head: head h reads KV head h / group
  float scale;
};
// Every head of [h0, h1) in turn through k's own per-head entries: k.attn_scores, k.softmax,
// k.attn_values (the default attn_heads entry, so a table without its own keeps its per-head kernels).
void attn_heads_by_head(const KernelSet& k, const AttnHeads& a, int h0, int h1);

// The scalar reference kernels (kernels/ref/): the oracle every optimized kernel equals bit for bit,
// and every table's default entry (KernelSet below), so a table names only the kernels it replaces.
float dot_f32_ref(const float* a, const float* b, int n);
void matvec_f32_ref(const MatRef& w, const float* x, float* y, int r0, int r1);
void matvec_f16_ref(const MatRef& w, const float* x, float* y, int r0, int r1);
void matvec_q8_0_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4_0_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4g64_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void attn_scores_ref(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores);
void attn_values_ref(const float* att, const float* values, size_t stride, int n, int hs, float* out);
void softmax_ref(float* x, int n);
void fill_f32_ref(float* x, int n, float value);
void silu_mul_ref(float* gate, const float* up, int n);
// i2_s rows (quant/ternary.h) times int8 activations with one scale: y[r] = (float)isum * (w.scale * xs[0]).
void matvec_i2s_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matmat_i2s_ref(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y,
                    size_t y_stride, int r0, int r1);
void matvec_i2s_rows_ref(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y);
void tl_lut_build_ref(const TlTensor& w, const int8_t* q, uint8_t* lut);
void tl_matmul_ref(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens,
                   float* y, size_t y_stride, int tile0, int tile1);
void matvec_q4e_f32_ref(const MatRef& w, const float* x, float* y, int r0, int r1);
void matvec_q4e_q8_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4e_q8_rows_ref(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y);
void attn_scores_q8_ref(const int8_t* q, float qs, const int8_t* keys, const float* kscales, size_t stride,
                        size_t s_stride, int n, int hs, float scale, float* scores);
void attn_values_q8_ref(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride,
                        int n, int hs, float* out);
// (quantize_i8s and quantize_activations, quant/ternary.h and quant/blocks.h, are their own references.)
// q4e_quantize_activations (quant/q4e.h) through a table's two halves: the same bits.
void q4e_quantize_activations(const KernelSet& k, const float* x, int n, int8_t* q, float* scale);
// The matmat_tiled entry of tables without a block GEMM: declines every call.
bool matmat_tiled_none(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1);

// ---- The sparse ReLU FFN's down product (model/sparse_ffn.h) ----
// A q8_0 / q4_0 / q4g64 / q4e down matrix [rows, cols] stored by column, built once from the row-major
// matrix (build_down_cols, model/sparse_ffn.h): column j's integer weights (the block codes, the
// q4 offset of 8 still in) at w + j * col_bytes, in chunks of 32 rows: q8_0: 32 int8 (row 32c + i at
// byte 32c + i); q4_0 / q4g64 / q4e: 16 bytes, row 32c + i in the low nibble of byte 16c + i and row
// 32c + 16 + i in its high nibble. scales[b * rows + r] = row r's block b scale as f32 (f16_to_f32 of
// the stored d, exact). rows % 32 == 0; cols % block == 0 except for q4e, whose block is the tensor's
// group (any size; the last group may be shorter).
// i2_s (a ternary down matrix): column j's 2-bit codes (w + 1, as stored: a code 3 stays 3, which every
// i2_s kernel reads as weight 2) at w + j * col_bytes (col_bytes = rows / 4), i2_s's bit order per 32
// rows instead of 128: row 32c + 8k + i at byte 8c + i, bits 7-6 for k = 0 .. 1-0 for k = 3; block =
// cols (one scale), scales[0] = the tensor's scale.
struct DownCols {
  DType type = DType::kF32;  // kF32: not built
  int rows = 0, cols = 0, block = 0;
  size_t col_bytes = 0;
  const uint8_t* w = nullptr;
  const float* scales = nullptr;
};
// The row-major matrix's block matvec (the contract above) reading only the columns in `live`
// (n_live increasing indices). Columns not listed must have xq == 0 (listing a zero column is
// harmless). A block with a listed column gets the dense int32 sum (integer adds in any order); a
// block with none is skipped: its dense term is (float)0 * (d_w * d_x) = +-0 when d_w is finite
// (build_down_cols refuses a matrix with a non-finite scale), and adding +-0 to a lane that starts at
// +0 never changes it (a round-to-nearest sum is -0 only when both terms are). So y[r] has the bits
// of matvec_<type>(row-major, xq, xs) for r in [r0, r1); r0 and r1 multiples of 32 (r1 may be rows).
// q4e follows its own order (the contract above, int8 activations, xs[0] the one scale): per row one
// accumulator from +0, acc += (float)isum_g * d_g in increasing group order, y = acc * xs[0]; a group
// with no listed column is skipped by the same argument (acc starts at +0, so it is never -0).
// i2_s follows matvec_i2s's: one exact int32 sum per row over the listed columns (a column not listed
// has xq == 0 and adds 0 to the dense sum), then y[r] = (float)isum * (scales[0] * xs[0]).
void matvec_down_cols_ref(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live,
                          float* y, int r0, int r1);

// A kernel table. Every entry defaults to the reference kernel: a table is written with designated
// initializers naming the kernels it replaces, in this order, e.g.
//   constexpr KernelSet kAvx2 = {.name = "avx2", .dot_f32 = avx2::dot_f32, ...};
// (constant-initialised: no guard variables, which the MCU builds cannot have).
struct KernelSet {
  const char* name = nullptr;
  float (*dot_f32)(const float* a, const float* b, int n) = dot_f32_ref;
  // y[r] = (row r of w) . x, for r in [r0, r1).
  void (*matvec_f32)(const MatRef& w, const float* x, float* y, int r0, int r1) = matvec_f32_ref;
  void (*matvec_f16)(const MatRef& w, const float* x, float* y, int r0, int r1) = matvec_f16_ref;
  void (*matvec_q8_0)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) = matvec_q8_0_ref;
  void (*matvec_q4_0)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) = matvec_q4_0_ref;
  void (*matvec_q4g64)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) = matvec_q4g64_ref;

  // Attention over one head. scores[t] = dot_f32(q, keys + t * stride, hs) / scale for t < n.
  void (*attn_scores)(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores) = attn_scores_ref;
  // out[i] = sum over t < n, in increasing t, of att[t] * values[t * stride + i], for i < hs.
  void (*attn_values)(const float* att, const float* values, size_t stride, int n, int hs, float* out) = attn_values_ref;
  // In-place softmax: m = running max (x[i] > m replaces m, so NaNs are never picked unless x[0]
  // is one), x[i] = mc_expf(x[i] - m), sum in increasing i, then x[i] /= sum.
  void (*softmax)(float* x, int n) = softmax_ref;
  // Heads [h0, h1) of one position (AttnHeads above), each head's attn_scores, softmax and
  // attn_values bit for bit, leaving the attention weights in att: what attn_heads_by_head does
  // with the reference kernels. A table may run several heads' sequential chains side by side
  // (each head keeps its order of operations).
  void (*attn_heads)(const KernelSet& k, const AttnHeads& a, int h0, int h1) = attn_heads_by_head;
  // x[i] = value for i < n (the two-stage head's -inf for every row it does not compute).
  void (*fill_f32)(float* x, int n, float value) = fill_f32_ref;
  // gate[i] = mc_silu(gate[i]) * up[i]: the SwiGLU product.
  void (*silu_mul)(float* gate, const float* up, int n) = silu_mul_ref;
  // i2_s rows times int8 activations with one scale (xs[0]): see the contract above.
  void (*matvec_i2s)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) = matvec_i2s_ref;
  // The same for n columns: column c's int8 activations at xq + c * xq_stride, its scale xs[c], its
  // outputs at y + c * y_stride; every output has matvec_i2s's bits (integer sums are exact).
  void (*matmat_i2s)(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y,
                     size_t y_stride, int r0, int r1) = matmat_i2s_ref;
  // The n rows listed in `rows` (the sparse FFN's live up rows): y[rows[i]] has matvec_i2s's bits.
  void (*matvec_i2s_rows)(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n,
                          float* y) = matvec_i2s_rows_ref;

  // One token's LUT (tl_lut_bytes) from its int8 activations (w.cols of them).
  void (*tl_lut_build)(const TlTensor& w, const int8_t* q, uint8_t* lut) = tl_lut_build_ref;
  // Tiles [tile0, tile1) (BM rows each) for n_tokens: token n's LUT at lut + n * lut_stride, its
  // inverse activation scale inv_scales[n], output row y + n * y_stride (see the contract above).
  void (*tl_matmul)(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens,
                    float* y, size_t y_stride, int tile0, int tile1) = tl_matmul_ref;
  // esp32-ai int4 rows (q4e) times f32 or int8 activations: see the contract above.
  void (*matvec_q4e_f32)(const MatRef& w, const float* x, float* y, int r0, int r1) = matvec_q4e_f32_ref;
  void (*matvec_q4e_q8)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) = matvec_q4e_q8_ref;
  // The n distinct rows listed in `rows`, in any order (the sparse FFN's live up rows of a PLE model):
  // y[rows[i]] has matvec_q4e_q8's bits, the other rows are untouched.
  void (*matvec_q4e_q8_rows)(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n,
                             float* y) = matvec_q4e_q8_rows_ref;

  // Attention over one head of an int8 KV cache (see the contract above): key t at keys + t * stride,
  // its scale at kscales[t * s_stride]; q the int8 query with scale qs.
  void (*attn_scores_q8)(const int8_t* q, float qs, const int8_t* keys, const float* kscales, size_t stride,
                         size_t s_stride, int n, int hs, float scale, float* scores) = attn_scores_q8_ref;
  void (*attn_values_q8)(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride,
                         int n, int hs, float* out) = attn_values_q8_ref;

  // BitLinear's activation quantization, bit for bit quant/ternary.h's quantize_i8s (the reference):
  // q = round-half-away(x * s) clamped to [-128, 127], s = i8s_scale(max |x|), *inv_scale = 1 / s.
  void (*quantize_i8s)(const float* x, int n, int8_t* q, float* inv_scale) = mcullm::quantize_i8s;

  // quant/blocks.h's quantize_activations (the reference), bit for bit: int8 blocks for the
  // quantized weight types' activations.
  void (*quantize_blocks)(const float* x, int n, int block, int8_t* q, float* scales) = quantize_activations;
  // q4e_quantize_activations' two halves (quant/q4e.h, the references), bit for bit: the vector's
  // max |x| (at least 1e-8), and its int8 values given that max (round half to even of x * 127 / xmax).
  float (*q4e_activations_max)(const float* x, int n) = mcullm::q4e_activations_max;
  void (*q4e_quantize_with)(const float* x, int n, float xmax, int8_t* q) = q4e_quantize_activations_with;

  // Rows [r0, r1) times n columns as a register-tiled GEMM (q8_0 / q4_0 / q4g64: int8, x.q, on VNNI
  // or on plain AVX2 with vpmaddubsw; avx512 also f16: x.f): every output has the matvec's bits. False (y untouched) for other types,
  // rows too long for it, or in tables without one (matmat_tiled_none); matmat() then runs matvecs
  // over row blocks.
  bool (*matmat_tiled)(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) = matmat_tiled_none;

  // The sparse ReLU FFN's down product over the live columns of a column-stored block matrix
  // (DownCols above): the row-major block matvec's bits (q4e: matvec_q4e_q8's; i2_s: matvec_i2s's).
  void (*matvec_down_cols)(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live,
                           float* y, int r0, int r1) = matvec_down_cols_ref;
};

const KernelSet& kernels_ref();
// nullptr when not compiled in or when the CPU lacks AVX2.
const KernelSet* kernels_avx2();
// The AVX2 table with the VNNI GEMM of the block types (matmat_tiled) on AVX-VNNI (VEX-encoded, the
// cores without AVX-512); nullptr when not compiled in or when the CPU lacks AVX-VNNI (or AVX2).
const KernelSet* kernels_avxvnni();
// The AVX2 table with the kernels AVX-512 makes faster: VNNI i2_s matvec / matmat, the TL2 LUT
// matmul; nullptr when not compiled in or when the CPU lacks AVX-512 F/BW/VL/VNNI (or AVX2).
const KernelSet* kernels_avx512();
// The avx512 table with the batched i2_s product (matmat_i2s) on AMX-INT8 tiles; nullptr when not
// compiled in, when the CPU lacks AMX-TILE / AMX-INT8 or the avx512 table, or when the OS refuses
// the tile state (Linux only: asked once with arch_prctl).
const KernelSet* kernels_amx();
// The NEON table (kernels/arm/ + the reference for the rest; aarch64 builds only, nullptr elsewhere).
const KernelSet* kernels_neon();
// The ESP32-S3 PIE table (kernels/esp32s3/: the reference with PIE integer loops for q4g64, q4e, i2_s
// and the int8 attention scores); only in Xtensa builds with MCULLM_PIE, nullptr elsewhere.
const KernelSet* kernels_pie();

// The kernel registry (kernels/dispatch.cpp): every table compiled into this build, fastest first,
// "ref" last. get() is one of the functions above: nullptr when this CPU cannot run the table.
// kernels_best, kernels_by_name and the CLI's --kernels choices all read it.
struct KernelTable {
  const char* name;
  const KernelSet* (*get)();
};
// The registry's tables; *count receives their number (at least 1: ref).
const KernelTable* kernel_tables(int* count);
// A registered table's name, or "auto" (kernels_best); nullptr for a name the registry does not know
// or a table this CPU cannot run.
const KernelSet* kernels_by_name(const char* name);
// The first registered table this CPU runs.
const KernelSet& kernels_best();

// Rows [r0, r1) of w times x, whatever w's type (x.q must be filled when w is quantized; for i2_s
// weights x.q with one scale selects the integer kernel, else the f32 path is taken; q4e weights
// likewise: x.q with its one scale (q4e_quantize_activations), else x.f). tl1 / tl2 weights (w.tl
// set) with x.q: a slow scalar path weight by weight with the LUT kernels' bits (models use
// tl_mul_mat's pieces instead, model/transformer.h run_ternary_q); with f32 input, the f32 path.
void matvec(const KernelSet& k, const MatRef& w, const ActVec& x, float* y, int r0, int r1);

// Rows [r0, r1) of w times the n columns of x (batched prefill): y[c * y_stride + r] has exactly the
// bits matvec gives for column c. Each block of rows is read from memory once for all n columns
// (i2_s with one scale per column: matmat_i2s; q8_0 / q4_0 / q4g64 / f16: matmat_tiled when the
// table takes it; the other types: matvec per column over row blocks that stay in L1).
void matmat(const KernelSet& k, const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1);

}  // namespace mcullm
