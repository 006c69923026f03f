#include "cluster/frame.h"

#include <inttypes.h>
#include <string.h>

#include "cluster/frame_bytes.h"
#include "core/crc32.h"

namespace mcullm::cluster {
namespace {

using wire::all_zero;
using wire::get_u32;
using wire::put_u32;

constexpr size_t kCrcOffset = 24;  // header bytes [0, 24) are covered by the CRC, then the payload

bool type_valid(uint8_t t) { return t >= 1 && t <= static_cast<uint8_t>(FrameType::kHeartbeat); }

uint32_t frame_crc(const uint8_t* header, const uint8_t* payload, size_t payload_len) {
  return crc32_ieee(payload, payload_len, crc32_ieee(header, kCrcOffset));
}

// The header fields every frame is checked against before its payload is awaited (the magic is
// checked by the caller). Ok, or why the header cannot start a frame.
Status check_header(const uint8_t* h) {
  if (h[4] != kFrameVersion)
    return Status::Error(Code::kCorrupt, "link frame: version %u, this build speaks %u", h[4], kFrameVersion);
  if (!type_valid(h[5])) return Status::Error(Code::kCorrupt, "link frame: unknown type %u", h[5]);
  if (h[6] || h[7]) return Status::Error(Code::kCorrupt, "link frame: reserved header bytes are not zero");
  const uint32_t len = get_u32(h + 20);
  if (len > kMaxPayloadBytes)
    return Status::Error(Code::kCorrupt, "link frame: %s payload of %" PRIu32 " bytes, more than %zu",
                         frame_type_name(static_cast<FrameType>(h[5])), len, kMaxPayloadBytes);
  if (len % 4 != 0)
    return Status::Error(Code::kCorrupt, "link frame: %s payload of %" PRIu32 " bytes, not a multiple of 4",
                         frame_type_name(static_cast<FrameType>(h[5])), len);
  return Status::Ok();
}

void read_header(const uint8_t* h, FrameHeader* out) {
  out->type = static_cast<FrameType>(h[5]);
  out->seq = get_u32(h + 8);
  out->stream = get_u32(h + 12);
  out->pos = get_u32(h + 16);
  out->payload_len = get_u32(h + 20);
}

Status check_crc(const uint8_t* bytes, const FrameHeader& h) {
  const uint32_t want = get_u32(bytes + kCrcOffset);
  const uint32_t got = frame_crc(bytes, bytes + kFrameHeaderBytes, h.payload_len);
  if (want != got)
    return Status::Error(Code::kCorrupt, "link frame: CRC mismatch in a %s frame (seq %" PRIu32 ", %" PRIu32 " payload bytes): "
                         "header says %08" PRIx32 ", bytes give %08" PRIx32, frame_type_name(h.type), h.seq, h.payload_len, want, got);
  return Status::Ok();
}

Status need(size_t bytes, size_t cap, const char* what) {
  if (bytes > cap) return Status::Error(Code::kInvalidArgument, "%s payload needs %zu bytes, the buffer has %zu", what, bytes, cap);
  return Status::Ok();
}

}  // namespace

const char* frame_type_name(FrameType t) {
  switch (t) {
    case FrameType::kHello: return "hello";
    case FrameType::kReady: return "ready";
    case FrameType::kReset: return "reset";
    case FrameType::kHidden: return "hidden";
    case FrameType::kAck: return "ack";
    case FrameType::kError: return "error";
    case FrameType::kHeartbeat: return "heartbeat";
  }
  return nullptr;
}

Status encode_frame(const FrameHeader& header, const uint8_t* payload, uint8_t* out, size_t cap, size_t* frame_bytes) {
  if (!type_valid(static_cast<uint8_t>(header.type)))
    return Status::Error(Code::kInvalidArgument, "link frame: unknown type %u", static_cast<unsigned>(header.type));
  const size_t len = header.payload_len;
  if (len > kMaxPayloadBytes || len % 4 != 0)
    return Status::Error(Code::kInvalidArgument, "link frame: a %s payload of %zu bytes (at most %zu, a multiple of 4)",
                         frame_type_name(header.type), len, kMaxPayloadBytes);
  if (len > 0 && payload == nullptr)
    return Status::Error(Code::kInvalidArgument, "link frame: %zu payload bytes but no payload", len);
  if (kFrameHeaderBytes + len > cap)
    return Status::Error(Code::kInvalidArgument, "link frame: %zu bytes do not fit a buffer of %zu",
                         kFrameHeaderBytes + len, cap);
  if (len > 0 && payload != out + kFrameHeaderBytes) memmove(out + kFrameHeaderBytes, payload, len);
  memcpy(out, kFrameMagic, 4);
  out[4] = kFrameVersion;
  out[5] = static_cast<uint8_t>(header.type);
  out[6] = out[7] = 0;
  put_u32(out + 8, header.seq);
  put_u32(out + 12, header.stream);
  put_u32(out + 16, header.pos);
  put_u32(out + 20, header.payload_len);
  put_u32(out + kCrcOffset, frame_crc(out, out + kFrameHeaderBytes, len));
  *frame_bytes = kFrameHeaderBytes + len;
  return Status::Ok();
}

Status decode_frame(const uint8_t* bytes, size_t n, Frame* out) {
  if (n < kFrameHeaderBytes)
    return Status::Error(Code::kCorrupt, "link frame: %zu bytes, shorter than its %zu-byte header", n, kFrameHeaderBytes);
  if (memcmp(bytes, kFrameMagic, 4) != 0) return Status::Error(Code::kCorrupt, "link frame: bad magic");
  MC_TRY(check_header(bytes));
  FrameHeader h;
  read_header(bytes, &h);
  if (n != kFrameHeaderBytes + h.payload_len)
    return Status::Error(Code::kCorrupt, "link frame: %zu bytes, its header says %zu", n, static_cast<size_t>(kFrameHeaderBytes + h.payload_len));
  MC_TRY(check_crc(bytes, h));
  out->header = h;
  out->payload = bytes + kFrameHeaderBytes;
  return Status::Ok();
}

// ---- payloads ----

Status encode_hello(const Hello& h, uint8_t* out, size_t cap, size_t* len) {
  MC_TRY(need(kHelloBytes, cap, "hello"));
  const uint32_t fields[10] = {h.protocol, static_cast<uint32_t>(h.role), h.first_layer, h.end_layer, h.n_layers,
                               h.dim,      h.ctx_len,                      h.max_streams, h.capabilities, 0};
  for (int i = 0; i < 10; ++i) put_u32(out + 4 * i, fields[i]);
  put_u32(out + 40, static_cast<uint32_t>(h.slice_hash));
  put_u32(out + 44, static_cast<uint32_t>(h.slice_hash >> 32));
  *len = kHelloBytes;
  return Status::Ok();
}

Status decode_hello(const uint8_t* p, size_t n, Hello* out) {
  if (n != kHelloBytes) return Status::Error(Code::kCorrupt, "hello: %zu payload bytes, expected %zu", n, kHelloBytes);
  Hello h;
  h.protocol = get_u32(p);
  const uint32_t role = get_u32(p + 4);
  h.first_layer = get_u32(p + 8);
  h.end_layer = get_u32(p + 12);
  h.n_layers = get_u32(p + 16);
  h.dim = get_u32(p + 20);
  h.ctx_len = get_u32(p + 24);
  h.max_streams = get_u32(p + 28);
  h.capabilities = get_u32(p + 32);
  h.slice_hash = uint64_t{get_u32(p + 40)} | uint64_t{get_u32(p + 44)} << 32;
  if (get_u32(p + 36) != 0) return Status::Error(Code::kCorrupt, "hello: reserved field is not zero");
  if (role > static_cast<uint32_t>(NodeRole::kNode)) return Status::Error(Code::kCorrupt, "hello: unknown role %" PRIu32, role);
  h.role = static_cast<NodeRole>(role);
  if (h.capabilities & ~kAllCapabilities)
    return Status::Error(Code::kCorrupt, "hello: unknown capability bits %08" PRIx32, h.capabilities & ~kAllCapabilities);
  if (h.first_layer > h.end_layer || h.end_layer > h.n_layers)
    return Status::Error(Code::kCorrupt, "hello: layers [%" PRIu32 ", %" PRIu32 ") are not a range of the model's %" PRIu32, h.first_layer,
                         h.end_layer, h.n_layers);
  *out = h;
  return Status::Ok();
}

Status encode_ack(uint32_t acked_seq, uint8_t* out, size_t cap, size_t* len) {
  MC_TRY(need(4, cap, "ack"));
  put_u32(out, acked_seq);
  *len = 4;
  return Status::Ok();
}

Status decode_ack(const uint8_t* p, size_t n, uint32_t* acked_seq) {
  if (n != 4) return Status::Error(Code::kCorrupt, "ack: %zu payload bytes, expected 4", n);
  *acked_seq = get_u32(p);
  return Status::Ok();
}

Status encode_error(const Status& error, uint8_t* out, size_t cap, size_t* len) {
  const size_t text = strnlen(error.message(), kMaxErrorText);
  const size_t bytes = 8 + ((text + 3) & ~size_t{3});
  MC_TRY(need(bytes, cap, "error"));
  // an Ok status sent as an error would read back as "internal": say so instead of sending code 0
  put_u32(out, static_cast<uint32_t>(error.ok() ? Code::kInternal : error.code()));
  put_u32(out + 4, static_cast<uint32_t>(text));
  memcpy(out + 8, error.message(), text);
  memset(out + 8 + text, 0, bytes - 8 - text);
  *len = bytes;
  return Status::Ok();
}

Status decode_error(const uint8_t* p, size_t n, Status* remote) {
  if (n < 8) return Status::Error(Code::kCorrupt, "error frame: %zu payload bytes, shorter than 8", n);
  const uint32_t code = get_u32(p);
  const uint32_t text = get_u32(p + 4);
  if (code == 0 || code > static_cast<uint32_t>(Code::kInternal))
    return Status::Error(Code::kCorrupt, "error frame: unknown code %" PRIu32, code);
  if (text > kMaxErrorText) return Status::Error(Code::kCorrupt, "error frame: text of %" PRIu32 " bytes, at most %zu", text, kMaxErrorText);
  if (n != 8 + ((size_t{text} + 3) & ~size_t{3}))
    return Status::Error(Code::kCorrupt, "error frame: %zu payload bytes for a text of %" PRIu32, n, text);
  if (memchr(p + 8, 0, text) != nullptr) return Status::Error(Code::kCorrupt, "error frame: NUL inside the text");
  if (!all_zero(p + 8 + text, n - 8 - text)) return Status::Error(Code::kCorrupt, "error frame: padding is not zero");
  char msg[kMaxErrorText + 1];
  memcpy(msg, p + 8, text);
  msg[text] = '\0';
  *remote = Status::Error(static_cast<Code>(code), "%s", msg);
  return Status::Ok();
}

Status check_empty_payload(const FrameHeader& h) {
  if (h.payload_len != 0)
    return Status::Error(Code::kCorrupt, "%s frame with %" PRIu32 " payload bytes, expected none", frame_type_name(h.type),
                         h.payload_len);
  return Status::Ok();
}

// ---- hidden states ----

uint32_t hidden_chunk_values(HiddenEncoding e) {
  if (!hidden_encoding_valid(static_cast<uint8_t>(e))) return 0;
  // bytes per block of 64 values; the chunk head comes first
  const size_t per_block = hidden_encoded_bytes(e, kInt8Block);
  return static_cast<uint32_t>((kMaxPayloadBytes - kHiddenChunkHeadBytes) / per_block) * kInt8Block;
}

uint32_t hidden_frame_count(HiddenEncoding e, uint32_t dim) {
  const uint32_t per = hidden_chunk_values(e);
  return per == 0 ? 0 : (dim + per - 1) / per;
}

size_t hidden_wire_bytes(HiddenEncoding e, uint32_t dim) {
  if (dim == 0 || dim > kMaxHiddenDim) return 0;
  const uint32_t per = hidden_chunk_values(e);
  if (per == 0) return 0;
  const uint32_t full = dim / per, rest = dim % per;
  size_t bytes = size_t{full} * (kFrameHeaderBytes + kHiddenChunkHeadBytes + hidden_encoded_bytes(e, per));
  if (rest) bytes += kFrameHeaderBytes + kHiddenChunkHeadBytes + hidden_encoded_bytes(e, rest);
  return bytes;
}

Status encode_hidden_chunk(HiddenEncoding e, const float* x, uint32_t dim, uint32_t chunk, uint8_t* out, size_t cap,
                           size_t* len) {
  if (!hidden_encoding_valid(static_cast<uint8_t>(e)))
    return Status::Error(Code::kInvalidArgument, "hidden state: unknown encoding %u", static_cast<unsigned>(e));
  if (dim == 0 || dim > kMaxHiddenDim)
    return Status::Error(Code::kInvalidArgument, "hidden state: dim %" PRIu32 " (1 .. %" PRIu32 ")", dim, kMaxHiddenDim);
  const uint32_t per = hidden_chunk_values(e);
  if (chunk >= hidden_frame_count(e, dim))
    return Status::Error(Code::kInvalidArgument, "hidden state: chunk %" PRIu32 " of a %" PRIu32 "-frame vector", chunk, hidden_frame_count(e, dim));
  const uint32_t offset = chunk * per;
  const uint32_t count = dim - offset < per ? dim - offset : per;
  const size_t bytes = kHiddenChunkHeadBytes + hidden_encoded_bytes(e, count);
  MC_TRY(need(bytes, cap, "hidden"));
  out[0] = static_cast<uint8_t>(e);
  out[1] = out[2] = out[3] = 0;
  put_u32(out + 4, dim);
  put_u32(out + 8, offset);
  put_u32(out + 12, count);
  MC_TRY(encode_hidden(e, x + offset, count, out + kHiddenChunkHeadBytes, cap - kHiddenChunkHeadBytes));
  *len = bytes;
  return Status::Ok();
}

Status parse_hidden_chunk(const uint8_t* p, size_t n, HiddenChunk* out) {
  if (n < kHiddenChunkHeadBytes)
    return Status::Error(Code::kCorrupt, "hidden frame: %zu payload bytes, shorter than its %zu-byte head", n,
                         kHiddenChunkHeadBytes);
  if (!hidden_encoding_valid(p[0])) return Status::Error(Code::kCorrupt, "hidden frame: unknown encoding %u", p[0]);
  if (p[1] || p[2] || p[3]) return Status::Error(Code::kCorrupt, "hidden frame: reserved bytes are not zero");
  HiddenChunk c;
  c.encoding = static_cast<HiddenEncoding>(p[0]);
  c.dim = get_u32(p + 4);
  c.offset = get_u32(p + 8);
  c.count = get_u32(p + 12);
  if (c.dim == 0 || c.dim > kMaxHiddenDim)
    return Status::Error(Code::kCorrupt, "hidden frame: dim %" PRIu32 " (1 .. %" PRIu32 ")", c.dim, kMaxHiddenDim);
  const uint32_t per = hidden_chunk_values(c.encoding);
  // the canonical split: chunk k holds values [k * per, min(dim, (k + 1) * per))
  if (c.offset >= c.dim || c.offset % per != 0)
    return Status::Error(Code::kCorrupt, "hidden frame: offset %" PRIu32 " is not a chunk start of a %" PRIu32 "-value vector", c.offset, c.dim);
  const uint32_t want = c.dim - c.offset < per ? c.dim - c.offset : per;
  if (c.count != want)
    return Status::Error(Code::kCorrupt, "hidden frame: %" PRIu32 " values at offset %" PRIu32 " of %" PRIu32 ", expected %" PRIu32, c.count, c.offset,
                         c.dim, want);
  c.data = p + kHiddenChunkHeadBytes;
  c.data_bytes = hidden_encoded_bytes(c.encoding, c.count);
  if (n != kHiddenChunkHeadBytes + c.data_bytes)
    return Status::Error(Code::kCorrupt, "hidden frame: %zu payload bytes, %" PRIu32 " %s values take %zu", n, c.count,
                         hidden_encoding_name(c.encoding), kHiddenChunkHeadBytes + c.data_bytes);
  *out = c;
  return Status::Ok();
}

void HiddenAssembler::start(float* dst, uint32_t dim) {
  dst_ = dst;
  dim_ = dim;
  received_ = 0;
}

Status HiddenAssembler::add(const Frame& frame) {
  if (dst_ == nullptr) return Status::Error(Code::kInvalidArgument, "hidden state: start() was not called");
  Status st = [&]() -> Status {
    if (frame.header.type != FrameType::kHidden)
      return Status::Error(Code::kInvalidArgument, "expected a hidden frame, got %s", frame_type_name(frame.header.type));
    HiddenChunk c;
    MC_TRY(parse_hidden_chunk(frame.payload, frame.header.payload_len, &c));
    if (c.dim != dim_) return Status::Error(Code::kCorrupt, "hidden frame: a %" PRIu32 "-value vector, expected %" PRIu32, c.dim, dim_);
    if (received_ == dim_) return Status::Error(Code::kCorrupt, "hidden frame: the vector is already complete");
    if (received_ > 0 && (frame.header.stream != stream_ || frame.header.pos != pos_ || c.encoding != encoding_))
      return Status::Error(Code::kCorrupt, "hidden frame: stream %" PRIu32 " pos %" PRIu32 " %s inside a vector of stream %" PRIu32 " pos %" PRIu32 " %s",
                           frame.header.stream, frame.header.pos, hidden_encoding_name(c.encoding), stream_, pos_,
                           hidden_encoding_name(encoding_));
    if (c.offset != received_)
      return Status::Error(Code::kCorrupt, "hidden frame: values from %" PRIu32 ", expected from %" PRIu32, c.offset, received_);
    MC_TRY(decode_hidden(c.encoding, c.data, c.data_bytes, c.count, dst_ + c.offset));
    stream_ = frame.header.stream;
    pos_ = frame.header.pos;
    encoding_ = c.encoding;
    received_ += c.count;
    return Status::Ok();
  }();
  if (!st.ok()) received_ = 0;
  return st;
}

// ---- stream decoder ----

void FrameDecoder::reset() {
  len_ = consume_ = skipped_ = 0;
  resyncing_ = false;
}

// Drops held bytes before the first position >= from where a magic could start (a full magic, or a
// prefix of it at the end of what is held).
void FrameDecoder::drop_to_next_magic(size_t from) {
  size_t i = from;
  for (; i < len_; ++i) {
    const size_t avail = len_ - i < 4 ? len_ - i : 4;
    if (memcmp(buf_ + i, kFrameMagic, avail) == 0) break;
  }
  if (!resyncing_) skipped_ += i;
  memmove(buf_, buf_ + i, len_ - i);
  len_ -= i;
}

bool FrameDecoder::step(DecodeEvent* ev) {
  drop_to_next_magic(0);
  if (len_ < 4) return false;
  // a magic starts the held bytes: anything skipped before it was garbage between frames
  if (skipped_ > 0) {
    error_ = Status::Error(Code::kCorrupt, "link: %zu bytes of garbage before a frame were skipped", skipped_);
    skipped_ = 0;
    ++errors_;
    *ev = DecodeEvent::kError;
    return true;
  }
  resyncing_ = false;
  if (len_ < kFrameHeaderBytes) return false;
  Status st = check_header(buf_);
  FrameHeader h;
  if (st.ok()) {
    read_header(buf_, &h);
    if (len_ < kFrameHeaderBytes + h.payload_len) return false;
    st = check_crc(buf_, h);
  }
  if (!st.ok()) {
    error_ = st;
    ++errors_;
    resyncing_ = true;  // the bytes up to the next magic belong to this bad frame
    drop_to_next_magic(1);
    *ev = DecodeEvent::kError;
    return true;
  }
  frame_.header = h;
  frame_.payload = buf_ + kFrameHeaderBytes;
  consume_ = kFrameHeaderBytes + h.payload_len;
  ++frames_;
  *ev = DecodeEvent::kFrame;
  return true;
}

size_t FrameDecoder::feed(const uint8_t* data, size_t n, DecodeEvent* ev) {
  if (consume_ > 0) {  // the frame returned last time is done with
    memmove(buf_, buf_ + consume_, len_ - consume_);
    len_ -= consume_;
    consume_ = 0;
  }
  size_t used = 0;
  while (true) {
    if (step(ev)) return used;
    // Not enough held: take just what the current frame still needs (or one magic's worth while
    // looking for a magic), so that a frame never straddles the buffer's end.
    size_t want = 4;
    if (len_ >= kFrameHeaderBytes) want = kFrameHeaderBytes + get_u32(buf_ + 20);
    else if (len_ >= 4) want = kFrameHeaderBytes;
    const size_t take = want - len_ < n - used ? want - len_ : n - used;
    if (take == 0) {
      *ev = DecodeEvent::kNeedMore;
      return used;
    }
    memcpy(buf_ + len_, data + used, take);
    len_ += take;
    used += take;
  }
}

}  // namespace mcullm::cluster
