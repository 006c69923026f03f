#include "board/line_server.h"

#include <string.h>

#include "model/generate.h"

namespace mcullm::board {

Status LineServer::init(Hal& hal, const LineServerOptions& opt) {
  hal_ = &hal;
  opt_ = opt;
  if (!opt.kernels || !opt.pool) return Status::Error(Code::kInvalidArgument, "line server: kernels and a thread pool are needed");
  if (opt.work_tier != Tier::kSram && opt.work_tier != Tier::kPsram)
    return Status::Error(Code::kInvalidArgument, "line server: the work tier must be sram or psram");
  MC_TRY(mapped_.init(hal, opt.partition));
  const int seq_len = mapped_.model().cfg().seq_len;
  if (opt.ctx_len < 0 || opt.ctx_len > seq_len)
    return Status::Error(Code::kInvalidArgument, "context %d is not in 1..%d (the model's)", opt.ctx_len, seq_len);
  ctx_len_ = opt.ctx_len > 0 ? opt.ctx_len : seq_len;
  Arena& work = mapped_.arena(opt.work_tier);
  if (opt.cluster_master) {
    MasterOptions mo = opt.master;
    mo.ctx_len = ctx_len_;
    MC_TRY(start_master(mapped_, hal.spi(), work, mo, opt.pool, opt.kernels, &link_, &master_));
    decoder_ = &master_;
  } else {
    if (opt.sparse_ffn_max_live < 0 || opt.sparse_ffn_max_live > 1000)
      return Status::Error(Code::kInvalidArgument, "sparse FFN: %d live neurons per mille is not in 0..1000", opt.sparse_ffn_max_live);
    if (opt.sparse_ffn_max_live > 0 && opt.sparse_ffn_down_columns) {
      size_t bytes = 0;
      MC_TRY(mapped_.build_sparse_ffn(&bytes));
    }
    if (Status st = local_.init(mapped_.model(), ctx_len_, work, opt.pool, opt.kernels); !st.ok()) return st.prefix("KV cache and activations: ");
    if (Status st = local_.enable_batch(opt.prefill_batch, work); !st.ok()) return st.prefix("prefill batch of %d tokens: ", opt.prefill_batch);
    local_.set_sparse_ffn(opt.sparse_ffn_max_live > 0, opt.sparse_ffn_max_live);
    decoder_ = &local_.decoder();
  }
  const TokenizerImage& tok = mapped_.model().tokenizer;
  MC_TRY(work.alloc_array(tok.is_open() ? lineproto::kTextIdsCapacity : lineproto::kMaxPromptTokens, TensorClass::kScratch, &ids_));
  MC_TRY(work.alloc_array(static_cast<size_t>(ctx_len_) + 2, TensorClass::kScratch, &history_));
  if (tok.is_open()) {
    size_t longest = 1;  // decode_step gives a token's stored bytes, or fewer, or one byte
    for (int id = 0; id < tok.vocab_size(); ++id) {
      size_t len = 0;
      tok.token_bytes(id, &len);
      if (len > longest) longest = len;
    }
    MC_TRY(work.alloc_array(lineproto::kMaxPromptTextBytes, TensorClass::kScratch, &text_));
    MC_TRY(work.alloc_array(lineproto::kTextIdsCapacity, TensorClass::kScratch, &tok_ids_));
    MC_TRY(work.alloc_array(lineproto::kTextIdsCapacity, TensorClass::kScratch, &tok_work_));
    MC_TRY(work.alloc_array(lineproto::kMaxFormattedLine + 4 * longest, TensorClass::kScratch, &piece_line_));
  }
  return Status::Ok();
}

bool LineServer::write(const char* s, size_t n) { return hal_->serial().write(reinterpret_cast<const uint8_t*>(s), n); }

bool LineServer::error_line(const Status& st) {
  char line[lineproto::kMaxFormattedLine];
  return write(line, lineproto::format_error(st.message(), strlen(st.message()), line));
}

namespace {

// The generation's timing, in the HAL's cycles: P when the prompt's last forward is done, then one T
// per sampled token (sampling + the forward that made its logits), as serve/engine_host.cpp times them.
struct Run {
  LineServer* server;
  Hal* hal;
  int n_prompt;
  uint64_t start, last;
  double prompt_ms = 0;
  bool prompt_done = false, out_ok = true;
  bool (*write)(Run*, const char*, size_t);
  // An S request: U lines with each token's bytes after the one before it (the prompt's last at first).
  const TokenizerImage* tok = nullptr;
  char* piece_line = nullptr;
  int prev = -1;
};

double ms_of(Hal* hal, uint64_t cycles) { return static_cast<double>(cycles) / (1000.0 * hal->cycles_per_us()); }

void on_logits(void* user, int pos, const float*, int) {
  Run* r = static_cast<Run*>(user);
  if (pos != r->n_prompt - 1) return;
  r->last = r->hal->cycles();
  r->prompt_done = true;
  r->prompt_ms = ms_of(r->hal, r->last - r->start);
  char line[lineproto::kMaxFormattedLine];
  r->out_ok = r->out_ok && r->write(r, line, lineproto::format_prompt_done(r->prompt_ms, line));
}

bool on_step(void* user, const GenerateStep& step) {
  Run* r = static_cast<Run*>(user);
  if (!step.sampled) return true;
  const uint64_t now = r->hal->cycles();
  const double us = ms_of(r->hal, now - r->last) * 1000.0 + 0.5;  // rounded as the PC rounds (std::round)
  r->last = now;
  char line[lineproto::kMaxFormattedLine];
  const uint32_t whole = us > 4e9 ? 4000000000u : static_cast<uint32_t>(us);
  if (r->tok) {
    size_t n = 0;
    const char* piece = r->tok->decode_step(r->prev, step.next, &n);
    r->prev = step.next;
    r->out_ok = r->out_ok && r->write(r, r->piece_line, lineproto::format_piece(step.next, whole, piece, n, r->piece_line));
  } else {
    r->out_ok = r->out_ok && r->write(r, line, lineproto::format_token(step.next, whole, line));
  }
  return r->out_ok;
}

}  // namespace

bool LineServer::generate_text(const lineproto::GenerateHead& g, size_t n) {
  const TokenizerImage& tok = mapped_.model().tokenizer;
  if (!tok.is_open()) {
    ++requests_;
    return error_line(Status::Error(Code::kUnsupported, "this board's image holds no tokenizer (S needs one: convert without --no-tokenizer)"));
  }
  size_t n_ids = 0;
  const bool bos = (tok.flags() & kTokImageAddBos) != 0;
  if (Status st = tok.encode(text_, n, bos, false, false, tok_ids_, tok_work_, lineproto::kTextIdsCapacity, &n_ids); !st.ok()) {
    ++requests_;
    return error_line(st);
  }
  for (size_t i = 0; i < n_ids; ++i) ids_[i] = static_cast<int>(tok_ids_[i]);  // int32_t is long on some MCU ABIs
  return generate(g, static_cast<uint32_t>(n_ids), true);
}

bool LineServer::generate(const lineproto::GenerateHead& g, uint32_t n_ids, bool pieces) {
  ++requests_;
  const int vocab = mapped_.model().cfg().vocab_size;
  if (Status st = lineproto::check_prompt(ids_, n_ids, vocab, ctx_len_); !st.ok()) return error_line(st);
  SamplerConfig sc;  // the board's sampler: temperature and top-k only (as serve --serial sets it)
  sc.temperature = static_cast<float>(g.temp_x1000) / 1000.0f;
  sc.top_k = static_cast<int>(g.top_k);
  sc.top_p = 1.0f;
  sc.min_p = 0.0f;
  sc.repeat_penalty = 1.0f;
  sc.seed = g.seed;
  if (decoder_ != &master_)  // the single board: its own decoder's head (a master's head is full)
    if (Status st = local_.choose_head(sc.picks_argmax()); !st.ok()) return error_line(st);
  Arena& work = mapped_.arena(opt_.work_tier);
  const Arena::Mark mark = work.mark();
  Sampler sampler;
  if (Status st = sampler.init(sc, vocab, work); !st.ok()) {
    work.rollback(mark);
    return error_line(st);
  }
  const int n_prompt = static_cast<int>(n_ids);
  const bool ignore_eos = (g.flags & lineproto::kFlagIgnoreEos) != 0;
  GenerateOptions go;
  go.n_predict = lineproto::predict_budget(static_cast<int>(g.n_predict), n_prompt, ctx_len_);
  go.stop_a = ignore_eos ? -1 : mapped_.image().config().bos_id;
  go.stop_b = ignore_eos ? -1 : mapped_.image().config().eos_id;
  Run run{this, hal_, n_prompt, 0, 0, 0, false, true, [](Run* r, const char* s, size_t n) { return r->server->write(s, n); }};
  if (pieces) {
    run.tok = &mapped_.model().tokenizer;
    run.piece_line = piece_line_;
    run.prev = ids_[n_prompt - 1];
  }
  GenerateHooks hooks{&run, on_logits, on_step, false};  // P waits for the last prompt token: no prompt logits
  GenerateResult gr;
  hal_->gpio_write(Gpio::kActivity, true);
  run.start = run.last = hal_->cycles();
  const Status st = mcullm::generate(*decoder_, sampler, ids_, n_prompt, go, history_, nullptr, hooks, &gr);
  const uint64_t end = hal_->cycles();
  hal_->gpio_write(Gpio::kActivity, false);
  work.rollback(mark);
  if (!run.out_ok) return false;
  if (!st.ok()) return error_line(st);
  char line[lineproto::kMaxFormattedLine];
  // n_predict 0: the prompt's last token is never fed, so the prompt ends with the generation.
  if (!run.prompt_done) {
    run.prompt_ms = ms_of(hal_, end - run.start);
    if (!write(line, lineproto::format_prompt_done(run.prompt_ms, line))) return false;
  }
  double predicted_ms = ms_of(hal_, end - run.start) - run.prompt_ms;
  if (predicted_ms < 0) predicted_ms = 0;
  const double per_token = gr.n_sampled > 0 ? predicted_ms / gr.n_sampled : 0.0;
  return write(line, lineproto::format_end(static_cast<uint32_t>(gr.n_sampled), per_token, line));
}

bool LineServer::feed(const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const lineproto::LineSplitter::Event ev = splitter_.push(static_cast<char>(bytes[i]));
    if (ev == lineproto::LineSplitter::Event::kNone) continue;
    lineproto::GenerateHead g;
    uint32_t n_ids = 0;
    char reply[lineproto::kMaxFormattedLine];
    size_t reply_len = 0;
    switch (lineproto::answer_line(splitter_.line(), splitter_.size(), ev == lineproto::LineSplitter::Event::kTooLong, &g, ids_,
                                   lineproto::kMaxPromptTokens, &n_ids, text_, reply, &reply_len)) {
      case lineproto::LineAction::kIgnore: break;
      case lineproto::LineAction::kReply:
        if (!write(reply, reply_len)) return false;
        break;
      case lineproto::LineAction::kGenerate:
        if (!generate(g, n_ids)) return false;
        break;
      case lineproto::LineAction::kGenerateText:
        if (!generate_text(g, n_ids)) return false;
        break;
    }
  }
  return true;
}

Status LineServer::serve(int stop_after_ms) {
  uint8_t buf[256];
  for (;;) {
    const long n = hal_->serial().read(buf, sizeof buf, stop_after_ms);
    if (n < 0) return Status::Ok();  // the stream closed
    if (n == 0) {
      if (stop_after_ms >= 0) return Status::Ok();
      continue;
    }
    if (!feed(buf, static_cast<size_t>(n))) return Status::Ok();  // the output is gone
  }
}

}  // namespace mcullm::board
