// `mcullm dummy`: writes a small deterministic llama model (random weights from a seed) with a word
// vocabulary, so that the engine can be run and measured with no download. Its text is word salad:
// the weights are random, but every run with the same seed writes the same file.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli.h"
#include "dummy_gguf.h"
#include "format/esp32ai.h"
#include "format/transformer_gguf_writer_host.h"
#include "core/file_io_host.h"
#include "model/arch.h"
#include "model/sampler.h"
#include "quant/q4e.h"

namespace mcullm::cli {

namespace {

struct DummyOptions {
  std::string output;
  std::string type;  // "": the arch's default (llama f32, bitnet and qwen2 i2_s)
  std::string arch = "llama", layout, embd_type, chat_template;  // embd_type "": the arch's default
  bool untied_head = false, shape_given = false;  // shape_given: one of --dim --hidden --layers ... (llama only)
  int dim = 64, hidden = 172, layers = 5, heads = 8, kv_heads = 4, seq_len = 512;
  uint64_t seed = 1234;
  std::string ffn = "silu";  // llama: the FFN activation (silu or relu)
  PretunedOptions pretuned;
};

// Common words of children's stories: the dummy's vocabulary beyond the byte tokens.
const char* const kWords =
    "the a and to was he she it they in on of his her with for that said day one big little time "
    "was happy sad play friend mom dad went saw had very but so could not all ball tree dog cat "
    "bird fish park sun sky home girl boy name lily tim ben sue max sam toy box red blue green "
    "yellow small fun run jump look find help like love want make see go come up down out over "
    "under again then when there here what who how why because did do get got give good bad nice "
    "kind new old long short fast slow hot cold warm soft loud quiet pretty funny scary brave "
    "strong tired hungry car boat bike book cake apple water rain snow wind flower garden house "
    "room bed door window school teacher baby sister brother family animal bear lion rabbit duck "
    "frog mouse horse cow pig sheep hat shoe dress coat star moon cloud river sea sand hill "
    "forest road shop door key bag cup plate spoon bread milk egg cookie candy smile laugh cry "
    "sing dance read draw paint build share learn think know feel hear tell ask say talk walk "
    "climb swim fly sleep eat drink open close push pull throw catch hold carry pick found lost "
    "gave took made came ran jumped looked played smiled laughed cried wanted liked loved "
    "thought knew felt heard told asked walked climbed";

std::vector<std::string> dummy_vocab() {
  std::vector<std::string> v = {"<unk>", "\n<s>\n", "\n</s>\n"};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.push_back(buf);
  }
  std::istringstream in(kWords);
  std::string w;
  for (const char* p : {" ", ".", ",", "!", "\n", "\"", "?"}) v.push_back(p);
  while (in >> w) {
    v.push_back(" " + w);
    v.push_back(std::string(1, static_cast<char>(w[0] - 32)) + w.substr(1));  // Capitalised, sentence start
  }
  // drop duplicates, keep the first
  std::vector<std::string> out;
  for (const std::string& s : v) {
    bool seen = false;
    for (const std::string& t : out) seen = seen || t == s;
    if (!seen) out.push_back(s);
  }
  return out;
}

// Weights ~ uniform(-a, a) from llama2.c's xorshift generator: the same on every machine.
struct Filler {
  uint64_t state;
  std::vector<std::vector<float>> store;
  const float* fill(size_t n, float a) {
    store.emplace_back(n);
    for (float& x : store.back()) x = (xorshift_f32(&state) * 2.0f - 1.0f) * a;
    return store.back().data();
  }
  const float* ones(size_t n) {
    store.emplace_back(n, 1.0f);
    return store.back().data();
  }
};

// The word vocabulary padded with "[PAD<id>]" pieces up to `size` tokens (0: no padding).
Status padded_vocab(const std::string& layout, int size, Llama2cTokenizer* tok) {
  std::vector<std::string> vocab = dummy_vocab();
  const size_t words = vocab.size();
  if (size > 0) {
    if (static_cast<size_t>(size) < words)
      return Status::Error(Code::kInvalidArgument, "layout %s: vocabulary %d is smaller than the word list", layout.c_str(), size);
    for (size_t i = words; i < static_cast<size_t>(size); ++i) vocab.push_back("[PAD" + std::to_string(i) + "]");
  }
  std::vector<float> scores(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) scores[i] = i < 259 ? 0.0f : i < words ? -static_cast<float>(i) : -1e9f;
  return tok->load_vocab(vocab, scores);
}

// A BitNet b1.58 model of a named layout (bitnet.cpp's generate-dummy-bitnet-model): the word
// vocabulary, padded with "[PAD<id>]" pieces up to the layout's vocabulary size.
int dummy_bitnet(const DummyOptions& o) {
  std::string name = o.layout;  // default: the architecture's "tiny" layout
  for (const ModelLayout& l : bitnet_layouts())
    if (name.empty() && l.arch == o.arch && l.name.rfind("tiny", 0) == 0) name = l.name;
  const ModelLayout* layout = bitnet_layout_by_name(name);
  if (!layout)
    return report(Status::Error(Code::kInvalidArgument, "--layout %s is unknown (%s)", name.c_str(),
                                layout_names(bitnet_layouts()).c_str()));
  if (layout->arch != o.arch)
    return report(Status::Error(Code::kInvalidArgument, "layout %s is architecture %s, not %s", layout->name.c_str(),
                                layout->arch.c_str(), o.arch.c_str()));
  GgufDummyOptions opt;
  opt.layout = *layout;
  if (!o.type.empty() && o.type != "f32" && o.type != "i2_s" && o.type != "tl1" && o.type != "tl2")
    return report(Status::Error(Code::kInvalidArgument, "--type %s: BitNet layers are written as i2_s, tl1 or tl2",
                                o.type.c_str()));
  if (Status st = apply_pretuned(o.pretuned); !st.ok()) return report(st);  // the TL tilings to pack with
  opt.linear_type = o.type.empty() || o.type == "f32" ? DType::kI2_S : dtype_info_by_name(o.type.c_str())->type;
  opt.seed = o.seed;
  opt.embedding_type = dtype_info_by_name(o.embd_type.empty() ? "f16" : o.embd_type.c_str())->type;
  opt.name = "mcullm dummy bitnet " + layout->name;
  Llama2cTokenizer tok;
  if (Status st = padded_vocab(layout->name, layout->vocab, &tok); !st.ok()) return report(st);
  GgufWriter w;
  GgufDummyReport rep;
  if (Status st = write_gguf_dummy(opt, tok, &w, &rep); !st.ok()) return report(st);
  if (Status st = w.write_file(o.output); !st.ok()) return report(st);
  for (const std::string& note : rep.notes) std::fprintf(stderr, "mcullm: note: %s\n", note.c_str());
  std::fprintf(stderr, "mcullm: wrote %s: dummy %s layout %s, dim %d, %d layers, vocab %d, %s + %s embedding, "
               "%.2f M parameters (%.2f M ternary), %.2f MiB\n",
               o.output.c_str(), layout->arch.c_str(), layout->name.c_str(), layout->dim, layout->layers,
               tok.vocab_size(), dtype_info(opt.linear_type)->name, dtype_info(opt.embedding_type)->name, rep.params / 1e6, rep.linear_params / 1e6, rep.weight_bytes / 1048576.0);
  return 0;
}

// An esp32-ai PLE model file (header v0, int4 q4e weights, group 128) of a named layout: "28.9M"
// (esp32-tinyLLM's TinyStories model: its header reads V=32768 D=96 L=6 H=4 F=66 P=128 seq_len=512
// group=128) or "3.4M" (the ../shared/models/esp32-ai-ple fixture's shape). For the cost model:
// the weights are random, the text is noise. --ffn relu writes a v1 header with the ReLU-FFN flag
// (the combo model's FFN, for the sparse FFN's timing).
int dummy_ple(const DummyOptions& o) {
  struct Layout {
    const char* name;
    int vocab, dim, layers, heads, ffn, ple;
  };
  const Layout layouts[] = {{"28.9M", 32768, 96, 6, 4, 66, 128}, {"3.4M", 4096, 128, 6, 4, 415, 64}};
  const std::string name = o.layout.empty() ? "28.9M" : o.layout;
  const Layout* lay = nullptr;
  for (const Layout& l : layouts)
    if (name == l.name) lay = &l;
  if (!lay) return report(Status::Error(Code::kInvalidArgument, "--layout %s is unknown for esp32ai-ple (28.9M, 3.4M)", name.c_str()));
  if (!o.type.empty()) return report(Status::Error(Code::kInvalidArgument, "--arch esp32ai-ple writes int4 (q4e) weights; drop --type"));
  constexpr int kGroup = 128;
  std::vector<uint8_t> b;
  auto put32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  auto putf = [&](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    put32(u);
  };
  const bool relu = o.ffn == "relu";
  if (relu) {  // v1: version, header bytes, flags (tied head, ReLU FFN), then both vocabularies
    put32(kEsp32aiMagicV1);
    put32(1);
    put32(static_cast<uint32_t>(kEsp32aiHeaderV1Bytes));
    put32(kEsp32aiFlagTied | kEsp32aiFlagReluFfn);
    for (int v : {lay->vocab, lay->vocab, lay->dim, lay->layers, lay->heads, lay->ffn, lay->ple, 512, kGroup})
      put32(static_cast<uint32_t>(v));
  } else {
    put32(kEsp32aiMagicV0);
    for (int v : {lay->vocab, lay->dim, lay->layers, lay->heads, lay->ffn, lay->ple, 512, kGroup}) put32(static_cast<uint32_t>(v));
  }
  putf(10000.0f);
  Filler f{o.seed ? o.seed : 1, {}};
  auto quant = [&](int rows, int cols) {
    const size_t n = static_cast<size_t>(rows) * cols;
    std::vector<float> x(n);
    for (float& v : x) v = (xorshift_f32(&f.state) * 2.0f - 1.0f) / std::sqrt(static_cast<float>(cols));
    const size_t at = b.size();
    b.resize(at + q4e_tensor_bytes(rows, cols, kGroup));
    q4e_quantize_tensor(x.data(), rows, cols, kGroup, b.data() + at);
  };
  auto ones = [&](int n) {
    for (int i = 0; i < n; ++i) putf(1.0f);
  };
  const int D = lay->dim, L = lay->layers, P = lay->ple, F = lay->ffn;
  quant(lay->vocab, D);  // tok_emb, the tied head
  quant(L * P, D);       // ple_model_proj
  ones(P);               // ple_proj_norm
  quant(lay->vocab, L * P);  // ple_table
  for (int l = 0; l < L; ++l) {
    ones(D);
    quant(3 * D, D);
    quant(D, D);
    ones(D);
    quant(F, D);
    quant(F, D);
    quant(D, F);
    quant(P, D);
    quant(D, P);
    ones(D);
  }
  ones(D);
  if (Status st = write_file_atomic(o.output, b.data(), b.size()); !st.ok()) return report(st);
  std::fprintf(stderr, "mcullm: wrote %s: dummy esp32-ai PLE layout %s (vocab %d, dim %d, %d layers, ffn %d%s, ple %d), %.2f MiB\n",
               o.output.c_str(), lay->name, lay->vocab, D, L, F, relu ? " relu" : "", P, b.size() / 1048576.0);
  return 0;
}

// A Qwen2 model of a named layout (dummy_gguf.h): ternary linear layers (i2_s by
// default; --type picks tl1 / tl2 or a dense type), a 4-bit embedding (q4_0 by default) and a tied head.
int dummy_qwen2(const DummyOptions& o) {
  const std::string name = o.layout.empty() ? "tiny" : o.layout;
  const ModelLayout* layout = qwen2_layout_by_name(name);
  if (!layout)
    return report(Status::Error(Code::kInvalidArgument, "--layout %s is unknown for qwen2 (%s)", name.c_str(),
                                layout_names(qwen2_layouts()).c_str()));
  GgufDummyOptions opt;
  opt.layout = *layout;
  opt.seed = o.seed;
  opt.linear_type = dtype_info_by_name(o.type.empty() ? "i2_s" : o.type.c_str())->type;
  opt.embedding_type = dtype_info_by_name(o.embd_type.empty() ? "q4_0" : o.embd_type.c_str())->type;
  opt.tied_head = !o.untied_head;
  opt.relu_ffn = o.ffn == "relu";
  opt.name = "mcullm dummy qwen2 " + layout->name;
  if (Status st = apply_pretuned(o.pretuned); !st.ok()) return report(st);
  Llama2cTokenizer tok;
  if (Status st = padded_vocab(layout->name, layout->vocab, &tok); !st.ok()) return report(st);
  GgufWriter w;
  GgufDummyReport rep;
  if (Status st = write_gguf_dummy(opt, tok, &w, &rep); !st.ok()) return report(st);
  if (Status st = w.write_file(o.output); !st.ok()) return report(st);
  for (const std::string& note : rep.notes) std::fprintf(stderr, "mcullm: note: %s\n", note.c_str());
  std::fprintf(stderr, "mcullm: wrote %s: dummy qwen2 layout %s, dim %d, %d layers, %d/%d heads, vocab %d, %s linear + %s "
               "embedding (%s head%s), %.2f M parameters (%.2f M linear), %.2f MiB\n",
               o.output.c_str(), layout->name.c_str(), layout->dim, layout->layers, layout->heads, layout->kv_heads,
               tok.vocab_size(), dtype_info(opt.linear_type)->name, dtype_info(opt.embedding_type)->name,
               opt.tied_head ? "tied" : "separate", opt.relu_ffn ? ", ReLU FFN" : "", rep.params / 1e6, rep.linear_params / 1e6, rep.weight_bytes / 1048576.0);
  return 0;
}

// A llama of the given shape (--dim ...), f32 or one --type, with the word vocabulary.
int dummy_llama(const DummyOptions& o) {
  if (!o.layout.empty()) return report(Status::Error(Code::kInvalidArgument, "--layout needs --arch bitnet, bitnet-25, qwen2 or esp32ai-ple"));
  if (!o.embd_type.empty()) return report(Status::Error(Code::kInvalidArgument, "--embd-type needs --arch bitnet, bitnet-25 or qwen2"));
  if (o.type == "i2_s" || o.type == "tl1" || o.type == "tl2")
    return report(Status::Error(Code::kInvalidArgument, "--type %s needs --arch bitnet or bitnet-25", o.type.c_str()));
  const std::vector<std::string> vocab = dummy_vocab();
  TransformerModel m;
  if (o.ffn == "relu") m.spec.act = FfnAct::kRelu;
  LlamaConfig& c = m.cfg;
  c.dim = o.dim;
  c.hidden_dim = o.hidden;
  c.n_layers = o.layers;
  c.n_heads = o.heads;
  c.n_kv_heads = o.kv_heads;
  c.vocab_size = static_cast<int>(vocab.size());
  c.seq_len = o.seq_len;
  if (Status st = c.validate(); !st.ok()) return report(Status::Error(Code::kInvalidArgument, "%s", st.message()));

  Filler f{o.seed ? o.seed : 1, {}};
  const size_t d = static_cast<size_t>(c.dim), kv = static_cast<size_t>(c.kv_dim()), h = static_cast<size_t>(c.hidden_dim);
  const float wa = 1.0f / std::sqrt(static_cast<float>(c.dim));
  // Small embeddings keep the tied head's logits within a few units, so sampling spreads over many
  // words instead of locking onto one; byte and special tokens (BOS / EOS would end the text early)
  // get smaller ones still, so whole words win.
  std::vector<float> emb(static_cast<size_t>(c.vocab_size) * d);
  for (size_t i = 0; i < emb.size(); ++i) {
    const size_t token = i / d;
    emb[i] = (xorshift_f32(&f.state) * 2.0f - 1.0f) * (token < 259 ? 0.01f : 0.15f);
  }
  m.tok_emb = f32_matrix(emb.data(), c.vocab_size, c.dim);
  m.output = m.tok_emb;
  m.out_norm = f.ones(d);
  std::vector<TransformerLayer> layers(static_cast<size_t>(c.n_layers));
  for (TransformerLayer& L : layers) {
    L.attn_norm = f.ones(d);
    L.ffn_norm = f.ones(d);
    L.wq = f32_matrix(f.fill(d * d, wa), c.dim, c.dim);
    L.wk = f32_matrix(f.fill(kv * d, wa), c.kv_dim(), c.dim);
    L.wv = f32_matrix(f.fill(kv * d, wa), c.kv_dim(), c.dim);
    L.wo = f32_matrix(f.fill(d * d, wa), c.dim, c.dim);
    L.w1 = f32_matrix(f.fill(h * d, wa), c.hidden_dim, c.dim);
    L.w2 = f32_matrix(f.fill(d * h, 1.0f / std::sqrt(static_cast<float>(c.hidden_dim))), c.dim, c.hidden_dim);
    L.w3 = f32_matrix(f.fill(h * d, wa), c.hidden_dim, c.dim);
  }
  m.layers = layers.data();

  Llama2cTokenizer tok;
  std::vector<float> scores(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) scores[i] = i < 259 ? 0.0f : -static_cast<float>(i);
  if (Status st = tok.load_vocab(vocab, scores); !st.ok()) return report(st);

  GgufExportOptions opt;
  opt.weight_type = dtype_info_by_name(o.type.empty() ? "f32" : o.type.c_str())->type;
  opt.name = "mcullm dummy";
  opt.source = "mcullm dummy seed " + std::to_string(o.seed);
  GgufWriter w;
  GgufExportReport rep;
  if (Status st = export_transformer_gguf(m, &tok, opt, &w, &rep); !st.ok()) return report(st);
  if (!o.chat_template.empty()) w.set_string("tokenizer.chat_template", o.chat_template);
  if (Status st = w.write_file(o.output); !st.ok()) return report(st);
  std::fprintf(stderr, "mcullm: wrote %s: dummy llama, dim %d, %d layers, vocab %d, %s, %.2f MiB of weights\n",
               o.output.c_str(), c.dim, c.n_layers, c.vocab_size, o.type.c_str(), rep.weight_bytes / 1048576.0);
  return 0;
}

// The writer of each architecture --arch takes (by its GGUF name, model/arch.h).
struct DummyWriter {
  const char* gguf_arch;
  int (*write)(const DummyOptions&);
};
constexpr DummyWriter kDummyWriters[] = {
    {"llama", dummy_llama}, {"bitnet", dummy_bitnet}, {"bitnet-25", dummy_bitnet}, {"esp32ai-ple", dummy_ple}, {"qwen2", dummy_qwen2},
};

std::vector<std::string> dummy_archs() {
  std::vector<std::string> names;
  for (const DummyWriter& d : kDummyWriters) names.push_back(d.gguf_arch);
  return names;
}

int dummy(const DummyOptions& o) {
  const DummyWriter* writer = nullptr;
  for (const DummyWriter& d : kDummyWriters)
    if (o.arch == d.gguf_arch) writer = &d;
  if (!writer || !arch_info_by_gguf(writer->gguf_arch))
    return report(Status::Error(Code::kInvalidArgument, "--arch %s has no dummy writer", o.arch.c_str()));
  if (o.shape_given && writer->write != dummy_llama)
    return report(Status::Error(Code::kInvalidArgument, "--dim, --hidden, --layers, --heads, --kv-heads and --seq-len shape the "
                                "llama dummy; --arch %s takes its shape from --layout", o.arch.c_str()));
  if (o.ffn != "silu" && writer->write != dummy_llama && writer->write != dummy_ple && writer->write != dummy_qwen2)
    return report(Status::Error(Code::kInvalidArgument, "--ffn needs --arch llama, qwen2 or esp32ai-ple"));
  if (o.untied_head && writer->write != dummy_qwen2 && writer->write != dummy_ple)
    return report(Status::Error(Code::kInvalidArgument, "--untied-head needs --arch qwen2"));
  return writer->write(o);
}

}  // namespace

void add_dummy_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<DummyOptions>();
  CLI::App* cmd = app.add_subcommand("dummy", "Write a deterministic model (random weights from a seed, word vocabulary) as GGUF: "
                                      "a small llama, or a BitNet b1.58 of a named layout (--arch bitnet --layout 125M)");
  cmd->add_option("-o,--output", o->output, "GGUF file to write")->required();
  cmd->add_option("--type", o->type, "Weight type (default: llama f32; BitNet i2_s, tl1 or tl2, f32 meaning i2_s there; "
                                     "qwen2 linear layers: i2_s by default, or tl1, tl2, f32, f16, q8_0, q4_0, q4g64)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4g64", "i2_s", "tl1", "tl2"}));
  cmd->add_option("--arch", o->arch, "llama (the dims below), bitnet / bitnet-25 (a --layout), or esp32ai-ple (an esp32-ai .bin file)")
      ->check(CLI::IsMember(dummy_archs()));
  cmd->add_option("--layout", o->layout, "BitNet layout: 125M 350M 1B 1.5B 2.7B 3.8B 7B large 2B-4T tiny tiny-25 (default tiny); "
                                         "esp32ai-ple: 28.9M (default) or 3.4M; qwen2: ref (the cluster reference design), small, tiny (default)");
  cmd->add_option("--embd-type", o->embd_type, "Token embedding / head type: BitNet f32, f16 (default) or q8_0; qwen2 also "
                                               "q4_0 (default) or q4g64")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4g64"}));
  cmd->add_flag("--untied-head", o->untied_head, "qwen2: a separate output.weight (default: tied to the embedding)");
  const std::vector<CLI::Option*> shape = {
      cmd->add_option("--dim", o->dim, "llama: model width")->check(CLI::Range(2, 8192)),
      cmd->add_option("--hidden", o->hidden, "llama: feed-forward width")->check(CLI::Range(1, 32768)),
      cmd->add_option("--layers", o->layers, "llama: layers")->check(CLI::Range(1, 256)),
      cmd->add_option("--heads", o->heads, "llama: attention heads")->check(CLI::Range(1, 256)),
      cmd->add_option("--kv-heads", o->kv_heads, "llama: key/value heads")->check(CLI::Range(1, 256)),
      cmd->add_option("--seq-len", o->seq_len, "llama: context length")->check(CLI::Range(1, 1 << 20))};
  cmd->add_option("--seed", o->seed, "Weight seed");
  cmd->add_option("--ffn", o->ffn, "llama, qwen2, esp32ai-ple: FFN activation, silu (SwiGLU, default) or relu (ReLU-gated: the sparse FFN runs)")
      ->check(CLI::IsMember({"silu", "relu"}));
  cmd->add_option("--chat-template", o->chat_template, "Store this text as tokenizer.chat_template (llama arch)");
  add_pretuned_options(cmd, &o->pretuned);
  cmd->callback([o, exit_code, shape] {
    for (const CLI::Option* opt : shape) o->shape_given = o->shape_given || opt->count() > 0;
    *exit_code = dummy(*o);
  });
}

}  // namespace mcullm::cli
