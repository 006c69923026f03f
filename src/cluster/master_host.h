// `mcullm cluster`'s logic: the master keeps the tokenizer, the embedding, the final norm, the head
// and sampling; the layers run on nodes (cluster/node_server_host.h) reached through links
// (cluster/transport.h). Each stream is a Decoder (ClusterStream) that the generation loop drives
// as it drives a local model: forward() embeds the token, sends the hidden state through every
// node in layer order (relaying each node's answer to the next as it came) and applies the head.
//
// Faults. A node is failed, with the reason in words, when its link closes (a process that died),
// when nothing, not even a heartbeat answer, comes from it for the timeout (hung, stopped; a node
// computing a long frame still answers heartbeats and is waited for, up to busy_ms), when it
// sends a corrupt frame or an error frame, or when its hello carries another slice hash than the
// master computes for that range from its own copy of the model. Then, if the nodes left can hold
// every layer (max_layers each), the master re-plans the layers onto them, checks each node's new
// slice by hash, replays every stream's tokens so far to rebuild their caches, and carries on from
// the token that failed: the output is the same. With no room it waits up to rejoin_ms for a
// failed node to come back (a restarted node is admitted once its slice hash checks out; one with
// another slice is refused, and the master gives up saying so); else the stream fails with the
// reason. Never a hang: every wait has a deadline.
//
// Re-admission. A thread tries, every heartbeat period, to reconnect each failed node. One that
// answers is re-admitted at the next token boundary (the next forward() of any stream, once every
// step in flight is done): the layers are planned onto every live node again, each checked by hash,
// and every stream replays its tokens into the new chain, so the output stays the same. A node
// that comes back with another slice is refused, left out and not tried again.
#pragma once
#include <stdint.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/slice_source_host.h"
#include "cluster/transport.h"
#include "model/decoder.h"

namespace mcullm::cluster {

struct NodeEndpoint {
  std::string name;  // for messages, e.g. "127.0.0.1:7001"
  // Opens a new link to the node (called again to re-admit a node that failed).
  std::function<Status(std::unique_ptr<Transport>*)> connect;
};

struct MasterOptions {
  HiddenEncoding encoding = HiddenEncoding::kF32;
  int ctx_len = 0;           // 0 = the model's
  int timeout_ms = 5000;     // silence (not even a heartbeat answer) after which a node is failed
  int busy_ms = 600000;      // one answer (a hidden state, a hello) from a node still answering heartbeats
  int heartbeat_ms = 500;
  int max_layers = 0;        // layers one node holds at most (the capacity rule); 0 = any
  int rejoin_ms = 0;         // with no room left: how long to wait for a failed node to come back
  bool readmit = true;       // reconnect failed nodes and take them back at the next token boundary
  // The layer ranges of `nodes` nodes, in chain order (at start and at every re-plan); empty: even_plan.
  // Either way a range over max_layers is no room.
  std::function<Status(int nodes, std::vector<SliceRange>* out)> split;
  std::function<void(const std::string&)> log;  // messages (default: stderr)
};

// Layer ranges for `nodes` nodes of at most max_layers (0 = any) over n_layers: contiguous, as even
// as possible, earlier nodes taking the remainder. An error when they cannot hold every layer.
Status even_plan(int n_layers, int nodes, int max_layers, std::vector<SliceRange>* out);

class ClusterStream;

class ClusterMaster {
 public:
  ClusterMaster(SliceSource* source, ThreadPool* pool, const KernelSet* kernels, const MasterOptions& opt);
  ~ClusterMaster();
  // Connects to every node, plans the layers (even_plan), checks each node's slice by hash.
  Status start(const std::vector<NodeEndpoint>& nodes);
  // A new stream (its own KV caches on the nodes, its own embed / head buffers here).
  Status open_stream(std::unique_ptr<ClusterStream>* out);
  // "node 1 127.0.0.1:7001 layers 0:4, ..." for the current plan.
  std::string plan_text();
  int replans() const { return replans_; }

 private:
  friend class ClusterStream;
  struct RxFrame {
    FrameHeader h;
    std::vector<uint8_t> payload;
  };
  struct Link {
    int index = 0;
    NodeEndpoint ep;
    std::unique_ptr<Transport> t;
    std::mutex send_mu;
    uint32_t seq = 0;
    std::thread rx;
    // under mu_:
    bool alive = false;
    std::string failure;
    SliceRange range;
    bool refused = false;  // came back with another slice: not tried again
    bool back = false;     // came back with its slice, not yet in a plan
    bool checking = false; // reconnected, its hello not yet answered: in no plan meanwhile
    std::map<uint32_t, std::deque<RxFrame>> inbox;  // by stream (control frames under kControl)
    std::chrono::steady_clock::time_point last_seen;
  };
  static constexpr uint32_t kControl = 0xFFFFFFFEu;

  Status connect_link(Link& l);
  void rx_loop(Link* l);
  void heartbeat_loop();
  // Reconnects failed nodes not in use (readmit / rejoin_ms); one that answers sets readmit_pending_.
  void rejoin_loop();
  void fail(Link& l, const std::string& why);
  std::string who(const Link& l) const;
  Status send(Link& l, const FrameHeader& h, const uint8_t* payload);
  // Waits for the next frame of `key` on l (frames of other positions are stale and dropped).
  Status await(Link& l, uint32_t key, FrameType type, uint32_t pos, int frames, std::vector<RxFrame>* out);
  Status hello(Link& l, const SliceRange& r);
  // The ranges of opt_.split (or even_plan) for `nodes` nodes, each within max_layers.
  Status plan_layers(int nodes, std::vector<SliceRange>* plan) const;
  Status assign(const std::vector<Link*>& links, const std::vector<SliceRange>& plan);
  Status recover(uint64_t seen_epoch);
  // At a token boundary: re-plans onto every live node when a failed one came back.
  Status readmit();
  // Plans onto every live node, checks each by hash, bumps the epoch (with step_mu_ held alone).
  Status replan_live();
  // Embeds `token`, runs it through every node; with logits non-null applies the head too.
  Status run_chain(ClusterStream& s, int token, int pos, const float** logits);
  // Frees the stream's KV caches on the nodes (reset frames).
  void close_stream(uint32_t id);

  SliceSource* source_;
  ThreadPool* pool_;
  const KernelSet* kernels_;
  MasterOptions opt_;
  std::vector<std::unique_ptr<Link>> links_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_mutex step_mu_;  // steps share it; re-planning takes it alone
  std::mutex compute_mu_;      // the master's embed / head (one thread pool)
  std::vector<Link*> plan_;    // the chain, in layer order
  uint64_t epoch_ = 0;
  int replans_ = 0;
  uint32_t next_stream_ = 0;
  bool stopping_ = false;
  bool recovering_ = false;       // a re-plan holds step_mu_ alone: no step uses any link
  bool readmit_pending_ = false;  // a failed node reconnected and waits for the next token boundary
  std::thread heartbeat_, rejoin_;
};

// One sequence generated through the cluster, as a Decoder (model/generate.h drives it). It must
// not outlive its master; destroying it frees its caches on the nodes.
class ClusterStream final : public Decoder {
 public:
  ~ClusterStream();
  Status forward(int token, int pos, const float** logits) override;
  int vocab_size() const override;
  int ctx_len() const override;
  uint32_t id() const { return id_; }

 private:
  friend class ClusterMaster;
  ClusterMaster* master_ = nullptr;
  uint32_t id_ = 0;
  uint64_t epoch_ = 0;          // the plan its caches on the nodes were built under
  std::vector<int> tokens_;     // tokens fed so far, by position (replayed after a re-plan)
  std::unique_ptr<SliceInstance> local_;  // embedding and head
  std::vector<float> hidden_;
};

}  // namespace mcullm::cluster
