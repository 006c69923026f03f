// The "pie" kernel table for the ESP32-S3 (Xtensa LX7 with the PIE SIMD unit): the q8_0, q4g64 and q4e
// (int8 activations) matvecs run in pie_kernels.S with their float steps, the integer inner loops of
// the i2_s matvec and of the int8 attention scores too, their float steps here; FPU loops of the same
// file (not PIE) do the attention's divisions, softmax's exponentials, SiLU, the int8 values, int8
// block rounding and the head's fill; all in the scalar reference's order (kernels.h), so the results
// are the reference's bits (docs/pie.md). Everything else, and any call whose pointers are not aligned
// where the assembly needs it, takes the reference. Compiled only for Xtensa builds that define MCULLM_PIE (and link
// pie_kernels.S); empty elsewhere.
#if defined(__XTENSA__) && defined(MCULLM_PIE)
#include "core/fmath.h"
#include "kernels/kernels.h"
#include "kernels/matmat_rows.h"
#include "kernels/ref/f32_unrolled.h"
#include "quant/blocks.h"
#include "quant/q4e.h"

extern "C" {
int32_t mcullm_pie_dot_s8(const int8_t* a, const int8_t* b, int n16);
int32_t mcullm_pie_dot_s8_ub(const int8_t* a, const int8_t* b, int n16);
int32_t mcullm_pie_i2s_codes(const uint8_t* row, const int8_t* xq, int ngroups, const uint8_t* m03);
struct BlockRows {  // mcullm_pie_q4g64_rows's / mcullm_pie_q8_0_rows's arguments (word offsets in pie_kernels.S)
  const uint8_t* blocks;  // row 0's first block
  float* y;               // y of row 0
  int rows, row_bytes, nb;
  const int8_t* xq;
  const float* xs;
  const int8_t* consts;  // q4g64 only
};
void mcullm_pie_q4g64_rows(const BlockRows* a);
void mcullm_pie_q8_0_rows(const BlockRows* a);
struct Q4eRows {  // mcullm_pie_q4e_rows's arguments (word offsets in pie_kernels.S)
  const uint8_t* codes;   // row 0's first code byte
  const uint8_t* scales;  // row 0's f16 scale of the first group
  float* y;               // y of row 0: the running sums
  int rows, row_bytes, scale_stride, ngroups, n16;
  const int8_t* x2;
  const int8_t* consts;
  int from_zero;  // nonzero: the sums start at +0, y is only written
  const int32_t* xsum8;  // per group: 8 * the sum of its activations (the codes' -8)
};
void mcullm_pie_q4e_rows(const Q4eRows* a);
void mcullm_pie_scores_s8(const int8_t* q, const int8_t* keys, int stride, int n, int n16, int32_t* out);
void mcullm_fdiv_by(float* x, int n, uint32_t d_bits);
void mcullm_fill_u32(uint32_t* x, int n, uint32_t v);
uint32_t mcullm_softmax_exps(float* x, int n, const float* k);
void mcullm_silu_denominators(const float* x, float* den, int n, const float* k);
void mcullm_silu_gate(float* gate, const float* den, const float* up, int n);
struct ValuesQ8Block {  // mcullm_values_q8_12's arguments (byte offsets in pie_kernels.S)
  const float* att;
  const int8_t* values;  // row 0's first of the twelve values
  const float* vscales;
  int stride, scale_stride_bytes, n;
  float* out;
};
void mcullm_values_q8_12(const ValuesQ8Block* a);
void mcullm_round_to_int8(const float* x, int n, uint32_t id_bits, int8_t* q);
uint32_t mcullm_q4e_abs_max(const float* x, int n, uint32_t m_bits);
void mcullm_q4e_round_int8(const float* x, int n, uint32_t inv_bits, int8_t* q);
}

namespace mcullm {
namespace {

alignas(16) const uint8_t kMask03[16] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
alignas(16) const int8_t kQ4Consts[32] = {15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
                                          -8, -8, -8, -8, -8, -8, -8, -8, -8, -8, -8, -8, -8, -8, -8, -8};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Exact int32 dot product of n int8 values; a 16-byte aligned, b any alignment.
int32_t dot_s8(const int8_t* a, const int8_t* b, int n) {
  const int n16 = n / 16;
  int32_t isum = 0;
  if (n16 > 0) isum = aligned16(b) ? mcullm_pie_dot_s8(a, b, n16) : mcullm_pie_dot_s8_ub(a, b, n16);
  for (int i = 16 * n16; i < n; ++i) isum += a[i] * b[i];
  return isum;
}

// x[i] /= d with the bits of C's division on this target (__divsf3: pie_kernels.S's mcullm_fdiv_by
// runs its steps, the divisor's once for the whole row instead of once per element).
void divide_by(float* x, int n, float d) {
  if (n > 0) mcullm_fdiv_by(x, n, __builtin_bit_cast(uint32_t, d));
}

// attn_scores_unrolled's dot products; the divisions by the scale through divide_by.
void attn_scores_pie(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores) {
  for (int t = 0; t < n; ++t) scores[t] = dot_f32_unrolled(q, keys + static_cast<size_t>(t) * stride, hs);
  divide_by(scores, n, scale);
}

void fill_f32_pie(float* x, int n, float value) {
  if (n > 0) mcullm_fill_u32(reinterpret_cast<uint32_t*>(x), n, __builtin_bit_cast(uint32_t, value));
}

constexpr int kMaxPaddedHead = 256;  // the widest head the scores kernel pads (wider: one row at a time)

// The int32 sums for every position in one assembly call: q is copied into 16 n16 zero-padded
// bytes, so a head that is not a multiple of 16 wide (24: 16 + 8) needs no scalar tail; each padded
// row reads up to 16 n16 + 31 bytes from its start (its chunk alignment and one chunk more), which
// stay inside the cache's written rows for all but the last few rows: those take dot_s8.
void attn_scores_q8_pie(const int8_t* q, float qs, const int8_t* keys, const float* kscales, size_t stride,
                        size_t s_stride, int n, int hs, float scale, float* scores) {
  if (hs > kMaxPaddedHead || n <= 0) {
    attn_scores_q8_ref(q, qs, keys, kscales, stride, s_stride, n, hs, scale, scores);
    return;
  }
  const int n16 = (hs + 15) / 16;
  alignas(16) int8_t padded[kMaxPaddedHead];
  for (int i = 0; i < 16 * n16; ++i) padded[i] = i < hs ? q[i] : 0;
  const long last_end = static_cast<long>(n - 1) * static_cast<long>(stride) + hs;  // past the last row's keys
  const long room = last_end - (16 * n16 + 31);
  int fast = room < 0 ? 0 : static_cast<int>(room / static_cast<long>(stride)) + 1;
  if (fast > n) fast = n;
  int32_t* isums = reinterpret_cast<int32_t*>(scores);  // the sums first, then their scores in place
  if (fast > 0) mcullm_pie_scores_s8(padded, keys, static_cast<int>(stride), fast, n16, isums);
  for (int t = fast; t < n; ++t) isums[t] = dot_s8(padded, keys + static_cast<size_t>(t) * stride, hs);
  for (int t = 0; t < n; ++t) scores[t] = static_cast<float>(isums[t]) * (qs * kscales[static_cast<size_t>(t) * s_stride]);
  divide_by(scores, n, scale);
}

// mc_expf's constants as pie_kernels.S's expf_f0 takes them: [0] the caller's (softmax's max), then
// the floats it uses and its two limits (whose bits the assembly compares).
static_assert(__builtin_bit_cast(uint32_t, 88.72283935546875f) == 0x42b17218u &&
                  __builtin_bit_cast(uint32_t, -103.972084045410f) == 0xc2cff1b5u,
              "mc_expf's limits, as bits");
constexpr float kExpfConstants[13] = {0.0f,           1.44269504088896341f, 0.693145751953125f, 1.428606765330187045e-06f,
                                      1.0f / 5040.0f, 1.0f / 720.0f,        1.0f / 120.0f,      1.0f / 24.0f,
                                      1.0f / 6.0f,    0.5f,                 1.0f,               88.72283935546875f,
                                      -103.972084045410f};

// attn_values_q8's outputs twelve at a time in the assembly (the twelve sums in registers, two values a
// load), the rest (and rows that are not 2-byte aligned) in attn_values_q8_unrolled; each output's
// order of operations is the reference's whichever computes it.
void attn_values_q8_pie(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride,
                        int n, int hs, float* out) {
  int i = 0;
  if ((reinterpret_cast<uintptr_t>(values) & 1) == 0 && (stride & 1) == 0) {
    for (; i + 12 <= hs; i += 12) {
      const ValuesQ8Block a = {att, values + i, vscales, static_cast<int>(stride),
                               static_cast<int>(s_stride * sizeof(float)), n, out + i};
      mcullm_values_q8_12(&a);
    }
  }
  if (i < hs) attn_values_q8_unrolled(att, values + i, vscales, stride, s_stride, n, hs - i, out + i);
}

// quantize_activations' blocks, each block's rounding in mcullm_round_to_int8.
void quantize_blocks_pie(const float* x, int n, int block, int8_t* q, float* scales) {
  quantize_blocks_by(x, n, block, q, scales, [](const float* v, int len, float id, int8_t* out) {
    mcullm_round_to_int8(v, len, __builtin_bit_cast(uint32_t, id), out);
  });
}

// q4e_quantize_activations' halves (quant/q4e.cpp): the loops in the assembly, inv = 127 / xmax here.
float q4e_activations_max_pie(const float* x, int n) {
  return __builtin_bit_cast(float, mcullm_q4e_abs_max(x, n, __builtin_bit_cast(uint32_t, kQ4eActivationMaxFloor)));
}
void q4e_quantize_with_pie(const float* x, int n, float xmax, int8_t* q) {
  mcullm_q4e_round_int8(x, n, __builtin_bit_cast(uint32_t, q4e_activation_inv(xmax)), q);
}

// softmax_ref's steps: the max here, the exponentials and their sum in mcullm_softmax_exps (mc_expf's
// operations with its constants in registers), the normalizing divisions through divide_by.
void softmax_pie(float* x, int n) {
  float max = x[0];
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float k[13];
  for (int i = 0; i < 13; ++i) k[i] = i == 0 ? max : kExpfConstants[i];
  divide_by(x, n, __builtin_bit_cast(float, mcullm_softmax_exps(x, n, k)));
}

// silu_mul_ref's gate[i] = mc_silu(gate[i]) * up[i], mc_silu = x / (1 + mc_expf(-x)): the divisors a
// chunk at a time (mc_expf with its constants in registers), then the divisions and products.
void silu_mul_pie(float* gate, const float* up, int n) {
  constexpr int kChunk = 64;
  float den[kChunk];
  for (int c = 0; c < n; c += kChunk) {
    const int m = n - c < kChunk ? n - c : kChunk;
    mcullm_silu_denominators(gate + c, den, m, kExpfConstants);
    mcullm_silu_gate(gate + c, den, up + c, m);
  }
}

// An i2_s row of codes 1 (bytes 0x55) for up to 8192 columns: its codes' dot product is the
// activations' sum, in the assembly's 16 lanes instead of a scalar loop.
struct OnesCodes {
  alignas(16) uint8_t b[2048];
  constexpr OnesCodes() : b() {
    for (uint8_t& v : b) v = 0x55;
  }
};
constexpr OnesCodes kOnesCodes;

// i2_s rows: the codes' dot product in the assembly, less the activations' sum (sum(code * q) -
// sum(q) = sum((code - 1) * q)), which is computed once per call.
struct I2sRowsPie {
  const MatRef& w;
  const int8_t* xq;
  int groups;
  int32_t xsum = 0;
  float scale;
  I2sRowsPie(const MatRef& m, const int8_t* q, const float* xs) : w(m), xq(q), groups(m.cols / 128), scale(m.scale * xs[0]) {}
  bool usable() const { return aligned16(w.data) && (w.row_bytes & 15) == 0 && aligned16(xq) && groups > 0; }
  void sum_activations() {
    if (groups * 32 <= static_cast<int>(sizeof kOnesCodes.b)) {
      xsum = mcullm_pie_i2s_codes(kOnesCodes.b, xq, groups, kMask03);
      return;
    }
    for (int j = 0; j < groups * 128; ++j) xsum += xq[j];
  }
  float row(int r) const { return static_cast<float>(mcullm_pie_i2s_codes(w.row(r), xq, groups, kMask03) - xsum) * scale; }
};

void matvec_i2s_pie(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  I2sRowsPie p(w, xq, xs);
  if (!p.usable()) {
    matvec_i2s_ref(w, xq, xs, y, r0, r1);
    return;
  }
  p.sum_activations();
  for (int r = r0; r < r1; ++r) y[r] = p.row(r);
}

// The gate-first FFN's live up rows: the activations' sum once for all of them (a matvec call per
// row summed them again for each).
void matvec_i2s_rows_pie(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y) {
  I2sRowsPie p(w, xq, xs);
  if (!p.usable()) {
    matvec_i2s_rows_ref(w, xq, xs, rows, n, y);
    return;
  }
  p.sum_activations();
  for (int i = 0; i < n; ++i) y[rows[i]] = p.row(rows[i]);
}

// q4g64 / q8_0 (34-byte blocks of kBlock weights): the assembly does every step of the reference
// (integer block sums, f16 scales, the 8 lanes, the fold), every row in one call.
template <int kBlock, void (*Rows)(const BlockRows*),
          void (*Ref)(const MatRef&, const int8_t*, const float*, float*, int, int)>
void matvec_blocks_pie(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  if (!aligned16(xq) || w.cols <= 0) {
    Ref(w, xq, xs, y, r0, r1);
    return;
  }
  if (r1 <= r0) return;
  const BlockRows a = {.blocks = w.row(r0),
                       .y = y + r0,
                       .rows = r1 - r0,
                       .row_bytes = static_cast<int>(w.row_bytes),
                       .nb = (w.cols + kBlock - 1) / kBlock,
                       .xq = xq,
                       .xs = xs,
                       .consts = kQ4Consts};
  Rows(&a);
}

namespace {
constexpr int kQ4eHalf = 256;  // x2: even columns at [0, 256), odd ones at [256, 512)

bool q4e_pie_group_ok(const MatRef& w) { return w.group > 0 && w.group % 32 == 0 && w.group <= 2 * kQ4eHalf; }

// One chunk of whole groups [g0, g1): its activations deinterleaved into x2 and the groups' sums.
struct Q4eChunk {
  alignas(16) int8_t x2[2 * kQ4eHalf];
  int32_t xsum8[2 * kQ4eHalf / 32];
  int g0, c0, c1, full, tail, ng;

  void prepare(const MatRef& w, const int8_t* xq, int g_begin, int g_end) {
    ng = q4e_groups(w.cols, w.group);
    g0 = g_begin;
    c0 = g_begin * w.group;
    c1 = g_end * w.group < w.cols ? g_end * w.group : w.cols;
    full = (c1 - c0) / w.group;  // whole groups in this chunk
    tail = c1 - c0 - full * w.group;
    // Deinterleave in column pairs, zero-padded to 32 columns, with each group's sum.
    const int n = c1 - c0, npad = (n + 31) & ~31;
    const int8_t* src = xq + c0;
    for (int g = 0; g < g_end - g_begin; ++g) {
      const int k1 = ((g + 1) * w.group < npad ? (g + 1) * w.group : npad) / 2;
      int32_t sum = 0;
      for (int k = g * w.group / 2; k < k1; ++k) {
        const int8_t e = 2 * k < n ? src[2 * k] : 0, o = 2 * k + 1 < n ? src[2 * k + 1] : 0;
        x2[k] = e;
        x2[kQ4eHalf + k] = o;
        sum += e + o;
      }
      xsum8[g] = 8 * sum;
    }
  }

  // Rows [r0, r1) over this chunk: y[r] starts (first chunk) or goes on with the chunk's groups.
  void rows(const MatRef& w, const int8_t* xq, float* y, int r0, int r1) const {
    Q4eRows a;
    a.row_bytes = static_cast<int>(w.row_bytes);
    a.scale_stride = 2 * ng;
    a.consts = kQ4Consts;
    a.xsum8 = xsum8;
    a.codes = w.row(r0) + c0 / 2;
    a.scales = w.scales + (static_cast<size_t>(r0) * static_cast<size_t>(ng) + static_cast<size_t>(g0)) * 2;
    a.y = y + r0;
    a.rows = r1 - r0;
    a.x2 = x2;
    a.ngroups = full;
    a.n16 = w.group / 32;
    a.from_zero = g0 == 0;  // the first chunk starts the sums (no memset of y)
    if (full > 0) {
      mcullm_pie_q4e_rows(&a);
      a.from_zero = 0;
    }
    if (tail > 0) {
      a.codes += full * w.group / 2;
      a.scales += 2 * full;
      a.x2 = x2 + full * w.group / 2;
      a.xsum8 = xsum8 + full;
      a.ngroups = 1;
      a.n16 = (tail + 31) / 32;
      // Rows whose over-read (past the row's last code byte) stays inside the tensor's rows.
      const int over = 16 * a.n16 - (tail + 1) / 2, after = (over + a.row_bytes - 1) / a.row_bytes;
      const int rasm = w.rows - after < r1 ? w.rows - after : r1;
      a.rows = rasm - r0;
      if (a.rows > 0) mcullm_pie_q4e_rows(&a);
      for (int r = rasm > r0 ? rasm : r0; r < r1; ++r) {
        if (a.from_zero) y[r] = 0.0f;
        int32_t isum = 0;
        for (int j = c0 + full * w.group; j < c1; ++j) isum += q4e_weight(w, r, j) * xq[j];
        y[r] += static_cast<float>(isum) * q4e_scale(w, r, g0 + full);
      }
    }
  }
};

// Each chunk of whole groups (at most 512 columns) in increasing order, prepared, handed to f.
template <typename F>
void for_q4e_chunks(const MatRef& w, const int8_t* xq, F&& f) {
  const int ng = q4e_groups(w.cols, w.group), gpc = 2 * kQ4eHalf / w.group;
  Q4eChunk ch;
  for (int g0 = 0; g0 < ng; g0 += gpc) {
    ch.prepare(w, xq, g0, ng - g0 < gpc ? ng : g0 + gpc);
    f(ch);
  }
}
}  // namespace

// esp32-ai int4 rows with int8 activations: y[r] accumulates the groups in increasing order exactly
// as the reference's acc does (it starts at +0 and holds a float between chunks), then y[r] *= xs[0].
// Columns go in chunks of whole groups, at most 512 columns: the chunk's activations deinterleaved
// (even / odd columns) into x2, zero-padded to a multiple of 32 columns, and the assembly does the
// integer sums and the float steps (mul.s, add.s) of every row. The chunk's last, partial group
// (cols not a multiple of the group) is one more assembly group of ceil(tail / 32) * 32 columns: the
// padded activations are 0, so the codes read past the row's tail (at most 15 bytes, in the next
// row) add nothing; the tails of the last rows, whose over-read could leave the tensor, are summed here.
void matvec_q4e_q8_pie(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  if (!q4e_pie_group_ok(w)) {
    matvec_q4e_q8_ref(w, xq, xs, y, r0, r1);
    return;
  }
  if (r1 <= r0) return;
  for_q4e_chunks(w, xq, [&](const Q4eChunk& ch) { ch.rows(w, xq, y, r0, r1); });
  for (int r = r0; r < r1; ++r) y[r] = y[r] * xs[0];
}

// The listed rows: each chunk's activations are prepared once for all of them (per-row calls of
// matvec_q4e_q8_pie would redo it for every row), then each run of consecutive listed rows is one
// assembly call; every row the same operations in the same order as matvec_q4e_q8_pie's.
void matvec_q4e_q8_rows_pie(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y) {
  if (!q4e_pie_group_ok(w)) {
    matvec_q4e_q8_rows_ref(w, xq, xs, rows, n, y);
    return;
  }
  if (n <= 0) return;
  for_q4e_chunks(w, xq, [&](const Q4eChunk& ch) {
    for (int i = 0; i < n;) {
      int e = i + 1;
      while (e < n && rows[e] == rows[e - 1] + 1) ++e;
      ch.rows(w, xq, y, rows[i], rows[e - 1] + 1);
      i = e;
    }
  });
  for (int i = 0; i < n; ++i) y[rows[i]] = y[rows[i]] * xs[0];
}

constexpr KernelSet kPie = {.name = "pie",
                            .dot_f32 = dot_f32_unrolled,
                            .matvec_f32 = matvec_f32_unrolled,
                            .matvec_q8_0 = matvec_blocks_pie<32, mcullm_pie_q8_0_rows, matvec_q8_0_ref>,
                            .matvec_q4g64 = matvec_blocks_pie<64, mcullm_pie_q4g64_rows, matvec_q4g64_ref>,
                            .attn_scores = attn_scores_pie,
                            .attn_values = attn_values_unrolled,
                            .softmax = softmax_pie,
                            .fill_f32 = fill_f32_pie,
                            .silu_mul = silu_mul_pie,
                            .matvec_i2s = matvec_i2s_pie,
                            .matmat_i2s = matmat_i2s_by_rows<matvec_i2s_pie>,
                            .matvec_i2s_rows = matvec_i2s_rows_pie,
                            .matvec_q4e_q8 = matvec_q4e_q8_pie,
                            .matvec_q4e_q8_rows = matvec_q4e_q8_rows_pie,
                            .attn_scores_q8 = attn_scores_q8_pie,
                            .attn_values_q8 = attn_values_q8_pie,
                            .quantize_blocks = quantize_blocks_pie,
                            .q4e_activations_max = q4e_activations_max_pie,
                            .q4e_quantize_with = q4e_quantize_with_pie};

}  // namespace

const KernelSet* kernels_pie_table() { return &kPie; }

}  // namespace mcullm
#endif
