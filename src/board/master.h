// The cluster master's firmware: the board keeps the embedding, final norm, head and sampling; the
// layers run on node boards (board/node.h) wired in the reference design's ring: the master's SPI TX
// to node 1's RX, node 1's TX to node 2, ..., the last node's TX back to the master's RX (one board
// and one node: a pair). Every hidden state goes once around the ring. It is a Decoder, so the
// generation loop (model/generate.h) and the line server drive it as they drive a local model.
// Connecting: one hello per node, its hop count in the frame's pos (node k takes the hello with pos 0
// after k-1 hops), each node's answer comes round with its slice hash, checked against the hash the
// master computes from its own copy of the model; then a reset goes round (every node clears its cache).
// Faults: a corrupt frame or an error frame answering a hidden state makes the master send that
// hidden state again (the node recomputes the same position: its cache rewinds), up to `retries`
// times, so a flipped bit on the wire loses nothing; a node that stays silent fails the step with a
// message saying so.
// Several streams: the pieces below forward() (send_hidden, AwaitedAnswer, route_answer) let a caller
// keep one hidden state per stream in flight on the ring at once, so that while node 2 computes
// stream A node 1 computes stream B (each node keeps a KV cache per stream: board/node.h). No threads
// here: the caller sends, hands every transfer it receives to route_answer / route_corrupt and
// looks at each stream's state (the PC's ring master, cluster/ring_master_host.h, does it with a
// receiving thread; forward() is the one-stream case of the same pieces).
#pragma once
#include "board/frame_link.h"
#include "board/mapped_model.h"
#include "cluster/hidden_codec.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "model/llama_slice.h"

namespace mcullm::board {

struct MasterOptions {
  int ctx_len = 0;  // 0: the model's
  int nodes = 1;    // nodes in the ring; the layers split evenly (earlier nodes take the remainder) or node_ranges
  cluster::HiddenEncoding encoding = cluster::HiddenEncoding::kF32;
  int timeout_ms = 5000;  // the node's answer to a hello, a reset or a hidden state
  int retries = 3;        // re-sends of one hidden state after a corrupt or refused exchange
  // The slice hash each node must report (nodes values, in ring order), for a master whose image does
  // not hold the nodes' layers (a per-node master image: embedding and head only); nullptr: computed
  // from the master's own copy of the layers.
  const uint64_t* node_hashes = nullptr;
  // Each node's layers (nodes values, in ring order, consecutive from 0 to the last layer: e.g. the
  // planner's split the per-node images were cut by); nullptr: the even split above.
  const SliceRange* node_ranges = nullptr;
  int streams = 1;  // streams the caller keeps in flight: connect() refuses a node with fewer stream slots
};

// One stream's hidden state on its way round the ring, as the master waits for it.
struct AwaitedAnswer {
  enum class State : uint8_t { kIdle, kWaiting, kDone, kSendAgain };
  State state = State::kIdle;
  uint32_t stream = 0;
  uint32_t pos = 0;
  cluster::HiddenAssembler answer;
  Status why;  // kSendAgain: what went wrong (kCorrupt)
  // Waits for stream's hidden state at pos, into out[dim].
  void expect(uint32_t stream, uint32_t pos, float* out, uint32_t dim);
};

// One frame the master received, for the answers awaited[n]: a hidden frame of a waiting (stream,
// pos) goes into its vector (kDone once whole; a bad chunk: kSendAgain); an error frame about a
// waiting stream makes it kSendAgain (the node's text in why); one about no waiting stream (a node
// that got a corrupt transfer cannot tell whose it was) makes every waiting answer kSendAgain.
// Anything else (a stale answer, a heartbeat, a reset coming back) changes nothing.
void route_answer(const cluster::Frame& f, AwaitedAnswer* awaited, int n);
// A transfer the master received was corrupt (whose answer it was, nobody knows): every waiting
// answer becomes kSendAgain with `why`.
void route_corrupt(const Status& why, AwaitedAnswer* awaited, int n);

class Master final : public Decoder {
 public:
  // work: the master's part (embedding and head buffers) and a hidden buffer.
  Status init(const LlamaModel* model, FrameLink& link, Arena& work, ThreadPool* pool, const KernelSet* kernels,
              const MasterOptions& opt);
  // The hellos and the reset (above). Errors say which node (by its layers) did what.
  Status connect();
  static constexpr int kMaxNodes = 16;
  Status forward(int token, int pos, const float** logits) override;
  // The hidden state x[dim] of `stream` at `pos`, sent to node 1 (MasterOptions::encoding).
  Status send_hidden(uint32_t stream, int pos, const float* x);
  int timeout_ms() const { return opt_.timeout_ms; }
  int retries() const { return opt_.retries; }
  int vocab_size() const override { return model_->cfg.vocab_size; }
  int ctx_len() const override { return ctx_len_; }
  uint32_t resends() const { return resends_; }
  int nodes() const { return opt_.nodes; }  // the ring's nodes (the image's plan, else MasterOptions::nodes)

 private:
  // Waits for a frame of `type` (stale frames and heartbeats are skipped); kCorrupt for a corrupt
  // transfer or an error frame (its text), kOutOfRange when the node stays silent.
  Status await(cluster::FrameType type, cluster::Frame* out);
  Status exchange(int pos);  // one hidden state there and back

  const LlamaModel* model_ = nullptr;
  FrameLink* link_ = nullptr;
  MasterOptions opt_;
  LlamaSlice local_;  // embedding and head
  SliceRange ranges_[kMaxNodes];
  uint64_t hashes_[kMaxNodes] = {};  // what each node must report at hello
  float* hidden_ = nullptr;
  AwaitedAnswer awaited_;  // forward()'s one stream
  int ctx_len_ = 0;
  uint32_t stream_ = 0;
  uint32_t resends_ = 0;
};

// The master role over a mapped board image (the line server's cluster master and the board runner's
// role=master): the link's buffers and the master's in `work`, the nodes and their hashes from the
// image's nodes' plan when it has one (a per-node master image) and `mo` names none, then connect().
Status start_master(MappedModel& mapped, SpiLink& spi, Arena& work, const MasterOptions& mo, ThreadPool* pool,
                    const KernelSet* kernels, FrameLink* link, Master* master);

}  // namespace mcullm::board
