// Frames of every type for the link tests (frame codec and transports).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cluster/frame.h"

namespace mcullm::test {

// One frame as the tests keep it: its header and its payload bytes.
struct TestFrame {
  cluster::FrameHeader header;
  std::vector<uint8_t> payload;
  std::vector<uint8_t> encoded() const {
    std::vector<uint8_t> out(cluster::kFrameHeaderBytes + payload.size());
    size_t n = 0;
    EXPECT_TRUE(cluster::encode_frame(header, payload.data(), out.data(), out.size(), &n).ok());
    out.resize(n);
    return out;
  }
};

inline TestFrame make_test_frame(cluster::FrameType type, uint32_t seq, uint32_t stream, uint32_t pos,
                                 std::vector<uint8_t> payload) {
  TestFrame f;
  f.header.type = type;
  f.header.seq = seq;
  f.header.stream = stream;
  f.header.pos = pos;
  f.header.payload_len = static_cast<uint32_t>(payload.size());
  f.payload = std::move(payload);
  return f;
}

// A deterministic hidden state with a few large channels (as a residual stream has).
inline std::vector<float> test_hidden(uint32_t dim, uint32_t seed) {
  std::vector<float> x(dim);
  uint32_t s = seed * 2654435761u + 1;
  for (uint32_t i = 0; i < dim; ++i) {
    s = s * 1664525u + 1013904223u;
    x[i] = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * (i % 97 == 5 ? 40.0f : 2.0f);
  }
  return x;
}

// Every frame type with a valid payload, including a hidden state split over several frames.
inline std::vector<TestFrame> sample_frames() {
  using namespace cluster;
  std::vector<TestFrame> frames;
  uint32_t seq = 7;
  std::vector<uint8_t> buf(kMaxPayloadBytes);
  size_t len = 0;
  Hello h;
  h.role = NodeRole::kNode;
  h.first_layer = 4;
  h.end_layer = 8;
  h.n_layers = 24;
  h.dim = 896;
  h.ctx_len = 512;
  h.max_streams = 4;
  h.capabilities = kAllCapabilities;
  h.slice_hash = 0x0123456789ABCDEFull;
  EXPECT_TRUE(encode_hello(h, buf.data(), buf.size(), &len).ok());
  frames.push_back(make_test_frame(FrameType::kHello, seq++, 0, 0, {buf.begin(), buf.begin() + len}));
  frames.push_back(make_test_frame(FrameType::kReady, seq++, 0, 0, {}));
  frames.push_back(make_test_frame(FrameType::kReset, seq++, kAllStreams, 0, {}));
  for (HiddenEncoding e : {HiddenEncoding::kF32, HiddenEncoding::kF16, HiddenEncoding::kInt8}) {
    const std::vector<float> x = test_hidden(896, static_cast<uint32_t>(e));
    EXPECT_TRUE(encode_hidden_chunk(e, x.data(), 896, 0, buf.data(), buf.size(), &len).ok());
    frames.push_back(make_test_frame(FrameType::kHidden, seq++, 2, 17, {buf.begin(), buf.begin() + len}));
  }
  const uint32_t big = 20000;  // f32: 3 frames
  const std::vector<float> x = test_hidden(big, 9);
  for (uint32_t c = 0; c < hidden_frame_count(HiddenEncoding::kF32, big); ++c) {
    EXPECT_TRUE(encode_hidden_chunk(HiddenEncoding::kF32, x.data(), big, c, buf.data(), buf.size(), &len).ok());
    frames.push_back(make_test_frame(FrameType::kHidden, seq++, 3, 300, {buf.begin(), buf.begin() + len}));
  }
  EXPECT_TRUE(encode_ack(12, buf.data(), buf.size(), &len).ok());
  frames.push_back(make_test_frame(FrameType::kAck, seq++, 2, 17, {buf.begin(), buf.begin() + len}));
  EXPECT_TRUE(encode_error(Status::Error(Code::kOutOfRange, "position 600 is past the context of 512"), buf.data(),
                           buf.size(), &len).ok());
  frames.push_back(make_test_frame(FrameType::kError, seq++, 2, 600, {buf.begin(), buf.begin() + len}));
  frames.push_back(make_test_frame(FrameType::kHeartbeat, seq++, 0, 0, {}));
  return frames;
}

inline std::vector<uint8_t> concat_encoded(const std::vector<TestFrame>& frames) {
  std::vector<uint8_t> out;
  for (const TestFrame& f : frames) {
    const std::vector<uint8_t> e = f.encoded();
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

inline void expect_same_frame(const TestFrame& want, const cluster::Frame& got) {
  EXPECT_EQ(got.header.type, want.header.type);
  EXPECT_EQ(got.header.seq, want.header.seq);
  EXPECT_EQ(got.header.stream, want.header.stream);
  EXPECT_EQ(got.header.pos, want.header.pos);
  ASSERT_EQ(got.header.payload_len, want.payload.size());
  EXPECT_TRUE(want.payload.empty() || std::memcmp(got.payload, want.payload.data(), want.payload.size()) == 0);
}

}  // namespace mcullm::test
