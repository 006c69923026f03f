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
  node_range_ = SliceRange{0, model->cfg.n_layers, false};
  return Status::Ok();
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
  Hello h = slice_hello(NodeRole::kMaster, model_->cfg, node_range_, ctx_len_);
  uint8_t buf[kHelloBytes];
  size_t len = 0;
  MC_TRY(encode_hello(h, buf, sizeof buf, &len));
  MC_TRY(link_->send(FrameType::kHello, 0, 0, buf, len, opt_.timeout_ms));
  Frame f;
  if (Status st = await(FrameType::kHello, &f); !st.ok()) return st.prefix("connecting to the node: ");
  Hello in;
  MC_TRY(decode_hello(f.payload, f.header.payload_len, &in));
  if (in.role != NodeRole::kNode || static_cast<int>(in.first_layer) != node_range_.first ||
      static_cast<int>(in.end_layer) != node_range_.end)
    return Status::Error(Code::kCorrupt, "the node answered for layers %u:%u, not %d:%d", static_cast<unsigned>(in.first_layer),
                         static_cast<unsigned>(in.end_layer),
                         node_range_.first, node_range_.end);
  const uint64_t want = llama_slice_hash(*model_, node_range_);
  if (in.slice_hash != want)
    return Status::Error(Code::kCorrupt, "the node's layers %d:%d are other weights than the master's (slice hash %08lx%08lx, expected %08lx%08lx)",
                         node_range_.first, node_range_.end, static_cast<unsigned long>(in.slice_hash >> 32),
                         static_cast<unsigned long>(in.slice_hash & 0xffffffffu), static_cast<unsigned long>(want >> 32),
                         static_cast<unsigned long>(want & 0xffffffffu));
  MC_TRY(link_->send(FrameType::kReset, kAllStreams, 0, nullptr, 0, opt_.timeout_ms));
  return await(FrameType::kReady, &f);
}

Status Master::exchange(int pos) {
  const uint32_t dim = static_cast<uint32_t>(model_->cfg.dim);
  MC_TRY(link_->send_hidden(opt_.encoding, stream_, static_cast<uint32_t>(pos), hidden_, dim, opt_.timeout_ms));
  HiddenAssembler as;
  as.start(hidden_, dim);
  while (!as.complete()) {
    Frame f;
    MC_TRY(await(FrameType::kHidden, &f));
    if (f.header.stream != stream_ || f.header.pos != static_cast<uint32_t>(pos)) continue;  // stale
    if (Status st = as.add(f); !st.ok()) return Status::Error(Code::kCorrupt, "the node's hidden state: %s", st.message());
  }
  return Status::Ok();
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

}  // namespace mcullm::board
