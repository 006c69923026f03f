// The cluster link protocol (issue 6): the frames that carry hidden states and control messages
// between the master and the nodes, whatever the transport (in-process, TCP, serial / SPI).
// Freestanding core: no heap, no exceptions; everything encodes into and decodes from caller buffers.
//
// A frame is a 28-byte header then a payload, little-endian, every length a multiple of 4, and at
// most kMaxFrameBytes = 32 KB in all (header included): one frame is one ESP32-S3 SPI DMA transfer
// (word-aligned buffers, lengths a multiple of 4, <= 32 KB per transfer; FACTS.md section 5).
//
//   offset size field
//   0      4    magic      'M' 'C' 'L' 'K'
//   4      1    version    kFrameVersion (1)
//   5      1    type       FrameType (1..7)
//   6      2    reserved   0
//   8      4    seq        the sender's frame counter (+1 per frame sent on this link, wraps)
//   12     4    stream     the sequence this frame belongs to (several generate at once)
//   16     4    pos        the token position of that stream
//   20     4    length     payload bytes: a multiple of 4, <= kMaxPayloadBytes
//   24     4    crc        CRC-32 (core/crc32.h) of header bytes 0..23, then of the payload
//   28     length payload  (per type, below)
//
// Payloads (u32 unless said; reserved fields and padding must be zero, so a decoded frame
// re-encodes to the same bytes):
//   hello      48 bytes: protocol, role, first_layer, end_layer, n_layers, dim, ctx_len,
//              max_streams, capabilities, reserved, slice_hash (u64)   (struct Hello)
//   ready      empty: the sender is ready (its slice is loaded; a node answers hello with it)
//   reset      empty: forget stream `stream` (its KV cache), or every stream if it is kAllStreams
//   hidden     16-byte chunk head: encoding (u8), reserved (u8, u16), dim, offset, count; then
//              `count` values of the vector, encoded as hidden_codec.h says. A vector too large for
//              one frame is split into frames of hidden_chunk_values(encoding) values (a multiple of
//              64), sent in order with the same stream and pos; HiddenAssembler puts it together.
//   ack        4 bytes: the seq of the frame acknowledged
//   error      code (mcullm::Code), text length (<= kMaxErrorText), text (no NUL), zeros to 4
//   heartbeat  empty: "still alive"; the receiver answers with one of its own
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "cluster/hidden_codec.h"
#include "mcullm/status.h"

namespace mcullm::cluster {

constexpr uint8_t kFrameMagic[4] = {'M', 'C', 'L', 'K'};
constexpr uint8_t kFrameVersion = 1;
constexpr size_t kFrameHeaderBytes = 28;
constexpr size_t kMaxFrameBytes = 32768;
constexpr size_t kMaxPayloadBytes = kMaxFrameBytes - kFrameHeaderBytes;  // 32740
constexpr uint32_t kAllStreams = 0xFFFFFFFFu;                           // reset: every stream
constexpr size_t kHelloBytes = 48;
constexpr size_t kHiddenChunkHeadBytes = 16;
constexpr uint32_t kMaxHiddenDim = 1u << 20;                  // refused above (a hostile dim)
constexpr size_t kMaxErrorText = Status::kMaxMessage - 1;     // error text bytes
static_assert(kFrameHeaderBytes % 4 == 0 && kMaxPayloadBytes % 4 == 0, "SPI DMA: lengths multiple of 4");

enum class FrameType : uint8_t {
  kHello = 1,
  kReady = 2,
  kReset = 3,
  kHidden = 4,
  kAck = 5,
  kError = 6,
  kHeartbeat = 7,
};
// "hello", "ready", ...; nullptr for a value outside the enum.
const char* frame_type_name(FrameType t);

struct FrameHeader {
  FrameType type = FrameType::kHeartbeat;
  uint32_t seq = 0;
  uint32_t stream = 0;
  uint32_t pos = 0;
  uint32_t payload_len = 0;
};

// A decoded frame: the payload points into the decoder's (or transport's) buffer.
struct Frame {
  FrameHeader header;
  const uint8_t* payload = nullptr;
};

// Writes header + payload (header.payload_len bytes) to out[cap]; *frame_bytes = 28 + payload_len.
// payload may already sit at out + kFrameHeaderBytes (then nothing is copied), or be nullptr when
// payload_len is 0. Errors: invalid type, length not a multiple of 4 or too large, cap too small.
Status encode_frame(const FrameHeader& header, const uint8_t* payload, uint8_t* out, size_t cap, size_t* frame_bytes);

// Checks one complete frame in bytes[0, n) (n must be its exact size) and views it.
Status decode_frame(const uint8_t* bytes, size_t n, Frame* out);

// ---- payloads --------------------------------------------------------------------------------

enum class NodeRole : uint32_t { kMaster = 0, kNode = 1 };

// bit (1 << encoding) for every HiddenEncoding the sender accepts.
constexpr uint32_t capability_bit(HiddenEncoding e) { return 1u << static_cast<uint32_t>(e); }
constexpr uint32_t kAllCapabilities =
    capability_bit(HiddenEncoding::kF32) | capability_bit(HiddenEncoding::kF16) | capability_bit(HiddenEncoding::kInt8);

struct Hello {
  uint32_t protocol = kFrameVersion;
  NodeRole role = NodeRole::kNode;
  uint32_t first_layer = 0;  // the sender runs layers [first_layer, end_layer) of n_layers
  uint32_t end_layer = 0;
  uint32_t n_layers = 0;
  uint32_t dim = 0;
  uint32_t ctx_len = 0;
  uint32_t max_streams = 1;
  uint32_t capabilities = capability_bit(HiddenEncoding::kF32);
  uint64_t slice_hash = 0;  // identifies the weights of the slice (the master checks it)
};
// kHelloBytes into out[cap].
Status encode_hello(const Hello& h, uint8_t* out, size_t cap, size_t* len);
// Errors: wrong size, reserved non-zero, unknown role or capability bits, layer range not inside n_layers.
Status decode_hello(const uint8_t* p, size_t n, Hello* out);

Status encode_ack(uint32_t acked_seq, uint8_t* out, size_t cap, size_t* len);
Status decode_ack(const uint8_t* p, size_t n, uint32_t* acked_seq);

// An error frame carries a Status: its code and message (cut to kMaxErrorText bytes).
Status encode_error(const Status& error, uint8_t* out, size_t cap, size_t* len);
// *remote becomes the sender's Status (code and text; never Ok). Errors: bad size, padding, code, NUL.
Status decode_error(const uint8_t* p, size_t n, Status* remote);

// Checks that an empty-payload type (ready, reset, heartbeat) has an empty payload.
Status check_empty_payload(const FrameHeader& h);

// Hidden states.
// The most values one hidden frame carries in encoding e (a multiple of 64); 0 if e is invalid.
uint32_t hidden_chunk_values(HiddenEncoding e);
// Frames needed for a vector of dim values.
uint32_t hidden_frame_count(HiddenEncoding e, uint32_t dim);
// Bytes on the link for a whole vector of dim values: every frame's header, chunk head and values
// (the figure a cost model wants; 0 for an invalid encoding or dim). 896 values: f32 3628, f16 1836, int8 996.
size_t hidden_wire_bytes(HiddenEncoding e, uint32_t dim);
// Payload of frame `chunk` (0 .. hidden_frame_count - 1) of x[dim] into out[cap].
Status encode_hidden_chunk(HiddenEncoding e, const float* x, uint32_t dim, uint32_t chunk, uint8_t* out, size_t cap,
                           size_t* len);

// A hidden payload's head, checked (sizes, canonical split, padding) but not yet decoded.
struct HiddenChunk {
  HiddenEncoding encoding = HiddenEncoding::kF32;
  uint32_t dim = 0;
  uint32_t offset = 0;
  uint32_t count = 0;
  const uint8_t* data = nullptr;  // hidden_encoded_bytes(encoding, count) bytes
  size_t data_bytes = 0;
};
Status parse_hidden_chunk(const uint8_t* p, size_t n, HiddenChunk* out);

// Puts a hidden state back together from its frames (in order, same stream, pos, encoding, dim).
class HiddenAssembler {
 public:
  // Receives a vector of `dim` values into dst[dim].
  void start(float* dst, uint32_t dim);
  // Adds one hidden frame. Errors (the vector is then abandoned; start again): not a hidden frame,
  // a bad payload, another dim, stream, pos or encoding than the first chunk, a chunk out of order.
  Status add(const Frame& frame);
  bool complete() const { return dst_ != nullptr && received_ == dim_; }
  uint32_t stream() const { return stream_; }
  uint32_t pos() const { return pos_; }
  HiddenEncoding encoding() const { return encoding_; }

 private:
  float* dst_ = nullptr;
  uint32_t dim_ = 0;
  uint32_t received_ = 0;
  uint32_t stream_ = 0;
  uint32_t pos_ = 0;
  HiddenEncoding encoding_ = HiddenEncoding::kF32;
};

// ---- the stream decoder ----------------------------------------------------------------------

enum class DecodeEvent : uint8_t {
  kNeedMore,  // every byte given was taken; feed more
  kFrame,     // frame() is a good frame (valid until the next feed() or reset())
  kError,     // error() says what was wrong; the decoder already looks for the next magic
};

// Bytes in, frames out, whatever the chunking. A corrupt frame (bad magic, version, type, reserved
// bits, length, CRC) or garbage between frames is reported once as kError, then the decoder
// resynchronises on the next magic, rescanning the bytes it already holds (a frame whose length
// field was hit may have swallowed the good frames after it; they are not lost).
// Holds one frame's worth of bytes inside (kMaxFrameBytes): no heap.
class FrameDecoder {
 public:
  // Takes a prefix of data[0, n) and returns its length. Call it again with the rest until it
  // returns with kNeedMore (also after a kFrame or kError that took 0 bytes: held bytes may hold more):
  //   while (true) { size_t used = d.feed(p, n, &ev); p += used; n -= used; if (ev == kNeedMore) break; ... }
  size_t feed(const uint8_t* data, size_t n, DecodeEvent* ev);
  const Frame& frame() const { return frame_; }
  const Status& error() const { return error_; }
  // Bytes held that are not yet a whole frame: non-zero when a peer that closes now closed mid-frame.
  size_t pending() const { return len_ - consume_; }
  uint64_t frames() const { return frames_; }
  uint64_t errors() const { return errors_; }
  void reset();

 private:
  bool step(DecodeEvent* ev);  // decides on the held bytes; false: needs more
  void drop_to_next_magic(size_t from);

  uint8_t buf_[kMaxFrameBytes];
  size_t len_ = 0;       // bytes held
  size_t consume_ = 0;   // bytes of the last frame returned, dropped on the next feed
  size_t skipped_ = 0;   // garbage bytes skipped since the last frame or error
  bool resyncing_ = false;  // skipping the rest of a corrupt frame: not garbage to report again
  Frame frame_;
  Status error_;
  uint64_t frames_ = 0;
  uint64_t errors_ = 0;
};

}  // namespace mcullm::cluster
