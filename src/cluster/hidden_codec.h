// How a hidden state (the residual stream between two layer ranges) travels over a cluster link.
// Freestanding: no heap, no exceptions, no compiler intrinsics; the same bytes on every target.
//   f32   4 bytes per value, lossless (the default: a cluster's output is then bit-identical to one process).
//   f16   2 bytes per value, IEEE half, round to nearest even; overflow gives inf, nan stays nan
//         (quant/f16.h, the portable conversion the kernels use). Every half value round-trips exactly.
//   int8  1 byte per value plus one f32 scale per block of 64 values (the last block may be short):
//         d = amax / 127, q = round-half-away(x * (1 / d)) in [-127, 127] (quant/blocks.h's
//         quantize_activations, the kernels' own int8 activations). |x - q * d| <= d / 2 (up to
//         float rounding of x * (1 / d)). Per block rather than per vector: one outlier (the residual
//         stream has a few large channels) then costs precision in 64 values, not in all of them, for
//         4 bytes in 64 (1.06 bytes per value). Non-finite inputs are refused.
// Byte layout of `count` values (little-endian, always padded with zeros to a multiple of 4 bytes):
//   f32   count x f32
//   f16   count x u16, then 2 zero bytes when count is odd
//   int8  ceil(count / 64) x f32 scales, then count x i8, then zeros to a multiple of 4
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "mcullm/status.h"

namespace mcullm::cluster {

enum class HiddenEncoding : uint8_t { kF32 = 0, kF16 = 1, kInt8 = 2 };
constexpr uint32_t kInt8Block = 64;  // values per int8 scale

// "f32", "f16", "int8"; nullptr for a value outside the enum.
const char* hidden_encoding_name(HiddenEncoding e);
// Parses "f32" / "f16" / "int8" (a CLI flag); false otherwise.
bool parse_hidden_encoding(const char* name, HiddenEncoding* out);
// True for the three encodings above (a byte read off the wire may be anything).
bool hidden_encoding_valid(uint8_t e);

// Bytes of `count` values in encoding e (a multiple of 4); 0 for an invalid encoding.
size_t hidden_encoded_bytes(HiddenEncoding e, uint32_t count);

// Writes hidden_encoded_bytes(e, count) bytes to out (cap bytes available; any alignment).
// Errors: cap too small, invalid encoding, a non-finite value for int8.
Status encode_hidden(HiddenEncoding e, const float* x, uint32_t count, uint8_t* out, size_t cap);
// Reads exactly hidden_encoded_bytes(e, count) bytes (n must equal it) into x[count].
// Errors (kCorrupt): wrong size, non-zero padding, an int8 scale that is negative or not finite,
// an int8 code of -128 (the encoder never writes it). f32 / f16 values are taken as they are.
Status decode_hidden(HiddenEncoding e, const uint8_t* in, size_t n, uint32_t count, float* x);

}  // namespace mcullm::cluster
