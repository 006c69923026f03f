// Scalar reference of the TL1 / TL2 LUT kernels: LUT construction and the table-lookup matmul,
// walking the packed bytes in storage order (quant/ternary.h, kernels/tl_layout.h).
#include "kernels/kernels.h"

#include "kernels/tl_layout.h"

namespace mcullm {

namespace {

constexpr int kQuarter[4] = {0, 2, 1, 3};  // TL2 index vectors: byte 8q + j is row 8 * kQuarter[q] + j

void put_entry(uint8_t* table, int idx, int v) {
  table[idx] = static_cast<uint8_t>(v & 0xFF);
  table[16 + idx] = static_cast<uint8_t>((v >> 8) & 0xFF);
}

// Table of a pair (x0, x1): entry 3a + b + 4 = a * x0 + b * x1.
void pair_table(int x0, int x1, uint8_t* table) {
  for (int i = 0; i < 32; ++i) table[i] = 0;
  for (int a = -1; a <= 1; ++a)
    for (int b = -1; b <= 1; ++b) put_entry(table, 3 * a + b + 4, a * x0 + b * x1);
}

// Table of a triple: entry 9a + 3b + c (the non-negative patterns 0..13) = a * x0 + b * x1 + c * x2.
void triple_table(int x0, int x1, int x2, uint8_t* table) {
  for (int i = 0; i < 32; ++i) table[i] = 0;
  for (int a = -1; a <= 1; ++a)
    for (int b = -1; b <= 1; ++b)
      for (int c = -1; c <= 1; ++c) {
        const int v = 9 * a + 3 * b + c;
        if (v >= 0) put_entry(table, v, a * x0 + b * x1 + c * x2);
      }
}

// Adds the pair-index bytes of TL2's pair part (or nothing when absent) for rows of one tile.
void tl2_pairs(const TlTensor& w, const uint8_t* p, const uint8_t* lut, int32_t* acc) {
  const int blocks = (w.cols - w.three_k) / tl::kPairBK;
  const uint8_t* pair_lut = lut + static_cast<size_t>(w.three_k / 3) * tl::kLutGroupBytes;
  for (int kb = 0; kb < blocks; ++kb)
    for (int rb = 0; rb < w.tiling.BM / 32; ++rb)
      for (int yb = 0; yb < tl::kPairBK / 4; ++yb, p += 32) {
        const uint8_t* t0 = pair_lut + static_cast<size_t>(kb * 16 + 2 * yb) * tl::kLutGroupBytes;
        for (int pos = 0; pos < 32; ++pos) {
          const int row = rb * 32 + 8 * kQuarter[pos / 8] + pos % 8;
          acc[row] += tl::lut_entry(t0, p[pos] >> 4) + tl::lut_entry(t0 + tl::kLutGroupBytes, p[pos] & 0x0F);
        }
      }
}

void tl2_tile(const TlTensor& w, int tile, const uint8_t* lut, int32_t* acc) {
  const int BK = w.tiling.BK, nrb = w.tiling.BM / 32;
  const uint8_t* ip = w.index + tile * tl::tile_index_bytes(w);
  const uint8_t* sp = w.sign + tile * tl::tile_sign_bytes(w);
  for (int kb = 0; kb < w.three_k / BK; ++kb)
    for (int rb = 0; rb < nrb; ++rb) {
      const uint8_t* signs = sp + (static_cast<size_t>(kb) * nrb + rb) * (BK / 24) * 32;
      for (int yb = 0; yb < BK / 6; ++yb, ip += 32) {
        const int g = kb * (BK / 3) + 2 * yb;  // the byte's high nibble; g + 1 the low one
        const uint8_t* t0 = lut + static_cast<size_t>(g) * tl::kLutGroupBytes;
        for (int pos = 0; pos < 32; ++pos) {
          const int ri = 8 * kQuarter[pos / 8] + pos % 8;
          for (int h = 0; h < 2; ++h) {
            const int gg = 2 * yb + h;  // triple within the K block
            const uint8_t* word = signs + ((gg / 8) * 16 + ri % 16) * 2;
            const int bit = 15 - (2 * (gg % 8) + ri / 16);
            const int negative = ((word[0] | word[1] << 8) >> bit) & 1;
            const int v = tl::lut_entry(t0 + h * tl::kLutGroupBytes, h == 0 ? ip[pos] >> 4 : ip[pos] & 0x0F);
            acc[rb * 32 + ri] += negative ? -v : v;
          }
        }
      }
    }
  if (w.pairs) tl2_pairs(w, w.pairs + tile * tl::tile_pair_bytes(w), lut, acc);
}

void tl1_tile(const TlTensor& w, int tile, const uint8_t* lut, int32_t* acc) {
  const int BK = w.tiling.BK, bm = w.tiling.bm, by = 256 / bm;
  const uint8_t* ip = w.index + tile * tl::tile_index_bytes(w);
  for (int kb = 0; kb < w.cols / BK; ++kb)
    for (int rb = 0; rb < w.tiling.BM / bm; ++rb)
      for (int yb = 0; yb < BK / by; ++yb)
        for (int rq = 0; rq < bm / 16; ++rq)
          for (int pq = 0; pq < by / 4; ++pq, ip += 16) {
            const int p = kb * (BK / 2) + yb * (by / 2) + 2 * pq;  // high nibble; p + 1 the low one
            const uint8_t* t0 = lut + static_cast<size_t>(p) * tl::kLutGroupBytes;
            for (int r = 0; r < 16; ++r)
              acc[rb * bm + rq * 16 + r] +=
                  tl::lut_entry(t0, ip[r] >> 4) + tl::lut_entry(t0 + tl::kLutGroupBytes, ip[r] & 0x0F);
          }
}

}  // namespace

void tl_lut_build_ref(const TlTensor& w, const int8_t* q, uint8_t* lut) {
  int k = 0;
  if (w.type == TlType::kTL2)
    for (; k < w.three_k; k += 3, lut += tl::kLutGroupBytes) triple_table(q[k], q[k + 1], q[k + 2], lut);
  for (; k < w.cols; k += 2, lut += tl::kLutGroupBytes) pair_table(q[k], q[k + 1], lut);
}

void tl_matmul_ref(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens,
                   float* y, size_t y_stride, int tile0, int tile1) {
  tl::matmul_tiles<tl1_tile, tl2_tile>(w, lut, lut_stride, inv_scales, n_tokens, y, y_stride, tile0, tile1);
}

}  // namespace mcullm
