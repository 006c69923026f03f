// From a validated board image to a ready model: the config and weight pointers into the image's
// sections (in place, or where BoardImage::place() copied them), and the architecture's decoder.
// Freestanding: the layer tables come from one arena allocation, weights are never copied here.
#pragma once
#include "core/arena.h"
#include "core/thread_pool.h"
#include "format/board_image.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "model/bitnet.h"
#include "model/bitnet_llama2c.h"
#include "model/decoder.h"
#include "model/llama.h"
#include "model/qwen2.h"
#include "model/ple.h"
#include "model/vocab_head.h"
#include "tokenizer/tokenizer_image.h"

namespace mcullm {

struct BoardModel {
  const ArchInfo* arch = nullptr;  // the image's row (model/arch.h), set by board_model_from_image
  TransformerModel transformer; // family kTransformer (llama, bitnet, bitnet-25, qwen2)
  BitLlama2cModel bitllama2c;   // family kBitLlama2c
  PleModel ple;                 // family kPle (int8 activations, as `mcullm run` by default)
  LlamaConfig ple_base;         // ple.cfg.base()
  VocabHead head_groups;        // the head's groups when the image stores them (llama, PLE)
  bool has_head_groups = false;
  HeadMode default_head = HeadMode::kFull;  // the head the image asks generation to use, and its top groups (0: unset)
  int default_head_top = 0;
  // A master's image: the nodes' layers and the slice hash each must report (BoardRole::kNodePlan).
  int plan_nodes = 0;
  SliceRange plan_ranges[kBoardMaxPlanNodes];
  uint64_t plan_hashes[kBoardMaxPlanNodes] = {};
  // The tokenizer the image carries (BoardRole::kTokenizer), opened in place; is_open() false when none.
  TokenizerImage tokenizer;
  // That head over head_groups (full when the image stores no groups).
  HeadChoice head() const;
  const LlamaConfig& cfg() const;
};

// The LlamaConfig an image's config record describes (not validated).
LlamaConfig board_llama_config(const BoardImageConfig& c);

// Builds the model over `img` (call place() first if sections move); tables from `tables`.
// Every tensor the architecture needs must be present with the shape the config implies. Head
// groups, when present, are checked against the head (format/vocab_head_gguf.h check_vocab_head); an
// embedded tokenizer image is opened (TokenizerImage::open checks all of it) and must fit the vocabulary.
Status board_model_from_image(const BoardImage& img, Arena& tables, BoardModel* out);

// The gate-first sparse FFN of a ReLU model (model/sparse_ffn.h) on a board: the column-stored copy of
// every quantized down matrix (build_down_cols: the size of the matrix) in `arena`, built from the
// image's row-major matrices at start-up (the image keeps one copy; the dense path and batched prefill
// read it). Call it before the decoder's init. *bytes: what the copies took (0 for SwiGLU models and
// architectures without a sparse FFN, which are left as they are). An arena without room is an
// error that says so (the caller may run dense instead).
Status board_model_build_sparse_ffn(BoardModel* m, Arena& arena, size_t* bytes);

// The decoder of whichever architecture the model has; KV cache (f32, or int8 with one scale per head
// per position: `mcullm run --kv int8`'s bits) and activations from `work`.
class BoardDecoder {
 public:
  Status init(const BoardModel& model, int ctx_len, Arena& work, ThreadPool* pool, const KernelSet* kernels,
              KvType kv = KvType::kF32);
  // Batched prefill (Decoder::prefill, max_batch) of up to `cap` prompt tokens a call, every weight
  // matrix read once for them; the buffers come from `arena` (the columns' activations and logits,
  // which later single tokens use too: pass the work arena). cap <= 1 leaves it off. The bitllama2c
  // family has no batched prefill: it keeps one token a call. After init, before generating.
  Status enable_batch(int cap, Arena& arena);
  // The gate-first sparse FFN (after board_model_build_sparse_ffn) on or off, and above which share of
  // live neurons a token runs dense (per mille, ReluFfnQ::max_live_permille). The same bits either way.
  void set_sparse_ffn(bool on, int max_live_permille) {
    transformer_.set_sparse_ffn(on, max_live_permille);
    ple_.set_sparse_ffn(on, max_live_permille);
  }
  Decoder& decoder() { return *active_; }
  // The model's default head (BoardModel::head), or the full head where it is pruned and the
  // generation does not pick the argmax (sampling): a pruned head is exact for greedy decoding only.
  Status choose_head(bool picks_argmax);

 private:
  TransformerContext transformer_;
  BitLlama2cContext bitllama2c_;
  PleContext ple_;
  Decoder* active_ = nullptr;
  HeadChoice head_;
};

}  // namespace mcullm
