#include "cluster/slice_source_host.h"

#include <cstdlib>
#include <vector>

#include "format/gguf.h"
#include "load/layer_slice_loader_host.h"
#include "load/mapped_file_host.h"

namespace mcullm {

namespace {

class LlamaSliceInstance final : public SliceInstance {
 public:
  LayerSlice& slice() override { return slice_; }
  std::unique_ptr<uint8_t[]> memory;
  Arena arena;
  LlamaSlice slice_;
};

// A qwen2 slice: the part's table (pointing into the whole model) and one stream over it.
class Qwen2SliceInstance final : public SliceInstance {
 public:
  LayerSlice& slice() override { return stream->slice(); }
  SliceWeights part;
  std::unique_ptr<SliceStream> stream;
};

}  // namespace

Qwen2Model SliceSource::qwen2_part(const SliceRange& r) const {
  Qwen2Model m = lm_->model;
  m.first_layer = r.first;
  m.end_layer = r.end;
  m.layers = lm_->model.layers + r.first;
  m.has_embedding = r.master;
  m.has_head = r.master;
  return m;
}

Status SliceSource::open(const std::string& path, const LoadOptions& opt, std::unique_ptr<SliceSource>* out) {
  auto s = std::unique_ptr<SliceSource>(new SliceSource());
  MC_TRY(load_model(path, opt, &s->lm_));
  if (s->lm_->arch->slices == ArchSlices::kNone)
    return Status::Error(Code::kUnsupported, "%s is a %s model: the cluster runs llama and qwen2 models", path.c_str(),
                         s->lm_->arch_name());
  *out = std::move(s);
  return Status::Ok();
}

namespace {

// general.architecture of a GGUF file ("" for anything else, e.g. a llama2.c file).
std::string gguf_arch(const std::string& path) {
  MappedFile f;
  if (!f.open(path).ok()) return "";
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile g;
  GgufStr arch;
  if (!g.open(f.data(), f.size(), arena).ok() || !g.get_string("general.architecture", &arch).ok()) return "";
  return std::string(arch.data, arch.size);
}

}  // namespace

Status SliceSource::open_node(const std::string& path, const LoadOptions& opt, const SliceRange& first,
                              std::unique_ptr<SliceSource>* out) {
  const ArchInfo* arch = arch_info_by_gguf(gguf_arch(path).c_str());
  if (!arch || arch->slices != ArchSlices::kRanges) return open(path, opt, out);
  auto s = std::unique_ptr<SliceSource>(new SliceSource());
  s->path_ = path;
  s->kv_ = opt.kv;
  MC_TRY(load_slice_weights(path, first.first, first.end, first.master, first.master, &s->part_));
  *out = std::move(s);
  return Status::Ok();
}

Status SliceSource::hold(const SliceRange& r) {
  if (!part_) return Status::Ok();
  const Qwen2Model& m = part_->model;
  if (m.first_layer == r.first && m.end_layer == r.end && m.has_embedding == r.master) return Status::Ok();
  MC_TRY(check_slice_range(config(), r));
  std::unique_ptr<SliceWeights> w;
  MC_TRY(load_slice_weights(path_, r.first, r.end, r.master, r.master, &w));
  part_ = std::move(w);
  hashes_.clear();
  return Status::Ok();
}

uint64_t SliceSource::hash(const SliceRange& r) {
  const auto key = r.master ? std::make_pair(-1, -1) : std::make_pair(r.first, r.end);
  auto it = hashes_.find(key);
  if (it == hashes_.end())
    it = hashes_.emplace(key, part_ ? part_->hash : slice_hash(lm_->model, r)).first;
  return it->second;
}

Status SliceSource::make(const SliceRange& r, int ctx_len, ThreadPool* pool, const KernelSet* kernels,
                         std::unique_ptr<SliceInstance>* out) const {
  MC_TRY(check_slice_range(config(), r));
  if (qwen2()) {
    auto q = std::make_unique<Qwen2SliceInstance>();
    SliceOptions so;
    so.ctx_len = ctx_len;
    so.kv = part_ ? kv_ : lm_->kv;
    if (part_) {  // the held range (hold() first)
      const Qwen2Model& m = part_->model;
      if (m.first_layer != r.first || m.end_layer != r.end || m.has_embedding != r.master)
        return Status::Error(Code::kInvalidArgument, "layers %d:%d are not the range this node holds (%d:%d)", r.first, r.end,
                             m.first_layer, m.end_layer);
      MC_TRY(make_slice_stream(*part_, so, pool, kernels, &q->stream));
    } else {
      q->part.model = qwen2_part(r);
      MC_TRY(make_slice_stream(q->part, so, pool, kernels, &q->stream));
    }
    *out = std::move(q);
    return Status::Ok();
  }
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
