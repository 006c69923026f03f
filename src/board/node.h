// The cluster node's firmware: one board of the ring (board/master.h). It receives frames
// (cluster/frame.h) from the previous board on its SPI RX and sends downstream on its SPI TX (to the
// next node, or back to the master for the last one); it does not know its place in the ring:
//   hello from the master with pos 0 -> takes the layer range it assigns, sends its own hello (role
//     node, range, ctx_len, slice hash); with pos > 0 -> passes it on with pos - 1
//   hidden (one vector, one or more frames) -> runs its layers at pos, sends the result on
//   reset -> clears its cache and passes the reset on (it comes back to the master when all did)
//   a node's hello, heartbeat, error, ready, ack -> passed on as they are (they are for the master)
//   anything corrupt or out of place -> an error frame saying what; the node keeps serving.
// Streams: the node keeps NodeOptions::max_streams stream slots, each its own KV cache of the
// assigned layers (one LlamaSlice per slot over the same weights, all from the work arena). A hidden
// state of a stream that holds a slot runs on that slot's cache; a new stream must start at pos 0
// and takes a free slot; with none free it is refused with an error frame that says so (a one-slot
// node instead hands its slot over to the new stream, as a one-stream board always did). A reset
// frees the stream's slot (kAllStreams: every slot). The model is the board image's llama-family
// model: a whole image (mapped; only the assigned range's weights are read) serves any range, a
// per-node image (format/board_image.h version 2) the ranges inside the layers it holds; a range
// outside them is refused with an error frame that says which layers the image holds.
#pragma once
#include "board/frame_link.h"
#include "board/mapped_model.h"
#include "cluster/frame.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/llama_slice.h"

namespace mcullm::board {

struct NodeOptions {
  int ctx_len = 0;          // 0: the model's
  int max_layers = 0;       // refuse assignments of more layers (0: no limit)
  int send_timeout_ms = 2000;
  // slice_hash of the layers the model holds, when known (a per-node image records it:
  // BoardImage::slice().hash); 0: computed from the weights.
  uint64_t held_hash = 0;
  int max_streams = 1;  // stream slots (KV caches), 1..kMaxStreamSlots; the hello reports it
};

// A ring of N nodes is full with N hidden states in flight (the reference design: 6 nodes); each
// slot is a LlamaSlice inside the Node (static memory on a board), its KV cache in the work arena.
constexpr int kMaxStreamSlots = 8;

class Node {
 public:
  // work: the KV caches of the assigned range (one per stream slot) and the hidden buffer (the
  // caches are rolled back and made again on every new assignment). The starting range is every layer the model holds.
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
  Status pass_on(const cluster::Frame& f, uint32_t pos);
  // The slot of `stream` at `pos` (a free one for a new stream at pos 0); an error that says why not.
  Status slot_for(uint32_t stream, uint32_t pos, int* slot);

  struct StreamSlot {
    LlamaSlice slice;  // this stream's KV cache of the range
    bool used = false;
    uint32_t stream = 0;
  };

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
  StreamSlot slots_[kMaxStreamSlots];
  int n_slots_ = 1;
  float* hidden_ = nullptr;
  cluster::HiddenAssembler assembler_;
  bool assembling_ = false;
  uint32_t served_ = 0;
  uint32_t errors_sent_ = 0;
};

// The node role from the board image in `partition` (the firmware's node and the board runner's
// role=node): maps and places the image, then the link's buffers, the KV caches of `streams` stream
// slots of ctx_len positions (0: the model's) and the hidden buffer in `work_tier`; a per-node image's recorded slice hash is
// what the node reports at hello. Errors name the step.
Status start_node(Hal& hal, const char* partition, Tier work_tier, int ctx_len, int streams, ThreadPool* pool,
                  const KernelSet* kernels, MappedModel* mapped, FrameLink* link, Node* node);

}  // namespace mcullm::board
