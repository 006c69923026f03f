#include "cluster/slice_hello.h"

namespace mcullm {

cluster::Hello slice_hello(cluster::NodeRole role, const LlamaConfig& c, const SliceRange& r, int ctx_len) {
  cluster::Hello h;
  h.role = role;
  h.first_layer = static_cast<uint32_t>(r.first);
  h.end_layer = static_cast<uint32_t>(r.end);
  h.n_layers = static_cast<uint32_t>(c.n_layers);
  h.dim = static_cast<uint32_t>(c.dim);
  h.ctx_len = static_cast<uint32_t>(ctx_len > 0 ? ctx_len : c.seq_len);
  h.capabilities = cluster::kAllCapabilities;
  return h;
}

}  // namespace mcullm
