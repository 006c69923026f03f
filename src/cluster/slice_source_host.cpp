#include "cluster/slice_source_host.h"

#include <cstdlib>

namespace mcullm {

namespace {

class LlamaSliceInstance final : public SliceInstance {
 public:
  LayerSlice& slice() override { return slice_; }
  std::unique_ptr<uint8_t[]> memory;
  Arena arena;
  LlamaSlice slice_;
};

}  // namespace

Status SliceSource::open(const std::string& path, const LoadOptions& opt, std::unique_ptr<SliceSource>* out) {
  auto s = std::unique_ptr<SliceSource>(new SliceSource());
  MC_TRY(load_model(path, opt, &s->lm_));
  if (s->lm_->arch != "llama")
    return Status::Error(Code::kUnsupported, "%s is a %s model: the cluster runs llama-family models", path.c_str(),
                         s->lm_->arch.c_str());
  *out = std::move(s);
  return Status::Ok();
}

uint64_t SliceSource::hash(const SliceRange& r) {
  if (!have_hash_ || r.first != hashed_.first || r.end != hashed_.end || r.master != hashed_.master) {
    hash_ = llama_slice_hash(lm_->model, r);
    hashed_ = r;
    have_hash_ = true;
  }
  return hash_;
}

Status SliceSource::make(const SliceRange& r, int ctx_len, ThreadPool* pool, const KernelSet* kernels,
                         std::unique_ptr<SliceInstance>* out) const {
  MC_TRY(check_slice_range(lm_->model.cfg, r));
  auto inst = std::make_unique<LlamaSliceInstance>();
  const size_t bytes = llama_slice_work_bytes(lm_->model.cfg, r, ctx_len, lm_->kv);
  inst->memory.reset(new uint8_t[bytes]);
  inst->arena.reset(Tier::kHost, inst->memory.get(), bytes);
  MC_TRY(inst->slice_.init(&lm_->model, r, ctx_len, inst->arena, pool, kernels, lm_->kv));
  *out = std::move(inst);
  return Status::Ok();
}

Status parse_layer_range(const std::string& text, const char* what, SliceRange* out) {
  const size_t colon = text.find(':');
  char* e1 = nullptr;
  char* e2 = nullptr;
  if (colon != std::string::npos) {
    const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
    const long first = std::strtol(a.c_str(), &e1, 10), end = std::strtol(b.c_str(), &e2, 10);
    if (!a.empty() && !b.empty() && *e1 == '\0' && *e2 == '\0' && first >= 0 && end > first && end <= 4096) {
      out->first = static_cast<int>(first);
      out->end = static_cast<int>(end);
      out->master = false;
      return Status::Ok();
    }
  }
  return Status::Error(Code::kInvalidArgument, "%s '%s' is not a layer range A:B with 0 <= A < B", what, text.c_str());
}

}  // namespace mcullm
