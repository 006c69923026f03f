// The model flags every command shares and the session they open (session.h).
#include "session.h"

namespace mcullm::cli {

LoadOptions ModelOptions::load_options() const {
  LoadOptions lo;
  lo.bit_order = bit_order;
  lo.f32_activations = f32_activations;
  lo.kv = kv;
  lo.dense_ffn = dense_ffn;
  lo.sparse_max_live = sparse_max_live;
  return lo;
}

void add_model_options(CLI::App* cmd, ModelOptions* o, unsigned flags, const ModelHelp& help) {
  if (help.model) cmd->add_option("-m,--model", o->model, help.model)->required()->check(CLI::ExistingFile);
  if (flags & kTokenizerFlag)
    cmd->add_option("-z,--tokenizer", o->tokenizer,
                    "Tokenizer (llama2.c tokenizer.bin, a GGUF vocabulary or a tokenizer.json); default: the model's own, or one beside it")
        ->check(CLI::ExistingFile);
  if (flags & kCtxFlag) cmd->add_option("-c,--ctx-size", o->ctx, help.ctx)->check(CLI::Range(0, 1 << 24));
  if (flags & kThreadsFlag) add_threads_option(cmd, &o->threads, help.threads);
  if (flags & kKernelsFlag) {
    add_kernels_option(cmd, &o->kernels);
    cmd->add_flag("--dense-ffn", o->dense_ffn,
                  "ReLU FFN: run it dense, not gate first reading only live neurons (the same bits; for timing)");
    cmd->add_option("--sparse-ffn-max-live", o->sparse_max_live,
                    "ReLU FFN with a q8_0 / q4_0 / q4g64 / q4e / i2_s down matrix: gate first only for tokens with at most this many "
                    "live neurons per 1000 (1000: always; the same bits either way)")
        ->check(CLI::Range(0, 1000));
  }
  if (flags & kBitOrderFlag)
    cmd->add_option("--bit-order", o->bit_order, "Bit order of a bitllama2.c ternary file: msb, lsb or auto (detected)")
        ->check(CLI::IsMember({"msb", "lsb", "auto"}));
  if (flags & kPretunedFlag) add_pretuned_options(cmd, &o->pretuned);
  if (flags & kKvFlag)
    cmd->add_option_function<std::string>(
           "--kv", [o](const std::string& name) { parse_kv_type(name.c_str(), &o->kv); },
           "KV cache: f32 (default) or int8 (one scale per head per position; about 4x fewer bytes)")
        ->check(CLI::IsMember({"f32", "int8"}));
  if (flags & kHeadFlag) {
    cmd->add_option("--head", o->head,
                    "Vocabulary head: auto (the model file's default, else full), full, two-stage (the best --head-top "
                    "groups' rows; approximate) or pruned (exact for greedy decoding); the grouped heads need head "
                    "groups in the file (mcullm head --write)")
        ->check(CLI::IsMember({"auto", "full", "two-stage", "pruned"}));
    cmd->add_option("--head-top", o->head_top, "Groups the two-stage head reads (default: the file's, else 16)")
        ->check(CLI::Range(1, kMaxHeadGroups));
  }
  if (flags & kF32ActivationsFlag)
    cmd->add_flag("--f32-activations", o->f32_activations,
                  "PLE (esp32-ai) models: f32 matvec inputs, as esp32-ai's C core (default: int8, as its int8 build)");
}

void note_head(const HeadChoice& h) {
  if (h.mode == HeadMode::kTwoStage)
    std::fprintf(stderr, "mcullm: head: two-stage, the rows of the best %d of %d groups (approximate)\n", h.top_groups,
                 h.groups->n_groups);
  else if (h.mode == HeadMode::kPruned)
    std::fprintf(stderr, "mcullm: head: pruned, %d groups (exact greedy argmax)\n", h.groups->n_groups);
}

Status Session::start_decoder(int threads, size_t extra_bytes) {
  dec.decoder.reset();  // before the pool it runs on
  pool = std::make_unique<HostThreadPool>(threads, kHostMinParallelWork);
  return make_decoder(*lm, ctx_len, pool.get(), kernels, extra_bytes, &dec);
}

Status Session::set_head(const ModelOptions& o, bool sampling) {
  HeadChoice h;
  MC_TRY(resolve_head(o.head, o.head_top, *lm, sampling, &h));
  MC_TRY(dec.decoder->set_head(h, dec.work));
  note_head(h);
  return Status::Ok();
}

Status load_session_model(const std::string& path, const ModelOptions& o, std::unique_ptr<LoadedModel>* lm) {
  MC_TRY(load_model(path, o.load_options(), lm));
  for (const std::string& note : tl_tiling_notes(**lm)) std::fprintf(stderr, "mcullm: note: %s\n", note.c_str());
  return Status::Ok();
}

Status open_session(const ModelOptions& o, unsigned what, Session* s) {
  warn_threads(o.threads);
  MC_TRY(find_kernels(o.kernels, &s->kernels));
  MC_TRY(apply_pretuned(o.pretuned));
  MC_TRY(load_session_model(o.model, o, &s->lm));
  if (what & kOpenTokenizer) {
    s->tok_status = load_tokenizer(*s->lm, o.tokenizer, &s->tok, &s->tok_source);
    if (!s->tok_status.ok() && !o.tokenizer.empty()) return s->tok_status;
    if (!s->tok_status.ok()) s->tok.reset();
  }
  const int seq_len = s->cfg().seq_len;
  s->ctx_len = o.ctx > 0 ? o.ctx : seq_len;
  if (s->ctx_len > seq_len) return Status::Error(Code::kInvalidArgument, "-c %d is longer than the model's context of %d", s->ctx_len, seq_len);
  return what & kOpenDecoder ? s->start_decoder(o.threads, 0) : Status::Ok();
}

}  // namespace mcullm::cli
