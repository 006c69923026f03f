// `mcullm bench`: the seed's e2e benchmark (bitnet.cpp's e2e_benchmark.py, which runs llama-bench):
// prompt processing (pp<p>) and generation (tg<n>) speed for each model and thread count, printed as
// llama-bench's markdown table (t/s as average ± standard deviation over -r repetitions after one
// warm-up), then the bytes each generated token reads.
//
// Prompt processing runs as batched prefill (Decoder::prefill, up to max_batch() tokens per call,
// no head), the last token alone with its logits: the backend column gives the batch. Like
// llama-bench, pp feeds p deterministic pseudo-random token ids into an empty cache, and tg feeds
// n tokens one at a time into an empty cache (each the argmax of the previous logits).
#include <chrono>
#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "format/esp32ai.h"
#include "plan/cost_model_host.h"
#include "progress.h"
#include "quant/q4e.h"
#include "session.h"

namespace mcullm::cli {

namespace {

struct BenchOptions {
  ModelOptions m;  // --kernels, --kv, --use-pretuned
  std::string models, n_gen = "128", n_prompt = "512", threads = std::to_string(physical_cores());
  std::string board;  // a board profile: also print the cost model's prediction for each tg test
  int reps = 5;
};

using Clock = std::chrono::steady_clock;

Status parse_list(const std::string& flag, const std::string& text, std::vector<std::string>* out) {
  std::string s = text;
  for (char& c : s)
    if (c == ',') c = ' ';
  std::istringstream in(s);
  std::string item;
  while (in >> item) out->push_back(item);
  if (out->empty()) return Status::Error(Code::kInvalidArgument, "%s is empty", flag.c_str());
  return Status::Ok();
}

Status parse_ints(const std::string& flag, const std::string& text, int lo, int hi, std::vector<int>* out) {
  std::vector<std::string> items;
  MC_TRY(parse_list(flag, text, &items));
  for (const std::string& item : items) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || v < lo || v > hi)
      return Status::Error(Code::kInvalidArgument, "%s: '%s' is not a number in [%d, %d]", flag.c_str(), item.c_str(), lo, hi);
    out->push_back(static_cast<int>(v));
  }
  return Status::Ok();
}

// f(slot, stored bytes of one of its rows) for each tensor of the PLE model (format/esp32ai.h),
// whatever file it came from: q4e codes and f16 scales, or a norm's f32 values.
template <typename F>
void for_each_ple_tensor(const LoadedModel& m, F f) {
  PleModel copy = m.ple;  // ple_slots takes the addresses of its fields
  std::vector<PleSlot> slots(static_cast<size_t>(ple_slot_capacity(copy.cfg)));
  slots.resize(static_cast<size_t>(ple_slots(copy, slots.data())));
  for (const PleSlot& s : slots)
    f(s, s.quant ? (s.cols + 1) / 2 + 2.0 * q4e_groups(s.cols, s.mat->group) : 4.0 * s.cols);
}

// Weight bytes one PLE token reads: every layer matrix, norm and the head in full; one row of the
// PLE table; one row of the embedding unless it is also the (tied) head, then its output_vocab rows.
double ple_bytes_per_token(const LoadedModel& m) {
  const PleConfig& c = m.ple.cfg;
  double bytes = 0;
  for_each_ple_tensor(m, [&](const PleSlot& s, double row) {
    const bool table = std::string(s.name) == "ple_table.weight", emb = std::string(s.name) == "token_embd.weight";
    bytes += table || (emb && !c.tied_head) ? row : emb ? row * c.output_vocab : row * s.rows;
  });
  return bytes;
}

// Weight elements and bytes of the model's tensors (GGUF, PLE); 0 elements when the format has no table.
void tensor_totals(const LoadedModel& m, uint64_t* params, uint64_t* bytes) {
  *params = 0;
  *bytes = 0;
  if (m.is(ArchFamily::kPle)) {
    for_each_ple_tensor(m, [&](const PleSlot& s, double row) {
      *params += static_cast<uint64_t>(s.rows) * static_cast<uint64_t>(s.cols);
      *bytes += static_cast<uint64_t>(row * s.rows);
    });
    return;
  }
  if (m.format != "gguf") {
    *bytes = m.tables.stats().mapped_total();
    return;
  }
  for (uint64_t i = 0; i < m.gguf.tensor_count(); ++i) {
    const GgufTensor* t = m.gguf.tensor(i);
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; ++d) n *= static_cast<uint64_t>(t->ne[d]);
    *params += n;
    *bytes += t->nbytes;
  }
}

// "bitnet 128M I2_S+F16": architecture, parameters, type of the first layer's matrices (+ the
// embedding's when it differs).
std::string model_label(const LoadedModel& m, uint64_t params) {
  std::string type = "?";
  if (m.format == "gguf") {
    const GgufTensor* t = m.gguf.find_tensor("blk.0.ffn_up.weight");
    const GgufTensor* e = m.gguf.find_tensor("token_embd.weight");
    if (t && dtype_info(t->type)) type = dtype_info(t->type)->name;
    if (t && e && e->type != t->type && dtype_info(e->type)) type += std::string("+") + dtype_info(e->type)->name;
  } else if (m.is(ArchFamily::kBitLlama2c)) {
    type = "i2_s";
  } else if (m.is(ArchFamily::kPle)) {
    type = m.f32_activations ? "q4e (f32 act.)" : "q4e";
  }
  for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s %.0fM %s", m.arch_name(), params / 1e6, type.c_str());
  return buf;
}

struct Sample {
  double avg = 0, sd = 0;
};

Sample stats(const std::vector<double>& v) {
  Sample s;
  for (double x : v) s.avg += x;
  s.avg /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.avg) * (x - s.avg);
    s.sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  return s;
}

// Tokens per second of one run: `count` tokens fed from position 0 of a fresh cache.
Status timed_run(Decoder& dec, bool prompt, int count, double* tps) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  int token = 1;
  const int vocab = dec.vocab_size();
  std::vector<int> ids;
  if (prompt) {  // the prompt's tokens, drawn before the clock starts
    for (int i = 0; i < count; ++i) {
      ids.push_back(token);
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      token = static_cast<int>((state >> 33) % static_cast<uint64_t>(vocab));
    }
  }
  const Clock::time_point t0 = Clock::now();
  // pp: batched prefill, max_batch() tokens per call without the head, then the last token alone
  // with its logits (llama-bench computes the last token's logits only).
  for (int pos = 0; prompt && pos < count;) {
    const int n = std::min(count - 1 - pos, dec.max_batch());
    const float* logits = nullptr;
    if (n > 0) {
      MC_TRY(dec.prefill(ids.data() + pos, n, pos, nullptr));
      pos += n;
    } else {
      MC_TRY(dec.forward(ids[pos], pos, &logits));
      ++pos;
    }
  }
  for (int pos = 0; !prompt && pos < count; ++pos) {
    const float* logits = nullptr;
    MC_TRY(dec.forward(token, pos, &logits));
    {
      int best = 0;
      for (int i = 1; i < vocab; ++i)
        if (logits[i] > logits[best]) best = i;
      token = best;
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  *tps = count / (s > 0 ? s : 1e-9);
  return Status::Ok();
}

// The cost model's tokens/s for a tg test of n tokens on the board: n / (sum of the predicted time of
// each position), sampled at up to 64 evenly spaced positions; and the mean ms of each stage.
Status predicted_tg(const LoadedModel& lm, const BoardProfile& board, int n, int cores, double* tps,
                    double stage_ms[kStageCount]) {
  const int step = std::max(1, n / 64);
  double seconds = 0;
  int samples = 0;
  for (int s = 0; s < kStageCount; ++s) stage_ms[s] = 0;
  for (int pos = 0; pos < n; pos += step, ++samples) {
    CostOptions co;
    co.ctx_len = n;
    co.pos = pos;
    co.threads = cores;
    CostReport r;
    MC_TRY(cost_model(lm, board, co, &r));
    seconds += r.token_s;
    for (int s = 0; s < kStageCount; ++s) stage_ms[s] += 1e3 * r.stage_s[s];
  }
  for (int s = 0; s < kStageCount; ++s) stage_ms[s] /= samples;
  *tps = samples / seconds;
  return Status::Ok();
}

int bench(const BenchOptions& o) {
  if (Status st = apply_pretuned(o.m.pretuned); !st.ok()) return report(st);
  BoardProfile board;
  if (!o.board.empty())
    if (Status st = load_board_profile(o.board, &board); !st.ok()) return report(st);
  std::vector<std::string> models;
  std::vector<int> gens, prompts, threads;
  for (const Status& st : {parse_list("-m", o.models, &models), parse_ints("-n", o.n_gen, 0, 1 << 20, &gens),
                           parse_ints("-p", o.n_prompt, 0, 1 << 20, &prompts), parse_ints("-t", o.threads, 1, 256, &threads)})
    if (!st.ok()) return report(st);
  const KernelSet* kernels = nullptr;
  if (Status st = find_kernels(o.m.kernels, &kernels); !st.ok()) return report(st);
  const std::string backend = std::string("CPU ") + kernels->name + ", pp batch " + std::to_string(kPrefillBatch);
  for (int t : threads) warn_threads(t);
  long long n_runs = 0;  // the warm-up and repetitions of every test, for the progress bar
  for (int n : prompts) n_runs += n > 0 ? 1 + o.reps : 0;
  for (int n : gens) n_runs += n > 0 ? 1 + o.reps : 0;
  Progress progress("bench", n_runs * static_cast<long long>(models.size() * threads.size()), "runs");

  std::printf("| %-24s | %10s | %10s | %-27s | %7s | %8s | %20s |\n", "model", "size", "params", "backend", "threads", "test", "t/s");
  std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", std::string(24, '-').c_str(), "---------:", "---------:",
              std::string(27, '-').c_str(), "------:", "-------:", "-------------------:");
  std::fflush(stdout);
  std::vector<std::string> notes;
  for (const std::string& path : models) {
    std::unique_ptr<LoadedModel> lm;
    if (Status st = load_session_model(path, o.m, &lm); !st.ok()) return report(st);
    const LlamaConfig& cfg = lm->model.cfg;
    uint64_t params = 0, bytes = 0;
    tensor_totals(*lm, &params, &bytes);
    const std::string label = model_label(*lm, params);
    char size[32], pstr[32];
    std::snprintf(size, sizeof size, "%.2f MiB", bytes / 1048576.0);
    std::snprintf(pstr, sizeof pstr, "%.2f M", params / 1e6);
    int need = 1;
    for (int p : prompts) need = std::max(need, p);
    for (int n : gens) need = std::max(need, n);
    if (need > cfg.seq_len)
      return report(Status::Error(Code::kInvalidArgument, "%s: a test of %d tokens needs more than the model's context of %d",
                                  path.c_str(), need, cfg.seq_len));
    for (int t : threads) {
      HostThreadPool pool(t, kHostMinParallelWork);
      DecoderInstance dec;
      if (Status st = make_decoder(*lm, need, &pool, kernels, 0, &dec); !st.ok()) return report(st);
      HeadChoice head;  // greedy: a pruned head is exact here
      if (Status st = resolve_head(o.m.head, o.m.head_top, *lm, false, &head); !st.ok()) return report(st);
      if (Status st = dec.decoder->set_head(head, dec.work); !st.ok()) return report(st);
      if (t == threads.front()) note_head(head);
      struct Test { bool prompt; int count; };
      std::vector<Test> tests;
      for (int p : prompts)
        if (p > 0) tests.push_back({true, p});
      for (int n : gens)
        if (n > 0) tests.push_back({false, n});
      for (const Test& test : tests) {
        double tps = 0;
        if (Status st = timed_run(*dec.decoder, test.prompt, std::min(test.count, 16), &tps); !st.ok()) return report(st);  // warm-up
        progress.step();
        std::vector<double> runs;
        for (int r = 0; r < o.reps; ++r) {
          if (Status st = timed_run(*dec.decoder, test.prompt, test.count, &tps); !st.ok()) return report(st);
          runs.push_back(tps);
          progress.step();
        }
        progress.finish();  // the table row on a clean line
        const Sample s = stats(runs);
        char name[32], tstr[48];
        std::snprintf(name, sizeof name, "%s%d", test.prompt ? "pp" : "tg", test.count);
        std::snprintf(tstr, sizeof tstr, "%.2f ± %.2f", s.avg, s.sd);
        std::printf("| %-24s | %10s | %10s | %-27s | %7d | %8s | %20s |\n", label.c_str(), size, pstr, backend.c_str(), t, name, tstr);
        std::fflush(stdout);
      }
    }
    // Bytes one generated token reads: every weight matrix once (the embedding's one row, unless it
    // is also the head), plus the KV cache up to its position.
    const ArenaStats& as = lm->tables.stats();
    const size_t emb = as.mapped_by_class[static_cast<int>(TensorClass::kEmbedding)];
    const bool tied = emb > 0 && as.mapped_by_class[static_cast<int>(TensorClass::kHead)] == 0;
    const double row = cfg.vocab_size > 0 ? static_cast<double>(emb) / cfg.vocab_size : 0;
    const bool ple = lm->is(ArchFamily::kPle);
    const double weights = ple ? ple_bytes_per_token(*lm) : static_cast<double>(as.mapped_total()) - (tied ? 0.0 : emb - row);
    const double kv_per_pos = static_cast<double>(cfg.n_layers) * kv_bytes_per_layer_position(cfg, lm->kv);
    char note[320];
    std::snprintf(note, sizeof note,
                  "%s: %.2f MiB of weights read per generated token (%s), plus %.1f KiB of KV cache per position "
                  "before it (%s cache)",
                  label.c_str(), weights / 1048576.0,
                  ple ? (lm->ple.cfg.tied_head ? "one PLE table row; the tied embedding's head rows read whole"
                                               : "one PLE table row and one embedding row")
                  : tied ? "the tied embedding read whole as the head"
                         : "one embedding row",
                  kv_per_pos / 1024.0, kv_type_name(lm->kv));
    notes.push_back(note);
    for (int n : gens)
      for (int cores = 1; !o.board.empty() && n > 0 && cores <= 2; ++cores) {
        double tps = 0, ms[kStageCount];
        if (Status st = predicted_tg(*lm, board, n, cores, &tps, ms); !st.ok()) return report(st);
        std::snprintf(note, sizeof note,
                      "%s: predicted on %s, tg%d, %d core(s): %.1f tok/s; mean ms input %.3f attn %.3f ffn %.3f ple %.3f "
                      "head %.3f (cost model, mcullm plan)",
                      label.c_str(), board.name.c_str(), n, cores, tps, ms[0], ms[1], ms[2], ms[3], ms[4]);
        notes.push_back(note);
      }
  }
  std::printf("\n");
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  std::printf("pp runs as batched prefill (%d tokens per call; bitnet-llama2c and PLE models: one at a time); %d repetitions after one warm-up; t/s = avg ± stddev.\n",
              kPrefillBatch, o.reps);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Prompt and generation speed as llama-bench's table (bitnet.cpp's e2e benchmark)");
  cmd->add_option("-m,--model", o->models, "Model file(s), comma separated")->required();
  cmd->add_option("-n,--n-token,--n-gen", o->n_gen, "Generated tokens per tg test (comma list; 0 = none)");
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens per pp test (comma list; 0 = none)");
  cmd->add_option("-t,--threads", o->threads, "Threads (comma list; default: the physical cores)");
  cmd->add_option("-r,--repetitions", o->reps, "Repetitions of each test")->check(CLI::Range(1, 1000));
  add_model_options(cmd, &o->m, kKernelsFlag | kPretunedFlag | kKvFlag | kHeadFlag, {.model = nullptr});
  cmd->add_option("--board", o->board, "Also print the cost model's tg prediction on this board (preset or JSON file)");
  cmd->callback([o, exit_code] { *exit_code = bench(*o); });
}

}  // namespace mcullm::cli
