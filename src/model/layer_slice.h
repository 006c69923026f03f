// A model cut by layers, as the cluster runs it (DESIGN.md, issue 6): the master embeds the token
// and computes the final norm, head and sampling; each node runs one contiguous range of layers on
// the hidden state (the residual stream) and keeps only those layers' weights and KV cache.
// embed(), then run_layers() of every range in order, then head() give the logits of
// Decoder::forward bit for bit. One slice object holds one sequence's cache: a node serving several
// streams makes one per stream over the same weights.
#pragma once
#include "mcullm/status.h"

namespace mcullm {

class LayerSlice {
 public:
  virtual int dim() const = 0;
  virtual int vocab_size() const = 0;
  virtual int ctx_len() const = 0;
  virtual int n_layers() const = 0;     // of the whole model
  virtual int first_layer() const = 0;  // this slice runs layers [first_layer(), end_layer())
  virtual int end_layer() const = 0;
  virtual bool has_embedding() const = 0;
  virtual bool has_head() const = 0;
  // hidden[dim()] = the residual stream entering layer 0 for `token`.
  virtual Status embed(int token, float* hidden) = 0;
  // Runs this slice's layers at `pos` on hidden[dim()] in place; positions come in order from 0,
  // and a smaller pos rewinds this slice's cache (as Decoder::forward does).
  virtual Status run_layers(float* hidden, int pos) = 0;
  // Final norm and output head on hidden[dim()]: *logits holds vocab_size() values until the next call.
  virtual Status head(const float* hidden, const float** logits) = 0;

 protected:
  ~LayerSlice() = default;  // see Decoder: no virtual destructor in the freestanding core
};

}  // namespace mcullm
