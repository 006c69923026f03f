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
};

class Master final : public Decoder {
 public:
  // work: the master's part (embedding and head buffers) and a hidden buffer.
  Status init(const LlamaModel* model, FrameLink& link, Arena& work, ThreadPool* pool, const KernelSet* kernels,
              const MasterOptions& opt);
  // The hellos and the reset (above). Errors say which node (by its layers) did what.
  Status connect();
  static constexpr int kMaxNodes = 16;
  Status forward(int token, int pos, const float** logits) override;
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
