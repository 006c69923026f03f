// The cluster link's cost on a PC: hidden-state encodings (Qwen2-0.5B's 896 values), the stream
// decoder, and one hidden state's round trip over the in-process, TCP (loopback) and pty transports.
//   build/release/bench/link_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <memory>
#include <thread>
#include <vector>

#include "cluster/frame.h"
#include "cluster/transport_host.h"

namespace mcullm::cluster {
namespace {

constexpr uint32_t kDim = 896;

std::vector<float> hidden(uint32_t dim) {
  std::vector<float> x(dim);
  for (uint32_t i = 0; i < dim; ++i) x[i] = static_cast<float>((i * 37) % 101) * 0.03f - 1.5f;
  return x;
}

void BM_EncodeHidden(benchmark::State& state) {
  const HiddenEncoding e = static_cast<HiddenEncoding>(state.range(0));
  const std::vector<float> x = hidden(kDim);
  std::vector<uint8_t> out(hidden_encoded_bytes(e, kDim));
  for (auto _ : state) {
    benchmark::DoNotOptimize(encode_hidden(e, x.data(), kDim, out.data(), out.size()).ok());
    benchmark::ClobberMemory();
  }
  state.SetLabel(hidden_encoding_name(e));
  state.SetItemsProcessed(state.iterations() * kDim);
}
BENCHMARK(BM_EncodeHidden)->Arg(0)->Arg(1)->Arg(2);

void BM_DecodeHidden(benchmark::State& state) {
  const HiddenEncoding e = static_cast<HiddenEncoding>(state.range(0));
  const std::vector<float> x = hidden(kDim);
  std::vector<uint8_t> bytes(hidden_encoded_bytes(e, kDim));
  encode_hidden(e, x.data(), kDim, bytes.data(), bytes.size());
  std::vector<float> y(kDim);
  for (auto _ : state) {
    benchmark::DoNotOptimize(decode_hidden(e, bytes.data(), bytes.size(), kDim, y.data()).ok());
    benchmark::ClobberMemory();
  }
  state.SetLabel(hidden_encoding_name(e));
  state.SetItemsProcessed(state.iterations() * kDim);
}
BENCHMARK(BM_DecodeHidden)->Arg(0)->Arg(1)->Arg(2);

// 64 f32 hidden frames through the stream decoder in 4096-byte pieces (CRC and copies included).
void BM_StreamDecode(benchmark::State& state) {
  const std::vector<float> x = hidden(kDim);
  std::vector<uint8_t> stream, payload(kMaxPayloadBytes), frame(kMaxFrameBytes);
  for (uint32_t i = 0; i < 64; ++i) {
    size_t len = 0, n = 0;
    encode_hidden_chunk(HiddenEncoding::kF32, x.data(), kDim, 0, payload.data(), payload.size(), &len);
    FrameHeader h;
    h.type = FrameType::kHidden;
    h.seq = i;
    h.payload_len = static_cast<uint32_t>(len);
    encode_frame(h, payload.data(), frame.data(), frame.size(), &n);
    stream.insert(stream.end(), frame.begin(), frame.begin() + static_cast<long>(n));
  }
  auto d = std::make_unique<FrameDecoder>();
  for (auto _ : state) {
    d->reset();
    size_t frames = 0;
    for (size_t off = 0; off < stream.size(); off += 4096) {
      const uint8_t* p = stream.data() + off;
      size_t n = std::min<size_t>(4096, stream.size() - off);
      while (true) {
        DecodeEvent ev;
        const size_t used = d->feed(p, n, &ev);
        p += used;
        n -= used;
        if (ev == DecodeEvent::kNeedMore) break;
        frames += ev == DecodeEvent::kFrame;
      }
    }
    if (frames != 64) state.SkipWithError("lost frames");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(stream.size()));
}
BENCHMARK(BM_StreamDecode);

// One hidden state there and back: a sends, b receives and sends it back, a receives.
void round_trips(benchmark::State& state, Transport& a, Transport& b) {
  const std::vector<float> x = hidden(kDim);
  std::vector<float> y(kDim);
  uint32_t seq_a = 0, seq_b = 0;
  for (auto _ : state) {
    Frame f;
    if (!send_hidden(a, &seq_a, 1, 0, HiddenEncoding::kF32, x.data(), kDim, 5000, nullptr).ok() ||
        !b.receive(&f, 5000, nullptr).ok() ||
        !send_frame(b, &seq_b, FrameType::kHidden, 1, 0, f.payload, f.header.payload_len, 5000, nullptr).ok() ||
        !a.receive(&f, 5000, nullptr).ok()) {
      state.SkipWithError("link failed");
      break;
    }
  }
}

void BM_RoundTripInproc(benchmark::State& state) {
  std::unique_ptr<Transport> a, b;
  make_inproc_pair(&a, &b);
  round_trips(state, *a, *b);
}
BENCHMARK(BM_RoundTripInproc)->UseRealTime();

void BM_RoundTripTcp(benchmark::State& state) {
  std::unique_ptr<TcpListener> l;
  std::unique_ptr<Transport> a, b;
  if (!tcp_listen("127.0.0.1", 0, &l).ok()) return state.SkipWithError("listen failed");
  std::thread accept([&] { l->accept(5000, &b, nullptr); });
  const bool ok = tcp_connect("127.0.0.1", l->port(), 5000, &a).ok();
  accept.join();
  if (!ok || !b) return state.SkipWithError("connect failed");
  round_trips(state, *a, *b);
}
BENCHMARK(BM_RoundTripTcp)->UseRealTime();

void BM_RoundTripPty(benchmark::State& state) {
  std::unique_ptr<Transport> a, b;
  if (!make_pty_pair(SerialOptions(), &a, &b).ok()) return state.SkipWithError("no pty");
  round_trips(state, *a, *b);
}
BENCHMARK(BM_RoundTripPty)->UseRealTime();

}  // namespace
}  // namespace mcullm::cluster
