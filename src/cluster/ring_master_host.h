// The cluster master of a ring on a PC (`mcullm cluster --topology ring`): the board's master logic
// (board::Master, the code the firmware runs: hellos, slice hashes, hidden frames, the answers'
// routing by stream) over a TransportSpiLink (board/transport_spi_link_host.h) whose TX goes to
// node 1 and whose RX comes from the last node. Each stream is a Decoder (RingStream), so the same
// generate() loop as `mcullm run` drives it, with the same fingerprint for its seed.
//
// Streams: RingOptions::master.streams streams may be open at once, each with its own KV cache slot
// on every node (board/node.h; the hello checks each node keeps that many). Each stream's thread
// sends its hidden state and waits; one receiving thread hands every frame coming back from the last
// node to board::route_answer, which wakes the stream it answers. So K streams are in flight at once
// and the ring pipelines them: while node 2 computes stream A, node 1 computes stream B.
//
// Faults: a ring has one way back to the master, so when a node dies or stops the master only sees
// the ring go quiet or its link close: it cannot tell which node it was (the star can). With a
// `rewire` callback (`--local`: start a fresh ring of processes) a failed step rebuilds the whole
// ring (once every step in flight has ended), connects again (hellos: every slice checked by hash;
// reset), and every stream replays the positions of its story so far into it at its next step (the
// master keeps the tokens), then computes its position again: the output is that of an unbroken run.
// A corrupt frame, or an error frame a node sends about one, makes the streams waiting for an answer
// send their hidden state again (the nodes recompute the same position: their caches rewind).
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "board/master.h"
#include "board/node.h"
#include "board/transport_spi_link_host.h"
#include "cluster/transport.h"

namespace mcullm::cluster {

struct RingOptions {
  // encoding, timeout_ms, retries, ctx_len, streams (open at once); nodes and node_ranges from `ranges`
  board::MasterOptions master;
  std::vector<SliceRange> ranges;   // each node's layers, in ring order
  int max_rebuilds = 4;             // rebuilds of the ring in one run before giving up
  // Wires a ring (again): *to_first carries frames to node 1, *from_last brings the last node's. The
  // first call builds the ring; later ones (after a failure, only with `rebuild` set) replace it.
  std::function<Status(std::unique_ptr<Transport>* to_first, std::unique_ptr<Transport>* from_last)> wire;
  bool rebuild = false;                        // call wire() again after a failure
  std::function<void(const std::string&)> log;  // what happened, for a person (faults, rebuilds)
};

class RingStream;

class RingMaster {
 public:
  static constexpr int kMaxStreams = board::kMaxStreamSlots;  // streams open at once
  RingMaster(const LlamaModel* model, ThreadPool* pool, const KernelSet* kernels, RingOptions opt);
  ~RingMaster();
  // Wires the ring and connects (hellos checked by slice hash and stream slots, reset).
  Status start();
  // A new stream (its embedding and head buffers here, a KV cache slot on every node); at most
  // RingOptions::master.streams open at once. It must not outlive the master.
  Status open_stream(std::unique_ptr<RingStream>* out);
  int ctx_len() const;
  int rebuilds() const;
  uint32_t resends() const { return resends_; }  // hidden states sent again after a corrupt or refused exchange
  std::string plan_text() const;

 private:
  friend class RingStream;
  struct Wired;  // one ring's link, frame link, arena and board::Master
  Status build();  // wire + init + connect, then the receiving thread
  void stop_receiving();
  void receive_loop(Wired* ring);
  Status step(RingStream& s, int token, int pos, const float** logits);
  // One hidden state of s there and back (sent again after a corrupt exchange, up to retries).
  Status exchange(RingStream& s, int token, int pos, const float** logits);
  // After step `why` failed at `seen_epoch`: rebuilds the ring unless another stream already did.
  Status rebuild(uint64_t seen_epoch, const RingStream& s, int pos, const Status& why);
  void close_stream(RingStream& s);

  const LlamaModel* model_;
  ThreadPool* pool_;
  const KernelSet* kernels_;
  RingOptions opt_;
  std::unique_ptr<Wired> ring_;  // replaced only while no step runs (rebuilding_, active_ 0)
  std::thread receiver_;
  std::atomic<bool> stop_receiving_{false};
  std::mutex send_mu_;     // one hidden state's frames go out together
  std::mutex compute_mu_;  // the streams' embed / head share one thread pool
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // under mu_:
  std::vector<board::AwaitedAnswer> awaited_;  // by stream slot
  std::vector<bool> slot_open_;
  std::vector<uint32_t> resets_back_;  // streams whose reset came back round the ring, not yet seen by close_stream
  Status broken_;  // the receiving link's failure (the ring is broken)
  uint64_t epoch_ = 0;  // rings built so far
  bool rebuilding_ = false;
  int active_ = 0;  // steps using the ring
  uint32_t next_stream_ = 0;
  int rebuilds_ = 0;
  std::atomic<uint32_t> resends_{0};
};

// One sequence generated through the ring, as a Decoder (model/generate.h drives it). Closing it
// frees its cache slot on the nodes (a reset frame for its stream, waited for until it is back).
class RingStream final : public Decoder {
 public:
  ~RingStream();
  Status forward(int token, int pos, const float** logits) override { return master_->step(*this, token, pos, logits); }
  int vocab_size() const override;
  int ctx_len() const override;
  uint32_t id() const { return id_; }

 private:
  friend class RingMaster;
  RingMaster* master_ = nullptr;
  uint32_t id_ = 0;
  int slot_ = 0;
  uint64_t epoch_ = 0;       // the ring its caches were built on
  std::vector<int> tokens_;  // the token fed at each position so far: replayed into a rebuilt ring
  std::vector<uint8_t> mem_;
  Arena arena_;
  LlamaSlice local_;  // embedding and head
  float* sent_ = nullptr;    // the embedded token, as sent
  float* answer_ = nullptr;  // the last node's hidden state (the receiving thread writes it)
};

}  // namespace mcullm::cluster
