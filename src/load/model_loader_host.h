// Opens a model file of any format we read (GGUF, llama2.c legacy / ak42 v1 / v2) and its tokenizer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "format/gguf.h"
#include "load/mapped_file_host.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "model/decoder.h"
#include "model/bitnet.h"
#include "model/bitnet_llama2c.h"
#include "model/llama.h"
#include "model/ple.h"
#include "model/qwen2.h"
#include "model/vocab_head.h"
#include "quant/ternary.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

struct LoadedModel {
  std::string path;
  std::string format;  // "esp32-ai v0" / "esp32-ai v1", "gguf", "llama2.c legacy", "llama2.c ak42 v1", "llama2.c ak42 v2",
                       // "bitllama2.c ternary (msb)" / "(lsb)" (+ ", detected" when auto-detected)
  // The architecture's row (model/arch.h), never null: family kTransformer ("llama", "bitnet" /
  // "bitnet-25", "qwen2") is in `model`, kBitLlama2c in `bitnet`, kPle in `ple`.
  const ArchInfo* arch = arch_info("llama");
  MappedFile file;
  std::unique_ptr<uint8_t[]> table_memory;  // backs `tables`
  Arena tables;                             // tensor tables, expanded weights, GGUF indexes
  GgufFile gguf;                            // valid when format == "gguf"
  TransformerModel model;                   // the llama family; for other archs only model.cfg is set
  BitLlama2cModel bitnet;                   // arch "bitnet-llama2c"
  TernaryLayout bit_order = TernaryLayout::kBitllama2cMsb;  // of a bitllama2.c file
  PleModel ple;                             // arch "ple" (esp32-ai format v0 / v1)
  bool f32_activations = false;             // arch "ple": f32 matvec inputs, as esp32-ai's C core
  KvType kv = KvType::kF32;                 // the KV cache make_decoder gives every architecture
  bool dense_ffn = false;                   // llama family / PLE ReLU FFN: dense even where the sparse one applies
  int sparse_max_live = kSparseFfnMaxLivePermille;  // quantized down: sparse for tokens with at most this share live
  VocabHead head_groups;                    // the head's groups when the GGUF stores them (mcullm head --write)
  bool has_head_groups = false;
  HeadMode default_head = HeadMode::kFull;  // the head the file asks generation to use, and its top groups (0: unset)
  int default_head_top = 0;
  const char* arch_name() const { return arch->name; }
  bool is(ArchFamily f) const { return arch->family == f; }
};

struct LoadOptions {
  // Bit order of a bitllama2.c ternary file: "msb", "lsb" or "auto" (detect_bit_order below).
  std::string bit_order = "auto";
  // PLE models (esp32-ai files): compute every matvec with f32 activations, as esp32-ai's C core
  // does by default (else int8 activations, one scale per vector, as its int8 build).
  bool f32_activations = false;
  // The KV cache of the decoders make_decoder builds: f32, or int8 with a scale per head per position.
  KvType kv = KvType::kF32;
  // A ReLU FFN runs dense even where the gate-first sparse one applies (the same bits; for timing it).
  bool dense_ffn = false;
  // A quantized down matrix's sparse FFN runs for tokens with at most this share (per mille) of live
  // neurons (model/sparse_ffn.h ReluFfnQ); 1000: always.
  int sparse_max_live = kSparseFfnMaxLivePermille;
};

// The object holds pointers into itself, so it is created on the heap and never moved.
Status load_model(const std::string& path, std::unique_ptr<LoadedModel>* out);
Status load_model(const std::string& path, const LoadOptions& opt, std::unique_ptr<LoadedModel>* out);

// How sure a bitllama2.c model is of its own greedy continuation of BOS: the mean log-probability
// of the argmax over `steps` steps (one thread; every kernel table gives the same bits). The file does not say whether
// its weights are packed MSB- or LSB-first; the wrong order scrambles every group of four columns,
// and the scrambled model is far less sure of itself, so "auto" picks the order that scores higher.
Status bitllama2c_greedy_confidence(const BitLlama2cModel& model, int steps, double* mean_logprob);

// A ready-to-run decoder for the loaded model: its own work arena (KV cache, activations, plus
// `extra_bytes` for the caller, e.g. the sampler's scratch) and the architecture's context.
struct DecoderInstance {
  std::unique_ptr<uint8_t[]> memory;
  Arena work;
  std::shared_ptr<Decoder> decoder;
};
// Tokens the llama, bitnet and qwen2 decoders evaluate together in a prefill (Decoder::max_batch):
// 128 (was 32): each GEMM call transposes its weight rows once for all the columns, so more columns
// per call cost less per token (dense 86M Q4_0 pp128 on a Zen 5: +20%). Host memory only (not touched
// until used).
constexpr int kPrefillBatch = 128;

// The head `mode` (auto, full, two-stage, pruned; model/vocab_head.h) and `top` groups (0: the file's,
// else kDefaultTopGroups) mean for `lm`: auto is the file's default head (else full); pruned is exact
// for greedy decoding only, so with `sampling` an explicit pruned is an error and auto falls back to full.
Status resolve_head(const std::string& mode, int top, const LoadedModel& lm, bool sampling, HeadChoice* out);

Status make_decoder(const LoadedModel& model, int ctx_len, ThreadPool* pool, const KernelSet* kernels,
                    size_t extra_bytes, DecoderInstance* out);

// The tokenizer: `explicit_path` when given (a llama2.c tokenizer.bin or a GGUF with a vocabulary),
// else the model's own GGUF vocabulary, else tokenizer.bin / tok<vocab>.bin beside the model.
// *source says which was used.
Status load_tokenizer(const LoadedModel& model, const std::string& explicit_path, Llama2cTokenizer* tok,
                      std::string* source);

// The same for any tokenizer kind (tokenizer/tokenizer_host.h): `explicit_path` may also be a Hugging Face
// tokenizer.json, and a GGUF's vocabulary may be byte-level BPE ("gpt2"). A SentencePiece vocabulary
// must have the model's vocabulary size; a BPE one at most that many tokens (models pad their heads).
Status load_tokenizer(const LoadedModel& model, const std::string& explicit_path, std::unique_ptr<Tokenizer>* tok,
                      std::string* source);

// tl1 / tl2 matrices packed with another tiling than the installed tuning (--use-pretuned) asks for,
// one note per shape: a file's tiling is fixed when it is written (run / bench use it as it is;
// `mcullm convert --type tl2 --use-pretuned` repacks it). Empty without a tuning or TL matrices.
std::vector<std::string> tl_tiling_notes(const LoadedModel& model);
// True when a matrix of the model is tl1 / tl2.
bool model_has_tl(const LoadedModel& model);

// The llama vocabulary (tokenizer.ggml.model = "llama") of a GGUF file.
Status tokenizer_from_gguf(const GgufFile& file, Arena& scratch, Llama2cTokenizer* tok);

}  // namespace mcullm
