// `mcullm node`'s logic, written against the link interface (cluster/transport.h) so that tests
// drive it in-process: a node serves one layer range of a model to the master over one link.
//
// Topology: a star. Every hidden state goes master -> node -> master and the master relays it to
// the next node (the payload bytes as they came, so an f16 / int8 hidden state is rounded once per
// boundary, as in the reference design's chain master -> n1 -> ... -> n6 -> master). Why not the
// chain itself: the master then sees every node's answer on a link of its own, so it can say which
// node failed and why, and re-plan the layers onto the others without re-wiring node-to-node links;
// on a PC the extra hop is a memcpy through the loopback. A board build can still wire the chain.
//
// The node answers, on its link:
//   hello (from the master: role master, the layer range it assigns) -> hello (role node, its range,
//     ctx_len, the slice hash), after loading that range (the caches of every stream are dropped
//     when the range changes); an assignment over --max-layers is answered with an error frame.
//   reset (one stream or all) -> ready;
//   heartbeat -> heartbeat, at once, also while a hidden state is being computed: a thread of its own
//     reads the link, answers heartbeats and queues every other frame for the thread that computes,
//     so the master tells a busy node (a long frame) from a dead or stopped one;
//   hidden (stream, pos, one vector in one or more frames) -> runs its layers on the stream's own KV
//     cache (made on first use, at most max_streams) and answers hidden in the same encoding;
//   anything corrupt or out of place -> an error frame saying what, and the node keeps serving.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "cluster/slice_source_host.h"
#include "cluster/transport.h"

namespace mcullm::cluster {

struct NodeOptions {
  SliceRange range;          // loaded at start (the master may assign another in its hello)
  int ctx_len = 0;           // 0 = the model's
  int max_layers = 0;        // refuse assignments of more layers (0 = no limit)
  int max_streams = 16;      // KV caches kept at once
  // Test hooks that make this node fail on purpose after `fault_after` hidden states answered:
  // "kill" (SIGKILL itself), "stop" (SIGSTOP itself: a hung node), "flip" (one bit of the next
  // answer flipped on the wire), "exit" (closes the link), "hang" (stops answering until stop():
  // "stop" for a node inside a test process; its heartbeats stop too), "slow" (that hidden state's
  // layers take until the node has answered slow_beats heartbeats meanwhile: a frame longer than
  // the master's timeout, counted in heartbeats rather than in time, so a test needs no clock).
  std::string fault;
  int fault_after = 0;
  int slow_beats = 0;
};

class NodeServer {
 public:
  NodeServer(SliceSource* source, const NodeOptions& opt, ThreadPool* pool, const KernelSet* kernels);
  // Loads the starting range (computes its hash).
  Status init();
  // Serves one master over `link` until the master closes it or stop() is called: Ok then. An error
  // for a link that failed (other than closing) or a range that cannot be loaded at start.
  Status serve(Transport& link);
  void stop() { stop_ = true; }
  const SliceRange& range() const { return range_; }
  uint64_t hash() const { return hash_; }
  int hidden_served() const { return served_; }
  int heartbeats_answered() const { return beats_; }

 private:
  // What the reader thread hands the computing thread: a frame, or what ended or broke the link.
  struct Event {
    FrameHeader h;
    std::vector<uint8_t> payload;
    Status status;                     // not Ok: receive() failed with `why`
    LinkFailure why = LinkFailure::kNone;
  };
  void read_loop(Transport& link);
  Status load(const SliceRange& r);
  Status on_frame(Transport& link, const Frame& f);
  Status on_hidden(Transport& link, const Frame& f);
  Status reply_error(Transport& link, const FrameHeader& about, const Status& why);
  Status send(Transport& link, FrameType type, uint32_t stream, uint32_t pos, const uint8_t* payload, size_t len);
  Status send_hidden(Transport& link, HiddenEncoding e, uint32_t stream, uint32_t pos, const float* x);

  SliceSource* source_;
  NodeOptions opt_;
  ThreadPool* pool_;
  const KernelSet* kernels_;
  SliceRange range_;
  uint64_t hash_ = 0;
  std::map<uint32_t, std::unique_ptr<SliceInstance>> streams_;
  std::vector<float> hidden_;
  HiddenAssembler assembler_;
  bool assembling_ = false;
  std::mutex send_mu_;  // seq_ and whole frames: the reader sends heartbeats between the computer's frames
  uint32_t seq_ = 0;
  LinkFailure send_failure_ = LinkFailure::kNone;  // why the last send failed: kClosed = the master left
  int served_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> silent_{false};       // the "hang" fault: no heartbeats either
  std::atomic<bool> reader_done_{false};  // the link ended (or serve() is leaving)
  std::atomic<int> beats_{0};
  std::mutex in_mu_;
  std::condition_variable in_cv_;
  std::deque<Event> inbox_;
};

}  // namespace mcullm::cluster
