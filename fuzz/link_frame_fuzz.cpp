// Any bytes through the cluster link's stream decoder (src/cluster/frame.h) and payload decoders.
// Input: byte 0 = mode (bit 0: repair the CRC of every frame-like run first, so that mutated
// payloads reach the payload decoders), bytes 1..4 = the seed of a random chunking, then the stream.
// Checks:
//  - the stream decoded all at once and in random pieces gives the same frames and errors, in order;
//  - every frame is a verbatim piece of the input and re-encodes to the same bytes;
//  - hello / ack / error payloads that decode re-encode to the same bytes; hidden payloads decode
//    (or are refused) without a crash, f32 and (non-nan) f16 values re-encode to the same bytes,
//    and a HiddenAssembler takes them;
//  - the decoder never holds more than a frame, and reports what it holds.
#include <string.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/frame.h"
#include "cluster/frame_bytes.h"
#include "core/crc32.h"
#include "fuzz_support.h"
#include "quant/f16.h"

using namespace mcullm;
using namespace mcullm::cluster;

namespace {

struct Event {
  bool frame;
  std::vector<uint8_t> bytes;  // frame: its re-encoding; error: the message
};

std::vector<float>* g_hidden;  // kMaxHiddenDim floats for the assembler

void check_payload(const Frame& f) {
  const uint8_t* p = f.payload;
  const size_t n = f.header.payload_len;
  static std::vector<uint8_t> again(kMaxPayloadBytes);
  size_t len = 0;
  switch (f.header.type) {
    case FrameType::kHello: {
      Hello h;
      if (decode_hello(p, n, &h).ok()) {
        FUZZ_CHECK(encode_hello(h, again.data(), again.size(), &len).ok());
        FUZZ_CHECK(len == n && memcmp(again.data(), p, n) == 0);
      }
      break;
    }
    case FrameType::kAck: {
      uint32_t seq;
      if (decode_ack(p, n, &seq).ok()) {
        FUZZ_CHECK(encode_ack(seq, again.data(), again.size(), &len).ok());
        FUZZ_CHECK(len == n && memcmp(again.data(), p, n) == 0);
      }
      break;
    }
    case FrameType::kError: {
      Status remote;
      if (decode_error(p, n, &remote).ok()) {
        FUZZ_CHECK(!remote.ok());
        FUZZ_CHECK(encode_error(remote, again.data(), again.size(), &len).ok());
        FUZZ_CHECK(len == n && memcmp(again.data(), p, n) == 0);
      }
      break;
    }
    case FrameType::kHidden: {
      HiddenChunk c;
      if (!parse_hidden_chunk(p, n, &c).ok()) break;
      FUZZ_CHECK(c.offset + c.count <= c.dim && c.dim <= kMaxHiddenDim);
      FUZZ_CHECK(kHiddenChunkHeadBytes + c.data_bytes == n);
      std::vector<float> x(c.count);
      if (!decode_hidden(c.encoding, c.data, c.data_bytes, c.count, x.data()).ok()) break;
      bool nan = false;
      for (float v : x) nan = nan || v != v;
      if (c.encoding == HiddenEncoding::kF32 || (c.encoding == HiddenEncoding::kF16 && !nan)) {
        std::vector<uint8_t> enc(c.data_bytes);
        FUZZ_CHECK(encode_hidden(c.encoding, x.data(), c.count, enc.data(), enc.size()).ok());
        FUZZ_CHECK(memcmp(enc.data(), c.data, c.data_bytes) == 0);
      }
      if (c.offset == 0) {
        HiddenAssembler a;
        a.start(g_hidden->data(), c.dim);
        FUZZ_CHECK(a.add(f).ok());
        FUZZ_CHECK(a.complete() == (c.count == c.dim));
      }
      break;
    }
    case FrameType::kReady:
    case FrameType::kReset:
    case FrameType::kHeartbeat:
      FUZZ_CHECK(check_empty_payload(f.header).ok() == (n == 0));
      break;
  }
}

// Decodes bytes in pieces from `seed` (0: all at once); records every event.
std::vector<Event> decode(FrameDecoder& d, const uint8_t* data, size_t size, uint32_t seed) {
  d.reset();
  std::vector<Event> events;
  size_t off = 0;
  uint32_t s = seed;
  do {
    size_t n = size - off;
    if (seed) {
      s = s * 1664525u + 1013904223u;
      const size_t piece = 1 + (s >> 16) % (s & 0x100 ? 7 : 4096);
      n = n < piece ? n : piece;
    }
    const uint8_t* p = data + off;
    off += n;
    while (true) {
      DecodeEvent ev;
      const size_t used = d.feed(p, n, &ev);
      FUZZ_CHECK(used <= n);
      p += used;
      n -= used;
      FUZZ_CHECK(d.pending() <= kMaxFrameBytes);
      if (ev == DecodeEvent::kNeedMore) {
        FUZZ_CHECK(n == 0);
        break;
      }
      Event e;
      e.frame = ev == DecodeEvent::kFrame;
      if (e.frame) {
        const Frame& f = d.frame();
        e.bytes.resize(kMaxFrameBytes);
        size_t len = 0;
        FUZZ_CHECK(encode_frame(f.header, f.payload, e.bytes.data(), e.bytes.size(), &len).ok());
        e.bytes.resize(len);
        // the frame is a verbatim piece of the input
        FUZZ_CHECK(memmem(data, size, e.bytes.data(), len) != nullptr);
        Frame again;
        FUZZ_CHECK(decode_frame(e.bytes.data(), len, &again).ok());
        if (seed == 0) check_payload(f);
      } else {
        FUZZ_CHECK(!d.error().ok());
        const char* m = d.error().message();
        e.bytes.assign(m, m + strlen(m));
      }
      events.push_back(std::move(e));
    }
  } while (off < size);
  return events;
}

// Recomputes the CRC of every run that starts with a magic and whose header length fits.
void repair_crcs(std::vector<uint8_t>* b) {
  for (size_t i = 0; i + kFrameHeaderBytes <= b->size(); ++i) {
    if (memcmp(b->data() + i, kFrameMagic, 4) != 0) continue;
    const uint32_t len = wire::get_u32(b->data() + i + 20);
    if (len > kMaxPayloadBytes || i + kFrameHeaderBytes + len > b->size()) continue;
    uint32_t crc = crc32_ieee(b->data() + i, 24);
    crc = crc32_ieee(b->data() + i + kFrameHeaderBytes, len, crc);
    for (int k = 0; k < 4; ++k) (*b)[i + 24 + k] = static_cast<uint8_t>(crc >> (8 * k));
  }
}

void put_frame(std::vector<uint8_t>* out, FrameType type, uint32_t seq, const uint8_t* payload, size_t len) {
  FrameHeader h;
  h.type = type;
  h.seq = seq;
  h.stream = seq % 3;
  h.pos = seq * 5;
  h.payload_len = static_cast<uint32_t>(len);
  std::vector<uint8_t> buf(kMaxFrameBytes);
  size_t n = 0;
  FUZZ_CHECK(encode_frame(h, payload, buf.data(), buf.size(), &n).ok());
  out->insert(out->end(), buf.begin(), buf.begin() + static_cast<long>(n));
}

// Seeds: every frame type, hidden states in each encoding (one split over frames), garbage between.
void write_seeds(const std::string& dir) {
  std::vector<uint8_t> s;
  std::vector<uint8_t> p(kMaxPayloadBytes);
  size_t len = 0;
  Hello h;
  h.n_layers = 24;
  h.first_layer = 4;
  h.end_layer = 8;
  h.dim = 64;
  h.capabilities = kAllCapabilities;
  h.slice_hash = 0x1234;
  FUZZ_CHECK(encode_hello(h, p.data(), p.size(), &len).ok());
  put_frame(&s, FrameType::kHello, 1, p.data(), len);
  put_frame(&s, FrameType::kReady, 2, nullptr, 0);
  put_frame(&s, FrameType::kReset, 3, nullptr, 0);
  std::vector<float> x(9000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 37) - 18) * 0.37f;
  uint32_t seq = 4;
  for (uint8_t e = 0; e < 3; ++e) {
    FUZZ_CHECK(encode_hidden_chunk(static_cast<HiddenEncoding>(e), x.data(), 100, 0, p.data(), p.size(), &len).ok());
    put_frame(&s, FrameType::kHidden, seq++, p.data(), len);
  }
  const std::string junk = "noise MCL";
  s.insert(s.end(), junk.begin(), junk.end());
  FUZZ_CHECK(encode_ack(7, p.data(), p.size(), &len).ok());
  put_frame(&s, FrameType::kAck, seq++, p.data(), len);
  FUZZ_CHECK(encode_error(Status::Error(Code::kCorrupt, "slice hash mismatch"), p.data(), p.size(), &len).ok());
  put_frame(&s, FrameType::kError, seq++, p.data(), len);
  put_frame(&s, FrameType::kHeartbeat, seq++, nullptr, 0);
  std::vector<uint8_t> small = {0, 1, 2, 3, 4};  // mode 0, seed 0x04030201
  small.insert(small.end(), s.begin(), s.end());
  fuzz::write_seed(dir + "/frames", small[0], std::vector<uint8_t>(small.begin() + 1, small.end()));
  // a vector split over two f32 frames, mode 1 (CRC repair)
  std::vector<uint8_t> split;
  for (uint32_t c = 0; c < hidden_frame_count(HiddenEncoding::kF32, 9000); ++c) {
    FUZZ_CHECK(encode_hidden_chunk(HiddenEncoding::kF32, x.data(), 9000, c, p.data(), p.size(), &len).ok());
    put_frame(&split, FrameType::kHidden, c, p.data(), len);
  }
  split.insert(split.begin(), {9, 0, 0, 0});
  fuzz::write_seed(dir + "/hidden_split", 1, split);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_hidden = new std::vector<float>(kMaxHiddenDim);
  if (const char* dir = std::getenv("MCULLM_FUZZ_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  static FrameDecoder* whole = new FrameDecoder;
  static FrameDecoder* pieces = new FrameDecoder;
  std::vector<uint8_t> stream(data + 5, data + size);
  if (data[0] & 1) repair_crcs(&stream);
  const uint32_t seed = wire::get_u32(data + 1) | 1u;  // never 0: that is "all at once"
  const std::vector<Event> a = decode(*whole, stream.data(), stream.size(), 0);
  const std::vector<Event> b = decode(*pieces, stream.data(), stream.size(), seed);
  FUZZ_CHECK(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) FUZZ_CHECK(a[i].frame == b[i].frame && a[i].bytes == b[i].bytes);
  FUZZ_CHECK(whole->pending() == pieces->pending());
  // the payload decoders straight on the bytes too (the CRC keeps most mutations from reaching them)
  Frame raw;
  raw.header.type = FrameType::kHidden;
  raw.header.payload_len = static_cast<uint32_t>(stream.size() < kMaxPayloadBytes ? stream.size() : kMaxPayloadBytes);
  raw.payload = stream.data();
  for (uint8_t t = 1; t <= 7; ++t) {
    raw.header.type = static_cast<FrameType>(t);
    check_payload(raw);
  }
  return 0;
}
