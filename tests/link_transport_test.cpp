// The cluster transports (src/cluster/transport_host.h): in-process, TCP (Asio) and a pseudo-terminal
// carry the same frames in order; a corrupt frame is reported and skipped; a peer that closes (also
// mid-frame) is reported as closed, never a hang; timeouts; a rate-limited link is no faster than its rate.
#include <chrono>
#include <cstring>
#include <thread>

#include "cluster/transport_host.h"
#include "link_test_support.h"

namespace mcullm::test {
namespace {

using namespace cluster;
using Clock = std::chrono::steady_clock;

constexpr int kWait = 10000;  // ms: generous, only reached when something is broken

enum class Kind { kInproc, kTcp, kPty, kPtyPaced };

struct Pair {
  std::unique_ptr<Transport> a, b;
  std::unique_ptr<TcpListener> listener;
};

Pair make_pair(Kind kind) {
  Pair p;
  switch (kind) {
    case Kind::kInproc:
      make_inproc_pair(&p.a, &p.b);
      break;
    case Kind::kTcp: {
      Status st = tcp_listen("127.0.0.1", 0, &p.listener);
      EXPECT_TRUE(st.ok()) << st.message();
      if (!st.ok()) break;
      std::thread acceptor([&] {
        Status s = p.listener->accept(kWait, &p.b, nullptr);
        EXPECT_TRUE(s.ok()) << s.message();
      });
      st = tcp_connect("127.0.0.1", p.listener->port(), kWait, &p.a);
      EXPECT_TRUE(st.ok()) << st.message();
      acceptor.join();
      break;
    }
    case Kind::kPty:
    case Kind::kPtyPaced: {
      SerialOptions opt;
      if (kind == Kind::kPtyPaced) opt.rate_bps = 4000000;
      const Status st = make_pty_pair(opt, &p.a, &p.b);
      EXPECT_TRUE(st.ok()) << st.message();
      break;
    }
  }
  return p;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kInproc: return "inproc";
    case Kind::kTcp: return "tcp";
    case Kind::kPty: return "pty";
    case Kind::kPtyPaced: return "pty_paced";
  }
  return "?";
}

class LinkTransport : public ::testing::TestWithParam<Kind> {};

// Receives one frame, failing the test (not hanging) when it does not come.
void expect_receive(Transport& t, const TestFrame& want) {
  Frame f;
  LinkFailure why;
  const Status st = t.receive(&f, kWait, &why);
  ASSERT_TRUE(st.ok()) << st.message();
  expect_same_frame(want, f);
}

TEST_P(LinkTransport, CarriesTheSameFramesInOrderBothWays) {
  Pair p = make_pair(GetParam());
  ASSERT_TRUE(p.a && p.b);
  const std::vector<TestFrame> frames = sample_frames();
  // a sends while b receives (the pty's buffer is smaller than the frames: both must run at once)
  std::thread sender([&] {
    for (const TestFrame& f : frames) {
      const Status st = p.a->send(f.header, f.payload.data(), kWait, nullptr);
      ASSERT_TRUE(st.ok()) << st.message();
    }
  });
  for (const TestFrame& f : frames) expect_receive(*p.b, f);
  sender.join();
  // and back
  std::thread back([&] {
    for (const TestFrame& f : frames) ASSERT_TRUE(p.b->send(f.header, f.payload.data(), kWait, nullptr).ok());
  });
  for (const TestFrame& f : frames) expect_receive(*p.a, f);
  back.join();
  // nothing more: a short wait times out and says so
  Frame f;
  LinkFailure why;
  const Status st = p.b->receive(&f, 50, &why);
  EXPECT_EQ(why, LinkFailure::kTimeout) << st.message();
  EXPECT_NE(std::string(st.message()).find("no frame within 50 ms"), std::string::npos) << st.message();
}

TEST_P(LinkTransport, HiddenStatesTravelInEveryEncoding) {
  Pair p = make_pair(GetParam());
  ASSERT_TRUE(p.a && p.b);
  for (HiddenEncoding e : {HiddenEncoding::kF32, HiddenEncoding::kF16, HiddenEncoding::kInt8}) {
    for (uint32_t dim : {896u, 20000u}) {
      const std::vector<float> x = test_hidden(dim, dim + 1);
      uint32_t seq = 100;
      std::thread sender([&] {
        const Status st = send_hidden(*p.a, &seq, 4, 33, e, x.data(), dim, kWait, nullptr);
        ASSERT_TRUE(st.ok()) << st.message();
      });
      std::vector<float> y(dim);
      HiddenAssembler a;
      a.start(y.data(), dim);
      uint32_t next_seq = 100;
      while (!a.complete()) {
        Frame f;
        const Status st = p.b->receive(&f, kWait, nullptr);
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(f.header.seq, next_seq++);
        ASSERT_TRUE(a.add(f).ok());
      }
      sender.join();
      EXPECT_EQ(seq, 100 + hidden_frame_count(e, dim));
      EXPECT_EQ(a.stream(), 4u);
      EXPECT_EQ(a.pos(), 33u);
      // the same values the codec gives without any link
      std::vector<uint8_t> bytes(hidden_encoded_bytes(e, dim));
      std::vector<float> direct(dim);
      ASSERT_TRUE(encode_hidden(e, x.data(), dim, bytes.data(), bytes.size()).ok());
      ASSERT_TRUE(decode_hidden(e, bytes.data(), bytes.size(), dim, direct.data()).ok());
      EXPECT_EQ(std::memcmp(y.data(), direct.data(), dim * 4), 0) << hidden_encoding_name(e) << " " << dim;
    }
  }
}

TEST_P(LinkTransport, ACorruptFrameIsReportedThenTheLinkGoesOn) {
  Pair p = make_pair(GetParam());
  ASSERT_TRUE(p.a && p.b);
  const std::vector<TestFrame> frames = sample_frames();
  std::vector<uint8_t> bad = frames[3].encoded();
  bad[100] ^= 0x10;  // a flipped bit in the payload
  const std::string junk = "line noise";
  ASSERT_TRUE(p.a->send_bytes(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), kWait, nullptr).ok());
  ASSERT_TRUE(p.a->send_bytes(bad.data(), bad.size(), kWait, nullptr).ok());
  ASSERT_TRUE(p.a->send(frames[0].header, frames[0].payload.data(), kWait, nullptr).ok());
  Frame f;
  LinkFailure why;
  Status st = p.b->receive(&f, kWait, &why);
  EXPECT_EQ(why, LinkFailure::kCorrupt);
  EXPECT_NE(std::string(st.message()).find("10 bytes of garbage"), std::string::npos) << st.message();
  EXPECT_NE(std::string(st.message()).find(p.b->describe()), std::string::npos) << st.message();
  st = p.b->receive(&f, kWait, &why);
  EXPECT_EQ(why, LinkFailure::kCorrupt);
  EXPECT_NE(std::string(st.message()).find("CRC mismatch"), std::string::npos) << st.message();
  expect_receive(*p.b, frames[0]);
}

TEST_P(LinkTransport, APeerThatClosesIsReportedNotAHang) {
  Pair p = make_pair(GetParam());
  ASSERT_TRUE(p.a && p.b);
  const std::vector<TestFrame> frames = sample_frames();
  // one whole frame, then half of the next, then the peer goes away
  ASSERT_TRUE(p.a->send(frames[1].header, frames[1].payload.data(), kWait, nullptr).ok());
  const std::vector<uint8_t> half = frames[0].encoded();
  ASSERT_TRUE(p.a->send_bytes(half.data(), half.size() / 2, kWait, nullptr).ok());
  expect_receive(*p.b, frames[1]);  // what came before the close is still delivered
  if (GetParam() == Kind::kPty || GetParam() == Kind::kPtyPaced) {
    // the half frame must be in the slave's decoder before the master closes: a pty drops unread
    // input when its master closes
    Frame f;
    LinkFailure why;
    p.b->receive(&f, 200, &why);
    EXPECT_EQ(why, LinkFailure::kTimeout);
  }
  const auto t0 = Clock::now();
  p.a->close();
  Frame f;
  LinkFailure why = LinkFailure::kNone;
  const Status st = p.b->receive(&f, kWait, &why);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(kWait / 2)) << "the close was not noticed";
  EXPECT_EQ(why, LinkFailure::kClosed) << st.message();
  EXPECT_NE(std::string(st.message()).find("closed"), std::string::npos) << st.message();
  EXPECT_NE(std::string(st.message()).find("mid-frame"), std::string::npos) << st.message();
  // sending on the closed end fails at once, and says so
  const Status s2 = p.a->send(frames[1].header, frames[1].payload.data(), kWait, &why);
  EXPECT_EQ(why, LinkFailure::kClosed) << s2.message();
  // and so does sending towards it (the kernel may take a first write: a few tries)
  LinkFailure why3 = LinkFailure::kNone;
  for (int i = 0; i < 20 && why3 == LinkFailure::kNone; ++i) {
    p.b->send(frames[0].header, frames[0].payload.data(), kWait, &why3);
    if (why3 == LinkFailure::kNone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(why3, LinkFailure::kClosed);
}

TEST_P(LinkTransport, CloseFromAnotherThreadWakesABlockedReceive) {
  Pair p = make_pair(GetParam());
  ASSERT_TRUE(p.a && p.b);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    p.b->close();
  });
  Frame f;
  LinkFailure why = LinkFailure::kNone;
  const Status st = p.b->receive(&f, -1, &why);  // no timeout: only the close can end it
  closer.join();
  EXPECT_EQ(why, LinkFailure::kClosed) << st.message();
  p.b->close();  // idempotent
}

INSTANTIATE_TEST_SUITE_P(All, LinkTransport,
                         ::testing::Values(Kind::kInproc, Kind::kTcp, Kind::kPty, Kind::kPtyPaced),
                         [](const ::testing::TestParamInfo<Kind>& i) { return kind_name(i.param); });

TEST(LinkTransportPty, ARateLimitedLinkTakesAtLeastBitsOverRate) {
  SerialOptions opt;
  opt.rate_bps = 1000000;  // 1 Mbit/s
  Pair p;
  ASSERT_TRUE(make_pty_pair(opt, &p.a, &p.b).ok());
  const std::vector<TestFrame> frames = sample_frames();
  size_t bytes = 0;
  for (const TestFrame& f : frames) bytes += kFrameHeaderBytes + f.payload.size();
  const auto t0 = Clock::now();
  std::thread sender([&] {
    for (const TestFrame& f : frames) ASSERT_TRUE(p.a->send(f.header, f.payload.data(), kWait, nullptr).ok());
  });
  for (const TestFrame& f : frames) expect_receive(*p.b, f);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  sender.join();
  // a lower bound: the last byte cannot arrive before the link has clocked out every bit
  EXPECT_GE(seconds, static_cast<double>(bytes) * 8 / static_cast<double>(opt.rate_bps))
      << bytes << " bytes at " << opt.rate_bps << " bit/s";
  // a frame that cannot go out within its timeout at this rate is refused without waiting for it
  const TestFrame& big = frames[6];  // a hidden frame of ~32 KB: 0.26 s at 1 Mbit/s
  LinkFailure why;
  const Status st = p.a->send(big.header, big.payload.data(), 20, &why);
  EXPECT_EQ(why, LinkFailure::kTimeout) << st.message();
}

TEST(LinkTransportPty, APtyMasterWaitsForItsPeerAcrossRestarts) {
  // the master end of a pty whose slave another process opens (here: this one, twice)
  std::unique_ptr<Transport> master;
  std::string slave_path;
  ASSERT_TRUE(open_pty_transport(SerialOptions(), &master, &slave_path).ok());
  const std::vector<TestFrame> frames = sample_frames();
  Frame f;
  LinkFailure why;
  master->receive(&f, 100, &why);
  EXPECT_EQ(why, LinkFailure::kTimeout) << "no peer yet: a wait, not an error";
  for (int life = 0; life < 2; ++life) {
    std::unique_ptr<Transport> peer;
    ASSERT_TRUE(open_serial_transport(slave_path, SerialOptions(), &peer).ok());
    ASSERT_TRUE(peer->send(frames[0].header, frames[0].payload.data(), kWait, nullptr).ok());
    expect_receive(*master, frames[0]);
    ASSERT_TRUE(master->send(frames[1].header, frames[1].payload.data(), kWait, nullptr).ok());
    expect_receive(*peer, frames[1]);
    peer.reset();  // the peer goes away (and comes back on the next turn)
    master->receive(&f, 100, &why);
    EXPECT_EQ(why, LinkFailure::kTimeout) << life;
  }
}

TEST(LinkTransportInproc, AFloodIntoAReceiverThatDoesNotReadEndsTheLink) {
  std::unique_ptr<Transport> a, b;
  make_inproc_pair(&a, &b);
  const std::vector<TestFrame> frames = sample_frames();
  const TestFrame& big = frames[6];  // ~32 KB
  const std::vector<uint8_t> bytes = big.encoded();
  size_t sent = 0;
  while (sent <= (size_t{16} << 20)) {
    ASSERT_TRUE(a->send_bytes(bytes.data(), bytes.size(), kWait, nullptr).ok());
    sent += bytes.size();
  }
  // the frames that fit are still delivered, then the link reports why it ended
  LinkFailure why = LinkFailure::kNone;
  Frame f;
  Status st;
  size_t got = 0;
  while ((st = b->receive(&f, kWait, &why)).ok()) ++got;
  EXPECT_EQ(why, LinkFailure::kIo) << st.message();
  EXPECT_NE(std::string(st.message()).find("not read"), std::string::npos) << st.message();
  EXPECT_EQ(got, (size_t{16} << 20) / bytes.size());
}

TEST(LinkTransportTcp, ConnectingToAClosedPortGivesAClearError) {
  // a port that was just free: listen on 0, note the port, close
  uint16_t port;
  {
    std::unique_ptr<TcpListener> l;
    ASSERT_TRUE(tcp_listen("127.0.0.1", 0, &l).ok());
    port = l->port();
  }
  std::unique_ptr<Transport> t;
  const auto t0 = Clock::now();
  const Status st = tcp_connect("127.0.0.1", port, 300, &t);
  const auto elapsed = Clock::now() - t0;
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(t, nullptr);
  const std::string msg = st.message();
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
  EXPECT_LT(elapsed, std::chrono::milliseconds(kWait)) << msg;
}

TEST(LinkTransportTcp, ListenerAcceptTimesOutAndBadAddressesAreRefused) {
  std::unique_ptr<TcpListener> l;
  ASSERT_TRUE(tcp_listen("127.0.0.1", 0, &l).ok());
  std::unique_ptr<Transport> t;
  LinkFailure why;
  Status st = l->accept(50, &t, &why);
  EXPECT_EQ(why, LinkFailure::kTimeout) << st.message();
  EXPECT_NE(std::string(st.message()).find("no connection within 50 ms"), std::string::npos) << st.message();
  // the port is taken while l listens
  std::unique_ptr<TcpListener> l2;
  st = tcp_listen("127.0.0.1", l->port(), &l2);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("in use"), std::string::npos) << st.message();
  st = tcp_listen("not an address", 0, &l2);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  st = tcp_connect("no-such-host.invalid", 1, 100, &t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("resolve"), std::string::npos) << st.message();
  // a listener closed from another thread wakes its accept
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    l->close();
  });
  st = l->accept(-1, &t, &why);
  closer.join();
  EXPECT_EQ(why, LinkFailure::kClosed) << st.message();
}

TEST(LinkTransportTcp, AKilledPeerIsSeenAsClosed) {
  // the accepted end is destroyed (as a process that dies closes its sockets)
  Pair p = make_pair(Kind::kTcp);
  ASSERT_TRUE(p.a && p.b);
  p.b.reset();
  Frame f;
  LinkFailure why = LinkFailure::kNone;
  const Status st = p.a->receive(&f, kWait, &why);
  EXPECT_EQ(why, LinkFailure::kClosed) << st.message();
  EXPECT_NE(std::string(st.message()).find("peer closed"), std::string::npos) << st.message();
}

TEST(LinkTransportSerial, AMissingDeviceIsAClearError) {
  std::unique_ptr<Transport> t;
  const Status st = open_serial_transport("/dev/no-such-serial-device", SerialOptions(), &t);
  EXPECT_EQ(st.code(), Code::kIo);
  EXPECT_NE(std::string(st.message()).find("/dev/no-such-serial-device"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace mcullm::test
