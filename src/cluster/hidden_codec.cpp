#include "cluster/hidden_codec.h"

#include <inttypes.h>
#include <string.h>

#include "cluster/frame_bytes.h"
#include "quant/blocks.h"
#include "quant/f16.h"

namespace mcullm::cluster {
namespace {

using wire::all_zero;
using wire::get_u32;
using wire::put_u32;

constexpr size_t pad4(size_t n) { return (n + 3) & ~size_t{3}; }
uint32_t int8_blocks(uint32_t count) { return (count + kInt8Block - 1) / kInt8Block; }

}  // namespace

const char* hidden_encoding_name(HiddenEncoding e) {
  switch (e) {
    case HiddenEncoding::kF32: return "f32";
    case HiddenEncoding::kF16: return "f16";
    case HiddenEncoding::kInt8: return "int8";
  }
  return nullptr;
}

bool parse_hidden_encoding(const char* name, HiddenEncoding* out) {
  for (uint8_t e = 0; e < 3; ++e) {
    if (strcmp(name, hidden_encoding_name(static_cast<HiddenEncoding>(e))) == 0) {
      *out = static_cast<HiddenEncoding>(e);
      return true;
    }
  }
  return false;
}

bool hidden_encoding_valid(uint8_t e) { return e <= static_cast<uint8_t>(HiddenEncoding::kInt8); }

size_t hidden_encoded_bytes(HiddenEncoding e, uint32_t count) {
  switch (e) {
    case HiddenEncoding::kF32: return size_t{count} * 4;
    case HiddenEncoding::kF16: return pad4(size_t{count} * 2);
    case HiddenEncoding::kInt8: return size_t{int8_blocks(count)} * 4 + pad4(count);
  }
  return 0;
}

Status encode_hidden(HiddenEncoding e, const float* x, uint32_t count, uint8_t* out, size_t cap) {
  if (!hidden_encoding_valid(static_cast<uint8_t>(e)))
    return Status::Error(Code::kInvalidArgument, "hidden state: unknown encoding %u", static_cast<unsigned>(e));
  const size_t bytes = hidden_encoded_bytes(e, count);
  if (bytes > cap)
    return Status::Error(Code::kInvalidArgument, "hidden state: %" PRIu32 " values in %s need %zu bytes, the buffer has %zu",
                         count, hidden_encoding_name(e), bytes, cap);
  switch (e) {
    case HiddenEncoding::kF32:
      for (uint32_t i = 0; i < count; ++i) put_u32(out + 4 * i, f32_bits(x[i]));
      break;
    case HiddenEncoding::kF16:
      for (uint32_t i = 0; i < count; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        out[2 * i] = static_cast<uint8_t>(h);
        out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
      memset(out + size_t{count} * 2, 0, bytes - size_t{count} * 2);
      break;
    case HiddenEncoding::kInt8: {
      for (uint32_t i = 0; i < count; ++i) {
        if (!(x[i] - x[i] == 0.0f))  // inf - inf and nan - nan are nan
          return Status::Error(Code::kInvalidArgument, "hidden state: value %" PRIu32 " is not finite; int8 cannot carry it", i);
      }
      // quantize_activations writes whole blocks of codes: one block at a time through a small buffer.
      const uint32_t blocks = int8_blocks(count);
      uint8_t* codes = out + size_t{blocks} * 4;
      for (uint32_t b = 0; b < blocks; ++b) {
        const uint32_t start = b * kInt8Block;
        const uint32_t len = count - start < kInt8Block ? count - start : kInt8Block;
        int8_t q[kInt8Block];
        float d;
        quantize_activations(x + start, static_cast<int>(len), static_cast<int>(kInt8Block), q, &d);
        put_u32(out + 4 * b, f32_bits(d));
        memcpy(codes + start, q, len);
      }
      memset(codes + count, 0, bytes - size_t{blocks} * 4 - count);
      break;
    }
  }
  return Status::Ok();
}

Status decode_hidden(HiddenEncoding e, const uint8_t* in, size_t n, uint32_t count, float* x) {
  if (!hidden_encoding_valid(static_cast<uint8_t>(e)))
    return Status::Error(Code::kCorrupt, "hidden state: unknown encoding %u", static_cast<unsigned>(e));
  const size_t bytes = hidden_encoded_bytes(e, count);
  if (n != bytes)
    return Status::Error(Code::kCorrupt, "hidden state: %" PRIu32 " values in %s take %zu bytes, got %zu", count,
                         hidden_encoding_name(e), bytes, n);
  switch (e) {
    case HiddenEncoding::kF32:
      for (uint32_t i = 0; i < count; ++i) x[i] = f32_from_bits(get_u32(in + 4 * i));
      break;
    case HiddenEncoding::kF16:
      if (!all_zero(in + size_t{count} * 2, bytes - size_t{count} * 2))
        return Status::Error(Code::kCorrupt, "hidden state: f16 padding is not zero");
      for (uint32_t i = 0; i < count; ++i) x[i] = f16_to_f32(static_cast<uint16_t>(in[2 * i] | in[2 * i + 1] << 8));
      break;
    case HiddenEncoding::kInt8: {
      const uint32_t blocks = int8_blocks(count);
      const uint8_t* codes = in + size_t{blocks} * 4;
      if (!all_zero(codes + count, bytes - size_t{blocks} * 4 - count))
        return Status::Error(Code::kCorrupt, "hidden state: int8 padding is not zero");
      for (uint32_t b = 0; b < blocks; ++b) {
        const float d = f32_from_bits(get_u32(in + 4 * b));
        if (!(d >= 0.0f && d - d == 0.0f))
          return Status::Error(Code::kCorrupt, "hidden state: int8 scale %" PRIu32 " is negative or not finite", b);
        const uint32_t start = b * kInt8Block;
        const uint32_t end = count - start < kInt8Block ? count : start + kInt8Block;
        for (uint32_t i = start; i < end; ++i) {
          const int8_t q = static_cast<int8_t>(codes[i]);
          if (q == -128) return Status::Error(Code::kCorrupt, "hidden state: int8 code -128 at value %" PRIu32, i);
          x[i] = static_cast<float>(q) * d;
        }
      }
      break;
    }
  }
  return Status::Ok();
}

}  // namespace mcullm::cluster
