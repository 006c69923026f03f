#include "load/model_loader_host.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "format/bitllama2c.h"
#include "format/bitllama2c_gguf.h"
#include "format/esp32ai.h"
#include "format/llama2c.h"
#include "format/transformer_gguf.h"
#include "format/gguf_model.h"
#include "format/vocab_head_gguf.h"
#include "kernels/tl_tuning.h"
#include "load/tokenizer_loader_host.h"

namespace mcullm {

namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool is_gguf(const uint8_t* data, size_t size) { return size >= 4 && std::memcmp(data, "GGUF", 4) == 0; }

// U+2581 (SentencePiece's visible space) <-> ' '
std::string from_spm_spaces(const char* s, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (i + 2 < n && static_cast<uint8_t>(s[i]) == 0xE2 && static_cast<uint8_t>(s[i + 1]) == 0x96 &&
        static_cast<uint8_t>(s[i + 2]) == 0x81) {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

Status bitllama2c_greedy_confidence(const BitLlama2cModel& model, int steps, double* mean_logprob) {
  const LlamaConfig& c = model.cfg;
  if (steps > c.seq_len) steps = c.seq_len;
  const size_t bytes = 2ull * c.n_layers * static_cast<size_t>(steps) * c.kv_dim() * sizeof(float) +
                       16ull * (c.vocab_size + c.hidden_dim + c.dim) * sizeof(float) +
                       4ull * c.n_heads * static_cast<size_t>(steps) * sizeof(float) + (1u << 16);
  std::vector<uint8_t> mem(bytes);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  SerialPool pool;
  BitLlama2cContext ctx;
  MC_TRY(ctx.init(&model, steps, arena, &pool, &kernels_best()));  // any table: the same bits
  double total = 0;
  int token = 1;  // BOS
  for (int pos = 0; pos < steps; ++pos) {
    const float* logits = nullptr;
    MC_TRY(ctx.forward(token, pos, &logits));
    int best = 0;
    for (int i = 1; i < c.vocab_size; ++i)
      if (logits[i] > logits[best]) best = i;
    double sum = 0;
    for (int i = 0; i < c.vocab_size; ++i) sum += std::exp(static_cast<double>(logits[i]) - logits[best]);
    total += -std::log(sum);  // log-probability of the argmax
    token = best;
  }
  *mean_logprob = total / steps;
  return Status::Ok();
}

namespace {

// A loaded PLE model: its arch, options and the shared config summary the commands print; a ReLU
// FFN's column-stored down matrices unless it runs dense (or with f32 activations, which the column
// kernel does not take).
Status set_ple(LoadedModel* m, const LoadOptions& opt) {
  m->arch = arch_info("ple");
  m->f32_activations = opt.f32_activations;
  m->model.cfg = m->ple.cfg.base();
  if (opt.dense_ffn || opt.f32_activations) return Status::Ok();
  return ple_build_sparse_ffn(&m->ple, m->tables);
}

Status load_bitllama2c(LoadedModel* m, const LoadOptions& opt) {
  const uint8_t* data = m->file.data();
  const size_t size = m->file.size();
  m->arch = arch_info("bitnet-llama2c");
  TernaryLayout order = TernaryLayout::kBitllama2cMsb;
  bool detected = false;
  if (opt.bit_order == "lsb") {
    order = TernaryLayout::kBitllama2cLsb;
  } else if (opt.bit_order == "auto") {
    double score[2] = {0, 0};
    const TernaryLayout orders[2] = {TernaryLayout::kBitllama2cMsb, TernaryLayout::kBitllama2cLsb};
    for (int i = 0; i < 2; ++i) {
      const Arena::Mark mark = m->tables.mark();
      BitLlama2cModel trial;
      Status st = bitllama2c_load(data, size, orders[i], m->tables, &trial);
      if (st.ok()) st = bitllama2c_greedy_confidence(trial, 16, &score[i]);
      m->tables.rollback(mark);
      if (!st.ok()) return st;
    }
    order = score[1] > score[0] ? orders[1] : orders[0];
    detected = true;
  } else if (opt.bit_order != "msb") {
    return Status::Error(Code::kInvalidArgument, "bit order '%s' (msb, lsb or auto)", opt.bit_order.c_str());
  }
  MC_TRY(bitllama2c_load(data, size, order, m->tables, &m->bitnet));
  m->bit_order = order;
  m->model.cfg = m->bitnet.cfg;
  m->format = std::string("bitllama2.c ternary (") + (order == TernaryLayout::kBitllama2cMsb ? "msb" : "lsb") +
              (detected ? ", detected)" : ")");
  return Status::Ok();
}

// "llama, bitllama2c, ...": the GGUF architectures of the registry, for messages.
std::string known_gguf_archs() {
  std::string s;
  for (int i = 0; i < n_archs(); ++i) s += std::string(i ? ", " : "") + arch_table()[i].gguf_arch;
  return s;
}

// The model of a GGUF file whose row m->arch is set: the family's reader.
Status read_gguf_model(LoadedModel* m, const LoadOptions& opt) {
  switch (m->arch->family) {
    case ArchFamily::kBitLlama2c:
      MC_TRY(bitllama2c_from_gguf(m->gguf, m->tables, &m->bitnet));
      m->model.cfg = m->bitnet.cfg;
      return Status::Ok();
    case ArchFamily::kPle:
      MC_TRY(ple_from_gguf(m->gguf, m->tables, &m->ple));
      return set_ple(m, opt);
    case ArchFamily::kTransformer: break;
  }
  return transformer_from_gguf(m->gguf, m->tables, &m->model);  // the spec from the row (format/transformer_gguf.h)
}

}  // namespace

Status load_model(const std::string& path, std::unique_ptr<LoadedModel>* out) {
  return load_model(path, LoadOptions(), out);
}

Status load_model(const std::string& path, const LoadOptions& opt, std::unique_ptr<LoadedModel>* out) {
  auto m = std::make_unique<LoadedModel>();
  m->path = path;
  m->kv = opt.kv;
  m->dense_ffn = opt.dense_ffn;
  m->sparse_max_live = opt.sparse_max_live;
  MC_TRY(m->file.open(path));
  const uint8_t* data = m->file.data();
  const size_t size = m->file.size();
  // Tables are small; llama2.c v2 files expand to f32 (4 bytes per stored byte at most); a GGUF
  // ReLU model's sparse FFN copies its down matrices (f32 transposed, or column-stored blocks).
  const size_t table_bytes = (size_t{16} << 20) + (is_gguf(data, size) ? size / 2 : 4 * size);
  m->table_memory.reset(new uint8_t[table_bytes]);
  m->tables.reset(Tier::kHost, m->table_memory.get(), table_bytes);
  Status st;
  if (is_gguf(data, size)) {
    m->format = "gguf";
    st = m->gguf.open(data, size, m->tables);
    // A file without general.architecture is read as llama (as llama.cpp's early files).
    std::string arch = "llama";
    if (st.ok() && m->gguf.find_kv("general.architecture")) {
      GgufStr s{"", 0};
      st = m->gguf.get_string("general.architecture", &s);
      arch.assign(s.data, s.size);
    }
    if (st.ok()) {
      m->arch = arch_info_by_gguf(arch.c_str());
      if (!m->arch) {
        m->arch = arch_info("llama");
        st = Status::Error(Code::kUnsupported, "GGUF architecture '%s' is not one mcullm runs (%s)", arch.c_str(),
                           known_gguf_archs().c_str());
      }
    }
    if (st.ok()) st = read_gguf_model(m.get(), opt);
    if (st.ok() && gguf_has_vocab_head(m->gguf)) {  // head groups stored by `mcullm head --write`
      if (!m->arch->head_groups)
        st = Status::Error(Code::kUnsupported, "head groups are read for llama and PLE models (this one is %s)", m->arch_name());
      else
        st = vocab_head_from_gguf(m->gguf, m->is(ArchFamily::kPle) ? m->ple.output : m->model.output, m->tables, &m->head_groups);
      m->has_head_groups = st.ok();
      if (st.ok()) st = vocab_head_default_from_gguf(m->gguf, &m->default_head, &m->default_head_top);
    }
  } else if (esp32ai_is_model(data, size)) {
    st = esp32ai_load(data, size, m->tables, &m->ple);
    if (st.ok()) {
      m->format = m->ple.cfg.version == 0 ? "esp32-ai v0" : "esp32-ai v1";
      st = set_ple(m.get(), opt);
    }
  } else if (bitllama2c_is_ternary(data, size)) {
    st = load_bitllama2c(m.get(), opt);
  } else {
    Llama2cInfo info;
    st = llama2c_read_header(data, size, &info);
    if (st.ok()) {
      m->format = info.version == Llama2cVersion::kLegacy ? "llama2.c legacy"
                  : info.version == Llama2cVersion::kV1F32 ? "llama2.c ak42 v1"
                                                            : "llama2.c ak42 v2";
      st = llama2c_load(data, size, m->tables, &m->model);
    }
  }
  if (!st.ok()) return st.prefix("%s: ", path.c_str());
  *out = std::move(m);
  return Status::Ok();
}

Status resolve_head(const std::string& mode, int top_given, const LoadedModel& lm, bool sampling, HeadChoice* out) {
  HeadChoice h;
  if (mode == "auto") {
    h.mode = lm.has_head_groups ? lm.default_head : HeadMode::kFull;
    if (h.mode == HeadMode::kPruned && sampling) h.mode = HeadMode::kFull;
  } else if (!parse_head_mode(mode.c_str(), &h.mode)) {
    return Status::Error(Code::kInvalidArgument, "--head %s is not auto, full, two-stage or pruned", mode.c_str());
  } else if (h.mode == HeadMode::kPruned && sampling) {
    return Status::Error(Code::kInvalidArgument,
                         "--head pruned is exact for greedy decoding only (--temp 0, no repeat penalty); sampling needs --head full or two-stage");
  }
  if (h.mode != HeadMode::kFull) {
    if (!lm.has_head_groups)
      return Status::Error(Code::kUnsupported, "--head %s needs head groups in %s (mcullm head --write adds them)",
                           head_mode_name(h.mode), lm.path.c_str());
    h.groups = &lm.head_groups;
    const int top = top_given > 0 ? top_given : lm.default_head_top > 0 ? lm.default_head_top : kDefaultTopGroups;
    h.top_groups = top < lm.head_groups.n_groups ? top : lm.head_groups.n_groups;
    if (top_given > lm.head_groups.n_groups)
      return Status::Error(Code::kOutOfRange, "--head-top %d: the model's head has %d groups", top_given, lm.head_groups.n_groups);
  }
  *out = h;
  return Status::Ok();
}

Status make_decoder(const LoadedModel& m, int ctx_len, ThreadPool* pool, const KernelSet* kernels, size_t extra_bytes,
                    DecoderInstance* out) {
  const LlamaConfig& c = m.model.cfg;
  if (ctx_len <= 0) ctx_len = c.seq_len;
  const size_t kv = static_cast<size_t>(c.n_layers) * static_cast<size_t>(ctx_len) * kv_bytes_per_layer_position(c, m.kv) +
                    2ull * kPrefillBatch * c.kv_dim() * sizeof(float) + 4ull * c.dim;  // int8: staging rows, query
  // Batched prefill buffers (BatchState) for kPrefillBatch tokens, with room for alignment.
  const size_t widest = static_cast<size_t>(c.hidden_dim > c.dim ? c.hidden_dim : c.dim) + 64;
  const size_t batch = static_cast<size_t>(kPrefillBatch) *
                           (4ull * c.dim + 2ull * c.hidden_dim + static_cast<size_t>(c.vocab_size) + 2 * widest) * sizeof(float) +
                       (64u << 10);
  // A PLE model's columns also hold their per-layer inputs and gates (PleContext::enable_batch).
  const size_t ple = m.is(ArchFamily::kPle) ? static_cast<size_t>(kPrefillBatch + 1) *
                                                  (static_cast<size_t>(m.ple.cfg.n_layers + 1) * m.ple.cfg.ple_dim + 2 * widest) *
                                                  sizeof(float)
                                            : 0;
  const size_t bytes = kv + ple + 16ull * (c.vocab_size + c.hidden_dim + c.dim) * sizeof(float) +
                       4ull * c.n_heads * static_cast<size_t>(ctx_len) * sizeof(float) + batch + extra_bytes + (1u << 20);
  out->memory.reset(new uint8_t[bytes]);
  out->work.reset(Tier::kHost, out->memory.get(), bytes);
  if (m.is(ArchFamily::kBitLlama2c)) {
    auto bit = std::make_shared<BitLlama2cContext>();
    MC_TRY(bit->init(&m.bitnet, ctx_len, out->work, pool, kernels, m.kv));
    out->decoder = bit;
    return Status::Ok();
  }
  if (m.is(ArchFamily::kPle)) {
    auto ple = std::make_shared<PleContext>();
    MC_TRY(ple->init(&m.ple, ctx_len, out->work, pool, kernels, m.f32_activations, m.kv));
    ple->set_sparse_ffn(!m.dense_ffn, m.sparse_max_live);
    MC_TRY(ple->enable_batch(kPrefillBatch, out->work));
    out->decoder = ple;
    return Status::Ok();
  }
  auto ctx = std::make_shared<TransformerContext>();  // the llama family
  MC_TRY(ctx->init(&m.model, ctx_len, out->work, pool, kernels, m.kv));
  ctx->set_sparse_ffn(!m.dense_ffn, m.sparse_max_live);
  MC_TRY(ctx->enable_batch(kPrefillBatch, out->work));
  out->decoder = ctx;
  return Status::Ok();
}

Status tokenizer_from_gguf(const GgufFile& file, Arena& scratch, Llama2cTokenizer* tok) {
  GgufStr kind;
  MC_TRY(file.get_string("tokenizer.ggml.model", &kind));
  if (!kind.equals("llama"))
    return Status::Error(Code::kUnsupported, "tokenizer.ggml.model '%.*s' (the llama2.c-style tokenizer reads 'llama')",
                         static_cast<int>(kind.size < 32 ? kind.size : 32), kind.data);
  const Arena::Mark mark = scratch.mark();
  GgufStr* tokens = nullptr;
  uint64_t count = 0;
  Status st = file.get_string_array("tokenizer.ggml.tokens", scratch, &tokens, &count);
  if (!st.ok()) return st;
  const uint8_t* score_bytes = nullptr;
  uint64_t score_count = 0;
  st = file.get_array("tokenizer.ggml.scores", GgufType::kF32, &score_bytes, &score_count);
  if (st.ok() && score_count != count)
    st = Status::Error(Code::kCorrupt, "tokenizer.ggml.scores has %llu entries for %llu tokens",
                       static_cast<unsigned long long>(score_count), static_cast<unsigned long long>(count));
  if (st.ok()) {
    std::vector<std::string> pieces(count);
    std::vector<float> scores(count);
    for (uint64_t i = 0; i < count; ++i) {
      pieces[i] = from_spm_spaces(tokens[i].data, tokens[i].size);
      std::memcpy(&scores[i], score_bytes + 4 * i, 4);
    }
    st = tok->load_vocab(std::move(pieces), std::move(scores));
  }
  scratch.rollback(mark);
  return st;
}

Status load_tokenizer(const LoadedModel& model, const std::string& explicit_path, Llama2cTokenizer* tok,
                      std::string* source) {
  const int vocab = model.model.cfg.vocab_size;
  auto check_vocab = [&](const std::string& where) {
    if (tok->vocab_size() != vocab)
      return Status::Error(Code::kInvalidArgument, "tokenizer %s has %d tokens, the model %d", where.c_str(),
                           tok->vocab_size(), vocab);
    *source = where;
    return Status::Ok();
  };
  if (!explicit_path.empty()) {
    MappedFile f;
    MC_TRY(f.open(explicit_path));
    if (is_gguf(f.data(), f.size())) {
      std::vector<uint8_t> mem(size_t{8} << 20);
      Arena scratch(Tier::kHost, mem.data(), mem.size());
      GgufFile g;
      MC_TRY(g.open(f.data(), f.size(), scratch));
      Status st = tokenizer_from_gguf(g, scratch, tok);
      if (!st.ok()) return st.prefix("%s: ", explicit_path.c_str());
    } else {
      Status st = tok->load_bytes(f.data(), f.size(), vocab);
      if (!st.ok()) return st.prefix("%s: ", explicit_path.c_str());
    }
    return check_vocab(explicit_path);
  }
  if (model.format == "gguf" && model.gguf.find_kv("tokenizer.ggml.tokens")) {
    Arena& scratch = const_cast<Arena&>(model.tables);  // rolled back after use
    MC_TRY(tokenizer_from_gguf(model.gguf, scratch, tok));
    return check_vocab("embedded in " + model.path);
  }
  const std::string dir = dir_of(model.path);
  for (const std::string& name : {std::string("tokenizer.bin"), "tok" + std::to_string(vocab) + ".bin"}) {
    const std::string candidate = dir + "/" + name;
    if (!file_exists(candidate)) continue;
    Status st = tok->load_file(candidate, vocab);
    if (st.ok()) return check_vocab(candidate);
  }
  return Status::Error(Code::kNotFound,
                       "no tokenizer for %s: none embedded, no tokenizer.bin or tok%d.bin beside it (give one with -z)",
                       model.path.c_str(), vocab);
}

Status load_tokenizer(const LoadedModel& model, const std::string& explicit_path, std::unique_ptr<Tokenizer>* tok,
                      std::string* source) {
  const int vocab = model.model.cfg.vocab_size;
  auto check_vocab = [&](const std::string& where) {
    const int n = (*tok)->vocab_size();
    const bool spm = std::strcmp((*tok)->kind(), "llama2c-spm") == 0;
    if (spm ? n != vocab : n > vocab)
      return Status::Error(Code::kInvalidArgument, "tokenizer %s has %d tokens, the model %d", where.c_str(), n, vocab);
    *source = where;
    return Status::Ok();
  };
  if (!explicit_path.empty()) {
    MC_TRY(load_tokenizer_file(explicit_path, tok));
    return check_vocab(explicit_path);
  }
  if (model.format == "gguf" && model.gguf.find_kv("tokenizer.ggml.tokens")) {
    Arena& scratch = const_cast<Arena&>(model.tables);  // rolled back after use
    MC_TRY(tokenizer_from_gguf_any(model.gguf, scratch, tok));
    return check_vocab("embedded in " + model.path);
  }
  auto spm = std::make_unique<Llama2cTokenizer>();
  MC_TRY(load_tokenizer(model, explicit_path, spm.get(), source));
  *tok = std::move(spm);
  return Status::Ok();
}

namespace {
template <class Layer, class Fn>
void for_each_tl_in(const Layer* layers, int n_layers, Fn fn) {
  for (int l = 0; l < n_layers; ++l)
    for (const MatRef* m : {&layers[l].wq, &layers[l].wk, &layers[l].wv, &layers[l].wo, &layers[l].w1, &layers[l].w2,
                            &layers[l].w3})
      if (m->tl) fn(*m->tl);
}

// Every tl1 / tl2 matrix of a BitNet or bitllama2.c model.
template <class Fn>
void for_each_tl(const LoadedModel& m, Fn fn) {
  if (m.is(ArchFamily::kBitLlama2c)) for_each_tl_in(m.bitnet.layers, m.bitnet.cfg.n_layers, fn);
  if (m.is(ArchFamily::kTransformer)) for_each_tl_in(m.model.layers, m.model.end() - m.model.first_layer, fn);
}
}  // namespace

bool model_has_tl(const LoadedModel& m) {
  bool any = false;
  for_each_tl(m, [&](const TlTensor&) { any = true; });
  return any;
}

std::vector<std::string> tl_tiling_notes(const LoadedModel& m) {
  std::vector<std::string> notes;
  for_each_tl(m, [&](const TlTensor& t) {
    const TlTiling want = tl_file_tiling(t.type, t.rows, t.cols, tl_tiling_for(t.type, t.rows, t.cols));
    if (want.BM == t.tiling.BM && want.BK == t.tiling.BK && want.bm == t.tiling.bm) return;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s %dx%d is packed with BM %d BK %d bm %d, the tuning asks for BM %d BK %d bm %d: "
                  "the file's tiling is used (repack with convert --use-pretuned)",
                  tl_type_name(t.type), t.rows, t.cols, t.tiling.BM, t.tiling.BK, t.tiling.bm, want.BM, want.BK, want.bm);
    bool seen = false;
    for (const std::string& n : notes) seen = seen || n == buf;
    if (!seen) notes.push_back(buf);
  });
  return notes;
}

}  // namespace mcullm
