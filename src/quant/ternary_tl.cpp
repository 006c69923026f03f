// TL1 / TL2 tiled packings (quant/ternary.h): where each weight's index nibble and sign bit live.
#include <string.h>

#include "quant/ternary.h"

namespace mcullm {

namespace {

// Inside a 32-byte TL2 index vector, byte 8q + j holds row 8 * kQuarter[q] + j (self-inverse).
constexpr int kQuarter[4] = {0, 2, 1, 3};
constexpr int kTl2PairBK = 32;  // the pair part's K block

struct Nibble {
  size_t byte;
  bool high;
};

bool ternary_values(const int8_t* w, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (w[i] < -1 || w[i] > 1) return false;
  return true;
}

// TL1: pair p (columns 2p, 2p + 1) of row r.
Nibble tl1_pos(const TlTiling& t, int K, int r, int p) {
  const int by = 256 / t.bm, nkb = K / t.BK;
  const int tile = r / t.BM, rr = r % t.BM, rb = rr / t.bm, ri = rr % t.bm;
  const int kb = p / (t.BK / 2), pp = p % (t.BK / 2), yb = pp / (by / 2), pi = pp % (by / 2);
  size_t off = static_cast<size_t>(tile) * nkb + kb;
  off = off * (t.BM / t.bm) + rb;
  off = off * (t.BK / by) + yb;
  off = off * (t.bm / 16) + ri / 16;
  off = off * (by / 4) + pi / 2;
  return {off * 16 + ri % 16, pi % 2 == 0};
}

// TL2 index vectors: group g (a triple, or a pair in the pair part) of row r, `per_block` groups per K
// block, `blocks` K blocks, starting at `base`.
Nibble tl2_pos(const TlTiling& t, int blocks, int per_block, size_t base, int r, int g) {
  const int tile = r / t.BM, rr = r % t.BM, rb = rr / 32, ri = rr % 32;
  const int kb = g / per_block, gg = g % per_block;
  size_t off = static_cast<size_t>(tile) * blocks + kb;
  off = off * (t.BM / 32) + rb;
  off = off * (per_block / 2) + gg / 2;
  return {base + off * 32 + 8 * kQuarter[ri / 8] + ri % 8, gg % 2 == 0};
}

// TL2 sign bit of triple g of row r: byte offset (from the sign part) and bit in that byte.
void tl2_sign_pos(const TlTiling& t, int K3, int r, int g, size_t* byte, int* bit) {
  const int tile = r / t.BM, rr = r % t.BM, rb = rr / 32, ri = rr % 32;
  const int per_block = t.BK / 3, kb = g / per_block, gg = g % per_block;
  size_t off = static_cast<size_t>(tile) * (K3 / t.BK) + kb;
  off = off * (t.BM / 32) + rb;
  off = off * (t.BK / 24) + gg / 8;
  const int i = 2 * (gg % 8) + ri / 16, c = ri % 16;
  const int word_bit = 15 - i;
  *byte = (off * 16 + c) * 2 + (word_bit >= 8 ? 1 : 0);  // little-endian uint16
  *bit = word_bit % 8;
}

inline void put(uint8_t* dst, Nibble n, int v) {
  dst[n.byte] = static_cast<uint8_t>(n.high ? (dst[n.byte] & 0x0F) | (v << 4) : (dst[n.byte] & 0xF0) | v);
}
inline int get(const uint8_t* src, Nibble n) { return n.high ? src[n.byte] >> 4 : src[n.byte] & 0x0F; }

// Balanced-ternary digits of v = 9a + 3b + c (|v| <= 13).
inline void triple_of(int v, int* a, int* b, int* c) {
  *c = ((v % 3) + 4) % 3 - 1;
  v = (v - *c) / 3;
  *b = ((v % 3) + 4) % 3 - 1;
  *a = (v - *b) / 3;
}

}  // namespace

const char* tl_type_name(TlType type) { return type == TlType::kTL1 ? "tl1" : type == TlType::kTL2 ? "tl2" : "?"; }

bool tl_type_by_name(const char* name, TlType* out) {
  if (!name) return false;
  if (strcmp(name, "tl1") == 0) *out = TlType::kTL1;
  else if (strcmp(name, "tl2") == 0) *out = TlType::kTL2;
  else return false;
  return true;
}

bool tl_tiling_valid(TlType type, int64_t M, int64_t K, const TlTiling& t) {
  if (M <= 0 || K <= 0 || M > (1 << 24) || K > (1 << 24) || t.BM <= 0 || t.BM > kTlMaxBM || t.BK <= 0 || M % t.BM != 0) return false;
  if (type == TlType::kTL1) {
    if (t.bm != 16 && t.bm != 32 && t.bm != 64) return false;
    const int by = 256 / t.bm;
    return t.BM % t.bm == 0 && t.BK <= 256 && t.BK % by == 0 && K % t.BK == 0;
  }
  if (type != TlType::kTL2 || t.bm != 32) return false;
  return t.BM % 32 == 0 && t.BK % 24 == 0 && t.BK <= 240 && (K % t.BK) % kTl2PairBK == 0;
}

TlTiling tl_default_tiling(TlType type, int64_t M, int64_t K) {
  // bitnet.cpp's presets first (BM 256/128/160/320; BK 96/192 for TL2, 128/64 for TL1), then smaller.
  static const int kBM[] = {256, 128, 160, 320, 192, 64, 96, 32, 16};
  static const int kBK2[] = {96, 192, 240, 144, 48, 24};
  static const int kBK1[] = {128, 64, 256, 32, 16, 8};
  static const int kSimd1[] = {32, 64, 16};
  for (int bm_rows : kBM) {
    TlTiling t;
    t.BM = bm_rows;
    if (type == TlType::kTL2) {
      t.bm = 32;
      for (int bk : kBK2) {
        t.BK = bk;
        if (tl_tiling_valid(type, M, K, t)) return t;
      }
    } else {
      for (int bm : kSimd1) {
        t.bm = bm;
        for (int bk : kBK1) {
          t.BK = bk;
          if (tl_tiling_valid(type, M, K, t)) return t;
        }
      }
    }
  }
  return TlTiling{};
}

int tl_three_k(TlType type, int64_t K, const TlTiling& t) {
  return static_cast<int>(type == TlType::kTL2 && t.BK > 0 ? K - K % t.BK : K);
}

size_t tl_packed_bytes(TlType type, int64_t M, int64_t K, const TlTiling& t) {
  if (!tl_tiling_valid(type, M, K, t)) return 0;
  const size_t m = static_cast<size_t>(M);
  if (type == TlType::kTL1) return m * static_cast<size_t>(K) / 4;
  const size_t k3 = static_cast<size_t>(tl_three_k(type, K, t)), k2 = static_cast<size_t>(K) - k3;
  return m * k3 / 6 + m * k3 / 24 + m * k2 / 4;
}

size_t tl_scale_offset(TlType type, int64_t M, int64_t K, const TlTiling& t) {
  const size_t packed = tl_packed_bytes(type, M, K, t);
  if (packed == 0 || type == TlType::kTL1 || K < 256) return packed;
  const size_t m = static_cast<size_t>(M), k = static_cast<size_t>(K);
  const size_t nbytes = (k - 256) * m * 5 / 24 + 256 * m / 4;
  return nbytes >= packed ? nbytes : packed;
}

size_t tl_tensor_bytes(TlType type, int64_t M, int64_t K, const TlTiling& t) {
  const size_t at = tl_scale_offset(type, M, K, t);
  return at ? at + kI2STensorTailBytes : 0;
}

bool tl_pack(TlType type, const TlTiling& t, const int8_t* w, int M, int K, void* dst) {
  const size_t bytes = tl_packed_bytes(type, M, K, t);
  if (bytes == 0 || !ternary_values(w, static_cast<size_t>(M) * K)) return false;
  uint8_t* out = static_cast<uint8_t*>(dst);
  memset(out, 0, bytes);
  for (int r = 0; r < M; ++r) {
    const int8_t* row = w + static_cast<size_t>(r) * K;
    if (type == TlType::kTL1) {
      for (int p = 0; p < K / 2; ++p) put(out, tl1_pos(t, K, r, p), 3 * row[2 * p] + row[2 * p + 1] + 4);
      continue;
    }
    const int k3 = tl_three_k(type, K, t), k2 = K - k3;
    const size_t sign_base = static_cast<size_t>(M) * k3 / 6, pair_base = sign_base + static_cast<size_t>(M) * k3 / 24;
    for (int g = 0; g < k3 / 3; ++g) {
      const int v = 9 * row[3 * g] + 3 * row[3 * g + 1] + row[3 * g + 2];
      put(out, tl2_pos(t, k3 / t.BK, t.BK / 3, 0, r, g), v < 0 ? -v : v);
      size_t byte;
      int bit;
      tl2_sign_pos(t, k3, r, g, &byte, &bit);
      if (v < 0) out[sign_base + byte] = static_cast<uint8_t>(out[sign_base + byte] | 1 << bit);
    }
    for (int p = 0; p < k2 / 2; ++p)
      put(out, tl2_pos(t, k2 / kTl2PairBK, kTl2PairBK / 2, pair_base, r, p),
          3 * row[k3 + 2 * p] + row[k3 + 2 * p + 1] + 4);
  }
  return true;
}

bool tl_unpack(TlType type, const TlTiling& t, const void* src, int M, int K, int8_t* w) {
  if (tl_packed_bytes(type, M, K, t) == 0) return false;
  const uint8_t* in = static_cast<const uint8_t*>(src);
  bool ok = true;
  auto pair = [&](int idx, int8_t* dst) {
    ok = ok && idx <= 8;
    dst[0] = static_cast<int8_t>(idx / 3 - 1);  // idx = 3 (a + 1) + (b + 1)
    dst[1] = static_cast<int8_t>(idx % 3 - 1);
  };
  for (int r = 0; r < M; ++r) {
    int8_t* row = w + static_cast<size_t>(r) * K;
    if (type == TlType::kTL1) {
      for (int p = 0; p < K / 2; ++p) pair(get(in, tl1_pos(t, K, r, p)), row + 2 * p);
      continue;
    }
    const int k3 = tl_three_k(type, K, t), k2 = K - k3;
    const size_t sign_base = static_cast<size_t>(M) * k3 / 6, pair_base = sign_base + static_cast<size_t>(M) * k3 / 24;
    for (int g = 0; g < k3 / 3; ++g) {
      int v = get(in, tl2_pos(t, k3 / t.BK, t.BK / 3, 0, r, g));
      ok = ok && v <= 13;
      size_t byte;
      int bit;
      tl2_sign_pos(t, k3, r, g, &byte, &bit);
      if (in[sign_base + byte] >> bit & 1) v = -v;
      int a, b, c;
      triple_of(v, &a, &b, &c);
      row[3 * g] = static_cast<int8_t>(a);
      row[3 * g + 1] = static_cast<int8_t>(b);
      row[3 * g + 2] = static_cast<int8_t>(c);
    }
    for (int p = 0; p < k2 / 2; ++p)
      pair(get(in, tl2_pos(t, k2 / kTl2PairBK, kTl2PairBK / 2, pair_base, r, p)), row + k3 + 2 * p);
  }
  return ok;
}

bool ternary_rows_to_tl(TernaryLayout from, const void* src, size_t row_bytes, TlType to, const TlTiling& t, int M,
                        int K, void* dst, int8_t* scratch) {
  if (tl_packed_bytes(to, M, K, t) == 0 || ternary_row_bytes(from, K) == 0) return false;
  for (int r = 0; r < M; ++r)
    if (!ternary_unpack_row(from, static_cast<const uint8_t*>(src) + r * row_bytes, K, scratch + static_cast<size_t>(r) * K))
      return false;
  return tl_pack(to, t, scratch, M, K, dst);
}

bool tl_to_ternary_rows(TlType from, const TlTiling& t, const void* src, TernaryLayout to, void* dst, size_t row_bytes,
                        int M, int K, int8_t* scratch) {
  if (ternary_row_bytes(to, K) == 0 || !tl_unpack(from, t, src, M, K, scratch)) return false;
  for (int r = 0; r < M; ++r)
    if (!ternary_pack_row(to, scratch + static_cast<size_t>(r) * K, K, static_cast<uint8_t*>(dst) + r * row_bytes))
      return false;
  return true;
}

int tl_weight(TlType type, const TlTiling& t, const void* src, int M, int K, int r, int k) {
  const uint8_t* in = static_cast<const uint8_t*>(src);
  auto of_pair = [](int idx, int which) { return idx > 8 ? 2 : which == 0 ? idx / 3 - 1 : idx % 3 - 1; };
  if (type == TlType::kTL1) return of_pair(get(in, tl1_pos(t, K, r, k / 2)), k % 2);
  const int k3 = tl_three_k(type, K, t), k2 = K - k3;
  const size_t sign_base = static_cast<size_t>(M) * k3 / 6, pair_base = sign_base + static_cast<size_t>(M) * k3 / 24;
  if (k >= k3) {
    const int p = (k - k3) / 2;
    return of_pair(get(in, tl2_pos(t, k2 / kTl2PairBK, kTl2PairBK / 2, pair_base, r, p)), (k - k3) % 2);
  }
  const int g = k / 3;
  int v = get(in, tl2_pos(t, k3 / t.BK, t.BK / 3, 0, r, g));
  if (v > 13) return 2;
  size_t byte;
  int bit;
  tl2_sign_pos(t, k3, r, g, &byte, &bit);
  if (in[sign_base + byte] >> bit & 1) v = -v;
  int abc[3];
  triple_of(v, &abc[0], &abc[1], &abc[2]);
  return abc[k % 3];
}

int tl2_file_two_k(int64_t K) {
  if (K < 24 || K % 8 != 0) return -1;
  for (int r = 0; r <= 64; r += 32)
    if ((K - r) % 24 == 0 && K - r >= 24) return r;
  return -1;
}

size_t tl_file_row_bytes(TlType type, int64_t K) {
  if (K <= 0 || K > (1 << 24)) return 0;
  if (type == TlType::kTL1) return K % 4 == 0 ? static_cast<size_t>(K) / 4 : 0;
  const int two = tl2_file_two_k(K);
  if (two < 0) return 0;
  return static_cast<size_t>(K - two) * 5 / 24 + static_cast<size_t>(two) / 4;
}

bool tl_file_tiling_ok(TlType type, int64_t M, int64_t K, const TlTiling& t) {
  if (!tl_tiling_valid(type, M, K, t)) return false;
  return type == TlType::kTL1 || K - tl_three_k(type, K, t) == tl2_file_two_k(K);
}

TlTiling tl_file_tiling(TlType type, int64_t M, int64_t K, const TlTiling& preferred) {
  if (tl_file_tiling_ok(type, M, K, preferred)) return preferred;
  const TlTiling d = tl_default_tiling(type, M, K);
  return tl_file_tiling_ok(type, M, K, d) ? d : TlTiling{};
}

void tl_file_tail_write(uint8_t* tail, float scale, const TlTiling& t) {
  memset(tail, 0, kTlFileTailBytes);
  memcpy(tail, &scale, 4);
  const uint32_t v[3] = {static_cast<uint32_t>(t.BM), static_cast<uint32_t>(t.BK), static_cast<uint32_t>(t.bm)};
  for (int i = 0; i < 3; ++i)
    for (int b = 0; b < 4; ++b) tail[4 + 4 * i + b] = static_cast<uint8_t>(v[i] >> (8 * b));
}

bool tl_file_tail_read(const uint8_t* tail, TlType type, int64_t M, int64_t K, float* scale, TlTiling* t) {
  for (int i = 16; i < kTlFileTailBytes; ++i)
    if (tail[i] != 0) return false;
  uint32_t v[3];
  for (int i = 0; i < 3; ++i)
    v[i] = static_cast<uint32_t>(tail[4 + 4 * i]) | static_cast<uint32_t>(tail[5 + 4 * i]) << 8 |
           static_cast<uint32_t>(tail[6 + 4 * i]) << 16 | static_cast<uint32_t>(tail[7 + 4 * i]) << 24;
  if (v[0] > kTlMaxBM || v[1] > (1u << 24) || v[2] > 64) return false;
  TlTiling r;
  r.BM = static_cast<int>(v[0]);
  r.BK = static_cast<int>(v[1]);
  r.bm = static_cast<int>(v[2]);
  if (!tl_file_tiling_ok(type, M, K, r)) return false;
  memcpy(scale, tail, 4);
  *t = r;
  return true;
}

bool tl_dtype_type(DType d, TlType* out) {
  if (d == DType::kTL1) *out = TlType::kTL1;
  else if (d == DType::kTL2) *out = TlType::kTL2;
  else return false;
  return true;
}

DType tl_type_dtype(TlType t) { return t == TlType::kTL1 ? DType::kTL1 : DType::kTL2; }

}  // namespace mcullm
