#include "board/master.h"

#include "cluster/slice_hello.h"

namespace mcullm::board {

using namespace cluster;

Status Master::init(const LlamaModel* model, FrameLink& link, Arena& work, ThreadPool* pool, const KernelSet* kernels,
                    const MasterOptions& opt) {
  model_ = model;
  link_ = &link;
  opt_ = opt;
  if (opt.ctx_len < 0 || opt.ctx_len > model->cfg.seq_len)
    return Status::Error(Code::kInvalidArgument, "context %d is not in 1..%d (the model's)", opt.ctx_len, model->cfg.seq_len);
  ctx_len_ = opt.ctx_len > 0 ? opt.ctx_len : model->cfg.seq_len;
  MC_TRY(local_.init(model, SliceRange{0, 0, true}, ctx_len_, work, pool, kernels));
  MC_TRY(work.alloc_array(static_cast<size_t>(model->cfg.dim), TensorClass::kActivations, &hidden_));
  if (opt.streams < 1) return Status::Error(Code::kInvalidArgument, "%d streams asked (1 or more)", opt.streams);
  const int n = model->cfg.n_layers;
  if (opt.nodes < 1 || opt.nodes > kMaxNodes || opt.nodes > n)
    return Status::Error(Code::kInvalidArgument, "%d nodes for %d layers (1..%d nodes, at most one per layer)", opt.nodes, n,
                         kMaxNodes);
  for (int k = 0, first = 0; k < opt.nodes; ++k) {  // as even as possible, earlier nodes take the remainder
    const int count = n / opt.nodes + (k < n % opt.nodes ? 1 : 0);
    ranges_[k] = opt.node_ranges ? opt.node_ranges[k] : SliceRange{first, first + count, false};
    first += count;
  }
  MC_TRY(check_layer_split(ranges_, opt.nodes, n, Code::kInvalidArgument));
  for (int k = 0; k < opt.nodes; ++k) {
    const bool held = ranges_[k].first >= model->first_layer && ranges_[k].end <= model->end();
    if (opt.node_hashes) hashes_[k] = opt.node_hashes[k];
    else if (held) hashes_[k] = slice_hash(*model, ranges_[k]);
    else
      return Status::Error(Code::kInvalidArgument,
                           "the master's image holds layers %d:%d, not node %d's %d:%d: give the nodes' slice hashes (their images')",
                           model->first_layer, model->end(), k + 1, ranges_[k].first, ranges_[k].end);
  }
  return Status::Ok();
}

void AwaitedAnswer::expect(uint32_t s, uint32_t p, float* out, uint32_t dim) {
  state = State::kWaiting;
  stream = s;
  pos = p;
  answer.start(out, dim);
  why = Status::Ok();
}

void route_corrupt(const Status& why, AwaitedAnswer* awaited, int n) {
  for (int k = 0; k < n; ++k)
    if (awaited[k].state == AwaitedAnswer::State::kWaiting) {
      awaited[k].state = AwaitedAnswer::State::kSendAgain;
      awaited[k].why = why;
    }
}

void route_answer(const Frame& f, AwaitedAnswer* awaited, int n) {
  const FrameHeader& h = f.header;
  if (h.type != FrameType::kHidden && h.type != FrameType::kError) return;
  AwaitedAnswer* a = nullptr;
  for (int k = 0; k < n && !a; ++k)
    if (awaited[k].state == AwaitedAnswer::State::kWaiting && awaited[k].stream == h.stream) a = &awaited[k];
  if (h.type == FrameType::kError) {
    Status remote;
    Status why = decode_error(f.payload, h.payload_len, &remote);
    if (why.ok()) why = Status::Error(Code::kCorrupt, "the node reports: %s", remote.message());
    else why = Status::Error(Code::kCorrupt, "%s", why.message());
    if (a) {
      a->state = AwaitedAnswer::State::kSendAgain;
      a->why = why;
    } else {
      route_corrupt(why, awaited, n);
    }
    return;
  }
  if (!a || h.pos != a->pos) return;  // stale: an answer to an exchange given up or sent again
  if (Status st = a->answer.add(f); !st.ok()) {
    a->state = AwaitedAnswer::State::kSendAgain;
    a->why = Status::Error(Code::kCorrupt, "the node's hidden state: %s", st.message());
  } else if (a->answer.complete()) {
    a->state = AwaitedAnswer::State::kDone;
  }
}

Status Master::await(FrameType type, Frame* out) {
  int waited = 0;
  const int step = 50;
  while (waited < opt_.timeout_ms) {
    bool got = false;
    MC_TRY(link_->receive(out, &got, step));
    if (!got) {
      waited += step;
      continue;
    }
    if (out->header.type == FrameType::kError) {
      Status remote;
      if (Status st = decode_error(out->payload, out->header.payload_len, &remote); !st.ok()) return st;
      return Status::Error(Code::kCorrupt, "the node reports: %s", remote.message());
    }
    if (out->header.type == type) return Status::Ok();
    // a heartbeat or a late answer to an earlier exchange: not what we wait for
  }
  return Status::Error(Code::kOutOfRange, "the node did not answer within %d ms (waiting for %s)", opt_.timeout_ms,
                       frame_type_name(type));
}

Status Master::connect() {
  uint8_t buf[kHelloBytes];
  size_t len = 0;
  for (int k = 0; k < opt_.nodes; ++k) {  // node k + 1 takes the hello that has k hops left
    MC_TRY(encode_hello(slice_hello(NodeRole::kMaster, model_->cfg, ranges_[k], ctx_len_), buf, sizeof buf, &len));
    MC_TRY(link_->send(FrameType::kHello, 0, static_cast<uint32_t>(k), buf, len, opt_.timeout_ms));
  }
  bool answered[kMaxNodes] = {};
  for (int got = 0; got < opt_.nodes; ++got) {
    Frame f;
    if (Status st = await(FrameType::kHello, &f); !st.ok()) return st.prefix("connecting to the nodes (%d of %d answered): ", got, opt_.nodes);
    Hello in;
    MC_TRY(decode_hello(f.payload, f.header.payload_len, &in));
    int k = 0;
    while (k < opt_.nodes && !(static_cast<int>(in.first_layer) == ranges_[k].first && static_cast<int>(in.end_layer) == ranges_[k].end)) ++k;
    if (in.role != NodeRole::kNode || k == opt_.nodes || answered[k])
      return Status::Error(Code::kCorrupt, "a node answered for layers %u:%u, which no node was given (or twice)",
                           static_cast<unsigned>(in.first_layer), static_cast<unsigned>(in.end_layer));
    answered[k] = true;
    if (static_cast<int64_t>(in.max_streams) < opt_.streams)
      return Status::Error(Code::kInvalidArgument, "node %d (layers %d:%d) keeps %u stream%s, %d streams asked (give it more stream slots)",
                           k + 1, ranges_[k].first, ranges_[k].end, static_cast<unsigned>(in.max_streams),
                           in.max_streams == 1 ? "" : "s", opt_.streams);
    const uint64_t want = hashes_[k];
    if (in.slice_hash != want)
      return Status::Error(Code::kCorrupt, "node %d's layers %d:%d are other weights than the master's (slice hash %08lx%08lx, expected %08lx%08lx)",
                           k + 1, ranges_[k].first, ranges_[k].end, static_cast<unsigned long>(in.slice_hash >> 32),
                           static_cast<unsigned long>(in.slice_hash & 0xffffffffu), static_cast<unsigned long>(want >> 32),
                           static_cast<unsigned long>(want & 0xffffffffu));
  }
  MC_TRY(link_->send(FrameType::kReset, kAllStreams, 0, nullptr, 0, opt_.timeout_ms));
  Frame f;
  return await(FrameType::kReset, &f);  // back round the ring: every node has cleared its cache
}

Status Master::send_hidden(uint32_t stream, int pos, const float* x) {
  return link_->send_hidden(opt_.encoding, stream, static_cast<uint32_t>(pos), x, static_cast<uint32_t>(model_->cfg.dim), opt_.timeout_ms);
}

Status Master::exchange(int pos) {
  awaited_.expect(stream_, static_cast<uint32_t>(pos), hidden_, static_cast<uint32_t>(model_->cfg.dim));
  MC_TRY(send_hidden(stream_, pos, hidden_));
  const int step = 50;
  for (int waited = 0; awaited_.state == AwaitedAnswer::State::kWaiting;) {
    if (waited >= opt_.timeout_ms)
      return Status::Error(Code::kOutOfRange, "the node did not answer within %d ms (waiting for hidden)", opt_.timeout_ms);
    Frame f;
    bool got = false;
    if (Status st = link_->receive(&f, &got, step); !st.ok()) {
      if (st.code() != Code::kCorrupt) return st;
      route_corrupt(st, &awaited_, 1);
    } else if (got) {
      route_answer(f, &awaited_, 1);
    } else {
      waited += step;
    }
  }
  return awaited_.state == AwaitedAnswer::State::kDone ? Status::Ok() : awaited_.why;
}

Status Master::forward(int token, int pos, const float** logits) {
  if (pos < 0 || pos >= ctx_len_) return Status::Error(Code::kOutOfRange, "position %d is outside the context of %d", pos, ctx_len_);
  Status last;
  for (int attempt = 0; attempt <= opt_.retries; ++attempt) {
    MC_TRY(local_.embed(token, hidden_));  // again on a retry: the last attempt may have half-overwritten it
    last = exchange(pos);
    if (last.ok()) return local_.head(hidden_, logits);
    if (last.code() != Code::kCorrupt) break;
    ++resends_;
  }
  return last.prefix("token at pos %d: ", pos);
}

Status start_master(MappedModel& mapped, SpiLink& spi, Arena& work, const MasterOptions& mo, ThreadPool* pool,
                    const KernelSet* kernels, FrameLink* link, Master* master) {
  const LlamaModel* llama = nullptr;
  MC_TRY(mapped.llama(&llama));
  MasterOptions o = mo;
  const BoardModel& bm = mapped.model();
  if (bm.plan_nodes > 0 && !o.node_ranges) {  // a master's per-node image: its nodes and their hashes
    o.nodes = bm.plan_nodes;
    o.node_ranges = bm.plan_ranges;
    o.node_hashes = bm.plan_hashes;
  }
  MC_TRY(link->init(spi, work));
  MC_TRY(master->init(llama, *link, work, pool, kernels, o));
  return master->connect();
}

}  // namespace mcullm::board
