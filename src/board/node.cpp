#include "board/node.h"

#include "cluster/slice_hello.h"

namespace mcullm::board {

using namespace cluster;

Status Node::init(const LlamaModel* model, FrameLink& link, Arena& work, ThreadPool* pool, const KernelSet* kernels,
                  const NodeOptions& opt) {
  model_ = model;
  link_ = &link;
  work_ = &work;
  pool_ = pool;
  kernels_ = kernels;
  opt_ = opt;
  if (opt.max_streams < 1 || opt.max_streams > kMaxStreamSlots)
    return Status::Error(Code::kInvalidArgument, "%d stream slots asked, a node keeps 1..%d", opt.max_streams, kMaxStreamSlots);
  n_slots_ = opt.max_streams;
  MC_TRY(work.alloc_array(static_cast<size_t>(model->cfg.dim), TensorClass::kActivations, &hidden_));
  base_ = work.mark();
  if (model->end() <= model->first_layer)
    return Status::Error(Code::kInvalidArgument, "the node's image holds no layers (a cluster master's image?)");
  return assign(SliceRange{model->first_layer, model->end(), false}, opt.ctx_len);
}

Status Node::assign(const SliceRange& r, int ctx_len) {
  MC_TRY(check_slice_range(model_->cfg, r));
  if (r.master) return Status::Error(Code::kInvalidArgument, "a node does not hold the embedding and head");
  if (r.first < model_->first_layer || r.end > model_->end())
    return Status::Error(Code::kOutOfRange, "layers %d:%d asked for, this node's image holds layers %d:%d of %d (flash the image of that slice)",
                         r.first, r.end, model_->first_layer, model_->end(), model_->cfg.n_layers);
  if (opt_.max_layers > 0 && r.end - r.first > opt_.max_layers)
    return Status::Error(Code::kOutOfRange, "layers %d:%d are %d layers, this node holds at most %d", r.first, r.end, r.end - r.first,
                         opt_.max_layers);
  if (ctx_len < 0 || ctx_len > model_->cfg.seq_len)
    return Status::Error(Code::kOutOfRange, "context %d is longer than the model's %d", ctx_len, model_->cfg.seq_len);
  work_->rollback(base_);
  for (int k = 0; k < n_slots_; ++k) {
    slots_[k].used = false;
    if (Status st = slots_[k].slice.init(model_, r, ctx_len, *work_, pool_, kernels_); !st.ok()) {
      if (n_slots_ == 1) return st;
      return st.prefix("%d stream slots of layers %d:%d (context %d) asked, the work arena holds %d: ", n_slots_, r.first, r.end,
                       ctx_len > 0 ? ctx_len : model_->cfg.seq_len, k);
    }
  }
  range_ = r;
  ctx_len_ = ctx_len;
  const bool held = r.first == model_->first_layer && r.end == model_->end();
  hash_ = held && opt_.held_hash ? opt_.held_hash : slice_hash(*model_, r);
  assembling_ = false;
  return Status::Ok();
}

Status Node::reply_error(const FrameHeader& about, const Status& why) {
  ++errors_sent_;
  return link_->send_error(why, about.stream, about.pos, opt_.send_timeout_ms);
}

Status Node::on_hello(const Frame& f) {
  const FrameHeader& h = f.header;
  Hello in;
  if (Status st = decode_hello(f.payload, h.payload_len, &in); !st.ok()) return reply_error(h, st);
  if (in.role != NodeRole::kMaster) return pass_on(f, h.pos);  // an upstream node's answer, for the master
  if (h.pos > 0) return pass_on(f, h.pos - 1);                  // for a node further down the ring
  const LlamaConfig& c = model_->cfg;
  if (static_cast<int>(in.n_layers) != c.n_layers || static_cast<int>(in.dim) != c.dim)
    return reply_error(h, Status::Error(Code::kInvalidArgument, "the master's model has %u layers of width %u, this node's %d of %d",
                                        static_cast<unsigned>(in.n_layers), static_cast<unsigned>(in.dim), c.n_layers, c.dim));
  const SliceRange want{static_cast<int>(in.first_layer), static_cast<int>(in.end_layer), false};
  const int ctx = in.ctx_len > 0 ? static_cast<int>(in.ctx_len) : ctx_len_;
  if (want.first != range_.first || want.end != range_.end || ctx != ctx_len_)
    if (Status st = assign(want, ctx); !st.ok()) return reply_error(h, st);
  Hello out = slice_hello(NodeRole::kNode, c, range_, ctx_len_);
  out.max_streams = static_cast<uint32_t>(n_slots_);
  out.slice_hash = hash_;
  uint8_t buf[kHelloBytes];
  size_t len = 0;
  MC_TRY(encode_hello(out, buf, sizeof buf, &len));
  return link_->send(FrameType::kHello, 0, 0, buf, len, opt_.send_timeout_ms);
}

Status Node::on_hidden(const Frame& f) {
  const uint32_t dim = static_cast<uint32_t>(model_->cfg.dim);
  if (!assembling_) {
    assembler_.start(hidden_, dim);
    assembling_ = true;
  }
  if (Status st = assembler_.add(f); !st.ok()) {
    assembling_ = false;
    return reply_error(f.header, st);
  }
  if (!assembler_.complete()) return Status::Ok();
  assembling_ = false;
  const uint32_t stream = assembler_.stream(), pos = assembler_.pos();
  int slot = 0;
  if (Status st = slot_for(stream, pos, &slot); !st.ok()) return reply_error(f.header, st);
  if (Status st = slots_[slot].slice.run_layers(hidden_, static_cast<int>(pos)); !st.ok()) return reply_error(f.header, st);
  ++served_;  // before the answer goes out: once the master has it, the count is final
  return link_->send_hidden(assembler_.encoding(), stream, pos, hidden_, dim, opt_.send_timeout_ms);
}

Status Node::slot_for(uint32_t stream, uint32_t pos, int* slot) {
  int free_slot = -1;
  for (int k = 0; k < n_slots_; ++k) {
    if (slots_[k].used && slots_[k].stream == stream) {
      *slot = k;
      return Status::Ok();
    }
    if (!slots_[k].used && free_slot < 0) free_slot = k;
  }
  if (pos != 0)
    return Status::Error(Code::kOutOfRange, "stream %u at pos %u: this node keeps no cache of it (a new stream starts at pos 0)",
                         static_cast<unsigned>(stream), static_cast<unsigned>(pos));
  if (free_slot < 0 && n_slots_ == 1) free_slot = 0;  // a one-stream board: the new stream takes the cache over
  if (free_slot < 0)
    return Status::Error(Code::kOutOfRange, "stream %u at pos 0: all %d stream slots are in use (reset one)", static_cast<unsigned>(stream),
                         n_slots_);
  slots_[free_slot].used = true;
  slots_[free_slot].stream = stream;
  *slot = free_slot;
  return Status::Ok();
}

Status Node::pass_on(const Frame& f, uint32_t pos) {
  return link_->send(f.header.type, f.header.stream, pos, f.payload, f.header.payload_len, opt_.send_timeout_ms);
}

Status Node::on_frame(const Frame& f) {
  const FrameHeader& h = f.header;
  switch (h.type) {
    case FrameType::kHidden:
      return on_hidden(f);
    case FrameType::kReset:
      for (int k = 0; k < n_slots_; ++k)
        if (h.stream == kAllStreams || slots_[k].stream == h.stream) slots_[k].used = false;
      return pass_on(f, h.pos);
    case FrameType::kHello:
      return on_hello(f);
    case FrameType::kHeartbeat:
    case FrameType::kReady:
    case FrameType::kAck:
    case FrameType::kError:
      return pass_on(f, h.pos);
  }
  return reply_error(h, Status::Error(Code::kInvalidArgument, "unexpected frame type %u", static_cast<unsigned>(h.type)));
}

Status Node::poll(int timeout_ms) {
  Frame f;
  bool got = false;
  const Status st = link_->receive(&f, &got, timeout_ms);
  if (!st.ok()) {
    if (st.code() != Code::kCorrupt) return st;
    assembling_ = false;  // tell the master; it decides what a lost frame means
    FrameHeader whose;
    whose.stream = kAllStreams;  // a corrupt transfer's stream is unknown: any in flight may have lost it
    return reply_error(whose, Status::Error(Code::kCorrupt, "node received a corrupt frame: %s", st.message()));
  }
  if (!got) return Status::Ok();
  return on_frame(f);
}

Status start_node(Hal& hal, const char* partition, Tier work_tier, int ctx_len, int streams, ThreadPool* pool,
                  const KernelSet* kernels, MappedModel* mapped, FrameLink* link, Node* node) {
  MC_TRY(mapped->init(hal, partition));
  const LlamaModel* llama = nullptr;
  MC_TRY(mapped->llama(&llama));
  Arena& work = mapped->arena(work_tier);
  MC_TRY(link->init(hal.spi(), work));
  NodeOptions no;
  no.ctx_len = ctx_len;
  no.max_streams = streams;
  no.held_hash = mapped->image().slice().hash;  // a per-node image's; 0 (whole image): hashed
  return node->init(llama, *link, work, pool, kernels, no);
}

}  // namespace mcullm::board
