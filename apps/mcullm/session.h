// One model session for every command: the model flags they share and the model, tokenizer, kernel
// table, thread pool and decoder those flags open.
#pragma once
#include <memory>
#include <string>

#include "cli.h"
#include "core/thread_pool_host.h"
#include "load/model_loader_host.h"

namespace mcullm::cli {

struct ModelOptions {
  std::string model, tokenizer, kernels = "auto", bit_order = "auto";
  int ctx = 0, threads = 1;  // ctx 0: the model's context; -t defaults to the physical cores
  bool f32_activations = false;
  bool dense_ffn = false;
  int sparse_max_live = kSparseFfnMaxLivePermille;
  KvType kv = KvType::kF32;
  std::string head = "auto";  // --head: auto (the file's default, else full), full, two-stage, pruned
  int head_top = 0;           // --head-top: groups the two-stage head reads (0: the file's, else 16)
  PretunedOptions pretuned;
  LoadOptions load_options() const;
};

// The flags a command takes besides -m, each with one name, check and default for all commands:
// -z, -c, -t, --kernels, --kv, --bit-order, --use-pretuned / --tuning, --f32-activations.
enum ModelFlag : unsigned {
  kTokenizerFlag = 1, kCtxFlag = 2, kThreadsFlag = 4, kKernelsFlag = 8, kKvFlag = 16, kBitOrderFlag = 32, kPretunedFlag = 64,
  kF32ActivationsFlag = 128, kHeadFlag = 256,
};
// The help of the flags a command narrows; model nullptr: the command declares its own (bench's list,
// convert's positional input).
struct ModelHelp {
  const char* model = "Model file (GGUF or llama2.c .bin)";
  const char* ctx = "Context length (default: the model's)";
  const char* threads = "Threads";
};
void add_model_options(CLI::App* cmd, ModelOptions* o, unsigned flags, const ModelHelp& help = {});

struct Session {
  std::unique_ptr<LoadedModel> lm;
  std::unique_ptr<Tokenizer> tok;  // kOpenTokenizer: null when none was found (tok_status says why)
  std::string tok_source;
  Status tok_status;
  const KernelSet* kernels = nullptr;
  int ctx_len = 0;  // -c, else the model's context
  std::unique_ptr<HostThreadPool> pool;
  DecoderInstance dec;  // declared after the pool: destroyed before it
  const LlamaConfig& cfg() const { return lm->model.cfg; }
  // A pool of `threads` and a decoder of ctx_len positions with `extra_bytes` more in its work arena.
  Status start_decoder(int threads, size_t extra_bytes);
  // After start_decoder: the head o's --head / --head-top choose (resolve_head), noted on stderr.
  Status set_head(const ModelOptions& o, bool sampling);
};

// A one-line note on stderr when the head is not the full one.
void note_head(const HeadChoice& h);

// kOpenTokenizer: also the tokenizer (an error only when -z names one that fails);
// kOpenDecoder: also start_decoder(o.threads, 0).
enum OpenWhat : unsigned { kOpenTokenizer = 1, kOpenDecoder = 2 };
// Warns of too many threads, finds the kernel table, installs the tilings --use-pretuned asks for,
// loads the model, checks -c against its context and opens `what`.
Status open_session(const ModelOptions& o, unsigned what, Session* s);
// The model at `path` loaded with o's options; prints the notes on its TL tilings (--use-pretuned).
Status load_session_model(const std::string& path, const ModelOptions& o, std::unique_ptr<LoadedModel>* lm);

}  // namespace mcullm::cli
