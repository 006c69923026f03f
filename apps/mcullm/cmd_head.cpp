// `mcullm head`: how the two-stage and the pruned greedy vocabulary heads (model/vocab_head.h) compare
// with the full head on a model's own greedy stream: agreement with the full argmax and head bytes
// read per token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "format/vocab_head_gguf_writer_host.h"
#include "model/vocab_head_build_host.h"
#include "session.h"

namespace mcullm::cli {

namespace {

struct HeadOptions {
  ModelOptions m;  // -m, --f32-activations
  std::string tops = "1,2,4,8,16,32", write, default_head = "full", calib_text;
  int steps = 200, groups = 256, iters = 10, start = 1, default_top = 0, calib_tokens = 20000, calib_sampled = 0;
  bool groups_given = false;  // --groups: cluster again even when the file stores groups
  bool logit_metric = false;  // k-means in the metric of the logits on the calibration states
};

// Feeds tokens and hands out the head's input after each step.
class HiddenProbe {
 public:
  virtual ~HiddenProbe() = default;
  virtual Status step(int token, int pos, const float** hidden) = 0;
};

struct PleProbe final : public HiddenProbe {
  PleContext* ctx = nullptr;  // the session's decoder
  Status step(int token, int pos, const float** hidden) override {
    const float* lg = nullptr;
    MC_TRY(ctx->forward(token, pos, &lg));
    *hidden = ctx->head_input();
    return Status::Ok();
  }
};

// A llama model whose head is replaced by [I; 0] (f32): logits[0..dim) are then exactly the head's input.
class LlamaProbe final : public HiddenProbe {
 public:
  Status init(const LlamaModel& m, std::vector<uint8_t>* mem) {
    const LlamaConfig& c = m.cfg;
    if (c.vocab_size < c.dim) return Status::Error(Code::kUnsupported, "vocabulary smaller than the model width");
    eye_.assign(static_cast<size_t>(c.vocab_size) * c.dim, 0.0f);
    for (int i = 0; i < c.dim; ++i) eye_[static_cast<size_t>(i) * c.dim + i] = 1.0f;
    probe_ = m;
    probe_.output = f32_matrix(eye_.data(), c.vocab_size, c.dim);
    probe_.tied_output = false;
    mem->assign(2ull * c.n_layers * c.seq_len * c.kv_dim() * 4 + 64ull * (c.vocab_size + c.hidden_dim + c.dim) +
                    8ull * c.n_heads * c.seq_len + (1u << 20), 0);
    work_.reset(Tier::kHost, mem->data(), mem->size());
    return ctx_.init(&probe_, 0, work_, &pool_, &kernels_best());
  }
  Status step(int token, int pos, const float** hidden) override { return ctx_.forward(token, pos, hidden); }

 private:
  std::vector<float> eye_;
  LlamaModel probe_;
  Arena work_;
  SerialPool pool_;
  LlamaContext ctx_;
};

// Calibration states for the router: the head's input (as the head sees it) at every position of
// the training text (teacher-forced, in windows of the context) or of text the model samples from
// itself (temperature 1, fixed seed, from token `start`).
Status calibration_states(const HeadOptions& o, Session& s, HiddenProbe* probe, const MatRef& head, int ctx,
                          std::vector<float>* states) {
  const int dim = head.cols, vocab = head.rows;
  std::vector<int> text;
  int n = o.calib_sampled;
  if (!o.calib_text.empty()) {
    if (!s.tok) return Status::Error(Code::kNotFound, "--calib-text needs the model's tokenizer (-z)");
    std::ifstream f(o.calib_text, std::ios::binary);
    if (!f) return Status::Error(Code::kIo, "cannot read %s", o.calib_text.c_str());
    std::stringstream ss;
    ss << f.rdbuf();
    EncodeOptions eo;
    eo.add_bos = s.tok->wants_bos();
    MC_TRY(s.tok->encode(ss.str(), eo, &text));
    n = std::min(static_cast<int>(text.size()), o.calib_tokens);
  }
  std::vector<float> logits(vocab), xs(dim + 64);
  std::vector<int8_t> xq(dim + 64);
  std::mt19937 rng(1234);
  states->resize(static_cast<size_t>(n) * dim);
  int token = o.start;
  for (int i = 0; i < n; ++i) {
    if (!text.empty()) token = text[i];
    const float* x = nullptr;
    MC_TRY(probe->step(token, i % ctx, &x));
    const ActVec act = head_activations(kernels_best(), head.type, x, dim, o.m.f32_activations, xq.data(), xs.data());
    head_effective_input(act, dim, states->data() + static_cast<size_t>(i) * dim);
    if (text.empty()) {  // sample the next token from the full head
      matvec(kernels_best(), head, act, logits.data(), 0, vocab);
      const float mx = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (float& l : logits) sum += (l = std::exp(l - mx));
      double u = std::uniform_real_distribution<double>(0, sum)(rng);
      token = vocab - 1;
      for (int v = 0; v < vocab; ++v)
        if ((u -= logits[v]) <= 0) {
          token = v;
          break;
        }
    }
  }
  return Status::Ok();
}

int run_head(const HeadOptions& o) {
  Session s;
  if (Status st = open_session(o.m, o.calib_text.empty() ? 0u : static_cast<unsigned>(kOpenTokenizer), &s); !st.ok()) return report(st);
  const LoadedModel* lm = s.lm.get();
  if (!lm->arch->head_groups)
    return report(Status::Error(Code::kUnsupported, "mcullm head reads llama and PLE models (this one is %s)", lm->arch_name()));
  std::vector<int> tops;
  {
    std::stringstream ss(o.tops);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end || v < 1 || v > kMaxHeadGroups)
        return report(Status::Error(Code::kInvalidArgument, "--top: '%s' is not a group count in [1, %d]", item.c_str(), kMaxHeadGroups));
      tops.push_back(static_cast<int>(v));
    }
  }
  const bool ple = lm->is(ArchFamily::kPle);
  const MatRef head = ple ? lm->ple.output : lm->model.output;
  const int dim = head.cols, vocab = head.rows;
  const KernelSet& k = kernels_best();

  std::vector<uint8_t> llama_mem;
  LlamaProbe llama_probe;
  PleProbe ple_probe;
  HiddenProbe* probe = nullptr;
  if (ple) {
    if (Status st = s.start_decoder(1, 0); !st.ok()) return report(st);
    ple_probe.ctx = static_cast<PleContext*>(s.dec.decoder.get());
    probe = &ple_probe;
  } else {
    if (Status st = llama_probe.init(lm->model, &llama_mem); !st.ok()) return report(st);
    probe = &llama_probe;
  }
  const int ctx = ple ? lm->ple.cfg.seq_len : lm->model.cfg.seq_len;
  std::vector<uint8_t> head_mem(head.rows * (head_row_bytes(head) + 16) + static_cast<size_t>(kMaxHeadGroups) * (dim + 4) * 4 + (1u << 16));
  Arena head_arena(Tier::kHost, head_mem.data(), head_mem.size());
  VocabHead vh;
  const bool stored = lm->has_head_groups && !o.groups_given;
  if (stored) vh = lm->head_groups;
  if (o.logit_metric && (stored || (o.calib_text.empty() && o.calib_sampled == 0)))
    return report(Status::Error(Code::kInvalidArgument, "--logit-metric groups the rows anew on calibration states: give --groups and --calib-text or --calib-sampled"));
  const bool calibrated = !o.calib_text.empty() || o.calib_sampled > 0;
  std::vector<float> states;
  if (calibrated)
    if (Status st = calibration_states(o, s, probe, head, ctx, &states); !st.ok()) return report(st);
  const int n_states = static_cast<int>(states.size() / dim);
  if (!stored)
    if (Status st = build_vocab_head(head, o.groups, o.iters, head_arena, &vh, o.logit_metric ? states.data() : nullptr,
                                     o.logit_metric ? n_states : 0);
        !st.ok())
      return report(st);
  if (calibrated)
    if (Status st = fit_head_router(vh, states.data(), n_states, head_arena, &vh); !st.ok()) return report(st);
  HeadMode default_head = HeadMode::kFull;
  parse_head_mode(o.default_head.c_str(), &default_head);
  if (o.write.empty() && (default_head != HeadMode::kFull || o.default_top > 0))
    return report(Status::Error(Code::kInvalidArgument, "--default-head and --default-top are stored by --write"));
  if (o.default_top > vh.n_groups)
    return report(Status::Error(Code::kOutOfRange, "--default-top %d: the head has %d groups", o.default_top, vh.n_groups));
  if (!o.write.empty()) {
    if (lm->format != "gguf")
      return report(Status::Error(Code::kUnsupported, "--write copies a GGUF model: convert %s to GGUF first (mcullm convert)",
                                  o.m.model.c_str()));
    GgufWriter w;
    if (Status st = copy_gguf(lm->gguf, &w); !st.ok()) return report(st);
    if (Status st = add_vocab_head(vh, &w, default_head, o.default_top); !st.ok()) return report(st);
    if (Status st = w.write_file(o.write); !st.ok()) return report(st);
    std::fprintf(stderr, "mcullm: wrote %s: the model with its %d head groups\n", o.write.c_str(), vh.n_groups);
  }

  const int steps = o.steps < ctx ? o.steps : ctx;

  std::vector<float> full(vocab), scratch(vocab), xs(dim + 64);
  std::vector<int8_t> xq(dim + 64);
  std::vector<int> agree(tops.size(), 0);
  std::vector<double> bytes(tops.size(), 0);
  double pruned_bytes = 0, pruned_groups = 0;
  int pruned_agree = 0;
  const size_t full_bytes = static_cast<size_t>(vocab) * head_row_bytes(head);
  int token = o.start;
  for (int pos = 0; pos < steps; ++pos) {
    const float* x = nullptr;
    if (Status st = probe->step(token, pos, &x); !st.ok()) return report(st);
    const ActVec act = head_activations(kernels_best(), head.type, x, dim, o.m.f32_activations, xq.data(), xs.data());
    matvec(k, head, act, full.data(), 0, vocab);
    int best = 0;
    for (int i = 1; i < vocab; ++i)
      if (full[i] > full[best]) best = i;
    for (size_t t = 0; t < tops.size(); ++t) {
      HeadStats hs;
      agree[t] += two_stage_argmax(k, vh, act, tops[t], scratch.data(), &hs) == best;
      bytes[t] += static_cast<double>(hs.bytes_read);
    }
    HeadStats hs;
    pruned_agree += pruned_argmax(k, vh, act, scratch.data(), &hs) == best;
    pruned_bytes += static_cast<double>(hs.bytes_read);
    pruned_groups += hs.groups_visited;
    token = best;
  }
  char how[128];
  std::snprintf(how, sizeof how, "%s%s%s", stored ? "stored in the file" : "k-means", o.logit_metric ? " in the logit metric" : "",
                vh.router ? ", routed by the router" : "");
  if (!stored) std::snprintf(how + strlen(how), sizeof how - strlen(how), ", %d iterations", o.iters);
  std::printf("model %s (%s), head %d x %d %s, %d groups (%s), greedy from token %d, %d steps, %s activations\n",
              o.m.model.c_str(), lm->format.c_str(), vocab, dim, dtype_info(head.type)->name, vh.n_groups, how, o.start, steps,
              head.type == DType::kF32 || o.m.f32_activations ? "f32" : "int8");
  std::printf("%-22s %10s %16s %8s\n", "head", "agreement", "bytes/token", "share");
  std::printf("%-22s %9.1f%% %16zu %7.1f%%\n", "full", 100.0, full_bytes, 100.0);
  for (size_t t = 0; t < tops.size(); ++t) {
    char name[64];
    std::snprintf(name, sizeof name, "two-stage top %d", tops[t]);
    std::printf("%-22s %9.1f%% %16.0f %7.1f%%\n", name, 100.0 * agree[t] / steps, bytes[t] / steps, 100.0 * bytes[t] / steps / full_bytes);
  }
  std::printf("%-22s %9.1f%% %16.0f %7.1f%%  (%.1f groups visited)\n", "pruned greedy (exact)", 100.0 * pruned_agree / steps,
              pruned_bytes / steps, 100.0 * pruned_bytes / steps / full_bytes, pruned_groups / steps);
  return pruned_agree == steps ? 0 : 1;  // the pruned head is exact: anything else is a bug
}

}  // namespace

void add_head_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<HeadOptions>();
  CLI::App* cmd = app.add_subcommand("head", "Two-stage and pruned vocabulary heads vs the full head on the model's greedy stream");
  add_model_options(cmd, &o->m, kF32ActivationsFlag, {.model = "Model file (llama or esp32-ai PLE)"});
  cmd->add_option("-n,--steps", o->steps, "Greedy steps")->check(CLI::Range(1, 1 << 20));
  CLI::Option* groups =
      cmd->add_option("--groups", o->groups, "Head groups (k-means clusters; default 256, or the groups the file stores)")
          ->check(CLI::Range(1, kMaxHeadGroups));
  cmd->add_option("--iters", o->iters, "k-means iterations")->check(CLI::Range(0, 100));
  cmd->add_option("--top", o->tops, "Groups the two-stage head reads (comma list)");
  cmd->add_option("--start", o->start, "First token")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--calib-text", o->calib_text,
                  "Fit the two-stage head's router on the head inputs of this (training) text, teacher-forced");
  cmd->add_option("--calib-tokens", o->calib_tokens, "Tokens of --calib-text used")->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--calib-sampled", o->calib_sampled,
                  "Fit the router on this many positions of text the model samples from itself (no tokenizer needed)")
      ->check(CLI::Range(1, 1 << 22));
  cmd->add_flag("--logit-metric", o->logit_metric,
               "With --groups and a calibration: cluster the rows by how their logits differ on the calibration states");
  cmd->add_option("--write", o->write, "Also write a copy of the (GGUF) model with these head groups stored in it");
  cmd->add_option("--default-head", o->default_head,
                  "With --write: the head generation uses by default (`run --head auto`): full, two-stage or pruned")
      ->check(CLI::IsMember({"full", "two-stage", "pruned"}));
  cmd->add_option("--default-top", o->default_top, "With --write: the groups a default two-stage head reads")
      ->check(CLI::Range(1, kMaxHeadGroups));
  cmd->callback([o, exit_code, groups] {
    o->groups_given = groups->count() > 0;
    *exit_code = run_head(*o);
  });
}

}  // namespace mcullm::cli
