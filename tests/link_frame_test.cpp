// The cluster link codec (src/cluster/frame.h, hidden_codec.h): layout, round trips of every frame
// type, the stream decoder in any chunking, hostile input, and the hidden-state encodings' properties.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <memory>
#include <random>
#include <string>

#include "cluster/frame.h"
#include "cluster/hidden_codec.h"
#include "core/crc32.h"
#include "link_test_support.h"
#include "quant/f16.h"

namespace mcullm::test {
namespace {

using namespace cluster;

// What a stream decoder gave, in order: frames (as TestFrames) and errors.
struct Decoded {
  std::vector<TestFrame> frames;
  std::vector<std::string> errors;
  std::vector<int> order;  // 0 = frame, 1 = error
  size_t pending = 0;
};

// Feeds bytes in pieces whose sizes come from `rng` (1..max_piece), or all at once when max_piece == 0.
Decoded decode_stream(const std::vector<uint8_t>& bytes, size_t max_piece, uint32_t seed = 1) {
  auto d = std::make_unique<FrameDecoder>();
  std::mt19937 rng(seed);
  Decoded out;
  size_t off = 0;
  do {
    size_t n = bytes.size() - off;
    if (max_piece) n = std::min<size_t>(n, 1 + rng() % max_piece);
    const uint8_t* p = bytes.data() + off;
    off += n;
    while (true) {
      DecodeEvent ev;
      const size_t used = d->feed(p, n, &ev);
      EXPECT_LE(used, n);
      p += used;
      n -= used;
      if (ev == DecodeEvent::kNeedMore) {
        EXPECT_EQ(n, 0u);
        break;
      }
      if (ev == DecodeEvent::kFrame) {
        const Frame& f = d->frame();
        out.frames.push_back(make_test_frame(f.header.type, f.header.seq, f.header.stream, f.header.pos,
                                             {f.payload, f.payload + f.header.payload_len}));
        out.order.push_back(0);
      } else {
        out.errors.push_back(d->error().message());
        out.order.push_back(1);
      }
    }
  } while (off < bytes.size());
  out.pending = d->pending();
  return out;
}

void expect_frames(const std::vector<TestFrame>& want, const std::vector<TestFrame>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].header.type, want[i].header.type) << i;
    EXPECT_EQ(got[i].header.seq, want[i].header.seq) << i;
    EXPECT_EQ(got[i].header.stream, want[i].header.stream) << i;
    EXPECT_EQ(got[i].header.pos, want[i].header.pos) << i;
    EXPECT_EQ(got[i].payload, want[i].payload) << i;
  }
}

uint32_t le32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b[at]} | uint32_t{b[at + 1]} << 8 | uint32_t{b[at + 2]} << 16 | uint32_t{b[at + 3]} << 24;
}
void set_le32(std::vector<uint8_t>* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
// Recomputes the CRC after a deliberate edit, so that only the edited field is wrong.
void fix_crc(std::vector<uint8_t>* b) {
  uint32_t crc = crc32_ieee(b->data(), 24);
  crc = crc32_ieee(b->data() + kFrameHeaderBytes, b->size() - kFrameHeaderBytes, crc);
  set_le32(b, 24, crc);
}

TEST(LinkFrame, HeaderLayoutIsTheDocumentedTable) {
  const TestFrame f = make_test_frame(FrameType::kAck, 0x11223344u, 0x55667788u, 0x99AABBCCu, {1, 2, 3, 4});
  const std::vector<uint8_t> b = f.encoded();
  ASSERT_EQ(b.size(), 32u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "MCLK");
  EXPECT_EQ(b[4], 1);
  EXPECT_EQ(b[5], 5);
  EXPECT_EQ(b[6] | b[7], 0);
  EXPECT_EQ(le32(b, 8), 0x11223344u);
  EXPECT_EQ(le32(b, 12), 0x55667788u);
  EXPECT_EQ(le32(b, 16), 0x99AABBCCu);
  EXPECT_EQ(le32(b, 20), 4u);
  // CRC-32 of bytes 0..23 then the payload (an independent, bytewise CRC, zlib's polynomial)
  uint32_t crc = 0xFFFFFFFFu;
  std::vector<uint8_t> covered(b.begin(), b.begin() + 24);
  covered.insert(covered.end(), b.begin() + 28, b.end());
  for (uint8_t byte : covered) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  EXPECT_EQ(le32(b, 24), ~crc);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 28, b.end()), (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_EQ(kFrameHeaderBytes % 4, 0u);
  EXPECT_EQ(kMaxFrameBytes, 32768u);
}

TEST(LinkFrame, EveryTypeRoundTripsThroughEncodeAndDecode) {
  for (const TestFrame& f : sample_frames()) {
    const std::vector<uint8_t> b = f.encoded();
    EXPECT_EQ(b.size() % 4, 0u);
    EXPECT_LE(b.size(), kMaxFrameBytes);
    Frame got;
    ASSERT_TRUE(decode_frame(b.data(), b.size(), &got).ok()) << frame_type_name(f.header.type);
    expect_same_frame(f, got);
  }
  std::set<FrameType> types;
  for (const TestFrame& f : sample_frames()) types.insert(f.header.type);
  EXPECT_EQ(types.size(), 7u);
}

TEST(LinkFrame, EncodeInPlaceAndRefusals) {
  std::vector<uint8_t> buf(kMaxFrameBytes);
  for (size_t i = 0; i < 8; ++i) buf[kFrameHeaderBytes + i] = static_cast<uint8_t>(i * 3);
  FrameHeader h;
  h.type = FrameType::kHidden;
  h.payload_len = 8;
  size_t n = 0;
  ASSERT_TRUE(encode_frame(h, buf.data() + kFrameHeaderBytes, buf.data(), buf.size(), &n).ok());
  Frame f;
  ASSERT_TRUE(decode_frame(buf.data(), n, &f).ok());
  EXPECT_EQ(f.payload[7], 21);
  h.payload_len = 6;
  EXPECT_EQ(encode_frame(h, buf.data(), buf.data(), buf.size(), &n).code(), Code::kInvalidArgument);
  h.payload_len = kMaxPayloadBytes + 4;
  EXPECT_EQ(encode_frame(h, buf.data(), buf.data(), buf.size(), &n).code(), Code::kInvalidArgument);
  h.payload_len = 8;
  EXPECT_EQ(encode_frame(h, buf.data(), buf.data(), 30, &n).code(), Code::kInvalidArgument);
  h.type = static_cast<FrameType>(9);
  EXPECT_EQ(encode_frame(h, buf.data(), buf.data(), buf.size(), &n).code(), Code::kInvalidArgument);
  h.type = FrameType::kAck;
  EXPECT_EQ(encode_frame(h, nullptr, buf.data(), buf.size(), &n).code(), Code::kInvalidArgument);
  // the largest frame is exactly one 32 KB transfer
  std::vector<uint8_t> payload(kMaxPayloadBytes, 0xA5);
  h.payload_len = kMaxPayloadBytes;
  ASSERT_TRUE(encode_frame(h, payload.data(), buf.data(), buf.size(), &n).ok());
  EXPECT_EQ(n, 32768u);
}

TEST(LinkFrame, StreamDecoderGivesTheSameFramesInAnyChunking) {
  const std::vector<TestFrame> frames = sample_frames();
  const std::vector<uint8_t> bytes = concat_encoded(frames);
  for (size_t piece : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{64}, size_t{5000}, size_t{40000}}) {
    const Decoded d = decode_stream(bytes, piece, static_cast<uint32_t>(piece));
    EXPECT_TRUE(d.errors.empty()) << piece << ": " << (d.errors.empty() ? "" : d.errors[0]);
    expect_frames(frames, d.frames);
    EXPECT_EQ(d.pending, 0u);
  }
}

TEST(LinkFrame, PayloadsRoundTrip) {
  std::vector<uint8_t> buf(kMaxPayloadBytes);
  size_t len = 0;
  Hello h;
  h.role = NodeRole::kMaster;
  h.first_layer = 0;
  h.end_layer = 0;
  h.n_layers = 24;
  h.dim = 896;
  h.ctx_len = 512;
  h.max_streams = 8;
  h.capabilities = capability_bit(HiddenEncoding::kInt8);
  h.slice_hash = 0xFEDCBA9876543210ull;
  ASSERT_TRUE(encode_hello(h, buf.data(), buf.size(), &len).ok());
  ASSERT_EQ(len, kHelloBytes);
  Hello g;
  ASSERT_TRUE(decode_hello(buf.data(), len, &g).ok());
  EXPECT_EQ(g.role, h.role);
  EXPECT_EQ(g.n_layers, 24u);
  EXPECT_EQ(g.dim, 896u);
  EXPECT_EQ(g.ctx_len, 512u);
  EXPECT_EQ(g.max_streams, 8u);
  EXPECT_EQ(g.capabilities, h.capabilities);
  EXPECT_EQ(g.slice_hash, h.slice_hash);
  EXPECT_EQ(g.protocol, kFrameVersion);

  uint32_t acked = 0;
  ASSERT_TRUE(encode_ack(0xDEADBEEFu, buf.data(), buf.size(), &len).ok());
  ASSERT_TRUE(decode_ack(buf.data(), len, &acked).ok());
  EXPECT_EQ(acked, 0xDEADBEEFu);

  for (const char* text : {"", "a", "abcd", "node 3: slice hash 0123 does not match 4567"}) {
    Status remote;
    ASSERT_TRUE(encode_error(Status::Error(Code::kCorrupt, "%s", text), buf.data(), buf.size(), &len).ok());
    EXPECT_EQ(len % 4, 0u);
    ASSERT_TRUE(decode_error(buf.data(), len, &remote).ok());
    EXPECT_EQ(remote.code(), Code::kCorrupt);
    EXPECT_STREQ(remote.message(), text);
  }
  // a message as long as Status holds survives whole
  const std::string longest(kMaxErrorText, 'x');
  Status remote;
  ASSERT_TRUE(encode_error(Status::Error(Code::kIo, "%s", longest.c_str()), buf.data(), buf.size(), &len).ok());
  ASSERT_TRUE(decode_error(buf.data(), len, &remote).ok());
  EXPECT_EQ(std::string(remote.message()), longest);

  FrameHeader empty;
  empty.type = FrameType::kReady;
  EXPECT_TRUE(check_empty_payload(empty).ok());
  empty.payload_len = 4;
  EXPECT_EQ(check_empty_payload(empty).code(), Code::kCorrupt);
}

TEST(LinkFrame, HostilePayloadsAreRefused) {
  std::vector<uint8_t> buf(kMaxPayloadBytes);
  size_t len = 0;
  Hello h;
  h.n_layers = 24;
  h.end_layer = 4;
  ASSERT_TRUE(encode_hello(h, buf.data(), buf.size(), &len).ok());
  Hello g;
  EXPECT_EQ(decode_hello(buf.data(), len - 4, &g).code(), Code::kCorrupt);
  auto edited = [&](size_t at, uint32_t v) {
    std::vector<uint8_t> b(buf.begin(), buf.begin() + len);
    set_le32(&b, at, v);
    Hello out;
    return decode_hello(b.data(), b.size(), &out);
  };
  EXPECT_EQ(edited(4, 2).code(), Code::kCorrupt);          // role
  EXPECT_EQ(edited(8, 5).code(), Code::kCorrupt);          // first_layer > end_layer
  EXPECT_EQ(edited(12, 25).code(), Code::kCorrupt);        // end_layer > n_layers
  EXPECT_EQ(edited(32, 1u << 8).code(), Code::kCorrupt);   // capability bit
  EXPECT_EQ(edited(36, 1).code(), Code::kCorrupt);         // reserved
  EXPECT_TRUE(edited(8, 4).ok());

  uint32_t acked;
  EXPECT_EQ(decode_ack(buf.data(), 8, &acked).code(), Code::kCorrupt);

  ASSERT_TRUE(encode_error(Status::Error(Code::kIo, "abc"), buf.data(), buf.size(), &len).ok());
  Status remote;
  std::vector<uint8_t> e(buf.begin(), buf.begin() + len);
  auto bad_error = [&](std::vector<uint8_t> b) { return decode_error(b.data(), b.size(), &remote).code(); };
  std::vector<uint8_t> b = e;
  set_le32(&b, 0, 0);
  EXPECT_EQ(bad_error(b), Code::kCorrupt);  // code 0 (ok) is not an error
  b = e;
  set_le32(&b, 0, 99);
  EXPECT_EQ(bad_error(b), Code::kCorrupt);
  b = e;
  set_le32(&b, 4, 1000);
  EXPECT_EQ(bad_error(b), Code::kCorrupt);  // text longer than the payload and the limit
  b = e;
  b[11] = 1;
  EXPECT_EQ(bad_error(b), Code::kCorrupt);  // padding
  b = e;
  b[9] = 0;
  EXPECT_EQ(bad_error(b), Code::kCorrupt);  // NUL inside the text
  EXPECT_EQ(bad_error({1, 0, 0}), Code::kCorrupt);
}

TEST(LinkFrame, HiddenStatesSplitAndReassemble) {
  for (HiddenEncoding e : {HiddenEncoding::kF32, HiddenEncoding::kF16, HiddenEncoding::kInt8}) {
    EXPECT_EQ(hidden_chunk_values(e) % 64, 0u);
    EXPECT_LE(kHiddenChunkHeadBytes + hidden_encoded_bytes(e, hidden_chunk_values(e)), kMaxPayloadBytes);
    EXPECT_GT(kHiddenChunkHeadBytes + hidden_encoded_bytes(e, hidden_chunk_values(e) + 64), kMaxPayloadBytes);
    for (uint32_t dim : {1u, 63u, 64u, 65u, 896u, 8128u, 8129u, 20000u, 70001u}) {
      const std::vector<float> x = test_hidden(dim, dim);
      std::vector<float> y(dim, -1.0f), direct(dim);
      ASSERT_TRUE(encode_hidden(e, x.data(), dim, std::vector<uint8_t>(hidden_encoded_bytes(e, dim)).data(),
                                hidden_encoded_bytes(e, dim)).ok());
      std::vector<uint8_t> whole(hidden_encoded_bytes(e, dim));
      ASSERT_TRUE(encode_hidden(e, x.data(), dim, whole.data(), whole.size()).ok());
      ASSERT_TRUE(decode_hidden(e, whole.data(), whole.size(), dim, direct.data()).ok());
      HiddenAssembler a;
      a.start(y.data(), dim);
      size_t wire = 0;  // bytes of the encoded frames
      const uint32_t frames = hidden_frame_count(e, dim);
      for (uint32_t c = 0; c < frames; ++c) {
        TestFrame f = make_test_frame(FrameType::kHidden, c, 5, 99, std::vector<uint8_t>(kMaxPayloadBytes));
        size_t len = 0;
        ASSERT_TRUE(encode_hidden_chunk(e, x.data(), dim, c, f.payload.data(), f.payload.size(), &len).ok());
        f.payload.resize(len);
        f.header.payload_len = static_cast<uint32_t>(len);
        const std::vector<uint8_t> bytes = f.encoded();
        wire += bytes.size();
        Frame view;
        ASSERT_TRUE(decode_frame(bytes.data(), bytes.size(), &view).ok());
        EXPECT_FALSE(a.complete());
        ASSERT_TRUE(a.add(view).ok()) << hidden_encoding_name(e) << " dim " << dim << " chunk " << c;
      }
      EXPECT_TRUE(a.complete());
      EXPECT_EQ(wire, hidden_wire_bytes(e, dim)) << hidden_encoding_name(e) << " dim " << dim;
      EXPECT_EQ(a.stream(), 5u);
      EXPECT_EQ(a.pos(), 99u);
      EXPECT_EQ(a.encoding(), e);
      // the split does not change a value: chunks decode to what the whole vector decodes to
      EXPECT_EQ(std::memcmp(y.data(), direct.data(), dim * 4), 0) << hidden_encoding_name(e) << " dim " << dim;
      if (e == HiddenEncoding::kF32) {
        EXPECT_EQ(std::memcmp(y.data(), x.data(), dim * 4), 0);
      }
    }
  }
  const std::vector<float> x(10, 1.0f);
  std::vector<uint8_t> buf(kMaxPayloadBytes);
  size_t len;
  EXPECT_EQ(encode_hidden_chunk(HiddenEncoding::kF32, x.data(), 0, 0, buf.data(), buf.size(), &len).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(encode_hidden_chunk(HiddenEncoding::kF32, x.data(), kMaxHiddenDim + 1, 0, buf.data(), buf.size(), &len).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(encode_hidden_chunk(HiddenEncoding::kF32, x.data(), 10, 1, buf.data(), buf.size(), &len).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(encode_hidden_chunk(static_cast<HiddenEncoding>(3), x.data(), 10, 0, buf.data(), buf.size(), &len).code(),
            Code::kInvalidArgument);
}

TEST(LinkFrame, HiddenAssemblerRefusesMixedOrMisorderedChunks) {
  constexpr uint32_t dim = 20000;
  const std::vector<float> x = test_hidden(dim, 3);
  std::vector<float> y(dim);
  auto chunk = [&](uint32_t c, uint32_t stream, uint32_t pos, uint32_t vec_dim = 20000) {
    TestFrame f = make_test_frame(FrameType::kHidden, c, stream, pos, std::vector<uint8_t>(kMaxPayloadBytes));
    size_t len = 0;
    EXPECT_TRUE(encode_hidden_chunk(HiddenEncoding::kF32, x.data(), vec_dim, c, f.payload.data(), f.payload.size(), &len).ok());
    f.payload.resize(len);
    f.header.payload_len = static_cast<uint32_t>(len);
    return f;
  };
  auto add = [&](HiddenAssembler& a, const TestFrame& f) {
    Frame v;
    v.header = f.header;
    v.payload = f.payload.data();
    return a.add(v);
  };
  HiddenAssembler a;
  EXPECT_FALSE(add(a, chunk(0, 1, 1)).ok());  // start() not called
  a.start(y.data(), dim);
  EXPECT_EQ(add(a, chunk(1, 1, 1)).code(), Code::kCorrupt);  // out of order
  ASSERT_TRUE(add(a, chunk(0, 1, 1)).ok());
  EXPECT_EQ(add(a, chunk(1, 2, 1)).code(), Code::kCorrupt);  // another stream: the vector is abandoned
  EXPECT_FALSE(a.complete());
  ASSERT_TRUE(add(a, chunk(0, 1, 1)).ok());
  EXPECT_EQ(add(a, chunk(1, 1, 2)).code(), Code::kCorrupt);  // another position
  a.start(y.data(), dim);
  EXPECT_EQ(add(a, chunk(0, 1, 1, 896)).code(), Code::kCorrupt);  // another dim
  TestFrame not_hidden = make_test_frame(FrameType::kAck, 0, 1, 1, {0, 0, 0, 0});
  EXPECT_FALSE(add(a, not_hidden).ok());
  a.start(y.data(), 896);
  ASSERT_TRUE(add(a, chunk(0, 1, 1, 896)).ok());
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(add(a, chunk(0, 1, 1, 896)).code(), Code::kCorrupt);  // already complete
}

TEST(LinkFrame, HostileHiddenPayloadsAreRefused) {
  const std::vector<float> x = test_hidden(896, 1);
  std::vector<uint8_t> buf(kMaxPayloadBytes);
  size_t len = 0;
  ASSERT_TRUE(encode_hidden_chunk(HiddenEncoding::kInt8, x.data(), 896, 0, buf.data(), buf.size(), &len).ok());
  const std::vector<uint8_t> good(buf.begin(), buf.begin() + len);
  auto parse = [](const std::vector<uint8_t>& b) {
    HiddenChunk c;
    return parse_hidden_chunk(b.data(), b.size(), &c);
  };
  ASSERT_TRUE(parse(good).ok());
  std::vector<uint8_t> b = good;
  b[0] = 3;
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);  // encoding
  b = good;
  b[2] = 1;
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);  // reserved
  b = good;
  set_le32(&b, 4, 0);
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);  // dim 0
  b = good;
  set_le32(&b, 4, kMaxHiddenDim + 1);
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);
  b = good;
  set_le32(&b, 8, 64);
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);  // offset not a chunk start
  b = good;
  set_le32(&b, 12, 895);
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);  // count
  b = good;
  set_le32(&b, 12, 0xFFFFFFFFu);
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);
  b = good;
  b.resize(b.size() - 4);
  EXPECT_EQ(parse(b).code(), Code::kCorrupt);  // truncated
  EXPECT_EQ(parse({0, 0, 0}).code(), Code::kCorrupt);

  // decode_hidden: bad scales, the code -128, padding
  std::vector<float> y(896);
  HiddenChunk c;
  ASSERT_TRUE(parse_hidden_chunk(good.data(), good.size(), &c).ok());
  std::vector<uint8_t> data(c.data, c.data + c.data_bytes);
  auto decode = [&](const std::vector<uint8_t>& d, HiddenEncoding e = HiddenEncoding::kInt8, uint32_t n = 896) {
    return decode_hidden(e, d.data(), d.size(), n, y.data());
  };
  ASSERT_TRUE(decode(data).ok());
  std::vector<uint8_t> d = data;
  set_le32(&d, 0, f32_bits(-1.0f));
  EXPECT_EQ(decode(d).code(), Code::kCorrupt);
  d = data;
  set_le32(&d, 4, 0x7FC00000u);  // nan
  EXPECT_EQ(decode(d).code(), Code::kCorrupt);
  d = data;
  set_le32(&d, 8, 0x7F800000u);  // inf
  EXPECT_EQ(decode(d).code(), Code::kCorrupt);
  d = data;
  d[14 * 4 + 100] = 0x80;
  EXPECT_EQ(decode(d).code(), Code::kCorrupt);
  EXPECT_EQ(decode(data, HiddenEncoding::kInt8, 895).code(), Code::kCorrupt);  // size does not match
  std::vector<uint8_t> odd(hidden_encoded_bytes(HiddenEncoding::kF16, 3));
  EXPECT_EQ(odd.size(), 8u);
  EXPECT_TRUE(decode(odd, HiddenEncoding::kF16, 3).ok());
  odd[7] = 1;
  EXPECT_EQ(decode(odd, HiddenEncoding::kF16, 3).code(), Code::kCorrupt);
  std::vector<uint8_t> i8(hidden_encoded_bytes(HiddenEncoding::kInt8, 3));
  EXPECT_EQ(i8.size(), 8u);
  EXPECT_TRUE(decode(i8, HiddenEncoding::kInt8, 3).ok());
  i8[7] = 1;
  EXPECT_EQ(decode(i8, HiddenEncoding::kInt8, 3).code(), Code::kCorrupt);
}

// ---- hostile streams ----

TEST(LinkFrame, TruncatedFramesGiveNoFrameAndStayPending) {
  const std::vector<uint8_t> f = sample_frames()[3].encoded();  // a hidden frame
  for (size_t cut : {size_t{1}, size_t{4}, size_t{27}, size_t{28}, f.size() - 1}) {
    const Decoded d = decode_stream(std::vector<uint8_t>(f.begin(), f.begin() + cut), 5);
    EXPECT_TRUE(d.frames.empty());
    EXPECT_TRUE(d.errors.empty());
    EXPECT_EQ(d.pending, cut) << cut;
    Frame view;
    EXPECT_EQ(decode_frame(f.data(), cut, &view).code(), Code::kCorrupt);
  }
  Frame view;
  std::vector<uint8_t> longer = f;
  longer.push_back(0);
  EXPECT_EQ(decode_frame(longer.data(), longer.size(), &view).code(), Code::kCorrupt);
}

TEST(LinkFrame, EveryFlippedBitIsCaughtAndTheNextFrameSurvives) {
  const std::vector<TestFrame> frames = sample_frames();
  const TestFrame& victim = frames[3];  // hidden, f32
  const TestFrame& next = frames.back();
  const std::vector<uint8_t> good = victim.encoded();
  const std::vector<uint8_t> after = next.encoded();
  // every bit of the header and CRC, and a sample of payload bits
  std::vector<size_t> bits;
  for (size_t i = 0; i < kFrameHeaderBytes * 8; ++i) bits.push_back(i);
  for (size_t i = kFrameHeaderBytes * 8; i < good.size() * 8; i += 97) bits.push_back(i);
  for (size_t bit : bits) {
    std::vector<uint8_t> b = good;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    Frame view;
    EXPECT_EQ(decode_frame(b.data(), b.size(), &view).code(), Code::kCorrupt) << "bit " << bit;
    b.insert(b.end(), after.begin(), after.end());
    const Decoded d = decode_stream(b, 0);
    // A hit length field may make the decoder wait for more: the next frame is then held whole and
    // comes out once the claimed length has arrived; copies of `next` worth a whole frame prove it.
    std::vector<uint8_t> more = b;
    while (more.size() < b.size() + kMaxFrameBytes) more.insert(more.end(), after.begin(), after.end());
    const Decoded d2 = decode_stream(more, 4000, static_cast<uint32_t>(bit));
    EXPECT_GE(d2.errors.size(), 1u) << "bit " << bit;
    ASSERT_EQ(d2.frames.size(), (more.size() - good.size()) / after.size()) << "bit " << bit;  // none lost
    EXPECT_EQ(d2.pending, 0u) << "bit " << bit;
    for (const TestFrame& f : d2.frames) EXPECT_EQ(f.encoded(), after) << "bit " << bit;
    if (d.pending == 0) {
      ASSERT_EQ(d.frames.size(), 1u) << "bit " << bit;
      EXPECT_GE(d.errors.size(), 1u) << "bit " << bit;
    }
  }
}

TEST(LinkFrame, BadHeaderFieldsAreReportedAndSkipped) {
  const std::vector<TestFrame> frames = sample_frames();
  const std::vector<uint8_t> good = frames[0].encoded();
  const std::vector<uint8_t> tail = frames[1].encoded();
  struct Case {
    const char* what;
    size_t at;
    uint32_t value;
    bool byte;
    const char* message;
  };
  const Case cases[] = {
      {"version", 4, 2, true, "version 2"},
      {"type 0", 5, 0, true, "unknown type 0"},
      {"type 8", 5, 8, true, "unknown type 8"},
      {"reserved", 6, 1, true, "reserved"},
      {"length not a multiple of 4", 20, 46, false, "not a multiple of 4"},
      {"oversized length", 20, kMaxPayloadBytes + 4, false, "more than"},
      {"huge length", 20, 0xFFFFFFF0u, false, "more than"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good;
    if (c.byte) b[c.at] = static_cast<uint8_t>(c.value);
    else set_le32(&b, c.at, c.value);
    fix_crc(&b);  // only the field is wrong
    Frame view;
    const Status st = decode_frame(b.data(), b.size(), &view);
    EXPECT_EQ(st.code(), Code::kCorrupt) << c.what;
    EXPECT_NE(std::string(st.message()).find(c.message), std::string::npos) << c.what << ": " << st.message();
    b.insert(b.end(), tail.begin(), tail.end());
    const Decoded d = decode_stream(b, 3);
    ASSERT_EQ(d.errors.size(), 1u) << c.what;
    EXPECT_NE(d.errors[0].find(c.message), std::string::npos) << c.what << ": " << d.errors[0];
    expect_frames({frames[1]}, d.frames);
  }
  // bad magic: the frame is garbage to the decoder, reported once, and the next frame survives
  std::vector<uint8_t> b = good;
  b[0] = 'X';
  b.insert(b.end(), tail.begin(), tail.end());
  const Decoded d = decode_stream(b, 0);
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_NE(d.errors[0].find("garbage"), std::string::npos) << d.errors[0];
  expect_frames({frames[1]}, d.frames);
}

TEST(LinkFrame, GarbageBetweenFramesIsSkippedOnce) {
  const std::vector<TestFrame> frames = sample_frames();
  std::vector<uint8_t> bytes;
  std::vector<int> want_order;
  std::mt19937 rng(5);
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i % 2 == 1) {  // garbage, with magic prefixes and a whole false magic in it
      const std::string junk = i % 4 == 1 ? "MCL noise MC MCLKxx\n" : std::string(13, '\0');
      bytes.insert(bytes.end(), junk.begin(), junk.end());
      want_order.push_back(1);
    }
    const std::vector<uint8_t> e = frames[i].encoded();
    bytes.insert(bytes.end(), e.begin(), e.end());
    want_order.push_back(0);
  }
  for (size_t piece : {size_t{0}, size_t{1}, size_t{5}, size_t{333}}) {
    const Decoded d = decode_stream(bytes, piece, static_cast<uint32_t>(piece) + 1);
    expect_frames(frames, d.frames);
    // the false magic inside the junk is a header error of its own; garbage runs are one error each
    size_t garbage = 0;
    for (const std::string& e : d.errors) garbage += e.find("garbage") != std::string::npos;
    EXPECT_EQ(garbage, frames.size() / 2) << piece;
  }
  // a stream that is only garbage gives nothing, and holds at most a magic prefix
  const std::string junk = "just text, no frames at all MC";
  const Decoded d = decode_stream(std::vector<uint8_t>(junk.begin(), junk.end()), 4);
  EXPECT_TRUE(d.frames.empty());
  EXPECT_EQ(d.pending, 2u);
}

TEST(LinkFrame, ACorruptLengthDoesNotSwallowTheFramesAfterIt) {
  // The first frame's length grows (CRC then fails): the decoder waits for bytes that are really the
  // next frames, then must find them again in what it holds.
  const std::vector<TestFrame> frames = sample_frames();
  std::vector<uint8_t> bytes = frames[3].encoded();
  set_le32(&bytes, 20, le32(bytes, 20) + 400);
  const std::vector<TestFrame> rest(frames.begin() + 4, frames.end());
  const std::vector<uint8_t> tail = concat_encoded(rest);
  bytes.insert(bytes.end(), tail.begin(), tail.end());
  for (size_t piece : {size_t{0}, size_t{1}, size_t{100}}) {
    const Decoded d = decode_stream(bytes, piece, 3);
    ASSERT_EQ(d.errors.size(), 1u) << piece;
    EXPECT_NE(d.errors[0].find("CRC"), std::string::npos) << d.errors[0];
    expect_frames(rest, d.frames);
    EXPECT_EQ(d.order.front(), 1);
  }
}

TEST(LinkFrame, AFrameCutShortByANewFrameIsReportedAndTheNewOneKept) {
  // A peer restarts mid-frame: half a frame, then a whole new one.
  const std::vector<TestFrame> frames = sample_frames();
  const std::vector<uint8_t> half = frames[3].encoded();
  std::vector<uint8_t> bytes(half.begin(), half.begin() + half.size() / 2);
  const std::vector<uint8_t> next = concat_encoded({frames[0], frames[1]});
  bytes.insert(bytes.end(), next.begin(), next.end());
  // then enough heartbeats that the cut frame's claimed length is reached
  std::vector<TestFrame> want = {frames[0], frames[1]};
  while (bytes.size() < half.size() + 200) {
    const TestFrame hb = make_test_frame(FrameType::kHeartbeat, static_cast<uint32_t>(want.size()), 0, 0, {});
    const std::vector<uint8_t> e = hb.encoded();
    bytes.insert(bytes.end(), e.begin(), e.end());
    want.push_back(hb);
  }
  const Decoded d = decode_stream(bytes, 11);
  ASSERT_EQ(d.errors.size(), 1u);
  expect_frames(want, d.frames);
}

// ---- hidden-state encodings ----

TEST(HiddenCodec, EveryHalfRoundTripsThroughF16Exactly) {
  std::vector<float> x(65536);
  for (uint32_t h = 0; h < 65536; ++h) x[h] = f16_to_f32(static_cast<uint16_t>(h));
  std::vector<uint8_t> bytes(hidden_encoded_bytes(HiddenEncoding::kF16, 65536));
  ASSERT_TRUE(encode_hidden(HiddenEncoding::kF16, x.data(), 65536, bytes.data(), bytes.size()).ok());
  std::vector<float> y(65536);
  ASSERT_TRUE(decode_hidden(HiddenEncoding::kF16, bytes.data(), bytes.size(), 65536, y.data()).ok());
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t wire = static_cast<uint16_t>(bytes[2 * h] | bytes[2 * h + 1] << 8);
    if (std::isnan(x[h])) {
      EXPECT_TRUE(std::isnan(y[h])) << h;
      EXPECT_EQ(wire & 0x8000, h & 0x8000) << h;  // the sign survives
    } else {
      EXPECT_EQ(wire, h) << h;
      EXPECT_EQ(f32_bits(y[h]), f32_bits(x[h])) << h;
    }
  }
}

// f16 rounding checked against its definition: the nearest half (in exact double arithmetic), ties to
// the even one, overflow past the rounding boundary to inf.
TEST(HiddenCodec, F16RoundsToNearestEven) {
  std::vector<double> halves;  // every finite non-negative half, ascending
  for (uint32_t h = 0; h < 0x7C00; ++h) halves.push_back(f16_to_f32(static_cast<uint16_t>(h)));
  halves.push_back(65536.0);  // where inf would be: a value just above 65504 is nearer to 65504
  std::mt19937 rng(11);
  std::vector<float> x;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    // mostly magnitudes a half can hold (exponents 100..143), some anywhere
    if (i % 4) bits = (bits & 0x807FFFFFu) | (100u + rng() % 44) << 23;
    float f = f32_from_bits(bits);
    if (std::isnan(f)) continue;
    x.push_back(f);
  }
  for (uint32_t h = 0; h + 1 < 0x7C00; h += 7) {  // exact midpoints between neighbours: the ties
    x.push_back(static_cast<float>((halves[h] + halves[h + 1]) / 2));
  }
  x.push_back(65519.998f);
  x.push_back(65520.0f);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  const uint32_t n = static_cast<uint32_t>(x.size());
  std::vector<uint8_t> bytes(hidden_encoded_bytes(HiddenEncoding::kF16, n));
  ASSERT_TRUE(encode_hidden(HiddenEncoding::kF16, x.data(), n, bytes.data(), bytes.size()).ok());
  for (uint32_t i = 0; i < n; ++i) {
    const uint16_t wire = static_cast<uint16_t>(bytes[2 * i] | bytes[2 * i + 1] << 8);
    const double a = std::fabs(static_cast<double>(x[i]));
    EXPECT_EQ(wire >> 15, std::signbit(x[i]) ? 1 : 0) << x[i];
    uint16_t want;
    if (a >= 65520.0) {
      want = 0x7C00;
    } else {
      const size_t hi = std::lower_bound(halves.begin(), halves.end(), a) - halves.begin();
      if (hi == 0 || halves[hi] == a) {
        want = static_cast<uint16_t>(hi);
      } else {
        const double dlo = a - halves[hi - 1], dhi = halves[hi] - a;
        want = static_cast<uint16_t>(dlo < dhi ? hi - 1 : dhi < dlo ? hi : ((hi - 1) % 2 == 0 ? hi - 1 : hi));
      }
    }
    ASSERT_EQ(wire & 0x7FFF, want) << "x = " << x[i];
  }
}

TEST(HiddenCodec, Int8ErrorIsAtMostHalfAScalePerBlockOf64) {
  std::mt19937 rng(4);
  for (uint32_t n : {1u, 3u, 64u, 100u, 896u, 4864u}) {
    std::vector<float> x(n);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (uint32_t i = 0; i < n; ++i) x[i] = normal(rng) * (i % 50 == 7 ? 300.0f : 1.0f);
    if (n >= 192) std::fill(x.begin() + 128, x.begin() + 192, 0.0f);  // a block of zeros: scale 0
    std::vector<uint8_t> bytes(hidden_encoded_bytes(HiddenEncoding::kInt8, n));
    EXPECT_EQ(bytes.size(), ((n + 63) / 64) * 4 + ((n + 3) / 4) * 4);
    ASSERT_TRUE(encode_hidden(HiddenEncoding::kInt8, x.data(), n, bytes.data(), bytes.size()).ok());
    std::vector<float> y(n);
    ASSERT_TRUE(decode_hidden(HiddenEncoding::kInt8, bytes.data(), bytes.size(), n, y.data()).ok());
    for (uint32_t b = 0; b * 64 < n; ++b) {
      const float d = f32_from_bits(le32(bytes, 4 * b));
      double amax = 0;
      for (uint32_t i = b * 64; i < std::min(n, b * 64 + 64); ++i) amax = std::max(amax, std::fabs(double{x[i]}));
      EXPECT_NEAR(d, amax / 127.0, amax / 127.0 * 1e-6);  // d = amax / 127 for this block alone
      for (uint32_t i = b * 64; i < std::min(n, b * 64 + 64); ++i) {
        const int8_t q = static_cast<int8_t>(bytes[((n + 63) / 64) * 4 + i]);
        EXPECT_GE(q, -127);
        EXPECT_EQ(y[i], static_cast<float>(q) * d);
        // |x - q d| <= d / 2, up to the rounding of x * (1 / d) (a few ulps of 127)
        EXPECT_LE(std::fabs(double{x[i]} - double{y[i]}), double{d} * (0.5 + 1e-5)) << "n " << n << " i " << i;
      }
    }
  }
  const float bad[3] = {1.0f, std::numeric_limits<float>::infinity(), 2.0f};
  const float nan[2] = {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  std::vector<uint8_t> bytes(64);
  EXPECT_EQ(encode_hidden(HiddenEncoding::kInt8, bad, 3, bytes.data(), bytes.size()).code(), Code::kInvalidArgument);
  EXPECT_EQ(encode_hidden(HiddenEncoding::kInt8, nan, 2, bytes.data(), bytes.size()).code(), Code::kInvalidArgument);
  EXPECT_EQ(encode_hidden(HiddenEncoding::kF32, bad, 3, bytes.data(), 8).code(), Code::kInvalidArgument);  // cap
  // f32 carries everything, nan payloads and signed zeros included
  const float odd[4] = {-0.0f, f32_from_bits(0x7FA12345u), std::numeric_limits<float>::denorm_min(), -1e38f};
  ASSERT_TRUE(encode_hidden(HiddenEncoding::kF32, odd, 4, bytes.data(), bytes.size()).ok());
  float back[4];
  ASSERT_TRUE(decode_hidden(HiddenEncoding::kF32, bytes.data(), 16, 4, back).ok());
  EXPECT_EQ(std::memcmp(odd, back, 16), 0);
}

TEST(HiddenCodec, NamesParse) {
  for (HiddenEncoding e : {HiddenEncoding::kF32, HiddenEncoding::kF16, HiddenEncoding::kInt8}) {
    HiddenEncoding back;
    ASSERT_TRUE(parse_hidden_encoding(hidden_encoding_name(e), &back));
    EXPECT_EQ(back, e);
  }
  HiddenEncoding back;
  EXPECT_FALSE(parse_hidden_encoding("bf16", &back));
  EXPECT_EQ(hidden_encoding_name(static_cast<HiddenEncoding>(7)), nullptr);
  EXPECT_EQ(hidden_encoded_bytes(static_cast<HiddenEncoding>(7), 10), 0u);
  EXPECT_EQ(hidden_encoded_bytes(HiddenEncoding::kF32, 896), 3584u);
  EXPECT_EQ(hidden_encoded_bytes(HiddenEncoding::kF16, 896), 1792u);
  EXPECT_EQ(hidden_encoded_bytes(HiddenEncoding::kInt8, 896), 14u * 4 + 896);
  // the figures docs/cluster.md gives for Qwen2-0.5B's 896 values
  EXPECT_EQ(hidden_wire_bytes(HiddenEncoding::kF32, 896), 3628u);
  EXPECT_EQ(hidden_wire_bytes(HiddenEncoding::kF16, 896), 1836u);
  EXPECT_EQ(hidden_wire_bytes(HiddenEncoding::kInt8, 896), 996u);
  EXPECT_EQ(hidden_wire_bytes(HiddenEncoding::kF32, 0), 0u);
  EXPECT_EQ(hidden_wire_bytes(static_cast<HiddenEncoding>(5), 896), 0u);
}

}  // namespace
}  // namespace mcullm::test
