// The llama family's one GGUF reader and writer (format/transformer_gguf.h,
// format/transformer_gguf_writer_host.h), checked per architecture from the same tables:
// read -> write -> read -> write gives the same bytes, keeps every tensor as it was, and every layer
// tensor the BlockSpec asks for, when missing or of another size or shape, is refused naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dummy_gguf.h"
#include "format/transformer_gguf.h"
#include "format/transformer_gguf_writer_host.h"
#include "load/model_loader_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

using test::small_vocab;

struct Source {
  std::string what;
  std::vector<uint8_t> bytes;
};

// One file per architecture of the family (and per kind of linear layer, head and FFN).
std::vector<Source> sources() {
  std::vector<Source> out;
  const Llama2cTokenizer tok = small_vocab(300);
  for (const char* layout : {"tiny", "tiny-25"}) {
    GgufDummyOptions o;
    o.layout = *bitnet_layout_by_name(layout);
    o.linear_type = std::string(layout) == "tiny" ? DType::kI2_S : DType::kTL2;
    GgufWriter w;
    GgufDummyReport r;
    EXPECT_TRUE(write_gguf_dummy(o, tok, &w, &r).ok());
    out.push_back({std::string("bitnet ") + layout, w.to_bytes()});
  }
  for (DType linear : {DType::kI2_S, DType::kF16}) {
    for (bool relu : {false, true}) {
      GgufDummyOptions o;
      o.layout = *qwen2_layout_by_name("tiny");
      o.linear_type = linear;
      o.embedding_type = DType::kF16;
      o.tied_head = linear != DType::kI2_S;
      o.relu_ffn = relu;
      GgufWriter w;
      GgufDummyReport r;
      EXPECT_TRUE(write_gguf_dummy(o, tok, &w, &r).ok());
      out.push_back({std::string("qwen2 ") + dtype_info(linear)->name + (relu ? " relu" : ""), w.to_bytes()});
    }
  }
  std::unique_ptr<LoadedModel> lm;
  EXPECT_TRUE(load_model(test::shared_path("models/stories260K/stories260K.bin"), &lm).ok());
  if (lm) {
    for (bool relu : {false, true}) {
      TransformerModel m = lm->model;
      if (relu) m.spec.act = FfnAct::kRelu;
      GgufWriter w;
      GgufExportOptions o;
      GgufExportReport r;
      EXPECT_TRUE(export_transformer_gguf(m, nullptr, o, &w, &r).ok());
      out.push_back({relu ? "llama relu" : "llama", w.to_bytes()});
    }
  }
  return out;
}

struct Read {
  std::vector<uint8_t> mem = std::vector<uint8_t>(size_t{16} << 20);
  Arena arena;
  GgufFile file;
  TransformerModel model;
  Status load(const std::vector<uint8_t>& bytes) {
    arena.reset(Tier::kHost, mem.data(), mem.size());
    MC_TRY(file.open(bytes.data(), bytes.size(), arena));
    return transformer_from_gguf(file, arena, &model);
  }
};

// The model read from `bytes` written again (dense matrices as the types they were read as).
std::vector<uint8_t> rewrite(const std::vector<uint8_t>& bytes, Read* r) {
  EXPECT_TRUE(r->load(bytes).ok());
  const ArchInfo* arch = nullptr;
  EXPECT_TRUE(gguf_transformer_arch(r->file, ArchSlices::kNone, &arch).ok());
  GgufExportOptions o;
  o.gguf_arch = arch->gguf_arch;
  o.weight_type = r->model.layers[0].wq.type;
  o.has_embedding_type = true;
  o.embedding_type = r->model.tok_emb.type;
  GgufWriter w;
  GgufExportReport rep;
  const Status st = export_transformer_gguf(r->model, nullptr, o, &w, &rep);
  EXPECT_TRUE(st.ok()) << st.message();
  return w.to_bytes();
}

TEST(TransformerGguf, WriteReadWriteGivesTheSameBytesAndTensors) {
  MC_REQUIRE_SHARED();
  for (const Source& s : sources()) {
    SCOPED_TRACE(s.what);
    Read a, b, c;
    const auto once = rewrite(s.bytes, &a);
    const auto twice = rewrite(once, &b);
    EXPECT_EQ(once, twice);
    ASSERT_TRUE(c.load(once).ok());
    EXPECT_EQ(a.model.spec.act, s.what.find("relu") != std::string::npos ? FfnAct::kRelu : a.model.spec.act);
    EXPECT_EQ(c.model.spec.act, a.model.spec.act);
    EXPECT_EQ(c.model.spec.ternary, a.model.spec.ternary);
    EXPECT_EQ(c.model.tied_output, a.model.tied_output);
    // Every tensor of the source, with its type, shape and bytes, and no other.
    EXPECT_EQ(c.file.tensor_count(), a.file.tensor_count());
    for (uint64_t i = 0; i < c.file.tensor_count(); ++i) {
      const GgufTensor* t = c.file.tensor(i);
      const std::string name(t->name.data, t->name.size);
      const GgufTensor* u = a.file.find_tensor(name.c_str());
      ASSERT_NE(u, nullptr) << name;
      EXPECT_EQ(t->type, u->type) << name;
      ASSERT_EQ(t->n_dims, u->n_dims) << name;
      for (uint32_t d = 0; d < t->n_dims; ++d) EXPECT_EQ(t->ne[d], u->ne[d]) << name;
      ASSERT_EQ(t->nbytes, u->nbytes) << name;
      EXPECT_EQ(std::memcmp(t->data, u->data, static_cast<size_t>(t->nbytes)), 0) << name;
    }
  }
}

// `bytes` with its u32 / f32 / string keys, and its tensors but `drop`, with `change` (when named)
// replaced by zeros of shape `ne`.
std::vector<uint8_t> edited(const std::vector<uint8_t>& bytes, const std::string& drop, const std::string& change = "",
                            std::vector<int64_t> ne = {}) {
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile f;
  EXPECT_TRUE(f.open(bytes.data(), bytes.size(), arena).ok());
  GgufWriter w;
  for (uint64_t i = 0; i < f.kv_count(); ++i) {
    const GgufKv* kv = f.kv(i);
    const std::string key(kv->key.data, kv->key.size);
    uint32_t u = 0;
    float x = 0;
    GgufStr str{"", 0};
    if (kv->type == GgufType::kU32 && f.get_u32(key.c_str(), &u).ok()) w.set_u32(key, u);
    if (kv->type == GgufType::kF32 && f.get_f32(key.c_str(), &x).ok()) w.set_f32(key, x);
    if (kv->type == GgufType::kString && f.get_string(key.c_str(), &str).ok()) w.set_string(key, std::string(str.data, str.size));
  }
  for (uint64_t i = 0; i < f.tensor_count(); ++i) {
    const GgufTensor* t = f.tensor(i);
    const std::string name(t->name.data, t->name.size);
    if (name == drop) continue;
    if (name == change) {
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
      EXPECT_TRUE(w.add_tensor(name, DType::kF32, ne, zeros.data(), zeros.size() * 4).ok());
      continue;
    }
    EXPECT_TRUE(w.add_tensor(name, t->type, std::vector<int64_t>(t->ne, t->ne + t->n_dims), t->data,
                             static_cast<size_t>(t->nbytes)).ok());
  }
  return w.to_bytes();
}

void expect_refused(const std::vector<uint8_t>& bytes, Code code, const std::string& want) {
  Read r;
  const Status st = r.load(bytes);
  EXPECT_EQ(st.code(), code) << want << ": " << st.message();
  EXPECT_NE(std::string(st.message()).find(want), std::string::npos) << st.message();
}

TEST(TransformerGguf, EveryTensorTheSpecAsksForIsCheckedByName) {
  MC_REQUIRE_SHARED();
  int count = 0;
  const LayerTensor* tensors = transformer_layer_tensors(&count);
  for (const Source& s : sources()) {
    SCOPED_TRACE(s.what);
    Read a;
    ASSERT_TRUE(a.load(s.bytes).ok());
    const LlamaConfig& c = a.model.cfg;
    int asked = 0;
    for (int i = 0; i < count; ++i) {
      const LayerTensor& t = tensors[i];
      char name[64];
      std::snprintf(name, sizeof name, "blk.1.%s", t.suffix);
      // The file holds exactly the tensors the table gives the architecture's spec.
      EXPECT_EQ(a.file.find_tensor(name) != nullptr, t.in(a.model.spec)) << name;
      if (!t.in(a.model.spec)) continue;
      ++asked;
      expect_refused(edited(s.bytes, name), Code::kNotFound, std::string("tensor ") + name + " is missing");
      const int n = t.length(c);
      if (t.vec)
        expect_refused(edited(s.bytes, "", name, {n + 1}), Code::kCorrupt,
                       std::string(name) + " should be a vector of " + std::to_string(n));
      else
        expect_refused(edited(s.bytes, "", name, {c.dim}), Code::kCorrupt,
                       std::string("tensor ") + name + " has 1 dimensions");
    }
    EXPECT_GE(asked, 9);
    expect_refused(edited(s.bytes, "output_norm.weight"), Code::kNotFound, "output_norm.weight is missing");
  }
}

}  // namespace
}  // namespace mcullm
