// The single board's firmware: the board image mapped from the model partition, its SRAM / PSRAM
// sections placed in the tiers' arenas (the placement the image carries: `mcullm convert --image`'s
// budgets, the planner's rule), and the line protocol (docs/protocol.md) answered on the serial
// stream, byte for byte as `mcullm serve --serial` answers (board/line_codec.h is shared; only the
// times differ: the board's come from its cycle counter). Written against the HAL only (board/hal.h).
#pragma once
#include "board/frame_link.h"
#include "board/hal.h"
#include "board/line_codec.h"
#include "board/mapped_model.h"
#include "board/master.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/sampler.h"

namespace mcullm::board {

struct LineServerOptions {
  const char* partition = "model";   // the partition holding the board image
  int ctx_len = 0;                   // 0: the model's
  Tier work_tier = Tier::kSram;      // KV cache, activations, sampler scratch: kSram or kPsram
  // Batched prefill (single board): up to this many prompt tokens a call, each weight matrix read
  // once for them, buffers from the work tier (BoardDecoder::enable_batch); 0 or 1: one at a time.
  int prefill_batch = 0;
  // A ReLU model's FFN gate first (model/sparse_ffn.h, the same bits as dense) for tokens with at
  // most this many live neurons per mille; 0: dense. Single board only. The down product reads the
  // image's rows (only the up rows of dead neurons are skipped), or with sparse_ffn_down_columns the
  // live columns of copies built in PSRAM at init (the down matrices' size again).
  int sparse_ffn_max_live = 0;
  bool sparse_ffn_down_columns = false;
  const KernelSet* kernels = nullptr;
  ThreadPool* pool = nullptr;        // e.g. a DualCorePool over the HAL's worker (board/dual_core_pool.h)
  // The cluster master role: the layers run on a node board over the HAL's SPI link (board/master.h);
  // init() connects to it. Otherwise the board runs the whole model.
  bool cluster_master = false;
  MasterOptions master;
};

class LineServer {
 public:
  // Maps and validates the image, places its sections, builds the model, its decoder (KV cache of
  // ctx_len positions) and the buffers of one request. Errors name the step and the tier that did
  // not fit.
  Status init(Hal& hal, const LineServerOptions& opt);
  // Answers lines until the serial stream closes (Ok) or stop_after_ms of silence (< 0: never).
  Status serve(int stop_after_ms = -1);
  // Feeds bytes as if read from the serial stream (serve() calls it); false when the output is gone.
  bool feed(const uint8_t* bytes, size_t n);

  MappedModel& mapped() { return mapped_; }
  const Master* master() const { return opt_.cluster_master ? &master_ : nullptr; }
  int ctx_len() const { return ctx_len_; }
  // Prompt tokens the decoder takes a call (LineServerOptions::prefill_batch, 1 where not batched).
  int max_batch() const { return decoder_ ? decoder_->max_batch() : 0; }
  uint32_t requests() const { return requests_; }
  // The FFN's live and skipped neuron counts so far (false: the model's FFN counts nothing).
  bool ffn_counts(FfnCounts* c) const { return decoder_ && decoder_->ffn_counts(c); }

 private:
  bool write(const char* s, size_t n);
  // Runs one G command and writes P, T..., E (or one X); with `pieces` (an S command) U lines instead
  // of T lines. false when the output is gone.
  bool generate(const lineproto::GenerateHead& g, uint32_t n_ids, bool pieces = false);
  // Runs one S command: text_[0, n) encoded with the image's tokenizer, then as G with U lines.
  bool generate_text(const lineproto::GenerateHead& g, size_t n);
  bool error_line(const Status& st);

  Hal* hal_ = nullptr;
  LineServerOptions opt_;
  MappedModel mapped_;
  BoardDecoder local_;
  FrameLink link_;
  Master master_;
  Decoder* decoder_ = nullptr;  // local_'s or master_
  int ctx_len_ = 0;
  int* ids_ = nullptr;      // kMaxPromptTokens, or kTextIdsCapacity with a tokenizer
  int* history_ = nullptr;  // ctx_len + 2
  // With a tokenizer in the image (S requests): the unescaped text, the encoder's ids and work ids, one U line.
  char* text_ = nullptr;    // kMaxPromptTextBytes
  int32_t* tok_ids_ = nullptr;   // kTextIdsCapacity
  int32_t* tok_work_ = nullptr;  // kTextIdsCapacity
  char* piece_line_ = nullptr;   // kMaxFormattedLine + 4 x the longest token

  lineproto::LineSplitter splitter_;
  uint32_t requests_ = 0;
};

}  // namespace mcullm::board
