// The one definition of every ternary packing (weights in {-1, 0, +1}) the project reads or writes,
// with pack / unpack per row and conversion between them. Kernels, readers and converters use these
// and nothing else, so that a packing order cannot differ between a writer and a reader.
//
//  layout            bytes per row           codes (2-bit)               order inside a byte / block
//  bitllama2c-msb    cols / 4                00=0 01=+1 11=-1 (10 bad)   weight j of a byte at bits 7-2j..6-2j
//  bitllama2c-lsb    cols / 4                same                        weight j at bits 2j..2j+1
//  cluster2          cols / 4                00=0 01=+1 10=-1 (11 bad)   weight j at bits 2j..2j+1
//  i2_s (bitnet.cpp) cols / 4                code = w + 1 (3 bad)        per 128 weights 32 bytes; byte b holds
//                    (+ one f32 per tensor)                              weights b, b+32, b+64, b+96 at bits
//                                                                        7-6, 5-4, 3-2, 1-0
//  tq2_0 (llama.cpp) 66 per 256              code = w + 1 (3 bad)        qs[64] then f16 d; in each 32-byte
//                                                                        chunk byte m holds weights m, m+32,
//                                                                        m+64, m+96 at bits 1-0, 3-2, 5-4, 7-6
//  tq1_0 (llama.cpp) 54 per 256              base 3, trit = w + 1        qs[48] (5 trits a byte), qh[4] (4 trits
//                                                                        a byte), f16 d; see ternary.cpp
// The per-row layouts need cols % 4 == 0 (i2_s: % 128, tq*: % 256). The scale of the per-matrix
// layouts (one f32 per tensor) lives outside the rows; the tq* blocks carry their own f16 scale d.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "quant/dtype.h"

namespace mcullm {

enum class TernaryLayout : uint8_t { kBitllama2cMsb = 0, kBitllama2cLsb, kCluster2, kI2S, kTQ2_0, kTQ1_0, kCount };
constexpr int kTernaryLayoutCount = static_cast<int>(TernaryLayout::kCount);

const char* ternary_layout_name(TernaryLayout layout);   // "bitllama2c-msb", ...; "?" if unknown
// False when the name is unknown.
bool ternary_layout_by_name(const char* name, TernaryLayout* out);

// Weights per unit (4 for the byte layouts, 128 for i2_s, 256 for tq*) and bytes per unit.
int ternary_unit_weights(TernaryLayout layout);
int ternary_unit_bytes(TernaryLayout layout);
// True when one row of `cols` weights can be stored in this layout.
bool ternary_row_fits(TernaryLayout layout, int64_t cols);
// Bytes of one row of `cols` weights; 0 when it does not fit.
size_t ternary_row_bytes(TernaryLayout layout, int64_t cols);
// Number of f16 block scales in a row (tq*: cols / 256, others 0).
int ternary_row_scales(TernaryLayout layout, int64_t cols);
// True for layouts whose blocks carry their own f16 scale.
bool ternary_has_block_scales(TernaryLayout layout);

// Packs `cols` values in {-1, 0, 1} into `dst` (ternary_row_bytes bytes). For tq* layouts `d`
// gives the f16 bits of each block's scale (nullptr: 1.0 for every block). False when the row does
// not fit the layout or a value is outside {-1, 0, 1} (dst is then unspecified).
bool ternary_pack_row(TernaryLayout layout, const int8_t* w, int cols, void* dst, const uint16_t* d = nullptr);

// Unpacks a row into `w` (cols values in {-1, 0, 1}); for tq* layouts also the f16 block scales
// into `d` when not nullptr. False when the row does not fit or holds an invalid code (bitllama2c:
// 10, cluster2: 11, i2_s / tq2_0: 3; w is then unspecified). Any tq1_0 byte decodes to valid trits.
// src may be unaligned.
bool ternary_unpack_row(TernaryLayout layout, const void* src, int cols, int8_t* w, uint16_t* d = nullptr);

// Repacks one row from one layout to another; tq* block scales carry over between the tq*
// layouts, and become 1.0 when the source has none. `scratch` holds cols int8 values.
bool ternary_convert_row(TernaryLayout from, const void* src, TernaryLayout to, void* dst, int cols, int8_t* scratch);

// The GGUF type of a layout (kF32 when it has none) and back.
bool ternary_layout_dtype(TernaryLayout layout, DType* out);
bool ternary_dtype_layout(DType type, TernaryLayout* out);

// Expands a tq1_0 / tq2_0 row to floats (w * d per block); src may be unaligned.
bool ternary_dequantize_tq_row(DType type, const void* src, float* dst, int cols);
// Expands an i2_s row to floats: w * scale (the tensor's scale).
bool i2s_dequantize_row(const void* src, float* dst, int cols, float scale);
// llama.cpp's tq1_0 / tq2_0 quantizer: per 256 weights d = max|x|, w = round(x / d) (half away
// from zero) clamped to [-1, 1]; d stored as f16.
bool ternary_quantize_tq_row(DType type, const float* src, void* dst, int cols);

// An i2_s tensor: rows * cols / 4 packed bytes, then its f32 scale (bitnet.cpp pads the tensor by
// 32 bytes to hold it). The scale is read from possibly unaligned bytes.
constexpr int kI2STensorTailBytes = 32;
size_t i2s_tensor_bytes(int64_t rows, int64_t cols);
float i2s_tensor_scale(const void* tensor, int64_t rows, int64_t cols);

// BitLinear activations (bitllama2.c's rule, one scale per vector): amax = max |x|,
// scale = (float)((double)amax / 127.0), q = round-half-away(x * (float)(1.0 / scale)).
// A zero (or non-finite) scale gives q = 0; values are clamped to [-127, 127] (q is never -128).
void quantize_bitlinear(const float* x, int n, int8_t* q, float* scale);

// bitnet.cpp's I2_S activations (its I8_S: one scale per token, ../shared/FACTS-ternary.md):
// s = (float)(127.0 / max(max |x|, 1e-5)), q = round-half-away(x * s) clamped to [-128, 127].
// *inv_scale receives (float)(1.0 / s), the multiplier matvec_i2s expects (y = isum * (w.scale * inv)).
// Non-finite inputs give q = 0 for every entry and *inv_scale = 0.
void quantize_i8s(const float* x, int n, int8_t* q, float* inv_scale);
// The scale of quantize_i8s for a given max |x| (0 when amax is not finite) and its rounding step.
float i8s_scale(float amax);
void quantize_i8s_with(const float* x, int n, float s, int8_t* q);

// ---- bitnet.cpp's tiled LUT layouts (../shared/FACTS-ternary.md): whole tensors, not rows ----
// Both store a M x K ternary matrix as 4-bit indices into per-activation-group lookup tables, in tiles
// of BM rows x BK columns, with one f32 scale per tensor after the packed data.
//  TL1 (ARM): pairs of weights (a, b) -> index 3a + b + 4 (0..8), two indices a byte. Byte order, outer
//     to inner: tile t (M / BM), K block (K / BK), row block (BM / bm), pair block (BK / by, by = 256 / bm),
//     row group of 16 (bm / 16), pair quad (by / 4), row (16); the byte's high nibble holds the even
//     pair of the quad's two, the low nibble the odd one. 2 bits a weight.
//  TL2 (x86): K splits into three_k = K - K % BK (triples) and two_k = K % BK (pairs, multiple of 32).
//     A triple (a, b, c) -> v = 9a + 3b + c, index |v| (0..13) plus a sign bit (v < 0). Three parts,
//     in this order: index bytes [tile][K block][32-row block][pair of triples (BK / 6)][32 bytes],
//     high nibble = even triple; inside the 32 bytes, byte 8q + j holds row 8 * {0,2,1,3}[q] + j (so
//     that the unpacklo/unpackhi of a byte shuffle give rows 0-15 and 16-31 in order). Sign words:
//     [tile][K block][32-row block][8 triples (BK / 24)][16 uint16 little-endian]; word c, bit 15 - i
//     is the sign of triple i / 2 of the eight, row 16 * (i % 2) + c. Then the pair part with the
//     index layout above, BK = 32 (16 pairs a block), pair index 3a + b + 4. 1.67 bits a weight
//     (three part), 2 (pair part).
// bitnet.cpp's llama.cpp fork names them GGML types 38 (TL1) and 39 (TL2); its converter chooses BM /
// BK / bm per (M, K) and the file only works with a kernel using the same values (they are not stored
// in the file), so a loader must be told the tiling (tl_default_tiling or the tuning file).
enum class TlType : uint8_t { kTL1 = 1, kTL2 = 2 };
constexpr uint32_t kGgmlTypeTL1 = 38;
constexpr uint32_t kGgmlTypeTL2 = 39;

constexpr int kTlMaxBM = 1024;  // bound on BM (the kernels keep a tile's int32 sums on the stack)

struct TlTiling {
  int BM = 0;  // rows per tile (unit of thread work; M % BM == 0; <= kTlMaxBM)
  int BK = 0;  // K per block (TL1: K % BK == 0; TL2: multiple of 24, (K % BK) % 32 == 0)
  int bm = 0;  // SIMD row block (TL1: 16, 32 or 64; TL2: 32)
};

const char* tl_type_name(TlType type);  // "tl1", "tl2"
bool tl_type_by_name(const char* name, TlType* out);
// True when (M, K) can be stored with this tiling; also bounds BK so that a block's int16 partial
// sums of activations in [-127, 127] cannot overflow (TL1 BK <= 256, TL2 BK <= 240).
bool tl_tiling_valid(TlType type, int64_t M, int64_t K, const TlTiling& t);
// A tiling that fits (M, K) (bitnet.cpp's presets where they fit); BM == 0 when none does.
TlTiling tl_default_tiling(TlType type, int64_t M, int64_t K);
// TL2: the columns stored as triples (K - K % BK); TL1: K.
int tl_three_k(TlType type, int64_t K, const TlTiling& t);
// Bytes of the packed indices (+ sign words); 0 when the tiling is not valid.
size_t tl_packed_bytes(TlType type, int64_t M, int64_t K, const TlTiling& t);
// Offset of the f32 scale in a tensor (bitnet.cpp's ggml_nbytes: TL1 M * K / 4; TL2
// (K - 256) * M * 5 / 24 + 256 * M / 4 when K >= 256 and that covers the packed bytes, else the
// packed bytes; zero padding in between) and the whole tensor's size (scale offset + 32).
size_t tl_scale_offset(TlType type, int64_t M, int64_t K, const TlTiling& t);
size_t tl_tensor_bytes(TlType type, int64_t M, int64_t K, const TlTiling& t);

// Packs a row-major M x K matrix of values in {-1, 0, 1} into dst (tl_packed_bytes bytes). False
// when the tiling is not valid or a value is out of range.
bool tl_pack(TlType type, const TlTiling& t, const int8_t* w, int M, int K, void* dst);
// Unpacks into a row-major M x K matrix. False when the tiling is not valid or an index is out of
// range (TL1 > 8, TL2 triple > 13, pair > 8; w is then unspecified).
bool tl_unpack(TlType type, const TlTiling& t, const void* src, int M, int K, int8_t* w);
// Whole tensors between a row layout (row_bytes apart) and a TL layout; scratch holds M * K int8.
bool ternary_rows_to_tl(TernaryLayout from, const void* src, size_t row_bytes, TlType to, const TlTiling& t, int M,
                        int K, void* dst, int8_t* scratch);
bool tl_to_ternary_rows(TlType from, const TlTiling& t, const void* src, TernaryLayout to, void* dst, size_t row_bytes,
                        int M, int K, int8_t* scratch);
// One weight (row r, column k) of a packed TL tensor: -1, 0 or 1; 2 for an index out of range.
// Slow (a scalar oracle and fallback), no validation of the tiling.
int tl_weight(TlType type, const TlTiling& t, const void* src, int M, int K, int r, int k);

// ---- Our GGUF tensor types tl1 / tl2 (DType::kTL1 / kTL2, ids 1026 / 1027) ----
// bitnet.cpp's TL files (GGML types 38 / 39) do not say which tiling packed them, and their size
// formula pads the TL2 data; ours are self-describing instead: the packed bytes (tl_packed_bytes,
// nothing in between), then a 32-byte tail: f32 scale, u32 BM, u32 BK, u32 bm (little-endian), 16
// zero bytes. So that the size follows from the shape alone (a GGUF reader checks every tensor's
// bounds before reading it), a TL2 tensor stores K - tl2_file_two_k(K) columns as triples: the
// smallest multiple of 32 that leaves a multiple of 24 (BK 96, bitnet.cpp's preset, always gives
// it); TL1 stores every column as pairs (2 bits a weight).
constexpr int kTlFileTailBytes = 32;
// TL2: columns stored as pairs (0, 32 or 64); -1 when K % 8 != 0 or K < 24 (no TL2 file layout).
int tl2_file_two_k(int64_t K);
// Bytes of one row's share of a file tensor (TL1 K / 4; TL2 5 * three_k / 24 + two_k / 4); 0 when
// K has no file layout.
size_t tl_file_row_bytes(TlType type, int64_t K);
// True when a tiling packs (M, K) into the file layout (valid, and TL2's triple part as above).
bool tl_file_tiling_ok(TlType type, int64_t M, int64_t K, const TlTiling& t);
// The tiling a writer packs (M, K) with: `preferred` when tl_file_tiling_ok, else
// tl_default_tiling when it is, else BM == 0 (the shape has no TL layout: write i2_s).
TlTiling tl_file_tiling(TlType type, int64_t M, int64_t K, const TlTiling& preferred);
void tl_file_tail_write(uint8_t* tail, float scale, const TlTiling& t);
// False when the tail is malformed (reserved bytes not zero, tiling not tl_file_tiling_ok).
bool tl_file_tail_read(const uint8_t* tail, TlType type, int64_t M, int64_t K, float* scale, TlTiling* t);
bool tl_dtype_type(DType d, TlType* out);  // kTL1 / kTL2 -> TlType
DType tl_type_dtype(TlType t);

}  // namespace mcullm
