// `mcullm eval`: how well a model predicts held-out text (nats/token, bits/byte, perplexity).
//
// Method. FACTS.md section 2 gives figures of an independent program (stories260K: 0.956 bits/byte
// on the first 20 chunks; 1.6082 nats/token and 1.1420 bits/byte on the whole file); of the readings
// of "chunks <= 1000 bytes cut at blank lines" tried, this one alone reproduces all three:
//  * Paragraphs. The text is cut at every "\n\n", scanning left to right ("\n\n\n" ends a paragraph
//    at its first two newlines; the next one starts with the third). Empty paragraphs (before a
//    leading or after a trailing "\n\n", or between doubled separators) are dropped. Nothing else is
//    stripped: trailing spaces stay, and a file ending in a single "\n" keeps it in its last paragraph.
//  * Chunks. Whole paragraphs, packed greedily in order, joined by "\n\n". A chunk counts with the
//    blank line that closes it: paragraph p joins the chunk while chunk + "\n\n" + p + "\n\n" takes
//    at most --max-chunk-bytes bytes (a chunk's text is thus at most limit - 2 bytes). A paragraph
//    too long for that is a chunk on its own (never split).
//  * Tokens. Each chunk is encoded alone as BOS + encode(chunk) (run.c's encode, which puts the
//    dummy-prefix " " before the text) and scored from position 0 with a fresh KV cache: each token
//    after BOS costs -log softmax(logits)[token], in double from the f32 logits with a stable
//    log-sum-exp (the project's own exp/log: the same figures on every machine). A chunk with more
//    tokens than the context (BOS included) keeps its first `context` tokens (context - 1
//    predictions); the output says how many were cut.
//  * Bytes. The UTF-8 bytes of each chunk's text: its paragraphs and the "\n\n" between them, not
//    the separators between chunks, not the dummy-prefix space; a cut chunk still counts all its
//    bytes (as the reference does).
//  * Figures. nats/token = nats / tokens scored; bits/byte = nats / ln 2 / bytes; perplexity =
//    exp(nats/token).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "progress.h"
#include "core/fmath.h"
#include "session.h"
#include "load/tokenizer_loader_host.h"

namespace mcullm::cli {

namespace {

struct EvalOptions {
  ModelOptions m;
  std::string text_file;
  long long chunks = -1;  // -1: all
  long long max_chunk_bytes = 1000;
  bool json = false;
  bool chunks_given = false;
};

// See the comment at the top of the file.
std::vector<std::string> split_chunks(const std::string& text, size_t limit) {
  std::vector<std::string> paragraphs;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    if (end > start) paragraphs.push_back(text.substr(start, end - start));
    start = end + 2;
  }
  std::vector<std::string> chunks;
  std::string cur;
  for (const std::string& p : paragraphs) {
    if (!cur.empty() && cur.size() + 2 + p.size() + 2 <= limit) {
      cur += "\n\n";
      cur += p;
      continue;
    }
    if (!cur.empty()) chunks.push_back(std::move(cur));
    cur = p;
  }
  if (!cur.empty()) chunks.push_back(std::move(cur));
  return chunks;
}

struct EvalTotals {
  long long chunks_in_text = 0, chunks = 0, tokens = 0, bytes = 0, truncated = 0;
  double nats = 0.0, seconds = 0.0;
};

// -log softmax(logits)[target] in double: max + log(sum exp(l - max)) - l[target].
double token_nats(const float* logits, int n, int target) {
  double mx = logits[0];
  for (int i = 1; i < n; ++i)
    if (logits[i] > mx) mx = logits[i];
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += mc_exp(static_cast<double>(logits[i]) - mx);
  return mx + mc_log(sum) - static_cast<double>(logits[target]);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_number(double v, const char* fmt) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

int eval(const EvalOptions& o) {
  if (o.max_chunk_bytes <= 0)
    return report(Status::Error(Code::kInvalidArgument, "--max-chunk-bytes must be at least 1 (got %lld)", o.max_chunk_bytes));
  if (o.chunks_given && o.chunks <= 0)
    return report(Status::Error(Code::kInvalidArgument, "--chunks must be at least 1 (got %lld)", o.chunks));
  std::error_code ec;
  if (!std::filesystem::exists(o.text_file, ec))
    return report(Status::Error(Code::kIo, "the text file %s does not exist", o.text_file.c_str()));
  if (!std::filesystem::is_regular_file(o.text_file, ec))
    return report(Status::Error(Code::kInvalidArgument, "the text file %s is not a regular file", o.text_file.c_str()));
  std::ifstream f(o.text_file, std::ios::binary);
  if (!f) return report(Status::Error(Code::kIo, "cannot read the text file %s", o.text_file.c_str()));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const std::vector<std::string> all_chunks = split_chunks(text, static_cast<size_t>(o.max_chunk_bytes));
  if (text.empty()) return report(Status::Error(Code::kInvalidArgument, "the text file %s is empty: no text to score", o.text_file.c_str()));
  if (all_chunks.empty())
    return report(Status::Error(Code::kInvalidArgument, "the text file %s has no text to score (%zu bytes, only blank lines)",
                                o.text_file.c_str(), text.size()));

  Session s;
  if (Status st = open_session(o.m, kOpenDecoder, &s); !st.ok()) return report(st);
  const LlamaConfig& cfg = s.cfg();
  // The model's own tokenizer, else an explicit one of any kind whose ids fit the model's vocabulary
  // (the esp32-ai PLE fixture ships without its tokenizer: any smaller one exercises the scoring).
  std::unique_ptr<Tokenizer> tok;
  std::string tok_source = o.m.tokenizer;
  if (Status st = o.m.tokenizer.empty() ? load_tokenizer(*s.lm, "", &tok, &tok_source) : load_tokenizer_file(o.m.tokenizer, &tok);
      !st.ok())
    return report(st);
  if (tok->vocab_size() > cfg.vocab_size)
    return report(Status::Error(Code::kInvalidArgument, "the tokenizer has %d tokens, the model %d", tok->vocab_size(), cfg.vocab_size));
  if (tok->bos_id() < 0) return report(Status::Error(Code::kInvalidArgument, "the tokenizer has no BOS token to start each chunk"));
  Decoder& model = *s.dec.decoder;
  const int ctx_len = model.ctx_len();
  const int vocab = model.vocab_size();

  EvalTotals t;
  t.chunks_in_text = static_cast<long long>(all_chunks.size());
  const long long n_chunks = o.chunks_given && o.chunks < t.chunks_in_text ? o.chunks : t.chunks_in_text;
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> ids;
  Progress progress("eval", n_chunks, "chunks");
  for (long long c = 0; c < n_chunks; ++c, progress.step()) {
    const std::string& chunk = all_chunks[static_cast<size_t>(c)];
    EncodeOptions eo;
    eo.add_bos = true;
    if (Status st = tok->encode(chunk, eo, &ids); !st.ok()) return report(st);
    size_t n = ids.size();
    if (n > static_cast<size_t>(ctx_len)) {
      n = static_cast<size_t>(ctx_len);
      ++t.truncated;
    }
    // Each chunk starts again at position 0: attention reads only the cache rows of positions
    // 0..pos, all written for this chunk, so this is a fresh KV cache.
    // Batched prefill (the same logits as one forward per token).
    const size_t batch = static_cast<size_t>(model.max_batch());
    for (size_t pos = 0; pos + 1 < n;) {
      const size_t m = n - 1 - pos < batch ? n - 1 - pos : batch;
      const float* rows = nullptr;
      if (Status st = model.prefill(ids.data() + pos, static_cast<int>(m), static_cast<int>(pos), &rows); !st.ok())
        return report(st);
      for (size_t i = 0; i < m; ++i, ++pos) t.nats += token_nats(rows + i * static_cast<size_t>(vocab), vocab, ids[pos + 1]);
    }
    t.tokens += static_cast<long long>(n) - 1;
    t.bytes += static_cast<long long>(chunk.size());
    ++t.chunks;
  }
  progress.finish();
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (t.tokens == 0 || t.bytes == 0)
    return report(Status::Error(Code::kInvalidArgument, "no token was scored (a context of %d tokens leaves no prediction)", ctx_len));

  const double nats_per_token = t.tokens > 0 ? t.nats / static_cast<double>(t.tokens) : 0.0;
  const double bits_per_byte = t.bytes > 0 ? t.nats / mc_log(2.0) / static_cast<double>(t.bytes) : 0.0;
  const double perplexity = mc_exp(nats_per_token);
  const double tok_per_s = t.seconds > 0 ? static_cast<double>(t.tokens) / t.seconds : 0.0;

  std::FILE* summary = o.json ? stderr : stdout;
  std::fprintf(summary, "eval: model %s (%s), tokenizer %s, kernels %s, %d thread%s, context %d, %s KV cache\n",
               o.m.model.c_str(), s.lm->format.c_str(), tok_source.c_str(), s.kernels->name, o.m.threads, o.m.threads == 1 ? "" : "s",
               ctx_len, kv_type_name(s.lm->kv));
  std::fprintf(summary, "eval: text %s: %lld of %lld chunks (<= %lld bytes, cut at blank lines)\n", o.text_file.c_str(), t.chunks,
               t.chunks_in_text, o.max_chunk_bytes);
  if (t.truncated > 0)
    std::fprintf(summary,
                 "eval: %lld chunk%s longer than the context of %d tokens: cut to their first %d tokens (%d predictions), "
                 "all their bytes counted\n",
                 t.truncated, t.truncated == 1 ? " was" : "s were", ctx_len, ctx_len, ctx_len - 1);
  if (tok->vocab_size() < cfg.vocab_size)
    std::fprintf(summary, "eval: the tokenizer has %d tokens, the model %d: the figures are the model's own only with its own tokenizer\n",
                 tok->vocab_size(), cfg.vocab_size);
  std::fprintf(summary, "eval: tokens scored %lld, bytes %lld\n", t.tokens, t.bytes);
  std::fprintf(summary, "eval: nats/token %.4f, bits/byte %.4f, perplexity %.4f\n", nats_per_token, bits_per_byte, perplexity);
  std::fprintf(summary, "eval: time %.2f s (%.1f tokens per second)\n", t.seconds, tok_per_s);
  if (FfnCounts c; model.ffn_counts(&c) && c.neurons > 0)
    std::fprintf(summary,
                 "eval: ReLU FFN: %.2f%% of neurons dead, %.2f%% skipped (up row and down weights not read; %llu of %llu "
                 "live over tokens and layers)\n",
                 100.0 * static_cast<double>(c.neurons - c.live) / static_cast<double>(c.neurons),
                 100.0 * static_cast<double>(c.skipped) / static_cast<double>(c.neurons), c.live, c.neurons);

  if (o.json) {
    std::printf("{\"model\": %s, \"tokenizer\": %s, \"text\": %s, \"kernels\": %s, \"threads\": %d, \"context\": %d, "
                "\"max_chunk_bytes\": %lld, \"chunks\": %lld, \"chunks_in_text\": %lld, \"truncated_chunks\": %lld, "
                "\"tokens\": %lld, \"bytes\": %lld, \"nats\": %s, \"nats_per_token\": %s, \"bits_per_byte\": %s, "
                "\"perplexity\": %s, \"seconds\": %s, \"tokens_per_second\": %s}\n",
                json_string(o.m.model).c_str(), json_string(tok_source).c_str(), json_string(o.text_file).c_str(),
                json_string(s.kernels->name).c_str(), o.m.threads, ctx_len, o.max_chunk_bytes, t.chunks, t.chunks_in_text, t.truncated,
                t.tokens, t.bytes, json_number(t.nats, "%.17g").c_str(), json_number(nats_per_token, "%.17g").c_str(),
                json_number(bits_per_byte, "%.17g").c_str(), json_number(perplexity, "%.17g").c_str(),
                json_number(t.seconds, "%.3f").c_str(), json_number(tok_per_s, "%.1f").c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Score held-out text: nats/token, bits/byte, perplexity");
  cmd->footer(
      "The text is cut at blank lines (\"\\n\\n\") into paragraphs, packed greedily into chunks joined by\n"
      "\"\\n\\n\": a chunk with its closing blank line takes at most --max-chunk-bytes bytes (a longer\n"
      "paragraph is a chunk of its own). Each chunk is scored alone as BOS + encode(chunk) from position 0\n"
      "with a fresh KV cache; a chunk longer than the context keeps its first <context> tokens. Bytes = the\n"
      "chunks' UTF-8 bytes (with the \"\\n\\n\" inside a chunk; without those between chunks and without the\n"
      "tokenizer's dummy-prefix space; a cut chunk counts in full). This reproduces FACTS.md section 2.");
  add_model_options(cmd, &o->m, kTokenizerFlag | kThreadsFlag | kKernelsFlag | kKvFlag);
  cmd->add_option("-f,--file", o->text_file, "The text to score (UTF-8)")->required();
  CLI::Option* chunks = cmd->add_option("--chunks", o->chunks, "Score only the first N chunks (N >= 1; default: all)");
  cmd->add_option("--max-chunk-bytes", o->max_chunk_bytes, "Largest chunk in bytes, counting its closing blank line (>= 1)")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object with the figures on stdout (the summary goes to stderr)");
  cmd->callback([o, exit_code, chunks] {
    o->chunks_given = chunks->count() > 0;
    *exit_code = eval(*o);
  });
}

}  // namespace mcullm::cli
