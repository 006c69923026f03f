// The cluster master of a ring on a PC (`mcullm cluster --topology ring`): the board's master logic
// (board::Master, the code the firmware runs) over a TransportSpiLink (board/transport_spi_link_host.h)
// whose TX goes to node 1 and whose RX comes from the last node. It is a Decoder, so the same
// generate() loop as `mcullm run` drives it, with the same fingerprint.
//
// Faults: a ring has one way back to the master, so when a node dies or stops the master only sees
// the ring go quiet or its link close: it cannot tell which node it was (the star can). With a
// `rewire` callback (`--local`: start a fresh ring of processes) a failed step rebuilds the whole
// ring, connects again (hellos: every slice checked by hash; reset), replays every position of the
// story so far so that the new nodes rebuild their KV caches (the master keeps the tokens), and
// computes the failed position again: the output is that of an unbroken run.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "board/master.h"
#include "board/transport_spi_link_host.h"
#include "cluster/transport.h"

namespace mcullm::cluster {

struct RingOptions {
  board::MasterOptions master;      // encoding, timeout_ms, retries, ctx_len; nodes and node_ranges from `ranges`
  std::vector<SliceRange> ranges;   // each node's layers, in ring order
  int max_rebuilds = 4;             // rebuilds of the ring in one run before giving up
  // Wires a ring (again): *to_first carries frames to node 1, *from_last brings the last node's. The
  // first call builds the ring; later ones (after a failure, only with `rebuild` set) replace it.
  std::function<Status(std::unique_ptr<Transport>* to_first, std::unique_ptr<Transport>* from_last)> wire;
  bool rebuild = false;                        // call wire() again after a failure
  std::function<void(const std::string&)> log;  // what happened, for a person (faults, rebuilds)
};

class RingMaster final : public Decoder {
 public:
  RingMaster(const LlamaModel* model, ThreadPool* pool, const KernelSet* kernels, RingOptions opt);
  ~RingMaster();
  // Wires the ring and connects (hellos checked by slice hash, reset).
  Status start();
  Status forward(int token, int pos, const float** logits) override;
  int vocab_size() const override { return model_->cfg.vocab_size; }
  int ctx_len() const override;
  int rebuilds() const { return rebuilds_; }
  uint32_t resends() const;  // hidden states sent again after a corrupt frame (over every ring built)
  std::string plan_text() const;

 private:
  struct Wired;                         // one ring's link, frame link, arena and board::Master
  Status build();  // wire + init + connect

  const LlamaModel* model_;
  ThreadPool* pool_;
  const KernelSet* kernels_;
  RingOptions opt_;
  std::unique_ptr<Wired> ring_;
  std::vector<int> history_;  // the token fed at each position so far: replayed into a rebuilt ring
  int rebuilds_ = 0;
  uint32_t old_resends_ = 0;
};

}  // namespace mcullm::cluster
