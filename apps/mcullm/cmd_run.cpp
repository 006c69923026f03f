// `mcullm run`: load a model and a tokenizer, feed a prompt, stream the generated text, report speed.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <unistd.h>

#include "model/conversation_host.h"
#include "plan/cost_model_host.h"
#include "model/generate.h"
#include "session.h"
#include "tokenizer/chat_template_host.h"

namespace mcullm::cli {

namespace {

struct RunOptions {
  ModelOptions m;
  std::string prompt, prompt_file, prompt_ids, dump_tokens, dump_logits, sampler = "default", system, chat_template, board;
  int n_predict = 256;
  int64_t seed = -1;
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  int top_k = 40, repeat_last_n = 64;
  bool fingerprint = false, no_bos = false, quiet = false, cnv = false, prompt_ids_given = false;
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct StepPrinter {
  const Tokenizer* tok;
  Utf8StreamDecoder utf8;
  OutputFile dump, logits;
  Clock::time_point start;
  double prompt_ms = 0;
  int n_prompt = 0;
  bool quiet = false;
  int stop_a = -1, stop_b = -1;  // sampled end tokens are not printed (llama2.c stops before printing BOS)
};

void on_logits(void* user, int, const float* logits, int n) {
  auto* p = static_cast<StepPrinter*>(user);
  p->logits.write(logits, sizeof(float) * static_cast<size_t>(n));
}

bool on_step(void* user, const GenerateStep& s) {
  auto* p = static_cast<StepPrinter*>(user);
  if (s.pos == p->n_prompt - 1) p->prompt_ms = ms_since(p->start);
  p->dump.printf("TOK %d %d %d\n", s.pos, s.token, s.next);
  const bool stop = s.sampled && (s.next == p->stop_a || s.next == p->stop_b);
  if (!p->quiet && p->tok && !stop) {
    if (!write_stdout(p->utf8.push(p->tok->decode_step(s.token, s.next)))) return false;  // main() reports it
  }
  // A failed write ends the run: nobody reads the rest.
  return !p->dump.failed() && !p->logits.failed();
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

void print_memory(const Arena& tables, const Arena& work) {
  std::string mapped;
  for (int c = 0; c < kClassCount; ++c) {
    const size_t b = tables.stats().mapped_by_class[c];
    if (b) mapped += std::string(mapped.empty() ? "" : ", ") + tensor_class_name(static_cast<TensorClass>(c)) + " " + mib(b);
  }
  std::string used;  // each class once, over both arenas
  for (int c = 0; c < kClassCount; ++c) {
    const size_t b = tables.stats().by_class[c] + work.stats().by_class[c];
    if (b) used += std::string(used.empty() ? "" : ", ") + tensor_class_name(static_cast<TensorClass>(c)) + " " + mib(b);
  }
  std::fprintf(stderr, "mcullm: weights in place  = %s (%s)\n", mib(tables.stats().mapped_total()).c_str(), mapped.c_str());
  std::fprintf(stderr, "mcullm: arena peak        = %s (%s)\n", mib(tables.stats().peak + work.stats().peak).c_str(), used.c_str());
}

SamplerConfig sampler_config(const RunOptions& o) {
  SamplerConfig sc;
  sc.temperature = o.temp;
  sc.top_k = o.top_k;
  sc.top_p = o.top_p;
  sc.min_p = o.min_p;
  sc.repeat_penalty = o.repeat_penalty;
  sc.repeat_last_n = o.repeat_last_n;
  sc.seed = static_cast<uint64_t>(o.seed);  // resolved by run(): never -1 here
  sc.llama2c = o.sampler == "llama2c";
  return sc;
}

bool print_text(void*, std::string_view text) { return write_stdout(text); }

// -cnv: one user message per stdin line, the reply on stdout; /reset starts over, /exit (or the end
// of stdin) quits. Per-turn figures go to stderr.
int chat(const RunOptions& o, Session& s) {
  if (!o.prompt.empty() || !o.prompt_file.empty() || o.prompt_ids_given)
    return report(Status::Error(Code::kInvalidArgument, "-cnv reads the conversation from stdin: give no -p, -f or --prompt-ids (-sys sets the system prompt)"));
  ChatTemplate tmpl;
  if (Status st = ChatTemplate::choose(s.lm->format == "gguf" ? &s.lm->gguf : nullptr, o.chat_template, &tmpl); !st.ok()) return report(st);
  const ChatFormat format(tmpl, *s.tok);
  const int ctx_len = s.ctx_len;
  if (Status st = s.start_decoder(o.m.threads, 16ull * s.cfg().vocab_size); !st.ok()) return report(st);
  if (Status st = s.set_head(o.m, !sampler_config(o).picks_argmax()); !st.ok()) return report(st);
  Sampler sampler;
  if (Status st = sampler.init(sampler_config(o), s.cfg().vocab_size, s.dec.work); !st.ok()) return report(st);
  Conversation conv(*s.dec.decoder, sampler, *s.tok, format);
  conv.set_system(o.system);
  std::fprintf(stderr, "mcullm: chat template %s, context %d, seed %lld; /reset starts over, /exit quits\n", tmpl.name(), ctx_len,
               static_cast<long long>(o.seed));

  const bool tty = isatty(0);
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stdout), std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      conv.reset();
      std::fprintf(stderr, "mcullm: conversation reset\n");
      continue;
    }
    if (line.empty()) continue;
    const int start = conv.n_past();
    ChatReply r;
    const Clock::time_point t0 = Clock::now();
    if (Status st = conv.reply(line, o.n_predict, o.quiet ? nullptr : print_text, nullptr, &r); !st.ok()) {
      report(st);
      continue;
    }
    if (!o.quiet) std::fputc('\n', stdout), std::fflush(stdout);
    std::fprintf(stderr, "mcullm: turn %d: fed %d tokens at positions %d..%d, sampled %d (%s), %.1f ms, %d of %d context used\n",
                 conv.turns(), r.n_prompt, start, start + r.n_prompt - 1, r.n_generated,
                 r.ended_by_eot ? "end of turn" : r.context_full ? "context full" : "length limit", ms_since(t0), conv.n_past(), ctx_len);
    if (r.context_full) std::fprintf(stderr, "mcullm: the context of %d tokens is full; /reset to start over\n", ctx_len);
  }
  return 0;
}

// --board: the model must fit the board's tiers, placed as `mcullm plan` places it (plan/cost_model_host.h).
int check_board(const RunOptions& o, const LoadedModel& lm) {
  BoardProfile board;
  if (Status st = load_board_profile(o.board, &board); !st.ok()) return report(st);
  CostOptions co;
  co.ctx_len = o.m.ctx;
  co.threads = o.m.threads >= 2 ? 2 : 1;
  CostReport r;
  if (Status st = cost_model(lm, board, co, &r); !st.ok()) return report(st);
  if (!r.fits) {
    std::fprintf(stderr, "mcullm: error: the model does not fit on %s: %s\n", board.name.c_str(), r.overflow.c_str());
    return kExitDoesNotFit;
  }
  std::fprintf(stderr, "mcullm: fits on %s: sram %llu, psram %llu, flash %llu bytes placed; predicted %.1f tok/s at position %d\n",
               board.name.c_str(), static_cast<unsigned long long>(r.placed[0]), static_cast<unsigned long long>(r.placed[1]),
               static_cast<unsigned long long>(r.placed[2]), r.tokens_per_s, r.pos);
  return 0;
}

int run(RunOptions o) {
  o.seed = resolve_seed(o.seed);
  const Clock::time_point t_load = Clock::now();
  Session s;
  if (Status st = open_session(o.m, kOpenTokenizer, &s); !st.ok()) return report(st);
  const LlamaConfig& cfg = s.cfg();
  if (!o.board.empty())
    if (int rc = check_board(o, *s.lm); rc != 0) return rc;
  const Tokenizer* tok = s.tok.get();
  if (!tok && (!o.prompt_ids_given || !o.quiet)) return report(s.tok_status);
  if (o.cnv) return chat(o, s);
  if (!o.system.empty() || !o.chat_template.empty())
    return report(Status::Error(Code::kInvalidArgument, "-sys and --chat-template are for a conversation (-cnv)"));

  // Prompt ids: BOS + the encoded text (as llama2.c), or the ids given.
  std::vector<int> prompt;
  if (o.prompt_ids_given) {
    if (!o.prompt.empty() || !o.prompt_file.empty())
      return report(Status::Error(Code::kInvalidArgument, "give either --prompt-ids or a text prompt (-p / -f), not both"));
    if (Status st = parse_prompt_ids(o.prompt_ids, cfg.vocab_size, &prompt); !st.ok()) return report(st);
  } else {
    std::string text = o.prompt;
    if (!o.prompt_file.empty()) {
      if (!o.prompt.empty()) return report(Status::Error(Code::kInvalidArgument, "give either -p or -f, not both"));
      std::ifstream f(o.prompt_file, std::ios::binary);
      if (!f) return report(Status::Error(Code::kIo, "cannot read prompt file %s", o.prompt_file.c_str()));
      std::stringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    }
    EncodeOptions eo;
    eo.add_bos = !o.no_bos && tok->wants_bos();
    if (Status st = tok->encode(text, eo, &prompt); !st.ok()) return report(st);
    if (prompt.empty()) return report(Status::Error(Code::kInvalidArgument, "the prompt is empty and --no-bos leaves no token"));
  }

  const int ctx_len = s.ctx_len;
  if (static_cast<int>(prompt.size()) > ctx_len)
    return report(Status::Error(Code::kOutOfRange, "the prompt has %zu tokens, the context holds %d (-c)", prompt.size(), ctx_len));
  if (Status st = s.start_decoder(o.m.threads, 16ull * cfg.vocab_size); !st.ok()) return report(st);
  if (Status st = s.set_head(o.m, !sampler_config(o).picks_argmax()); !st.ok()) return report(st);
  Arena& work = s.dec.work;

  Sampler sampler;
  if (Status st = sampler.init(sampler_config(o), cfg.vocab_size, work); !st.ok()) return report(st);
  const double load_ms = ms_since(t_load);

  StepPrinter printer;
  printer.tok = tok;
  printer.quiet = o.quiet;
  printer.n_prompt = static_cast<int>(prompt.size());
  if (!o.dump_tokens.empty()) {
    if (Status st = printer.dump.open(o.dump_tokens, "--dump-tokens"); !st.ok()) return report(st);
    printer.dump.printf("PROMPT");
    for (int id : prompt) printer.dump.printf(" %d", id);
    printer.dump.printf("\n");
  }
  if (!o.dump_logits.empty())
    if (Status st = printer.logits.open(o.dump_logits, "--dump-logits"); !st.ok()) return report(st);
  if (!o.quiet && tok && prompt[0] != tok->bos_id()) {
    write_stdout(printer.utf8.push(tok->decode_step(-1, prompt[0])));
  }

  GenerateOptions go;
  go.n_predict = o.n_predict;
  go.stop_a = tok ? tok->bos_id() : -1;  // llama2.c models end a story with BOS
  go.stop_b = tok ? tok->eos_id() : -1;
  printer.stop_a = go.stop_a;
  printer.stop_b = go.stop_b;
  std::vector<int> history(prompt.size() + static_cast<size_t>(o.n_predict) + 1);
  Fingerprint fp;
  GenerateHooks hooks{&printer, on_logits, on_step};
  GenerateResult result;
  printer.start = Clock::now();
  const Status st = generate(*s.dec.decoder, sampler, prompt.data(), static_cast<int>(prompt.size()), go, history.data(), o.fingerprint ? &fp : nullptr, hooks, &result);
  const double total_ms = ms_since(printer.start);
  const Status dump_st = printer.dump.close(), logits_st = printer.logits.close();
  if (!o.quiet) {
    write_stdout(printer.utf8.finish() + "\n");
  }
  if (!st.ok()) return report(st);
  for (const Status& s : {dump_st, logits_st})
    if (!s.ok()) return report(s);

  const double gen_ms = total_ms - printer.prompt_ms;
  const int gen_runs = result.n_sampled - 1;  // the first sampled token comes out of the prompt's last step
  std::fprintf(stderr, "\nmcullm: model             = %s (%s), tokenizer %s\n", o.m.model.c_str(), s.lm->format.c_str(),
               tok ? s.tok_source.c_str() : "none");
  std::fprintf(stderr, "mcullm: kernels           = %s, %d thread%s, context %d\n", s.kernels->name, o.m.threads,
               o.m.threads == 1 ? "" : "s", ctx_len);
  std::fprintf(stderr, "mcullm: sampling          = seed %lld (-s to repeat), temp %g\n", static_cast<long long>(o.seed), o.temp);
  std::fprintf(stderr, "mcullm: load time         = %10.2f ms\n", load_ms);
  std::fprintf(stderr, "mcullm: prompt eval time  = %10.2f ms / %5d tokens (%8.3f ms per token, %10.2f tokens per second)\n",
               printer.prompt_ms, result.n_prompt, printer.prompt_ms / result.n_prompt, 1000.0 * result.n_prompt / printer.prompt_ms);
  if (gen_runs > 0)
    std::fprintf(stderr, "mcullm:        eval time  = %10.2f ms / %5d runs   (%8.3f ms per token, %10.2f tokens per second)\n",
                 gen_ms, gen_runs, gen_ms / gen_runs, 1000.0 * gen_runs / gen_ms);
  std::fprintf(stderr, "mcullm:       total time  = %10.2f ms / %5d tokens\n", total_ms + load_ms, result.n_prompt + result.n_sampled);
  if (FfnCounts c; s.dec.decoder->ffn_counts(&c) && c.neurons > 0)
    std::fprintf(stderr,
                 "mcullm: ReLU FFN          = %.2f%% of neurons live (%llu of %llu over tokens and layers), %.2f%% skipped "
                 "(up row and down weights not read)%s\n",
                 100.0 * static_cast<double>(c.live) / static_cast<double>(c.neurons), c.live, c.neurons,
                 100.0 * static_cast<double>(c.skipped) / static_cast<double>(c.neurons),
                 o.m.dense_ffn ? ", dense (--dense-ffn)" : "");
  print_memory(s.lm->tables, work);
  if (result.context_full) std::fprintf(stderr, "mcullm: stopped: the context of %d tokens is full\n", ctx_len);
  if (o.fingerprint)
    std::printf("fingerprint %016" PRIx64 " tokens %016" PRIx64 " logits %016" PRIx64 "\n", fp.combined(), fp.tokens(), fp.logits());
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text with a model");
  add_model_options(cmd, &o->m, kTokenizerFlag | kCtxFlag | kThreadsFlag | kKernelsFlag | kBitOrderFlag | kPretunedFlag | kKvFlag | kF32ActivationsFlag | kHeadFlag);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file")->check(CLI::ExistingFile);
  CLI::Option* prompt_ids = cmd->add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids, e.g. 1,403,407 (no BOS is added)");
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->check(CLI::Range(0, 1 << 24));
  add_seed_option(cmd, &o->seed);
  cmd->add_option("--temp", o->temp, "Temperature (0 = greedy); -temp also works")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", o->top_k, "Top-k (0 = off)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", o->top_p, "Top-p (1 = off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", o->min_p, "Min-p (0 = off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", o->repeat_penalty, "Repeat penalty (1 = off)")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--repeat-last-n", o->repeat_last_n, "Tokens the repeat penalty looks back (-1 = all)")->check(CLI::Range(-1, 1 << 24));
  cmd->add_option("--sampler", o->sampler, "default, or llama2c (llama2.c's RNG and top-p: same seed, same text)")
      ->check(CLI::IsMember({"default", "llama2c"}));
  cmd->add_option("--board", o->board, "Refuse to run unless the model fits this board's memory tiers (preset or JSON profile), placed as `mcullm plan` does");
  cmd->add_flag("--fingerprint", o->fingerprint, "Print the run's fingerprint (hash of token ids and logits)");
  cmd->add_option("--dump-tokens", o->dump_tokens, "Write PROMPT / TOK lines (the format of ../shared/models/*/ref)");
  cmd->add_option("--dump-logits", o->dump_logits, "Write every step's logits as little-endian f32");
  cmd->add_flag("--no-bos", o->no_bos, "Do not put BOS before the encoded prompt");
  cmd->add_flag("-q,--quiet", o->quiet, "Do not print the generated text");
  cmd->add_flag("--cnv", o->cnv, "Conversation: one user message per stdin line, replies on stdout (-n per reply); /reset, /exit; -cnv also works");
  cmd->add_option("--sys", o->system, "System prompt of the conversation; -sys also works");
  cmd->add_option("--chat-template", o->chat_template, "Chat template (chatml, llama2); default: the model's tokenizer.chat_template")
      ->check(CLI::IsMember({"chatml", "qwen2", "llama2", "llama-2"}));
  cmd->callback([o, exit_code, prompt_ids] {
    o->prompt_ids_given = prompt_ids->count() > 0;
    *exit_code = run(*o);
  });
}

}  // namespace mcullm::cli
