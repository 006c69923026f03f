#include "serve/engine_host.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "board/line_codec.h"
#include "kernels/kernels.h"
#include "model/generate.h"

namespace mcullm::serve {

namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Turns decoded pieces into text the client may see: whole UTF-8 characters, stop strings cut off,
// and any tail that could still become a stop string held back until it cannot.
class TextStream {
 public:
  explicit TextStream(const std::vector<std::string>& stop) : stop_(stop) {
    for (const auto& s : stop_) max_stop_ = std::max(max_stop_, s.size());
  }
  // Adds bytes; returns the text that can be shown now. Sets *stopped when a stop string appeared.
  std::string push(const std::string& piece, bool* stopped) { return take(utf8_.push(piece), false, stopped); }
  std::string finish(bool* stopped) { return take(utf8_.finish(), true, stopped); }
  const std::string& text() const { return text_; }
  const std::string& stopping_word() const { return word_; }

 private:
  std::string take(const std::string& bytes, bool final, bool* stopped) {
    *stopped = false;
    if (done_) return std::string();
    text_ += bytes;
    // A stop string can only be new if it ends in the bytes just added.
    const size_t from = text_.size() - bytes.size() >= max_stop_ ? text_.size() - bytes.size() - max_stop_ + 1 : 0;
    size_t cut = std::string::npos;
    for (const auto& s : stop_) {
      if (s.empty()) continue;
      const size_t at = text_.find(s, from);
      if (at != std::string::npos && at < cut) {
        cut = at;
        word_ = s;
      }
    }
    if (cut != std::string::npos) {
      text_.resize(cut);
      done_ = true;
      *stopped = true;
      return emit(text_.size());
    }
    size_t hold = 0;
    if (!final) {
      for (const auto& s : stop_)
        for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), text_.size()); k > hold; --k)
          if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
            hold = k;
            break;
          }
    }
    return emit(text_.size() - hold);
  }
  std::string emit(size_t upto) {
    if (upto <= emitted_) return std::string();
    std::string out = text_.substr(emitted_, upto - emitted_);
    emitted_ = upto;
    return out;
  }

  const std::vector<std::string>& stop_;
  size_t max_stop_ = 0;
  Utf8StreamDecoder utf8_;
  std::string text_, word_;
  size_t emitted_ = 0;
  bool done_ = false;
};

}  // namespace

Admission::~Admission() {
  if (engine_) engine_->release_admission();
}

Status Engine::create(const EngineOptions& o, std::unique_ptr<Engine>* out) {
  if (o.parallel < 1 || o.parallel > 64) return Status::Error(Code::kInvalidArgument, "--parallel %d is not in 1..64", o.parallel);
  if (o.queue < 0 || o.queue > 4096) return Status::Error(Code::kInvalidArgument, "--queue %d is not in 0..4096", o.queue);
  if (o.threads < 1 || o.threads > 256) return Status::Error(Code::kInvalidArgument, "-t %d is not in 1..256", o.threads);
  std::unique_ptr<Engine> e(new Engine());
  e->opt_ = o;
  MC_TRY(load_model(o.model, &e->lm_));
  std::string source;
  MC_TRY(load_tokenizer(*e->lm_, o.tokenizer, &e->tok_, &source));
  const LlamaConfig& cfg = e->lm_->model.cfg;
  e->vocab_ = cfg.vocab_size;
  e->ctx_len_ = o.ctx > 0 ? o.ctx : cfg.seq_len;
  if (e->ctx_len_ > cfg.seq_len)
    return Status::Error(Code::kInvalidArgument, "-c %d is longer than the model's context of %d", e->ctx_len_, cfg.seq_len);
  e->model_id_ = o.alias.empty() ? base_name(o.model) : o.alias;
  ChatTemplate tmpl;
  const Status chat = ChatTemplate::choose(e->lm_->format.rfind("gguf", 0) == 0 ? &e->lm_->gguf : nullptr, o.chat_template, &tmpl);
  if (chat.ok()) {
    e->chat_ = std::make_unique<ChatFormat>(tmpl, e->tok_);
  } else if (!o.chat_template.empty()) {
    return chat;  // a name we do not know
  } else {
    e->chat_error_ = chat.message();  // no template, or one we cannot render: chat completions answer 501
  }
  MC_TRY(resolve_head(o.head, o.head_top, *e->lm_, false, &e->head_));
  const KernelSet* kernels = kernels_by_name(o.kernels.c_str());
  if (!kernels) return Status::Error(Code::kInvalidArgument, "--kernels %s is unknown or not supported by this CPU", o.kernels.c_str());
  if (o.remote && o.parallel != 1) return Status::Error(Code::kInvalidArgument, "a board runs one generation at a time: --parallel must be 1");
  for (int i = 0; i < o.parallel; ++i) {
    auto slot = std::make_unique<Slot>();
    if (!o.remote) {  // a board needs no local decoder
      slot->pool = std::make_unique<HostThreadPool>(o.threads, kHostMinParallelWork);
      MC_TRY(make_decoder(*e->lm_, e->ctx_len_, slot->pool.get(), kernels, 16ull * static_cast<size_t>(cfg.vocab_size) + 4096, &slot->dec));
      MC_TRY(slot->dec.decoder->set_head(e->head_, slot->dec.work));  // its scratch now, before any request's mark
    }
    e->free_.push_back(slot.get());
    e->slots_.push_back(std::move(slot));
  }
  e->m_.slots = o.parallel;
  e->m_.queue_capacity = o.queue;
  *out = std::move(e);
  return Status::Ok();
}

Engine::~Engine() { shutdown(); }

Status Engine::encode_prompt(const std::string& text, std::vector<int>* ids) const {
  MC_TRY(tok_.encode(text, true, false, ids));
  return check_prompt(*ids);
}

Status Engine::check_prompt(const std::vector<int>& ids) const {
  return lineproto::check_prompt(ids.data(), ids.size(), vocab_, ctx_len_);  // the board's checks and messages
}

std::unique_ptr<Admission> Engine::admit() {
  std::lock_guard<std::mutex> l(mu_);
  ++m_.requests;
  if (stopping_ || admitted_ >= opt_.parallel + opt_.queue) {
    ++m_.rejected;
    return nullptr;
  }
  ++admitted_;
  return std::make_unique<Admission>(this);
}

void Engine::release_admission() {
  std::lock_guard<std::mutex> l(mu_);
  --admitted_;
}

Engine::Slot* Engine::acquire_slot() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return stopping_ || !free_.empty(); });
  if (stopping_) return nullptr;
  Slot* s = free_.back();
  free_.pop_back();
  ++m_.busy_slots;
  return s;
}

void Engine::release_slot(Slot* s) {
  {
    std::lock_guard<std::mutex> l(mu_);
    free_.push_back(s);
    --m_.busy_slots;
  }
  cv_.notify_one();
}

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (opt_.remote) opt_.remote->shutdown();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> l(mu_);
  EngineMetrics m = m_;
  m.queued = admitted_ - m_.busy_slots;
  return m;
}

Status Engine::complete(const Admission&, const CompletionParams& p, const PromptDoneFn& on_prompt_done, const TokenFn& on_token,
                        CompletionResult* r) {
  *r = CompletionResult();
  if (Status st = check_prompt(p.prompt); !st.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    ++m_.failed;
    return st;
  }
  Slot* slot = acquire_slot();
  if (!slot) return Status::Error(Code::kUnsupported, "the server is shutting down");
  const Status st = opt_.remote ? run_remote(p, on_prompt_done, on_token, r) : run_on_slot(*slot, p, on_prompt_done, on_token, r);
  release_slot(slot);
  std::lock_guard<std::mutex> l(mu_);
  if (!st.ok()) {
    ++m_.failed;
    return st;
  }
  if (r->stop_type == "cancelled") ++m_.cancelled; else ++m_.completed;
  m_.prompt_tokens += static_cast<uint64_t>(r->n_prompt);
  m_.predicted_tokens += static_cast<uint64_t>(r->n_predicted);
  m_.prompt_ms += r->prompt_ms;
  m_.predicted_ms += r->predicted_ms;
  return st;
}

namespace {

struct StepState {
  const Llama2cTokenizer* tok;
  const CompletionParams* params;
  const Engine::PromptDoneFn* on_prompt_done;
  const Engine::TokenFn* on_token;
  CompletionResult* result;
  TextStream* text;
  int n_prompt;
  int delay_ms;
  int stop_a, stop_b;
  const std::vector<int>* stop_tokens;  // null when ignore_eos
  Clock::time_point start, last;
  bool cancelled = false, word_stop = false, prompt_done = false, token_stop = false;
};

int predict_budget(const CompletionParams& p, int ctx_len) {
  return lineproto::predict_budget(p.n_predict, static_cast<int>(p.prompt.size()), ctx_len);
}

// The per-request state the step hooks read, for a local slot or a board behind the bridge.
StepState step_state(const Llama2cTokenizer& tok, const CompletionParams& p, const Engine::PromptDoneFn& on_prompt_done,
                     const Engine::TokenFn& on_token, CompletionResult* r, TextStream* text, int delay_ms) {
  StepState s;
  s.tok = &tok;
  s.params = &p;
  s.on_prompt_done = &on_prompt_done;
  s.on_token = &on_token;
  s.result = r;
  s.text = text;
  s.n_prompt = static_cast<int>(p.prompt.size());
  s.delay_ms = delay_ms;
  s.stop_a = p.ignore_eos ? -1 : tok.bos_id();
  s.stop_b = p.ignore_eos ? -1 : tok.eos_id();
  s.stop_tokens = p.ignore_eos ? nullptr : &p.stop_tokens;
  return s;
}

void on_logits(void* user, int pos, const float*, int) {
  auto* s = static_cast<StepState*>(user);
  if (pos != s->n_prompt - 1) return;
  s->last = Clock::now();
  s->prompt_done = true;
  s->result->prompt_ms = ms_between(s->start, s->last);
  if (*s->on_prompt_done) (*s->on_prompt_done)(s->result->prompt_ms);
}

// One sampled token (prev: the token before it): its text goes out; false: stop generating.
bool accept_token(StepState* s, int prev, int next, double us) {
  TokenEvent ev;
  ev.id = next;
  ev.us = us;
  s->result->tokens.push_back(next);
  const bool extra_stop = s->stop_tokens && std::find(s->stop_tokens->begin(), s->stop_tokens->end(), next) != s->stop_tokens->end();
  const bool is_stop_token = next == s->stop_a || next == s->stop_b || extra_stop;
  s->token_stop = is_stop_token;
  if (!is_stop_token) ev.text = s->text->push(s->tok->decode_step(prev, next), &s->word_stop);
  bool keep = true;
  if (*s->on_token && !(*s->on_token)(ev)) {
    s->cancelled = true;
    keep = false;
  }
  if (s->word_stop || extra_stop) keep = false;
  // A simulated slow board: the delay counts in the next token's time and in predicted_ms.
  if (keep && s->delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s->delay_ms));
  return keep;
}

bool on_step(void* user, const GenerateStep& step) {
  auto* s = static_cast<StepState*>(user);
  if (!step.sampled) return true;
  const Clock::time_point now = Clock::now();
  const double us = ms_between(s->last, now) * 1000.0;
  s->last = now;
  return accept_token(s, step.token, step.next, us);
}

// Flushes the held-back text (unless stopped) and fills the result's text and stop fields.
void finish_text(StepState& s, const Engine::TokenFn& on_token, bool stopped_by_token, CompletionResult* r) {
  if (!s.cancelled && !s.word_stop) {
    bool stopped = false;
    TokenEvent last;
    last.text = s.text->finish(&stopped);
    s.word_stop = stopped;
    if (!last.text.empty() && on_token && !on_token(last)) s.cancelled = true;
  }
  r->text = s.text->text();
  if (s.cancelled) {
    r->stop_type = "cancelled";
  } else if (s.word_stop) {
    r->stop_type = "word";
    r->stopping_word = s.text->stopping_word();
  } else if (stopped_by_token) {
    r->stop_type = "eos";
  } else {
    r->stop_type = "limit";
  }
}

}  // namespace

Status Engine::run_on_slot(Slot& slot, const CompletionParams& p, const PromptDoneFn& on_prompt_done, const TokenFn& on_token,
                           CompletionResult* r) {
  Arena& work = slot.dec.work;
  const Arena::Mark mark = work.mark();
  struct Rollback {
    Arena& a;
    Arena::Mark m;
    ~Rollback() { a.rollback(m); }
  } rollback{work, mark};

  const bool exact_needed = !p.sampler.picks_argmax() && head_.mode == HeadMode::kPruned;
  MC_TRY(slot.dec.decoder->set_head(exact_needed ? HeadChoice() : head_, work));
  Sampler sampler;
  MC_TRY(sampler.init(p.sampler, vocab_, work));
  const int n_prompt = static_cast<int>(p.prompt.size());
  const int n_predict = predict_budget(p, ctx_len_);
  std::vector<int> history(static_cast<size_t>(n_prompt + n_predict + 1));

  TextStream text(p.stop);
  StepState s = step_state(tok_, p, on_prompt_done, on_token, r, &text, opt_.token_delay_ms);
  GenerateOptions go;
  go.n_predict = n_predict;
  go.stop_a = s.stop_a;
  go.stop_b = s.stop_b;
  GenerateHooks hooks{&s, on_logits, on_step};
  GenerateResult gr;
  s.start = s.last = Clock::now();
  MC_TRY(generate(*slot.dec.decoder, sampler, p.prompt.data(), n_prompt, go, history.data(), nullptr, hooks, &gr));
  finish_text(s, on_token, gr.stopped_by_token || s.token_stop, r);
  const Clock::time_point end = Clock::now();
  // n_predict 0: the prompt's last token is never fed, so the prompt ends with the generation.
  if (!s.prompt_done) r->prompt_ms = ms_between(s.start, end);
  r->predicted_ms = std::max(0.0, ms_between(s.start, end) - r->prompt_ms);
  r->n_prompt = gr.n_prompt;
  r->n_predicted = gr.n_sampled;
  r->context_full = gr.context_full;
  return Status::Ok();
}

// Bridge mode: the board samples; the times are the board's own (P's and the T lines').
Status Engine::run_remote(const CompletionParams& p, const PromptDoneFn& on_prompt_done, const TokenFn& on_token, CompletionResult* r) {
  const int n_predict = predict_budget(p, ctx_len_);
  TextStream text(p.stop);
  StepState s = step_state(tok_, p, on_prompt_done, on_token, r, &text, /*delay_ms=*/0);
  const int n_prompt = s.n_prompt;
  int prev = p.prompt.back();
  double token_ms = 0;
  const RemoteGenerator::PromptDoneFn prompt_done = [&](double ms) {
    r->prompt_ms = ms;
    if (on_prompt_done) on_prompt_done(ms);
  };
  const RemoteGenerator::TokenFn token = [&](int id, double us) {
    token_ms += us / 1000.0;
    const bool keep = accept_token(&s, prev, id, us);
    prev = id;
    return keep && !s.token_stop;
  };
  MC_TRY(opt_.remote->generate(p, n_predict, vocab_, prompt_done, token));
  finish_text(s, on_token, s.token_stop, r);
  r->predicted_ms = token_ms;
  r->n_prompt = n_prompt;
  r->n_predicted = static_cast<int>(r->tokens.size());
  r->context_full = n_prompt + r->n_predicted > ctx_len_;
  return Status::Ok();
}

}  // namespace mcullm::serve
