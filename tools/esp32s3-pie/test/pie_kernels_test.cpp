// The PIE kernel table against the scalar reference, on the emulated ESP32-S3 (QEMU -M sim -cpu
// esp32s3 with our PIE subset, tools/esp32s3-qemu): random inputs, every length class (whole
// chunks, tails, more blocks than one assembly call takes), aligned and unaligned rows, keys and
// activations (the unaligned activations take the reference fallback), extreme values. Every output
// must have the reference's bits. Prints one line per case group and the instruction counts of a
// few products (CCOUNT counts executed instructions with -icount shift=0 and the 1 GHz core clock
// of build.sh); exits with the number of failures.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"
#include "platform.h"
#include "quant/blocks.h"

namespace {

using namespace mcullm;

uint32_t g_rng = 0x12345678u;
uint32_t rnd() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}
// A positive float in [2^-8, 2^8) with random mantissa bits (no NaN, no subnormal).
float rnd_scale() {
  const uint32_t bits = ((119u + rnd() % 16u) << 23) | (rnd() & 0x7fffffu);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
uint16_t rnd_f16() { return static_cast<uint16_t>(((8u + rnd() % 14u) << 10) | (rnd() & 0x3ffu)); }
// Any f16 with the special ones often: +-0, subnormals, negative, the smallest and largest exponents,
// inf and nan (the q4g64 and q4e assemblies convert f16 to float themselves).
uint16_t rnd_f16_any() {
  const uint16_t sign = static_cast<uint16_t>((rnd() & 1u) << 15), mant = static_cast<uint16_t>(rnd() & 0x3ffu);
  switch (rnd() % 8u) {
    case 0: return sign;
    case 1: return static_cast<uint16_t>(sign | mant);
    case 2: return static_cast<uint16_t>(sign | 1u << 10 | mant);
    case 3: return static_cast<uint16_t>(sign | 30u << 10 | mant);
    case 4: return rnd() % 4u == 0 ? static_cast<uint16_t>(sign | 31u << 10 | (rnd() % 2u ? mant : 0u)) : rnd_f16();
    default: return static_cast<uint16_t>(sign | rnd_f16());
  }
}

// Buffers with room for offset views; 16-byte aligned bases.
alignas(16) uint8_t g_w[64 * 1024 + 64];
alignas(16) int8_t g_x[16 * 1024 + 64];
alignas(16) float g_s[1024];
alignas(16) float g_y0[1024];
alignas(16) float g_y1[1024];

const int kWoffQ4e[] = {0, 1, 7};
const int kXoff1[] = {0, 16, 3};
const int kWoff2[] = {0, 16, 1};
const int kXoff3[] = {0, 5};
const int kExtra4[] = {0, 1, 16, 13};
const int kQoff5[] = {0, 2};

int g_checks = 0, g_fail = 0;

void compare(const char* what, int a, int b, int c, int n) {
  ++g_checks;
  if (memcmp(g_y0, g_y1, static_cast<size_t>(n) * sizeof(float)) != 0) {
    ++g_fail;
    printf("FAIL %s %d %d %d\n", what, a, b, c);
    for (int i = 0; i < n; ++i) {  // the first differing output's bits (NaN payloads differ too)
      uint32_t u0, u1;
      memcpy(&u0, g_y0 + i, 4);
      memcpy(&u1, g_y1 + i, 4);
      if (u0 != u1) {
        printf("  y[%d]: ref %08lx, pie %08lx\n", i, static_cast<unsigned long>(u0), static_cast<unsigned long>(u1));
        break;
      }
    }
  }
}

void fill_x(int8_t* x, int n, bool extreme) {
  for (int i = 0; i < n; ++i) x[i] = extreme ? static_cast<int8_t>(-128) : static_cast<int8_t>(rnd());
}

using MatvecQ = void (*)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);

// q4g64 / q8_0: 34-byte blocks of `block` weights (random qs bytes are random codes of either type).
void test_blocks(const char* name, DType type, int block, MatvecQ KernelSet::*fn, const KernelSet& pie,
                 const KernelSet& ref) {
  // Odd column counts (the last block's padding columns: the reference reads the whole last block
  // and its activations; 172 is stories260K's hidden size), 1 to 9 blocks of either size (every lane
  // as the last one), more than 64 blocks.
  const int cols_list[] = {32, 64, 96, 128, 192, 288, 640, 64 * 65, 64 * 130, 1, 31, 33, 63, 65, 172, 300, 511, 575};
  char what[64];
  for (int cols : cols_list) {
    for (int woff = 0; woff < 3; ++woff) {
      for (int xoff : kXoff1) {
        for (int extreme = 0; extreme < 2; ++extreme) {
          const int nb = (cols + block - 1) / block;
          const int rows = 5;
          MatRef w;
          w.type = type;
          w.rows = rows;
          w.cols = cols;
          w.row_bytes = static_cast<size_t>(nb) * 34;
          w.data = g_w + woff;
          for (int r = 0; r < rows; ++r)
            for (int b = 0; b < nb; ++b) {
              uint8_t* blk = g_w + woff + r * w.row_bytes + b * 34;
              const uint16_t d = extreme ? rnd_f16() : rnd_f16_any();  // the assembly converts f16 too
              memcpy(blk, &d, 2);
              for (int j = 0; j < 32; ++j) blk[2 + j] = extreme ? 0x00 : static_cast<uint8_t>(rnd());
            }
          int8_t* x = g_x + xoff;
          fill_x(x, nb * block, extreme);
          for (int b = 0; b < nb; ++b) g_s[b] = rnd_scale();
          (ref.*fn)(w, x, g_s, g_y0, 0, rows);
          (pie.*fn)(w, x, g_s, g_y1, 0, rows);
          snprintf(what, sizeof what, "%s cols/woff/xoff", name);
          compare(what, cols, woff, xoff, rows);
          (ref.*fn)(w, x, g_s, g_y0, 1, 4);  // a row range
          (pie.*fn)(w, x, g_s, g_y1, 1, 4);
          snprintf(what, sizeof what, "%s rows 1..3 cols/woff/xoff", name);
          compare(what, cols, woff, xoff, 4);
        }
      }
    }
  }
}

void test_i2s(const KernelSet& pie, const KernelSet& ref) {
  const int cols_list[] = {128, 256, 384, 1024, 200, 4096};
  for (int cols : cols_list) {
    for (int woff : kWoff2) {
      for (int xoff : kXoff3) {
        for (int extreme = 0; extreme < 2; ++extreme) {
          const int rows = 7;
          MatRef w;
          w.type = DType::kI2_S;
          w.rows = rows;
          w.cols = cols;
          w.row_bytes = static_cast<size_t>(cols) / 4;
          w.data = g_w + woff;
          w.scale = rnd_scale();
          for (size_t i = 0; i < rows * w.row_bytes; ++i) {
            uint8_t byte = 0;
            for (int k = 0; k < 4; ++k) byte = static_cast<uint8_t>(byte << 2 | (extreme ? 2 : rnd() % 3));
            g_w[woff + i] = byte;
          }
          int8_t* x = g_x + xoff;
          fill_x(x, cols, extreme);
          const float xs = rnd_scale();
          ref.matvec_i2s(w, x, &xs, g_y0, 0, rows);
          pie.matvec_i2s(w, x, &xs, g_y1, 0, rows);
          compare("i2s cols/woff/xoff", cols, woff, xoff, rows);
          // The batched form: 3 columns, every output with matvec_i2s's bits.
          const float xs3[3] = {xs, rnd_scale(), rnd_scale()};
          ref.matmat_i2s(w, x, 0, xs3, 3, g_y0, rows, 0, rows);
          pie.matmat_i2s(w, x, 0, xs3, 3, g_y1, rows, 0, rows);
          compare("i2s matmat cols/woff/xoff", cols, woff, xoff, 3 * rows);
          // The gate-first FFN's listed rows (some rows, out of order, one twice): matvec_i2s's bits
          // at the listed rows, the others untouched.
          const int32_t listed[] = {5, 0, 3, 3, 6};
          for (int r = 0; r < rows; ++r) g_y0[r] = g_y1[r] = -1.5f;
          ref.matvec_i2s_rows(w, x, &xs, listed, 5, g_y0);
          pie.matvec_i2s_rows(w, x, &xs, listed, 5, g_y1);
          compare("i2s listed rows cols/woff/xoff", cols, woff, xoff, rows);
        }
      }
    }
  }
}

void test_q4e(const KernelSet& pie, const KernelSet& ref) {
  struct Shape { int cols, group; };
  const Shape shapes[] = {{128, 128}, {415, 128}, {1000, 128}, {256, 32}, {300, 64}, {96, 96}, {2048, 512},
                          {2048, 1024}, {31, 32},  {20, 32},   {3, 32},    {545, 64}, {33, 64}};
  for (const Shape& sh : shapes) {
    for (int woff : kWoffQ4e) {
      for (int extreme = 0; extreme < 2; ++extreme) {
        const int rows = 6, ng = (sh.cols + sh.group - 1) / sh.group;
        MatRef w;
        w.type = DType::kQ4E;
        w.rows = rows;
        w.cols = sh.cols;
        w.group = sh.group;
        w.row_bytes = static_cast<size_t>(sh.cols + 1) / 2;
        w.data = g_w + woff;
        for (size_t i = 0; i < rows * w.row_bytes; ++i) g_w[woff + i] = extreme ? 0x00 : static_cast<uint8_t>(rnd());
        uint8_t* scales = g_w + woff + rows * w.row_bytes + 1;  // unaligned, as in the files
        for (int i = 0; i < rows * ng; ++i) {
          const uint16_t d = extreme ? rnd_f16() : rnd_f16_any();
          memcpy(scales + 2 * i, &d, 2);
        }
        w.scales = scales;
        fill_x(g_x, sh.cols, extreme);
        const float xs = rnd_scale();
        ref.matvec_q4e_q8(w, g_x, &xs, g_y0, 0, rows);
        pie.matvec_q4e_q8(w, g_x, &xs, g_y1, 0, rows);
        compare("q4e cols/group/woff", sh.cols, sh.group, woff, rows);
        ref.matvec_q4e_q8(w, g_x, &xs, g_y0, 2, 5);  // a row range (the tails' last-rows rule)
        pie.matvec_q4e_q8(w, g_x, &xs, g_y1, 2, 5);
        compare("q4e rows 2..4 cols/group/woff", sh.cols, sh.group, woff, 5);
        // The gate-first FFN's listed rows (distinct, out of order, a run, the last row): matvec_q4e_q8's
        // bits at the listed rows, the others untouched.
        const int32_t listed[] = {5, 1, 2, 3};
        for (int r = 0; r < rows; ++r) g_y0[r] = g_y1[r] = -1.5f;
        ref.matvec_q4e_q8_rows(w, g_x, &xs, listed, 4, g_y0);
        pie.matvec_q4e_q8_rows(w, g_x, &xs, listed, 4, g_y1);
        compare("q4e listed rows cols/group/woff", sh.cols, sh.group, woff, rows);
      }
    }
  }
}

void test_attn(const KernelSet& pie, const KernelSet& ref) {
  // 24 = 16 + 8 (the padded row kernel); 300: wider than it pads (one row at a time)
  const int hs_list[] = {16, 24, 32, 48, 64, 7, 8, 67, 100, 128, 300};
  const int n_list[] = {1, 2, 9, 40};
  for (int hs : hs_list) {
    for (int extra : kExtra4) {
      for (int qoff : kQoff5) {
        for (int n : n_list) {
          for (int extreme = 0; extreme < 2; ++extreme) {
            const size_t stride = static_cast<size_t>(hs + extra);
            int8_t* keys = reinterpret_cast<int8_t*>(g_w) + 3 * extra;  // various key alignments
            fill_x(keys, static_cast<int>(stride) * n, extreme);
            int8_t* q = g_x + qoff;
            fill_x(q, hs, extreme);
            for (int t = 0; t < 2 * n; ++t) g_s[t] = rnd_scale();
            const float qs = rnd_scale(), scale = rnd_scale();
            ref.attn_scores_q8(q, qs, keys, g_s, stride, 2, n, hs, scale, g_y0);
            pie.attn_scores_q8(q, qs, keys, g_s, stride, 2, n, hs, scale, g_y1);
            compare("attn_scores_q8 hs/extra/qoff", hs, extra, qoff, n);
            // the values over the same rows (keys as values, the scores as weights: any floats, signs, zeros)
            const int8_t* values = keys + qoff + (extra & 1);  // odd rows take the unaligned path
            ref.attn_values_q8(g_y0, values, g_s, stride, 2, n, hs, g_y0 + 256);
            pie.attn_values_q8(g_y0, values, g_s, stride, 2, n, hs, g_y1 + 256);
            memcpy(g_y0, g_y0 + 256, static_cast<size_t>(hs) * sizeof(float));
            memcpy(g_y1, g_y1 + 256, static_cast<size_t>(hs) * sizeof(float));
            compare("attn_values_q8 hs/extra/qoff", hs, extra, qoff, hs);
          }
        }
      }
    }
  }
}

float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
// Any float: random bits, or one of the classes a division must get right.
float rnd_any_float() {
  static const uint32_t kSpecial[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000001u,
                                      0x807fffffu, 0x00800000u, 0x7f7fffffu, 0x3f800000u, 0x3f7fffffu, 0x7fa00001u};
  const uint32_t r = rnd();
  return r % 4 == 0 ? from_bits(kSpecial[(r >> 2) % 12]) : from_bits(rnd());
}

// The f32 scores divide every dot product by the scale (mcullm_fdiv_by): every class of quotient
// (zeros, subnormals, overflow, infinities, NaNs, signs) against C's division.
void test_divisions(const KernelSet& pie, const KernelSet& ref) {
  float* keys = reinterpret_cast<float*>(g_w);
  float* q = reinterpret_cast<float*>(g_x);
  for (int round = 0; round < 400; ++round) {
    const int n = 1 + static_cast<int>(rnd() % 64);
    for (int t = 0; t < n; ++t) keys[t] = rnd_any_float();
    q[0] = round % 2 ? 1.0f : rnd_any_float();  // hs 1: the quotient of one product by the scale
    const float scale = rnd_any_float();
    ref.attn_scores(q, keys, 1, n, 1, scale, g_y0);
    pie.attn_scores(q, keys, 1, n, 1, scale, g_y1);
    compare("attn_scores f32 (divisions) round/n", round, n, 0, n);
  }
  for (int n = 0; n <= 40; ++n) {  // the -inf fill: every length class of its eight-store loop, any start
    for (int i = 0; i < 48; ++i) g_y0[i] = g_y1[i] = static_cast<float>(i);
    ref.fill_f32(g_y0 + n % 3, n, -__builtin_huge_valf());
    pie.fill_f32(g_y1 + n % 3, n, -__builtin_huge_valf());
    compare("fill_f32 n", n, 0, 0, 48);
  }
  for (int round = 0; round < 300; ++round) {  // int8 blocks: every class of value, halves, short blocks
    const int block = round % 3 == 0 ? 32 : round % 3 == 1 ? 24 : 64;
    const int n = 1 + static_cast<int>(rnd() % 150);
    float* x = g_y0 + 512;
    for (int t = 0; t < n; ++t) {
      const uint32_t r = rnd() % 5;
      x[t] = r == 0 ? rnd_any_float()
           : r == 1 ? static_cast<float>(static_cast<int32_t>(rnd() % 255) - 127) * 0.5f  // halves: ties
                    : static_cast<float>(static_cast<int32_t>(rnd() % 20001) - 10000) * 0.0137f;
    }
    if (round % 7 == 0) {  // a scale of exactly 1 (max 127), values just below k + 0.5: a + 0.5f rounds up
      x[0] = 127.0f;
      for (int t = 1; t < n; ++t) {
        const float h = static_cast<float>(static_cast<int32_t>(rnd() % 254) - 127) + 0.5f;
        uint32_t u;
        memcpy(&u, &h, 4);
        u -= 1;  // the float below |h| (toward zero)
        memcpy(&x[t], &u, 4);
      }
    }
    int8_t q0[256], q1[256];
    float s0[16], s1[16];
    memset(q0, 0x55, sizeof q0);
    memset(q1, 0x55, sizeof q1);
    ref.quantize_blocks(x, n, block, q0, s0);
    pie.quantize_blocks(x, n, block, q1, s1);
    const int blocks = (n + block - 1) / block;
    ++g_checks;
    if (memcmp(q0, q1, static_cast<size_t>(blocks * block)) != 0 || memcmp(s0, s1, static_cast<size_t>(blocks) * 4) != 0) {
      ++g_fail;
      printf("FAIL quantize_blocks round %d n %d block %d\n", round, n, block);
    }
  }
  for (int round = 0; round < 300; ++round) {  // q4e's activations: its max, then round half to even
    const int n = round < 250 ? static_cast<int>(rnd() % 120) : 64 * (round % 3) + round % 2;
    float* x = g_y0 + 300;
    for (int t = 0; t < n; ++t) {
      const uint32_t r = rnd() % 5;
      x[t] = r == 0 ? rnd_any_float()
           : r == 1 ? static_cast<float>(static_cast<int32_t>(rnd() % 255) - 127) * 0.5f  // halves: ties
                    : static_cast<float>(static_cast<int32_t>(rnd() % 20001) - 10000) * 0.0137f;
    }
    if (round % 6 == 0 && n > 0) {  // xmax exactly 127 (inv 1): every k + 0.5 a tie, both parities
      x[0] = 127.0f;
      for (int t = 1; t < n; ++t) x[t] = static_cast<float>(static_cast<int32_t>(rnd() % 254) - 127) + 0.5f;
    }
    if (round % 6 == 1 && n > 0) x[n - 1] = from_bits(0x7fc00000u | (rnd() & 0x80000000u));  // a NaN
    if (round % 6 == 2 && n > 0) x[n / 2] = from_bits(0xff800000u);                        // -inf
    if (round % 6 == 3) for (int t = 0; t < n; ++t) x[t] = t % 2 ? -0.0f : 1e-9f;       // below the floor
    const float m0 = ref.q4e_activations_max(x, n), m1 = pie.q4e_activations_max(x, n);
    int8_t q0[256], q1[256];
    memset(q0, 0x55, sizeof q0);
    memset(q1, 0x55, sizeof q1);
    // with its own max, and with a max that makes values overflow +-127 (and inf * 0 = NaN for inv 0)
    const float xmax = round % 5 == 4 ? from_bits(0x7f800000u) : round % 5 == 3 ? 0.25f : m0;
    ref.q4e_quantize_with(x, n, xmax, q0);
    pie.q4e_quantize_with(x, n, xmax, q1);
    ++g_checks;
    if (memcmp(&m0, &m1, 4) != 0 || memcmp(q0, q1, sizeof q0) != 0) {
      ++g_fail;
      printf("FAIL q4e activations round %d n %d\n", round, n);
    }
  }
  for (int round = 0; round < 300; ++round) {  // SiLU and its gate: every class of input, chunk boundaries
    const int n = round < 200 ? 1 + static_cast<int>(rnd() % 140) : 64 * (round % 3) + round % 2;
    float* up = g_y1 + 256;
    for (int t = 0; t < n; ++t) {
      const uint32_t r = rnd() % 4;
      g_y0[t] = r == 0 ? rnd_any_float() : static_cast<float>(static_cast<int32_t>(rnd() % 40001) - 20000) * (r == 1 ? 0.01f : 0.0005f);
      up[t] = r == 3 ? rnd_any_float() : static_cast<float>(static_cast<int32_t>(rnd() % 2001) - 1000) * 0.003f;
    }
    memcpy(g_y1, g_y0, static_cast<size_t>(n) * sizeof(float));
    ref.silu_mul(g_y0, up, n);
    pie.silu_mul(g_y1, up, n);
    compare("silu_mul round/n", round, n, 0, n);
  }
  for (int round = 0; round < 200; ++round) {  // softmax: -inf, huge ranges, one-element rows
    const int n = 1 + static_cast<int>(rnd() % 100);
    for (int t = 0; t < n; ++t) {
      const uint32_t r = rnd() % 8;
      g_y0[t] = r == 0 ? from_bits(0xff800000u) : static_cast<float>(static_cast<int32_t>(rnd() % 4001) - 2000) * (r == 1 ? 0.25f : 0.01f);
    }
    if (round % 10 == 1) g_y0[0] = from_bits(0x7fc00000u);      // a NaN max: every argument NaN
    if (round % 10 == 2) g_y0[n / 2] = from_bits(0x7f800000u);  // +inf: inf - inf is NaN, the rest -inf
    if (round % 10 == 3) g_y0[n / 2] = -0.0f;                   // -0 - (+0)'s sign
    if (round % 10 == 4) g_y0[n - 1] = rnd_any_float();
    if (round % 10 == 5) g_y0[n - 1] = from_bits(0xffc00001u);  // a NaN with the sign bit: x - max keeps it?
    memcpy(g_y1, g_y0, static_cast<size_t>(n) * sizeof(float));
    ref.softmax(g_y0, n);
    pie.softmax(g_y1, n);
    compare("softmax round/n", round, n, 0, n);
  }
}

// Executed instructions of one call: the board counter (CCOUNT) times the instructions per count
// under -icount shift=0 (25 for the 40 MHz core).
template <typename F>
uint64_t count(F&& f) {
  const uint64_t t0 = board_counter();
  f();
  return (board_counter() - t0) * board_instructions_per_count();
}

void report(const char* what, uint64_t ref_n, uint64_t pie_n) {
  printf("instructions %s: ref %lu pie %lu (%.2fx)\n", what, static_cast<unsigned long>(ref_n),
         static_cast<unsigned long>(pie_n), static_cast<double>(ref_n) / static_cast<double>(pie_n));
}

void measure(const KernelSet& pie, const KernelSet& ref) {
  {
    MatRef w;
    w.type = DType::kQ4G64;
    w.rows = 64;
    w.cols = 256;
    w.row_bytes = 4 * sizeof(BlockQ4G64);
    w.data = g_w;
    report("q4g64 matvec 64x256", count([&] { ref.matvec_q4g64(w, g_x, g_s, g_y0, 0, 64); }),
           count([&] { pie.matvec_q4g64(w, g_x, g_s, g_y1, 0, 64); }));
  }
  {
    MatRef w;
    w.type = DType::kQ8_0;
    w.rows = 64;
    w.cols = 256;
    w.row_bytes = 8 * sizeof(BlockQ8_0);
    w.data = g_w;
    report("q8_0 matvec 64x256", count([&] { ref.matvec_q8_0(w, g_x, g_s, g_y0, 0, 64); }),
           count([&] { pie.matvec_q8_0(w, g_x, g_s, g_y1, 0, 64); }));
  }
  {
    MatRef w;
    w.type = DType::kI2_S;
    w.rows = 64;
    w.cols = 1024;
    w.row_bytes = 256;
    w.data = g_w;
    w.scale = 1.0f;
    const float xs = 1.0f;
    report("i2s matvec 64x1024", count([&] { ref.matvec_i2s(w, g_x, &xs, g_y0, 0, 64); }),
           count([&] { pie.matvec_i2s(w, g_x, &xs, g_y1, 0, 64); }));
    const int32_t listed[] = {1, 7, 8, 20, 33, 34, 50, 63};
    report("i2s 8 listed rows of 64x1024", count([&] { ref.matvec_i2s_rows(w, g_x, &xs, listed, 8, g_y0); }),
           count([&] { pie.matvec_i2s_rows(w, g_x, &xs, listed, 8, g_y1); }));
  }
  {
    MatRef w;
    w.type = DType::kQ4E;
    w.rows = 64;
    w.cols = 512;
    w.group = 128;
    w.row_bytes = 256;
    w.data = g_w;
    w.scales = g_w + 64 * 256;
    const float xs = 1.0f;
    report("q4e matvec 64x512 group 128", count([&] { ref.matvec_q4e_q8(w, g_x, &xs, g_y0, 0, 64); }),
           count([&] { pie.matvec_q4e_q8(w, g_x, &xs, g_y1, 0, 64); }));
  }
  {
    const int8_t* keys = reinterpret_cast<const int8_t*>(g_w);
    report("attn_scores_q8 hs=24 stride 96 n=128", count([&] { ref.attn_scores_q8(g_x, 1.0f, keys, g_s, 96, 1, 128, 24, 8.0f, g_y0); }),
           count([&] { pie.attn_scores_q8(g_x, 1.0f, keys, g_s, 96, 1, 128, 24, 8.0f, g_y1); }));
    for (int t = 0; t < 128; ++t) g_y0[t] = g_y1[t] = static_cast<float>(static_cast<int32_t>(rnd() % 200) - 100) * 0.05f;
    report("softmax n=128", count([&] { ref.softmax(g_y0, 128); }), count([&] { pie.softmax(g_y1, 128); }));
    report("attn_values_q8 hs=24 stride 96 n=128", count([&] { ref.attn_values_q8(g_y0, keys, g_s, 96, 1, 128, 24, g_y1 + 256); }),
           count([&] { pie.attn_values_q8(g_y0, keys, g_s, 96, 1, 128, 24, g_y1 + 256); }));
    for (int t = 0; t < 128; ++t) g_y0[t] = g_y1[t] = static_cast<float>(static_cast<int32_t>(rnd() % 200) - 100) * 0.05f;
    {
      int8_t q[128];
      float sc[4];
      report("quantize_blocks n=128 block 32", count([&] { ref.quantize_blocks(g_y0, 128, 32, q, sc); }),
             count([&] { pie.quantize_blocks(g_y0, 128, 32, q, sc); }));
    }
    report("silu_mul n=128", count([&] { ref.silu_mul(g_y0, g_y1 + 256, 128); }), count([&] { pie.silu_mul(g_y1, g_y1 + 256, 128); }));
    report("fill_f32 n=4096", count([&] { ref.fill_f32(g_y0, 512, 0.0f); }) * 8, count([&] { pie.fill_f32(g_y1, 512, 0.0f); }) * 8);
    report("attn_scores_q8 hs=64 n=64", count([&] { ref.attn_scores_q8(g_x, 1.0f, keys, g_s, 64, 1, 64, 64, 8.0f, g_y0); }),
           count([&] { pie.attn_scores_q8(g_x, 1.0f, keys, g_s, 64, 1, 64, 64, 8.0f, g_y1); }));
  }
}

}  // namespace

int main(int, char**) {
  const KernelSet* pie = kernels_by_name("pie");
  const KernelSet& ref = kernels_ref();
  ++g_checks;
  if (!pie || strcmp(pie->name, "pie") != 0 || &kernels_best() != pie) {
    printf("FAIL: no pie table, or not the best one\n");
    return 1;
  }
  test_blocks("q4g64", DType::kQ4G64, 64, &KernelSet::matvec_q4g64, *pie, ref);
  test_blocks("q8_0", DType::kQ8_0, 32, &KernelSet::matvec_q8_0, *pie, ref);
  test_i2s(*pie, ref);
  test_q4e(*pie, ref);
  test_attn(*pie, ref);
  test_divisions(*pie, ref);
  measure(*pie, ref);
  printf("pie kernels: %d checks, %d failures\n", g_checks, g_fail);
  return g_fail;
}
