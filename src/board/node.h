// The cluster node's firmware (docs/cluster.md's node, on a board): it answers the master over the
// HAL's SPI link (board/frame_link.h) with the frames of cluster/frame.h, as `mcullm node` does:
//   hello (role master, the layer range it assigns) -> hello (role node, range, ctx_len, slice hash)
//   reset -> ready;   heartbeat -> heartbeat
//   hidden (one vector, one or more frames) -> runs its layers at pos, answers hidden in the same encoding
//   anything corrupt or out of place -> an error frame saying what; the node keeps serving.
// A board keeps one stream (one KV cache): a hidden state of another stream must start at pos 0
// (it then takes the cache over), else it is refused. The model is the board image's llama model
// (the whole model is mapped; only the assigned range's weights are read).
#pragma once
#include "board/frame_link.h"
#include "cluster/frame.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/llama_slice.h"

namespace mcullm::board {

struct NodeOptions {
  int ctx_len = 0;          // 0: the model's
  int max_layers = 0;       // refuse assignments of more layers (0: no limit)
  int send_timeout_ms = 2000;
};

class Node {
 public:
  // work: the KV cache of the assigned range and the hidden buffer (marked here, rolled back on
  // every new assignment). The starting range is every layer.
  Status init(const LlamaModel* model, FrameLink& link, Arena& work, ThreadPool* pool, const KernelSet* kernels,
              const NodeOptions& opt);
  // Waits at most timeout_ms for one transfer and answers it. Errors only for a link that failed
  // (a send that timed out): the caller decides whether to go on.
  Status poll(int timeout_ms);
  const SliceRange& range() const { return range_; }
  uint32_t hidden_served() const { return served_; }  // hidden states computed and answered
  uint32_t errors_sent() const { return errors_sent_; }

 private:
  Status assign(const SliceRange& r, int ctx_len);
  Status on_frame(const cluster::Frame& f);
  Status on_hidden(const cluster::Frame& f);
  Status on_hello(const cluster::Frame& f);
  Status reply_error(const cluster::FrameHeader& about, const Status& why);

  const LlamaModel* model_ = nullptr;
  FrameLink* link_ = nullptr;
  Arena* work_ = nullptr;
  Arena::Mark base_{};
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  NodeOptions opt_;
  SliceRange range_;
  int ctx_len_ = 0;
  uint64_t hash_ = 0;
  LlamaSlice slice_;
  float* hidden_ = nullptr;
  cluster::HiddenAssembler assembler_;
  bool assembling_ = false;
  bool have_stream_ = false;
  uint32_t stream_ = 0;
  uint32_t served_ = 0;
  uint32_t errors_sent_ = 0;
};

}  // namespace mcullm::board
