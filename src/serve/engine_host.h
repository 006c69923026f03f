// The server's engine: one model (mapped once, shared), one tokenizer, and N generation slots, each
// with its own Decoder (KV cache, activations), Sampler scratch and thread pool. Requests are admitted
// up to slots + queue; beyond that admit() refuses (the HTTP layer answers 503). Used by the HTTP
// server and by the serial line-protocol server alike.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/thread_pool_host.h"
#include "load/model_loader_host.h"
#include "model/sampler.h"
#include "tokenizer/chat_template_host.h"

namespace mcullm::serve {

class RemoteGenerator;

struct EngineOptions {
  std::string model, tokenizer, alias;  // alias: the model id (default: the file's name)
  int ctx = 0;                          // 0 = the model's context
  int threads = 1;                      // per slot
  int parallel = 1;                     // slots (concurrent generations)
  int queue = 64;                       // admitted requests that may wait for a slot (a burst waits, as llama-server's does)
  int token_delay_ms = 0;               // sleep after each generated token (demos, tests: a slow board)
  std::string kernels = "auto";
  std::string chat_template;            // "chatml" / "llama2"; empty: the model file's own, if any
  std::string head = "auto";            // vocabulary head (load/model_loader_host.h resolve_head); a pruned
  int head_top = 0;                     //   head serves greedy requests, sampled ones get the full head
  std::shared_ptr<RemoteGenerator> remote;  // bridge mode (parallel must be 1); null: the local decoder
};

struct CompletionParams {
  std::vector<int> prompt;              // token ids, BOS included when wanted
  int n_predict = -1;                   // -1 = until the context is full
  SamplerConfig sampler;
  std::vector<std::string> stop;        // stop strings (not included in the text)
  bool ignore_eos = false;              // do not stop at BOS / EOS (nor at stop_tokens)
  std::vector<int> stop_tokens;         // more ids that end the generation (chat: end of turn); not shown
};

// Bridge mode: where the tokens come from when a board on a serial line runs the model
// (serve/board_link_host.h). The engine keeps everything else: tokenizer, text (UTF-8, stop strings),
// stop tokens, timings, the queue. The board samples with temperature, top-k and seed only.
class RemoteGenerator {
 public:
  virtual ~RemoteGenerator() = default;
  using PromptDoneFn = std::function<void(double prompt_ms)>;
  using TokenFn = std::function<bool(int id, double us)>;  // false: stop passing tokens on
  // Generates up to n_predict tokens after p.prompt (p.ignore_eos: not stopping at BOS / EOS); token
  // ids outside 0..vocab_size-1 are the board's error.
  // on_token may return false; the generator must still leave its link ready for the next request.
  // Errors: Code::kIo when the board stays silent too long, Code::kCorrupt for anything else the
  // board does wrong (a malformed or unexpected line, an X line, a hang-up).
  virtual Status generate(const CompletionParams& p, int n_predict, int vocab_size, const PromptDoneFn& on_prompt_done, const TokenFn& on_token) = 0;
  // Makes a running generate() return soon (server shutdown).
  virtual void shutdown() = 0;
};

// One generated token as the client sees it: `text` is what can be shown now (complete UTF-8, and
// nothing that could still turn into a stop string); it may be empty. id -1: the final flush.
struct TokenEvent {
  int id = -1;
  std::string text;
  double us = 0;                        // time of this token (sampling + the forward that made its logits)
};

struct CompletionResult {
  std::string text;
  std::vector<int> tokens;              // generated ids (a stop token included)
  int n_prompt = 0;
  int n_predicted = 0;
  std::string stop_type;                // "eos", "word", "limit" (n_predict or context), "cancelled"
  std::string stopping_word;
  double prompt_ms = 0;                 // forward of every prompt token
  double predicted_ms = 0;              // from then to the end (sampling + forwards of generated tokens)
  bool context_full = false;
};

struct EngineMetrics {
  uint64_t requests = 0, rejected = 0, cancelled = 0, failed = 0, completed = 0;
  uint64_t prompt_tokens = 0, predicted_tokens = 0;
  double prompt_ms = 0, predicted_ms = 0;
  int busy_slots = 0, slots = 0, queued = 0, queue_capacity = 0;
};

class Engine;

// A place in the system (a slot or the queue); releases it when destroyed.
class Admission {
 public:
  explicit Admission(Engine* e) : engine_(e) {}
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

 private:
  Engine* engine_;
};

class Engine {
 public:
  static Status create(const EngineOptions& o, std::unique_ptr<Engine>* out);
  ~Engine();

  const Llama2cTokenizer& tokenizer() const { return tok_; }
  const std::string& model_id() const { return model_id_; }
  int ctx_len() const { return ctx_len_; }
  int vocab_size() const { return vocab_; }
  const EngineOptions& options() const { return opt_; }
  const LoadedModel& model() const { return *lm_; }
  // The chat template bound to the tokenizer, or null (chat_unavailable() says why).
  const ChatFormat* chat() const { return chat_.get(); }
  const std::string& chat_unavailable() const { return chat_error_; }

  // BOS + the encoded text, as `mcullm run` does.
  Status encode_prompt(const std::string& text, std::vector<int>* ids) const;
  // Checks ids against the vocabulary and the context.
  Status check_prompt(const std::vector<int>& ids) const;

  // A place in the slots + queue, or null when they are all taken (counted as rejected).
  std::unique_ptr<Admission> admit();

  using TokenFn = std::function<bool(const TokenEvent&)>;  // return false to stop (client gone)
  using PromptDoneFn = std::function<void(double prompt_ms)>;
  // Waits for a free slot, generates, frees the slot. on_token may be null.
  Status complete(const Admission& admission, const CompletionParams& p, const PromptDoneFn& on_prompt_done,
                  const TokenFn& on_token, CompletionResult* result);

  // Wakes every request waiting for a slot (they fail); later complete() calls fail at once.
  void shutdown();
  EngineMetrics metrics() const;

 private:
  friend class Admission;
  struct Slot {
    std::unique_ptr<HostThreadPool> pool;
    DecoderInstance dec;
  };
  Engine() = default;
  Slot* acquire_slot();
  void release_slot(Slot* s);
  void release_admission();
  Status run_remote(const CompletionParams& p, const PromptDoneFn& on_prompt_done, const TokenFn& on_token, CompletionResult* r);
  Status run_on_slot(Slot& slot, const CompletionParams& p, const PromptDoneFn& on_prompt_done, const TokenFn& on_token,
                     CompletionResult* r);

  EngineOptions opt_;
  std::unique_ptr<LoadedModel> lm_;
  HeadChoice head_;  // greedy requests' head (sampled ones: full when it is pruned)
  Llama2cTokenizer tok_;
  std::unique_ptr<ChatFormat> chat_;
  std::string chat_error_;
  std::string model_id_;
  int ctx_len_ = 0, vocab_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot*> free_;
  int admitted_ = 0;
  bool stopping_ = false;
  EngineMetrics m_;  // counters, under mu_
};

}  // namespace mcullm::serve
