// `mcullm convert` of Hugging Face folders (load/hf_checkpoint_host.h, format/safetensors_host.h).
//
// Against PyTorch (train/hf_checkpoint.py writes tiny random Qwen2 / Llama folders and their logits
// from its own forward in float64; skipped without python3-torch unless MCULLM_REQUIRE_TORCH=1).
// Errors are relative to the largest reference logit (at least 1), at every prompt position:
//  - f32: within 1e-5 (measured 1.6e-7), for Qwen2 (NEOX RoPE, biases, separate head, one file)
//    and Llama (q / k rows un-permuted for adjacent-pair RoPE, tied head, two shards);
//  - absmean-ternary Qwen2 (i2_s, tl2): within 0.02 of the ternarized reference (int8 activations;
//    measured 0.0037); q4_0 / q4g64: within 0.15 of f32 (measured 0.063);
//  - BF16 and F16 tensors convert exactly: every GGUF tensor equals the one converted from the same
//    values stored as F32 (and F16 -> --type f16 gives the F16 bits back);
//  - tokenizer.json and the GGUF's vocabulary give the same ids (NFC included).
//
// Hostile folders (written here, no Python): each refused naming the file and the tensor, and the
// output file left as it was.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/arena.h"
#include "format/gguf.h"
#include "format/safetensors_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

using nlohmann::json;
using test::run_cli;
namespace fs = std::filesystem;

// ---- the PyTorch fixtures ----

class HfTorch : public ::testing::Test {
 public:
  static std::string dir() { return *dir_; }

 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir() + "/hf");
    const std::string cmd = "/usr/bin/python3 " MCULLM_SOURCE_DIR "/train/hf_checkpoint.py " + *dir_ + " 2>&1";
    status_ = std::system(cmd.c_str());
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override {
    if (WIFEXITED(status_) && WEXITSTATUS(status_) == 77)
      MCULLM_SKIP_OR_FAIL("torch", "train/hf_checkpoint.py: PyTorch is missing (apt install python3-torch)");
    ASSERT_TRUE(WIFEXITED(status_) && WEXITSTATUS(status_) == 0) << "train/hf_checkpoint.py failed";
  }
  static std::string* dir_;
  static int status_;
};
std::string* HfTorch::dir_ = nullptr;
int HfTorch::status_ = -1;

std::vector<float> read_f32(const std::string& path) {
  const std::vector<uint8_t> b = test::read_file(path);
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

constexpr int kVocab = 320;

// Converts folder `name` with --type `type`; returns the GGUF's path.
std::string convert(const std::string& name, const std::string& type = "") {
  const std::string out = test::temp_dir() + "/" + name + (type.empty() ? "" : "-" + type) + ".gguf";
  std::vector<std::string> args = {"convert", HfTorch::dir() + "/" + name, "-o", out};
  if (!type.empty()) args.insert(args.end(), {"--type", type});
  const test::CommandResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// `mcullm run`'s logits at every position of the reference prompt.
std::vector<float> run_logits(const std::string& gguf, const std::string& folder) {
  std::string tokens = test::read_text(folder + "/ref_tokens.txt");
  while (!tokens.empty() && (tokens.back() == '\n' || tokens.back() == '\r')) tokens.pop_back();
  const std::string dump = gguf + ".logits";
  const test::CommandResult r =
      run_cli({"run", "-m", gguf, "--prompt-ids", tokens, "-n", "1", "--temp", "0", "-q", "--dump-logits", dump});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return read_f32(dump);
}

// max |ours - ref| / max(1, max |ref|) over the reference's rows.
double rel_error(const std::vector<float>& ours, const std::vector<float>& ref) {
  EXPECT_GE(ours.size(), ref.size());
  if (ours.size() < ref.size() || ref.empty()) return 1e9;
  double err = 0.0, top = 1.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(ours[i]) - ref[i]));
    top = std::max(top, std::fabs(static_cast<double>(ref[i])));
  }
  return err / top;
}

TEST_F(HfTorch, F32LogitsMatchPyTorch) {
  for (const char* name : {"qwen2", "llama"}) {
    const std::string folder = dir() + "/" + name;
    const std::vector<float> ref = read_f32(folder + "/ref_logits.f32");
    ASSERT_EQ(ref.size() % kVocab, 0u);
    const double e = rel_error(run_logits(convert(name), folder), ref);
    EXPECT_LE(e, 1e-5) << name;
    std::printf("%s f32: max relative logit error %.3g\n", name, e);
  }
}

TEST_F(HfTorch, TernaryAndFourBitQwen2) {
  const std::string folder = dir() + "/qwen2";
  const std::vector<float> ternary_ref = read_f32(folder + "/ref_ternary_logits.f32");
  const std::vector<float> ref = read_f32(folder + "/ref_logits.f32");
  for (const char* type : {"i2_s", "tl2"}) {
    const double e = rel_error(run_logits(convert("qwen2", type), folder), ternary_ref);
    EXPECT_LE(e, 0.02) << type;
    std::printf("qwen2 %s: max relative logit error to the ternarized reference %.3g\n", type, e);
  }
  for (const char* type : {"q4_0", "q4g64"}) {
    const double e = rel_error(run_logits(convert("qwen2", type), folder), ref);
    EXPECT_LE(e, 0.15) << type;
    std::printf("qwen2 %s: max relative logit error %.3g\n", type, e);
  }
  // Our llama architecture has no ternary layers: refused, saying so.
  const test::CommandResult r = run_cli({"convert", dir() + "/llama", "-o", test::temp_dir() + "/lt.gguf", "--type", "i2_s"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no ternary layers"), std::string::npos) << r.err;
}

// Every tensor of two GGUF files: same type, shape and bytes.
void expect_same_tensors(const std::string& a, const std::string& b) {
  const std::vector<uint8_t> da = test::read_file(a), db = test::read_file(b);
  std::vector<uint8_t> ma(1 << 20), mb(1 << 20);
  Arena aa(Tier::kHost, ma.data(), ma.size()), ab(Tier::kHost, mb.data(), mb.size());
  GgufFile fa, fb;
  ASSERT_TRUE(fa.open(da.data(), da.size(), aa).ok()) << a;
  ASSERT_TRUE(fb.open(db.data(), db.size(), ab).ok()) << b;
  ASSERT_EQ(fa.tensor_count(), fb.tensor_count());
  for (uint64_t i = 0; i < fa.tensor_count(); ++i) {
    const GgufTensor* t = fa.tensor(i);
    const std::string name(t->name.data, t->name.size);
    const GgufTensor* u = fb.find_tensor(name.c_str());
    ASSERT_NE(u, nullptr) << name;
    EXPECT_EQ(t->type, u->type) << name;
    ASSERT_EQ(t->nbytes, u->nbytes) << name;
    EXPECT_EQ(std::memcmp(t->data, u->data, t->nbytes), 0) << name << " differs";
  }
}

TEST_F(HfTorch, Bf16AndF16ConvertExactly) {
  expect_same_tensors(convert("qwen2_bf16"), convert("qwen2_bf16_f32"));
  expect_same_tensors(convert("llama_f16"), convert("llama_f16_f32"));
  expect_same_tensors(convert("llama_f16", "f16"), convert("llama_f16_f32", "f16"));
}

TEST_F(HfTorch, TokenizerJsonBecomesTheGgufVocabulary) {
  const std::string text = "the cat in a hat<|im_end|> 12345 th\xC3\xA9 the\xCC\x81";  // the last: NFC makes it th\xC3\xA9
  for (const char* name : {"qwen2", "llama"}) {
    const std::string gguf = convert(name);
    const test::CommandResult a = run_cli({"tokenize", "-m", dir() + "/" + name + "/tokenizer.json", "--ids", "-p", text});
    const test::CommandResult b = run_cli({"tokenize", "-m", gguf, "--ids", "-p", text});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out) << name;
  }
}

// ---- hostile folders, written here ----

struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A tiny valid Qwen2 folder's tensors (F32): dim 8, 2 heads, 1 kv head, hidden 16, 1 layer, vocab 16.
std::vector<Entry> tiny_tensors() {
  std::vector<Entry> e;
  auto add = [&](const std::string& n, std::vector<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    std::vector<float> v(static_cast<size_t>(count));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>((i * 7 + n.size()) % 23) - 0.1f;
    Entry x{n, "F32", shape, std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(x.bytes.data(), v.data(), x.bytes.size());
    e.push_back(std::move(x));
  };
  add("model.embed_tokens.weight", {16, 8});
  add("model.norm.weight", {8});
  add("lm_head.weight", {16, 8});
  const std::string p = "model.layers.0.";
  add(p + "input_layernorm.weight", {8});
  add(p + "post_attention_layernorm.weight", {8});
  add(p + "self_attn.q_proj.weight", {8, 8});
  add(p + "self_attn.k_proj.weight", {4, 8});
  add(p + "self_attn.v_proj.weight", {4, 8});
  add(p + "self_attn.o_proj.weight", {8, 8});
  add(p + "self_attn.q_proj.bias", {8});
  add(p + "self_attn.k_proj.bias", {4});
  add(p + "self_attn.v_proj.bias", {4});
  add(p + "mlp.gate_proj.weight", {16, 8});
  add(p + "mlp.up_proj.weight", {16, 8});
  add(p + "mlp.down_proj.weight", {8, 16});
  return e;
}

json tiny_config() {
  return json{{"architectures", {"Qwen2ForCausalLM"}}, {"hidden_size", 8}, {"intermediate_size", 16},
              {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"vocab_size", 16},
              {"max_position_embeddings", 16}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
              {"tie_word_embeddings", false}};
}

// The safetensors bytes of `e`; `edit` may change the header before it is written.
std::vector<uint8_t> safetensors_bytes(const std::vector<Entry>& e, const std::function<void(json&)>& edit = nullptr) {
  json h = json::object();
  std::vector<uint8_t> data;
  for (const Entry& x : e) {
    h[x.name] = json{{"dtype", x.dtype}, {"shape", x.shape}, {"data_offsets", {data.size(), data.size() + x.bytes.size()}}};
    data.insert(data.end(), x.bytes.begin(), x.bytes.end());
  }
  if (edit) edit(h);
  const std::string text = h.dump();
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i)));
  for (char ch : text) out.push_back(static_cast<uint8_t>(ch));
  for (uint8_t b : data) out.push_back(b);
  return out;
}

std::string write_folder(const std::string& name, const json& config, const std::vector<uint8_t>& model) {
  const std::string d = test::temp_dir() + "/" + name;
  fs::create_directories(d);
  const std::string c = config.dump();
  test::write_file(d + "/config.json", std::vector<uint8_t>(c.begin(), c.end()));
  test::write_file(d + "/model.safetensors", model);
  return d;
}

// Converting `folder` fails with a message holding every one of `needles`, and the output file
// (holding "keep" before) is untouched.
void expect_refused(const std::string& folder, const std::vector<std::string>& needles) {
  const std::string out = folder + ".gguf";
  test::write_file(out, {'k', 'e', 'e', 'p'});
  const test::CommandResult r = run_cli({"convert", folder, "-o", out});
  EXPECT_NE(r.exit_code, 0) << folder;
  for (const std::string& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in: " << r.err;
  EXPECT_EQ(test::read_text(out), "keep") << folder;
}

TEST(HfConvert, TinyFolderConverts) {
  const std::string d = write_folder("ok", tiny_config(), safetensors_bytes(tiny_tensors()));
  const test::CommandResult r = run_cli({"convert", d, "-o", d + ".gguf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no tokenizer.json"), std::string::npos) << r.err;
  const test::CommandResult run = run_cli({"run", "-m", d + ".gguf", "--prompt-ids", "1,2,3", "-n", "2", "--temp", "0", "-q"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

TEST(HfConvert, MissingConfigKeys) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                          "max_position_embeddings", "rms_norm_eps", "architectures"}) {
    json c = tiny_config();
    c.erase(key);
    expect_refused(write_folder(std::string("nokey_") + key, c, safetensors_bytes(tiny_tensors())), {"config.json", key});
  }
  json c = tiny_config();
  c["architectures"] = {"GPT2LMHeadModel"};
  expect_refused(write_folder("gpt2", c, safetensors_bytes(tiny_tensors())), {"config.json", "GPT2LMHeadModel"});
  c = tiny_config();
  c["rope_scaling"] = json{{"type", "linear"}, {"factor", 2.0}};
  expect_refused(write_folder("rope_scaling", c, safetensors_bytes(tiny_tensors())), {"config.json", "rope_scaling"});
  c = tiny_config();
  c["head_dim"] = 3;
  expect_refused(write_folder("head_dim", c, safetensors_bytes(tiny_tensors())), {"config.json", "head_dim"});
  c = tiny_config();
  c["rms_norm_eps"] = "small";
  expect_refused(write_folder("eps_text", c, safetensors_bytes(tiny_tensors())), {"config.json", "rms_norm_eps", "finite"});
  c = tiny_config();
  c["num_attention_heads"] = -2;
  expect_refused(write_folder("neg_heads", c, safetensors_bytes(tiny_tensors())), {"config.json", "num_attention_heads"});
}

TEST(HfConvert, BadTensors) {
  const std::string k = "model.layers.0.self_attn.k_proj.weight";
  std::vector<Entry> e = tiny_tensors();
  e.erase(e.begin() + 6);  // k_proj
  expect_refused(write_folder("missing", tiny_config(), safetensors_bytes(e)), {"model.safetensors", k, "missing"});

  e = tiny_tensors();
  e[6].shape = {8, 4};  // same bytes, another shape
  expect_refused(write_folder("shape", tiny_config(), safetensors_bytes(e)), {"model.safetensors", k, "shape [8, 4]", "[4, 8]"});

  e = tiny_tensors();
  e[6].dtype = "I32";
  expect_refused(write_folder("dtype", tiny_config(), safetensors_bytes(e)), {"model.safetensors", k, "I32"});

  e = tiny_tensors();
  e[6].dtype = "Q9";
  expect_refused(write_folder("unknown_dtype", tiny_config(), safetensors_bytes(e)), {"model.safetensors", k, "Q9"});
}

TEST(HfConvert, CorruptSafetensors) {
  const std::vector<uint8_t> good = safetensors_bytes(tiny_tensors());
  std::vector<uint8_t> cut(good.begin(), good.end() - 10);
  expect_refused(write_folder("truncated", tiny_config(), cut), {"model.safetensors", "model.layers.0.mlp.down_proj.weight", "past the data"});

  std::vector<uint8_t> long_header = good;
  long_header[5] = 1;  // 2^40 + n
  expect_refused(write_folder("header_len", tiny_config(), long_header), {"model.safetensors", "header length", "past the end"});

  expect_refused(write_folder("tiny_file", tiny_config(), {1, 2, 3}), {"model.safetensors", "too short"});

  const std::string k = "model.layers.0.self_attn.k_proj.weight";
  std::vector<uint8_t> overlap = safetensors_bytes(tiny_tensors(), [&](json& h) {
    h[k]["data_offsets"] = h["model.layers.0.self_attn.q_proj.weight"]["data_offsets"];
    h[k]["shape"] = {8, 8};
  });
  expect_refused(write_folder("overlap", tiny_config(), overlap), {"model.safetensors", "overlap", "q_proj", "k_proj"});

  std::vector<uint8_t> out_of_range = safetensors_bytes(tiny_tensors(), [&](json& h) {
    const uint64_t b = h[k]["data_offsets"][0].get<uint64_t>();
    h[k]["data_offsets"] = {b + 100000, b + 100000 + 128};
  });
  expect_refused(write_folder("out_of_range", tiny_config(), out_of_range), {"model.safetensors", k, "past the data"});

  std::vector<uint8_t> backwards = safetensors_bytes(tiny_tensors(), [&](json& h) { h[k]["data_offsets"] = {128, 0}; });
  expect_refused(write_folder("backwards", tiny_config(), backwards), {"model.safetensors", k, "data_offsets"});

  std::vector<uint8_t> wrong_size = safetensors_bytes(tiny_tensors(), [&](json& h) { h[k]["shape"] = {4, 9}; });
  expect_refused(write_folder("wrong_size", tiny_config(), wrong_size), {"model.safetensors", k, "bytes for 36"});

  std::vector<uint8_t> not_json = good;
  not_json[8] = '[';
  expect_refused(write_folder("not_json", tiny_config(), not_json), {"model.safetensors", "JSON"});
}

TEST(HfConvert, ShardIndex) {
  const std::vector<Entry> all = tiny_tensors();
  std::vector<Entry> a(all.begin(), all.begin() + 7), b(all.begin() + 7, all.end());
  const std::string d = test::temp_dir() + "/sharded";
  fs::create_directories(d);
  const std::string c = tiny_config().dump();
  test::write_file(d + "/config.json", std::vector<uint8_t>(c.begin(), c.end()));
  test::write_file(d + "/a.safetensors", safetensors_bytes(a));
  test::write_file(d + "/b.safetensors", safetensors_bytes(b));
  json map = json::object();
  for (const Entry& x : a) map[x.name] = "a.safetensors";
  for (const Entry& x : b) map[x.name] = "b.safetensors";
  auto write_index = [&](const json& m) {
    const std::string t = json{{"weight_map", m}}.dump();
    test::write_file(d + "/model.safetensors.index.json", std::vector<uint8_t>(t.begin(), t.end()));
  };
  write_index(map);
  const test::CommandResult r = run_cli({"convert", d, "-o", d + ".gguf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("2 files"), std::string::npos) << r.err;

  json missing = map;
  missing["model.norm.weight"] = "c.safetensors";
  write_index(missing);
  expect_refused(d, {"model.safetensors.index.json", "model.norm.weight", "c.safetensors", "missing"});

  json wrong = map;
  wrong["model.norm.weight"] = "b.safetensors";  // it is in a
  write_index(wrong);
  expect_refused(d, {"b.safetensors", "model.norm.weight", "not in"});

  json escape = map;
  escape["model.norm.weight"] = "../ok/model.safetensors";
  write_index(escape);
  expect_refused(d, {"model.safetensors.index.json", "model.norm.weight", "not a file of the folder"});
}

// The reader alone: a header with __metadata__, an empty tensor, every float dtype widened exactly.
TEST(Safetensors, ParseAndWiden) {
  std::vector<Entry> e;
  e.push_back({"bf", "BF16", {2}, {0x80, 0x3f, 0x00, 0xc0}});  // 1.0, -2.0
  e.push_back({"h", "F16", {2}, {0x00, 0x3c, 0x00, 0x35}});    // 1.0, 0.3125
  e.push_back({"empty", "F32", {0, 4}, {}});
  const std::vector<uint8_t> bytes = safetensors_bytes(e, [](json& h) { h["__metadata__"] = {{"format", "pt"}}; });
  SafetensorsFile f;
  ASSERT_TRUE(f.parse(bytes.data(), bytes.size(), "x").ok());
  ASSERT_EQ(f.tensors().size(), 3u);
  float v[2];
  ASSERT_TRUE(safetensors_to_f32(*f.find("bf"), "x", v).ok());
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  ASSERT_TRUE(safetensors_to_f32(*f.find("h"), "x", v).ok());
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 0.3125f);
  EXPECT_EQ(f.find("nope"), nullptr);
  // Every cut of the file is refused or parses (never reads past it).
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    SafetensorsFile g;
    (void)g.parse(cut.data(), cut.size(), "cut");
  }
}

}  // namespace
}  // namespace mcullm
