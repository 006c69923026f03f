// The board image: writer -> reader round trips (the same logits as the model it came from, for
// every architecture we load), tier placement into arenas, and hostile input: every truncation,
// a bad CRC, wrong version, bad offsets / sizes / counts / ids / types, each with a clear message.
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/board_image.h"
#include "format/board_image_model.h"
#include "format/board_image_writer_host.h"
#include "load/board_image_export_host.h"
#include "load/layer_slice_loader_host.h"
#include "load/model_loader_host.h"
#include "model/llama_slice.h"
#include "plan/board_profile_host.h"
#include "test_support.h"
#include "tokenizer/llama2c_tokenizer_host.h"
#include "tokenizer/tokenizer_image_writer_host.h"

namespace mcullm {
namespace {

// A 16-byte aligned copy of an image (the reader wants aligned bytes, as from mmap or flash).
struct Buffer {
  std::vector<uint64_t> words;
  size_t size = 0;
  explicit Buffer(const std::vector<uint8_t>& b) : words(b.size() / 8 + 2), size(b.size()) {
    if (!b.empty()) std::memcpy(words.data(), b.data(), b.size());
  }
  uint8_t* data() { return reinterpret_cast<uint8_t*>(words.data()); }
};

Status open_bytes(const std::vector<uint8_t>& bytes, BoardImage* img, Buffer** keep = nullptr) {
  static std::vector<std::unique_ptr<Buffer>> buffers;  // outlive the views the tests hold
  buffers.push_back(std::make_unique<Buffer>(bytes));
  if (keep) *keep = buffers.back().get();
  return img->open(buffers.back()->data(), bytes.size());
}

void refresh_crc(std::vector<uint8_t>* b) {
  const uint32_t crc = crc32_ieee(b->data() + kBoardImageCrcStart, b->size() - kBoardImageCrcStart);
  std::memcpy(b->data() + offsetof(BoardImageHeader, crc32), &crc, 4);
}

template <typename T>
void put(std::vector<uint8_t>* b, size_t at, T v) {
  std::memcpy(b->data() + at, &v, sizeof v);
  refresh_crc(b);
}

size_t entry_at(uint32_t i, size_t field) { return kBoardImageTableOffset + i * kBoardImageEntryBytes + field; }

// A tiny llama (dim 8, 1 layer, vocab 6) with random f32 weights and the given tier per tensor class.
struct TinyLlama {
  std::vector<std::vector<float>> store;
  std::vector<BoardTensorSource> tensors;
  BoardImageConfig cfg{};

  void add(BoardRole role, int layer, uint32_t rows, uint32_t cols, TensorClass cls, Tier tier, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    store.emplace_back(rows * cols);
    for (float& v : store.back()) v = cls == TensorClass::kNorm ? 1.0f + u(rng) : u(rng);
    BoardTensorSource s;
    s.id = board_tensor_id(role, layer);
    s.type = DType::kF32;
    s.rows = rows;
    s.cols = cols;
    s.data = store.back().data();
    s.cls = cls;
    s.tier = tier;
    tensors.push_back(s);
  }

  explicit TinyLlama(Tier weights_tier = Tier::kFlash, Tier norm_tier = Tier::kSram) {
    std::mt19937 rng(5);
    cfg.arch = static_cast<uint32_t>(BoardArch::kLlama);
    cfg.dim = 8;
    cfg.hidden_dim = 12;
    cfg.n_layers = 1;
    cfg.n_heads = 2;
    cfg.n_kv_heads = 1;
    cfg.vocab_size = 6;
    cfg.seq_len = 8;
    cfg.norm_eps = 1e-5f;
    cfg.rope_theta = 10000.0f;
    cfg.tied = 1;
    cfg.bos_id = 1;
    cfg.eos_id = 2;
    add(BoardRole::kTokEmb, 0, 6, 8, TensorClass::kEmbedding, Tier::kPsram, rng);
    add(BoardRole::kOutNorm, 0, 1, 8, TensorClass::kNorm, norm_tier, rng);
    add(BoardRole::kAttnNorm, 0, 1, 8, TensorClass::kNorm, norm_tier, rng);
    add(BoardRole::kFfnNorm, 0, 1, 8, TensorClass::kNorm, norm_tier, rng);
    add(BoardRole::kWq, 0, 8, 8, TensorClass::kAttention, weights_tier, rng);
    add(BoardRole::kWk, 0, 4, 8, TensorClass::kAttention, weights_tier, rng);
    add(BoardRole::kWv, 0, 4, 8, TensorClass::kAttention, weights_tier, rng);
    add(BoardRole::kWo, 0, 8, 8, TensorClass::kAttention, weights_tier, rng);
    add(BoardRole::kW1, 0, 12, 8, TensorClass::kFfn, weights_tier, rng);
    add(BoardRole::kW2, 0, 8, 12, TensorClass::kFfn, weights_tier, rng);
    add(BoardRole::kW3, 0, 12, 8, TensorClass::kFfn, weights_tier, rng);
  }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    EXPECT_TRUE(write_board_image(cfg, tensors, &out).ok());
    return out;
  }
};

// Opens, builds the model and runs a few positions; any failure comes back as a status.
Status open_and_run(const std::vector<uint8_t>& bytes, std::vector<float>* logits = nullptr) {
  Buffer buf(bytes);
  BoardImage img;
  MC_TRY(img.open(buf.data(), bytes.size()));
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kSram, mem.data(), mem.size());
  BoardModel model;
  MC_TRY(board_model_from_image(img, arena, &model));
  BoardDecoder dec;
  SerialPool pool;
  MC_TRY(dec.init(model, 4, arena, &pool, &kernels_ref()));
  for (int pos = 0; pos < 4; ++pos) {
    const float* l = nullptr;
    MC_TRY(dec.decoder().forward(pos % model.cfg().vocab_size, pos, &l));
    if (logits) logits->insert(logits->end(), l, l + model.cfg().vocab_size);
  }
  return Status::Ok();
}

void expect_refused(const std::vector<uint8_t>& bytes, const char* needle) {
  const Status st = open_and_run(bytes);
  EXPECT_FALSE(st.ok()) << "expected a refusal mentioning '" << needle << "'";
  EXPECT_NE(std::strstr(st.message(), needle), nullptr) << st.message();
}

TEST(BoardImage, LayoutIsAlignedAndCanonical) {
  const std::vector<uint8_t> b = TinyLlama().bytes();
  BoardImage img;
  ASSERT_TRUE(open_bytes(b, &img).ok());
  EXPECT_EQ(b.size() % kBoardImageAlign, 0u);
  EXPECT_EQ(img.n_tensors(), 11u);
  for (uint32_t i = 0; i < img.n_tensors(); ++i) {
    const BoardImageTensor& t = img.tensor(i);
    EXPECT_EQ((img.section(static_cast<Tier>(t.tier)).offset + t.offset) % kBoardImageAlign, 0u);
    if (i) {
      EXPECT_LT(img.tensor(i - 1).id, img.tensor(i).id);
    }
  }
  EXPECT_GT(img.section(Tier::kSram).bytes, 0u);
  EXPECT_GT(img.section(Tier::kPsram).bytes, 0u);
  EXPECT_GT(img.section(Tier::kFlash).bytes, 0u);
  EXPECT_EQ(img.section(Tier::kHost).bytes, 0u);
  EXPECT_EQ(img.find(12345), nullptr);
  ASSERT_NE(img.find(board_tensor_id(BoardRole::kW2, 0)), nullptr);
  EXPECT_EQ(img.find(board_tensor_id(BoardRole::kW2, 0))->cols, 12u);
  // CRC-32 of "123456789" is the standard check value.
  EXPECT_EQ(crc32_ieee(reinterpret_cast<const uint8_t*>("123456789"), 9), 0xCBF43926u);
}

TEST(BoardImage, PlaceCopiesRamTiersAndKeepsLogits) {
  const std::vector<uint8_t> b = TinyLlama().bytes();
  std::vector<float> in_place;
  ASSERT_TRUE(open_and_run(b, &in_place).ok());
  BoardImage img;
  Buffer* buf = nullptr;
  ASSERT_TRUE(open_bytes(b, &img, &buf).ok());
  std::vector<uint8_t> sram_mem(4096), psram_mem(4096);
  Arena sram(Tier::kSram, sram_mem.data(), sram_mem.size()), psram(Tier::kPsram, psram_mem.data(), psram_mem.size());
  Arena flash(Tier::kFlash, buf->data(), b.size());
  Arena* const ram[kTierCount] = {&sram, &psram, nullptr, nullptr};
  ASSERT_TRUE(img.place(ram, flash).ok());
  const size_t norms = sram.stats().by_class[static_cast<int>(TensorClass::kNorm)];  // 3 norms of 32 bytes, 64 apart
  EXPECT_GE(norms, 2 * 64u + 32);
  EXPECT_LT(norms, 3 * 64u + 64);
  EXPECT_GE(psram.stats().by_class[static_cast<int>(TensorClass::kEmbedding)], 6 * 8 * 4u);
  EXPECT_EQ(flash.stats().mapped_by_class[static_cast<int>(TensorClass::kFfn)], (12 * 8 * 3) * 4u);
  const BoardImageTensor* emb = img.find(board_tensor_id(BoardRole::kTokEmb));
  EXPECT_GE(img.data(*emb), psram_mem.data());
  EXPECT_LT(img.data(*emb), psram_mem.data() + psram_mem.size());
  // Wipe the file's copy of the moved sections: the model must read the arenas' copies.
  std::memset(buf->data() + img.section(Tier::kSram).offset, 0xFF, img.section(Tier::kSram).bytes);
  std::memset(buf->data() + img.section(Tier::kPsram).offset, 0xFF, img.section(Tier::kPsram).bytes);
  std::vector<uint8_t> mem(1 << 20);
  Arena work(Tier::kSram, mem.data(), mem.size());
  BoardModel model;
  ASSERT_TRUE(board_model_from_image(img, work, &model).ok());
  BoardDecoder dec;
  SerialPool pool;
  ASSERT_TRUE(dec.init(model, 4, work, &pool, &kernels_ref()).ok());
  std::vector<float> placed;
  for (int pos = 0; pos < 4; ++pos) {
    const float* l = nullptr;
    ASSERT_TRUE(dec.decoder().forward(pos % 6, pos, &l).ok());
    placed.insert(placed.end(), l, l + 6);
  }
  ASSERT_EQ(placed.size(), in_place.size());
  EXPECT_EQ(std::memcmp(placed.data(), in_place.data(), placed.size() * 4), 0);
}

TEST(BoardImage, PlaceReportsTheTierThatIsTooSmall) {
  const std::vector<uint8_t> b = TinyLlama(Tier::kPsram).bytes();
  BoardImage img;
  Buffer* buf = nullptr;
  ASSERT_TRUE(open_bytes(b, &img, &buf).ok());
  std::vector<uint8_t> sram_mem(4096), psram_mem(512);
  Arena sram(Tier::kSram, sram_mem.data(), sram_mem.size()), psram(Tier::kPsram, psram_mem.data(), psram_mem.size());
  Arena flash(Tier::kFlash, buf->data(), b.size());
  Arena* const ram[kTierCount] = {&sram, &psram, nullptr, nullptr};
  const Status st = img.place(ram, flash);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kOutOfMemory);
  EXPECT_NE(std::strstr(st.message(), "psram"), nullptr) << st.message();
}

TEST(BoardImage, EveryTruncationIsRefused) {
  const std::vector<uint8_t> b = TinyLlama().bytes();
  ASSERT_TRUE(open_and_run(b).ok());
  for (size_t n = 0; n < b.size(); ++n) {
    const std::vector<uint8_t> prefix(b.begin(), b.begin() + static_cast<long>(n));
    const Status st = open_and_run(prefix);
    ASSERT_FALSE(st.ok()) << "prefix of " << n << " bytes accepted";
    ASSERT_TRUE(std::strstr(st.message(), "truncated") || std::strstr(st.message(), "magic")) << n << ": " << st.message();
  }
  std::vector<uint8_t> longer = b;
  longer.push_back(0);
  expect_refused(longer, "trailing bytes");
}

TEST(BoardImage, CorruptCrcIsRefused) {
  const std::vector<uint8_t> b = TinyLlama().bytes();
  for (size_t at : {size_t{28}, size_t{100}, b.size() / 2, b.size() - 1}) {
    std::vector<uint8_t> c = b;
    c[at] ^= 0x10;
    expect_refused(c, "CRC mismatch");
  }
}

TEST(BoardImage, HostileHeaderAndTableFieldsAreRefused) {
  const std::vector<uint8_t> b = TinyLlama().bytes();
  auto with = [&](auto edit) {
    std::vector<uint8_t> c = b;
    edit(&c);
    return c;
  };
  expect_refused(with([](auto* c) { (*c)[0] = 'X'; }), "bad magic");
  expect_refused(with([](auto* c) { put<uint32_t>(c, 8, 3); }), "version 3 (this reader reads versions 1 to 2)");
  expect_refused(with([](auto* c) { put<uint32_t>(c, 8, 0); }), "version 0");
  expect_refused(with([](auto* c) { put<uint32_t>(c, 28, 1); }), "reserved header");  // a slice record in version 1
  expect_refused(with([](auto* c) { put<uint32_t>(c, 24, 0x7fffffff); }), "do not fit");
  expect_refused(with([](auto* c) { put<uint32_t>(c, 24, 3); }), "its tensors end");  // fewer tensors than sections hold
  expect_refused(with([](auto* c) { put<uint32_t>(c, 40, 1); }), "reserved header");
  expect_refused(with([](auto* c) { put<uint32_t>(c, 64, 99); }), "unknown architecture");
  expect_refused(with([](auto* c) { put<int32_t>(c, 64 + 4, -8); }), "non-positive");           // dim
  expect_refused(with([](auto* c) { put<int32_t>(c, 64 + 52 - 8, 6); }), "outside the vocabulary");  // bos
  expect_refused(with([](auto* c) { put<uint8_t>(c, 64 + 42, 0); }), "missing");  // untied: no output tensor
  // Sections: misaligned, past the end, overlapping the table.
  expect_refused(with([](auto* c) { put<uint64_t>(c, kBoardImageSectionsOffset, 8); }), "misplaced");
  expect_refused(with([&](auto* c) { put<uint64_t>(c, kBoardImageSectionsOffset + 8, b.size()); }), "misplaced");
  expect_refused(with([](auto* c) { put<uint64_t>(c, kBoardImageSectionsOffset + 16, 64); }), "misplaced");
  // Tensor entries: order, tier, type, shape, bytes, offset.
  expect_refused(with([](auto* c) { put<uint32_t>(c, entry_at(1, 0), 0); }), "not strictly increasing");
  expect_refused(with([](auto* c) { put<uint8_t>(c, entry_at(2, 24), 9); }), "out of range");
  expect_refused(with([](auto* c) { put<uint32_t>(c, entry_at(2, 4), 77); }), "unknown type");
  expect_refused(with([](auto* c) { put<uint32_t>(c, entry_at(2, 12), 0); }), "shape");
  expect_refused(with([](auto* c) { put<uint32_t>(c, entry_at(2, 20), 4); }), "needs");
  expect_refused(with([](auto* c) { put<uint32_t>(c, entry_at(3, 16), 192); }), "expected");
  expect_refused(with([](auto* c) { put<uint32_t>(c, entry_at(3, 8), 2); put<uint32_t>(c, entry_at(3, 20), 64); }), "ends past");
  // Well-formed image, wrong model: a vector where a matrix belongs, a missing tensor.
  expect_refused(with([](auto* c) { put<uint32_t>(c, entry_at(1, 0), board_tensor_id(BoardRole::kOutput)); }), "missing");
}

// Any single byte of the header, config, sections or table set to any of a few values, with the CRC
// made right again: open / build / run either succeeds or fails with a message, never crashes.
TEST(BoardImage, MutatedMetadataNeverCrashes) {
  const std::vector<uint8_t> b = TinyLlama().bytes();
  const size_t meta = kBoardImageTableOffset + 11 * kBoardImageEntryBytes;
  int refused = 0;
  for (size_t at = 16; at < meta; ++at)
    for (uint8_t v : {uint8_t{0}, uint8_t{1}, uint8_t{0x40}, uint8_t{0x7f}, uint8_t{0xff}}) {
      std::vector<uint8_t> c = b;
      if (c[at] == v) continue;
      c[at] = v;
      refresh_crc(&c);
      const Status st = open_and_run(c);
      if (!st.ok()) {
        ++refused;
        EXPECT_GT(std::strlen(st.message()), 10u);
      }
    }
  EXPECT_GT(refused, 500);
}

TEST(BoardImage, UnalignedBufferIsRefused) {
  const std::vector<uint8_t> b = TinyLlama().bytes();
  std::vector<uint64_t> words(b.size() / 8 + 2);
  uint8_t* p = reinterpret_cast<uint8_t*>(words.data()) + 4;
  std::memcpy(p, b.data(), b.size());
  BoardImage img;
  const Status st = img.open(p, b.size());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "aligned"), nullptr) << st.message();
}


// ---- per-node images (version 2: a slice record) ----

// Opens a slice image, builds its model and runs its layers (and head) on a few positions.
Status open_and_run_slice(const std::vector<uint8_t>& bytes) {
  Buffer buf(bytes);
  BoardImage img;
  MC_TRY(img.open(buf.data(), bytes.size()));
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kSram, mem.data(), mem.size());
  BoardModel model;
  MC_TRY(board_model_from_image(img, arena, &model));
  const TransformerModel& m = model.transformer;
  LlamaSlice slice;
  SerialPool pool;
  MC_TRY(slice.init(&m, 4, arena, &pool, &kernels_ref()));
  std::vector<float> hidden(static_cast<size_t>(m.cfg.dim), 0.5f);
  for (int pos = 0; pos < 4; ++pos) {
    if (m.has_embedding) MC_TRY(slice.embed(pos, hidden.data()));
    MC_TRY(slice.run_layers(hidden.data(), pos));
    const float* logits = nullptr;
    if (m.has_head) MC_TRY(slice.head(hidden.data(), &logits));
  }
  return Status::Ok();
}

struct SliceImages {
  std::unique_ptr<LoadedModel> lm;
  std::vector<uint8_t> node, master;  // layers 1:3, and the master's part
  std::string gguf = test::temp_dir() + "/qwen2-tiny.gguf";
  SliceImages() {
    EXPECT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", gguf}).exit_code, 0);
    EXPECT_TRUE(load_model(gguf, &lm).ok());
    BoardImageOptions opt;
    opt.sliced = true;
    BoardImageReport rep;
    opt.slice = SliceRange{1, 3, false};
    EXPECT_TRUE(export_board_image(*lm, opt, &node, &rep).ok());
    opt.slice = SliceRange{0, 0, true};
    EXPECT_TRUE(export_board_image(*lm, opt, &master, &rep).ok());
  }
};

TEST(BoardImage, SliceImagesRecordTheirSliceAndHoldOnlyIt) {
  SliceImages s;
  BoardImage img;
  ASSERT_OK(open_bytes(s.node, &img));
  EXPECT_EQ(reinterpret_cast<const BoardImageHeader*>(s.node.data())->version, 2u);
  EXPECT_FALSE(img.slice().whole);
  EXPECT_EQ(img.slice().first, 1);
  EXPECT_EQ(img.slice().end, 3);
  EXPECT_FALSE(img.slice().embedding || img.slice().head);
  EXPECT_EQ(img.slice().hash, slice_hash(s.lm->model, SliceRange{1, 3, false}));
  // A PC node reading only that range from the file (a PC master driving board nodes, or a board
  // master PC nodes) names it with the same hash.
  std::unique_ptr<SliceWeights> pc_node;
  ASSERT_OK(load_slice_weights(s.gguf, 1, 3, false, false, &pc_node));
  EXPECT_EQ(pc_node->hash, img.slice().hash);
  EXPECT_EQ(img.config().n_layers, 4);  // the whole model's
  for (uint32_t i = 0; i < img.n_tensors(); ++i) {
    const uint32_t layer = img.tensor(i).id >> 8;
    EXPECT_TRUE(layer == 1 || layer == 2) << std::hex << img.tensor(i).id;
  }
  ASSERT_OK(open_and_run_slice(s.node));
  ASSERT_OK(open_bytes(s.master, &img));
  EXPECT_TRUE(img.slice().embedding && img.slice().head);
  EXPECT_EQ(img.slice().first, img.slice().end);
  std::unique_ptr<SliceWeights> pc_master;
  ASSERT_OK(load_slice_weights(s.gguf, 0, 0, true, true, &pc_master));
  EXPECT_EQ(pc_master->hash, img.slice().hash);
  for (uint32_t i = 0; i < img.n_tensors(); ++i) EXPECT_LT(img.tensor(i).id, 16u);  // global roles only
  ASSERT_OK(open_and_run_slice(s.master));
  // A whole image is still version 1 (boards with a version-1 reader keep reading them).
  BoardImageOptions whole;
  std::vector<uint8_t> w;
  BoardImageReport rep;
  ASSERT_OK(export_board_image(*s.lm, whole, &w, &rep));
  EXPECT_EQ(reinterpret_cast<const BoardImageHeader*>(w.data())->version, 1u);
  ASSERT_OK(open_bytes(w, &img));
  EXPECT_TRUE(img.slice().whole);
  // The single-board decoder needs the whole model: a slice is refused with a message.
  const Status st = open_and_run(s.node);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "whole model"), nullptr) << st.message();
}

TEST(BoardImage, DamagedSliceImagesAreRefused) {
  SliceImages s;
  const std::vector<uint8_t>& b = s.node;
  for (size_t n = 0; n < b.size(); n += n < 512 ? 1 : 997) {
    const std::vector<uint8_t> prefix(b.begin(), b.begin() + static_cast<long>(n));
    const Status st = open_and_run_slice(prefix);
    ASSERT_FALSE(st.ok()) << "prefix of " << n << " bytes accepted";
    ASSERT_TRUE(std::strstr(st.message(), "truncated") || std::strstr(st.message(), "magic")) << n << ": " << st.message();
  }
  for (size_t at : {size_t{28}, size_t{40}, size_t{44}, b.size() - 1}) {  // the slice record is under the CRC
    std::vector<uint8_t> c = b;
    c[at] ^= 0x01;
    const Status st = open_and_run_slice(c);
    EXPECT_NE(std::strstr(st.message(), "CRC mismatch"), nullptr) << st.message();
  }
  auto refused = [&](size_t at, uint32_t v, const char* needle) {
    std::vector<uint8_t> c = b;
    put<uint32_t>(&c, at, v);
    const Status st = open_and_run_slice(c);
    EXPECT_FALSE(st.ok()) << needle;
    EXPECT_NE(std::strstr(st.message(), needle), nullptr) << st.message();
  };
  refused(32, 5, "does not fit a model of 4 layers");      // end past the model
  refused(28, 3, "does not fit");                           // first > end
  refused(36, 4, "parts 4");                                // an unknown part
  refused(28, 0, "layer 0 is missing");                     // says 0:3, holds 1:3 (role of layer 0)
  refused(36, kBoardSliceHead, "missing");                  // says it has the head, has none
  refused(48, 1, "reserved header");
  {  // a nodes' plan belongs in a master's image, and must split the model's layers
    BoardImageOptions opt;
    opt.sliced = true;
    opt.slice = SliceRange{1, 3, false};
    opt.node_plan = {SliceRange{0, 4, false}};
    std::vector<uint8_t> out;
    BoardImageReport rep;
    EXPECT_NE(std::strstr(export_board_image(*s.lm, opt, &out, &rep).message(), "master's image only"), nullptr);
    opt.slice = SliceRange{0, 0, true};
    opt.node_plan = {SliceRange{0, 2, false}, SliceRange{3, 4, false}};
    EXPECT_NE(std::strstr(export_board_image(*s.lm, opt, &out, &rep).message(), "do not continue"), nullptr);
    opt.node_plan = {SliceRange{0, 2, false}};
    EXPECT_NE(std::strstr(export_board_image(*s.lm, opt, &out, &rep).message(), "layers 0:2 of 4"), nullptr);
  }
  {
    std::vector<uint8_t> c = b;
    put<uint32_t>(&c, 28, 2);
    put<uint32_t>(&c, 32, 2);  // 2:2 and no parts: holds nothing
    EXPECT_NE(std::strstr(open_and_run_slice(c).message(), "does not fit"), nullptr);
  }
}

TEST(BoardImage, SlicesOfOtherFamiliesAreRefusedAtExport) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<LoadedModel> lm;
  const std::string bit = test::shared_path("models/bitnet-tinystories/bit1M_msb.bin");
  if (!load_model(bit, &lm).ok()) GTEST_SKIP() << "no bitllama2.c model in ../shared";
  BoardImageOptions opt;
  opt.sliced = true;
  opt.slice = SliceRange{0, 1, false};
  std::vector<uint8_t> out;
  BoardImageReport rep;
  const Status st = export_board_image(*lm, opt, &out, &rep);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "llama-family"), nullptr) << st.message();
}

TEST(BoardImage, WriterRefusesDuplicateIds) {
  TinyLlama t;
  t.tensors.push_back(t.tensors[0]);
  std::vector<uint8_t> out;
  const Status st = write_board_image(t.cfg, t.tensors, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "twice"), nullptr) << st.message();
}

// Every architecture we load: the image gives the very logits the loaded model gives (after `edit`).
void expect_same_logits(const std::string& path, const std::function<void(LoadedModel&)>& edit = nullptr) {
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(path, &lm).ok()) << path;
  if (edit) edit(*lm);
  BoardImageOptions opt;
  opt.sram_budget = 16 * 1024;
  opt.psram_budget = 256 * 1024;
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  const Status st = export_board_image(*lm, opt, &bytes, &rep);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_GT(rep.tier_bytes[static_cast<int>(Tier::kSram)], 0u);
  EXPECT_GT(rep.tier_bytes[static_cast<int>(Tier::kPsram)] + rep.tier_bytes[static_cast<int>(Tier::kFlash)], 0u);
  std::vector<float> from_image;
  const Status run = open_and_run(bytes, &from_image);
  ASSERT_TRUE(run.ok()) << run.message();

  DecoderInstance dec;
  SerialPool pool;
  ASSERT_TRUE(make_decoder(*lm, 4, &pool, &kernels_ref(), 0, &dec).ok());
  std::vector<float> from_model;
  const int vocab = lm->model.cfg.vocab_size;
  for (int pos = 0; pos < 4; ++pos) {
    const float* l = nullptr;
    ASSERT_TRUE(dec.decoder->forward(pos % vocab, pos, &l).ok());
    from_model.insert(from_model.end(), l, l + vocab);
  }
  ASSERT_EQ(from_image.size(), from_model.size());
  EXPECT_EQ(std::memcmp(from_image.data(), from_model.data(), from_model.size() * 4), 0) << path;
}

// The image of the model at `path`, changed by `edit`, says config.ffn == ffn.
void expect_image_ffn(const std::string& path, const std::function<void(LoadedModel&)>& edit, int ffn) {
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(path, &lm).ok()) << path;
  edit(*lm);
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  BoardImageOptions opt;
  opt.sram_budget = 16 * 1024;
  ASSERT_TRUE(export_board_image(*lm, opt, &bytes, &rep).ok());
  BoardImage img;
  ASSERT_TRUE(img.open(bytes.data(), bytes.size()).ok());
  EXPECT_EQ(img.config().ffn, ffn) << path;
}

TEST(BoardImage, Stories260kF32GivesTheModelsLogits) {
  MC_REQUIRE_SHARED();
  expect_same_logits(test::shared_path("models/stories260K/stories260K.bin"));
}

// A ReLU-gated llama: the image carries the activation (config.ffn = 1) and runs the dense ReLU FFN;
// the loaded model runs the sparse one (f32 down transposed): the same bits.
TEST(BoardImage, ReluLlamaKeepsItsActivation) {
  MC_REQUIRE_SHARED();
  expect_same_logits(test::shared_path("models/stories260K/stories260K.bin"), [](LoadedModel& lm) {
    lm.model.spec.act = FfnAct::kRelu;
    ASSERT_TRUE(llama_build_sparse_ffn(&lm.model, lm.tables).ok());
    ASSERT_NE(lm.model.layers[0].w2_t, nullptr);
  });
  expect_image_ffn(test::shared_path("models/stories260K/stories260K.bin"),
                   [](LoadedModel& lm) { lm.model.spec.act = FfnAct::kRelu; }, 1);
}

// A ternary ReLU qwen2 (mcullm dummy --ffn relu, i2_s): the GGUF key and the image's config.ffn = 1
// both read as ReLU (not the bitnet archs' ReLU^2); the image runs the dense FFN, the loaded model
// the sparse one (i2_s down columns): the same bits.
TEST(BoardImage, TernaryReluQwen2KeepsItsActivation) {
  const std::string out = test::temp_dir() + "/qwen2-relu.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "--ffn", "relu", "-o", out, "--seed", "4"}).exit_code, 0);
  expect_same_logits(out, [](LoadedModel& lm) {
    ASSERT_EQ(lm.model.spec.act, FfnAct::kRelu);
    ASSERT_TRUE(lm.model.spec.ternary);
    ASSERT_EQ(lm.model.layers[0].w2_cols.type, DType::kI2_S);
  });
  expect_image_ffn(out, [](LoadedModel&) {}, 1);
}
TEST(BoardImage, Stories260kQ4g64GivesTheModelsLogits) {
  MC_REQUIRE_SHARED();
  const std::string out = test::temp_dir() + "/q4g64.gguf";
  ASSERT_EQ(test::run_cli({"convert", test::shared_path("models/stories260K/stories260K.bin"), "-o", out, "--type", "q4g64"}).exit_code, 0);
  expect_same_logits(out);
}

TEST(BoardImage, BitLlama2cTernaryGivesTheModelsLogits) {
  MC_REQUIRE_SHARED();
  expect_same_logits(test::shared_path("models/bitnet-tinystories/bit1M_msb.bin"));
}

TEST(BoardImage, BitnetGgufGivesTheModelsLogits) {
  MC_REQUIRE_SHARED();
  const std::string out = test::temp_dir() + "/bitnet-tiny.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "bitnet", "--layout", "tiny", "-o", out, "--seed", "3"}).exit_code, 0);
  expect_same_logits(out);
}

// esp32-ai's PLE fixture: q4e matrices with their f16 scales, the PLE table, a fused QKV.
std::vector<uint8_t> ple_fixture_image() {
  std::unique_ptr<LoadedModel> lm;
  EXPECT_TRUE(load_model(test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"), &lm).ok());
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  BoardImageOptions opt;
  opt.sram_budget = 16 * 1024;
  EXPECT_TRUE(export_board_image(*lm, opt, &bytes, &rep).ok());
  return bytes;
}

TEST(BoardImage, Esp32aiPleGivesTheModelsLogits) {
  MC_REQUIRE_SHARED();
  expect_same_logits(test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"));
}

// A ReLU PLE model (the combo model): the image carries the activation (config.ffn = 1) and gives
// the loaded ReLU model's logits (a SiLU run from the image would not). The loaded model runs the FFN
// gate first for every token (q4e down stored by column), the image dense: the same bits.
TEST(BoardImage, ReluPleKeepsItsActivation) {
  MC_REQUIRE_SHARED();
  const std::string path = test::shared_path("models/esp32-ai-ple/ple4096_int4.bin");
  const auto relu = [](LoadedModel& lm) { lm.ple.cfg.relu_ffn = true; };
  expect_same_logits(path, [](LoadedModel& lm) {
    lm.ple.cfg.relu_ffn = true;
    lm.sparse_max_live = 1000;
    ASSERT_TRUE(ple_build_sparse_ffn(&lm.ple, lm.tables).ok());
    ASSERT_EQ(lm.ple.layers[0].down_cols.type, DType::kQ4E);
  });
  expect_image_ffn(path, relu, 1);
  expect_image_ffn(path, [](LoadedModel&) {}, 0);
}

TEST(BoardImage, HostilePleConfigIsRefused) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> good = ple_fixture_image();
  ASSERT_FALSE(good.empty());
  ASSERT_TRUE(open_and_run(good).ok());
  const size_t cfg = kBoardImageConfigOffset;
  int32_t group = 0;
  std::memcpy(&group, good.data() + cfg + offsetof(BoardImageConfig, group), 4);
  struct Case {
    size_t at;
    int32_t value;
    const char* needle;
  } cases[] = {
      {offsetof(BoardImageConfig, group), 0, "PLE sizes"},
      {offsetof(BoardImageConfig, group), -5, "PLE sizes"},
      {offsetof(BoardImageConfig, group), 1 << 24, "PLE sizes"},
      {offsetof(BoardImageConfig, group), group * 2, "f16 scales"},  // the scales no longer match their matrices
      {offsetof(BoardImageConfig, ple_dim), 0, "PLE sizes"},
      {offsetof(BoardImageConfig, ple_dim), 7, "f32 values"},
      {offsetof(BoardImageConfig, input_vocab), -1, "PLE sizes"},
      {offsetof(BoardImageConfig, input_vocab), 3, "tied head"},
      {offsetof(BoardImageConfig, n_kv_heads), 1, "GQA"},
      {offsetof(BoardImageConfig, arch), static_cast<int32_t>(BoardArch::kLlama), "PLE sizes"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good;
    put(&b, cfg + c.at, c.value);
    expect_refused(b, c.needle);
  }
  TinyLlama t;
  t.cfg.ple_dim = 4;
  expect_refused(t.bytes(), "PLE sizes");  // PLE sizes on another architecture
}

TEST(BoardImage, Q4eMatrixWithoutScalesIsRefused) {
  MC_REQUIRE_SHARED();
  std::vector<uint8_t> b = ple_fixture_image();
  ASSERT_FALSE(b.empty());
  // Renumber the token embedding's scales (id 0x81) to the unused 0x83 (the table stays sorted).
  const auto* h = reinterpret_cast<const BoardImageHeader*>(b.data());
  bool found = false;
  for (uint32_t i = 0; i < h->n_tensors && !found; ++i) {
    uint32_t id = 0;
    std::memcpy(&id, b.data() + entry_at(i, 0), 4);
    if (id == board_scales_id(board_tensor_id(BoardRole::kTokEmb))) {
      put(&b, entry_at(i, 0), uint32_t{0x83});
      found = true;
    }
  }
  ASSERT_TRUE(found);
  expect_refused(b, "needs f16 scales");
}

// The board runs PLE models with int8 activations only: an f32-activation load is not exported.
TEST(BoardImage, PleWithF32ActivationsIsNotExported) {
  MC_REQUIRE_SHARED();
  LoadOptions lo;
  lo.f32_activations = true;
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"), lo, &lm).ok());
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  const Status st = export_board_image(*lm, BoardImageOptions(), &bytes, &rep);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "int8 activations"), nullptr) << st.message();
}

// ---- the embedded tokenizer image (BoardRole::kTokenizer) ----

struct StoriesWithTokenizer {
  std::unique_ptr<LoadedModel> lm;
  Llama2cTokenizer tok;
  std::vector<uint8_t> tok_image;
  StoriesWithTokenizer() {
    EXPECT_OK(load_model(test::shared_path("models/stories260K/stories260K.bin"), &lm));
    std::string source;
    EXPECT_OK(load_tokenizer(*lm, test::shared_path("models/stories260K/tok512.bin"), &tok, &source));
    EXPECT_OK(write_tokenizer_image(tok, &tok_image));
  }
  std::vector<uint8_t> image(bool with_tokenizer, BoardImageReport* rep = nullptr) const {
    BoardImageOptions opt;
    opt.psram_budget = 2 * 1024 * 1024;
    if (with_tokenizer) opt.tokenizer = tok_image;
    std::vector<uint8_t> bytes;
    BoardImageReport r;
    EXPECT_OK(export_board_image(*lm, opt, &bytes, rep ? rep : &r));
    return bytes;
  }
};

// Where the tokenizer's bytes lie in an image.
size_t tokenizer_offset(const std::vector<uint8_t>& bytes, uint32_t* tensor_bytes = nullptr) {
  BoardImage img;
  EXPECT_OK(open_bytes(bytes, &img));
  const BoardImageTensor* t = img.find(board_tensor_id(BoardRole::kTokenizer));
  EXPECT_NE(t, nullptr);
  if (!t) return 0;
  if (tensor_bytes) *tensor_bytes = t->bytes;
  return img.section(static_cast<Tier>(t->tier)).offset + t->offset;
}

TEST(BoardImage, CarriesTheTokenizerImageInFlashAndKeepsItsVersion) {
  MC_REQUIRE_SHARED();
  const StoriesWithTokenizer s;
  BoardImageReport rep;
  const std::vector<uint8_t> with = s.image(true, &rep), without = s.image(false);
  EXPECT_EQ(rep.tokenizer_bytes, (s.tok_image.size() + 3) / 4 * 4);
  BoardImage img;
  Buffer* buf = nullptr;
  ASSERT_OK(open_bytes(with, &img, &buf));
  EXPECT_EQ(reinterpret_cast<const BoardImageHeader*>(buf->data())->version, kBoardImageWholeVersion);  // old readers read it
  const BoardImageTensor* t = img.find(board_tensor_id(BoardRole::kTokenizer));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(static_cast<Tier>(t->tier), Tier::kFlash);  // read in place, never copied to RAM
  EXPECT_EQ(0, std::memcmp(img.data(*t), s.tok_image.data(), s.tok_image.size()));
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kSram, mem.data(), mem.size());
  BoardModel model;
  ASSERT_OK(board_model_from_image(img, arena, &model));
  ASSERT_TRUE(model.tokenizer.is_open());
  // The board's encoder gives the host tokenizer's ids.
  const std::string text = "Once upon a time, Lily saw a big \xe2\x98\x83 snowman.\n";
  std::vector<int> want;
  ASSERT_OK(s.tok.encode(text, true, false, &want));
  std::vector<int32_t> ids(text.size() + 3), work(text.size() + 3);
  size_t n = 0;
  ASSERT_OK(model.tokenizer.encode(text.data(), text.size(), true, false, false, ids.data(), work.data(), ids.size(), &n));
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + static_cast<long>(n)), want);
  // The model is the same with or without it: the same logits.
  std::vector<float> a, b;
  ASSERT_OK(open_and_run(with, &a));
  ASSERT_OK(open_and_run(without, &b));
  EXPECT_EQ(a, b);
  ASSERT_OK(open_bytes(without, &img));
  EXPECT_EQ(img.find(board_tensor_id(BoardRole::kTokenizer)), nullptr);
}

TEST(BoardImage, DamagedTokenizerImagesAreRefused) {
  MC_REQUIRE_SHARED();
  const StoriesWithTokenizer s;
  const std::vector<uint8_t> good = s.image(true);
  uint32_t tensor_bytes = 0;
  const size_t at = tokenizer_offset(good, &tensor_bytes);
  ASSERT_GT(at, 0u);
  ASSERT_OK(open_and_run(good));
  std::vector<uint8_t> b = good;
  put<uint32_t>(&b, at, 0x12345678u);  // its magic
  expect_refused(b, "board image: embedded tokenizer image: bad magic");
  b = good;
  put<uint32_t>(&b, at + offsetof(TokImageHeader, total_bytes), tensor_bytes + 64);  // says more than the tensor holds
  expect_refused(b, "embedded tokenizer image: header says");
  b = good;
  put<uint32_t>(&b, at + offsetof(TokImageHeader, total_bytes), static_cast<uint32_t>(s.tok_image.size()) - 8);  // short of its tables
  expect_refused(b, "embedded tokenizer image");
  b = good;
  put<uint32_t>(&b, at + offsetof(TokImageHeader, n_tokens), 513);  // more tokens than its tables hold
  expect_refused(b, "embedded tokenizer image");
  b = good;
  const uint32_t sorted_off = reinterpret_cast<const TokImageHeader*>(s.tok_image.data())->off_sorted;
  put<uint32_t>(&b, at + sorted_off, 9999);  // an id outside the vocabulary in its index
  expect_refused(b, "embedded tokenizer image: sorted index entry 0 is id 9999");
  // Every truncation of the tokenizer's bytes, stored as a whole tensor of a valid board image: refused.
  for (size_t cut : {size_t{0}, size_t{4}, size_t{88}, s.tok_image.size() / 2, s.tok_image.size() - 4}) {
    TinyLlama tiny;
    std::vector<uint8_t> blob(s.tok_image.begin(), s.tok_image.begin() + static_cast<long>(cut));
    blob.resize((cut + 3) / 4 * 4 + 4);  // at least one word
    BoardTensorSource t;
    t.id = board_tensor_id(BoardRole::kTokenizer);
    t.cols = static_cast<uint32_t>(blob.size() / 4);
    t.data = blob.data();
    tiny.tensors.push_back(t);
    const Status st = open_and_run(tiny.bytes());
    EXPECT_FALSE(st.ok()) << "cut at " << cut;
    EXPECT_NE(std::strstr(st.message(), "tokenizer"), nullptr) << st.message();
  }
  // A whole tokenizer of 512 tokens for a model of 6; a tokenizer in a node's image.
  TinyLlama tiny;
  std::vector<uint8_t> blob = s.tok_image;
  blob.resize((blob.size() + 3) / 4 * 4);
  BoardTensorSource t;
  t.id = board_tensor_id(BoardRole::kTokenizer);
  t.cols = static_cast<uint32_t>(blob.size() / 4);
  t.data = blob.data();
  tiny.tensors.push_back(t);
  expect_refused(tiny.bytes(), "the tokenizer has 512 tokens, the model's vocabulary 6");
  std::vector<uint8_t> node;
  BoardSlice slice;
  slice.whole = false;
  slice.first = 0;
  slice.end = 1;
  slice.embedding = slice.head = false;
  std::vector<BoardTensorSource> node_tensors;
  for (const BoardTensorSource& x : tiny.tensors)
    if (x.id >= 16 || x.id == t.id) node_tensors.push_back(x);
  ASSERT_OK(write_board_image(tiny.cfg, node_tensors, &node, slice));
  expect_refused(node, "a tokenizer in an image without the embedding");
  // Non-zero bytes past the tokenizer image's end (padding that is not padding).
  blob.resize(blob.size() + 8, 0xab);
  t.cols = static_cast<uint32_t>(blob.size() / 4);
  t.data = blob.data();
  TinyLlama big;
  big.cfg.vocab_size = 512;
  big.tensors.clear();
  std::mt19937 rng(3);
  big.add(BoardRole::kTokEmb, 0, 512, 8, TensorClass::kEmbedding, Tier::kPsram, rng);
  for (size_t i = 1; i < tiny.tensors.size() - 1; ++i) big.tensors.push_back(tiny.tensors[i]);
  big.tensors.push_back(t);
  expect_refused(big.bytes(), "its padding is 0 to 3 zero bytes");
}

TEST(BoardImageCli, ConvertEmbedsTheTokenizerUnlessAskedNotTo) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  const std::string model = test::shared_path("models/stories260K/stories260K.bin");
  const test::CommandResult with = test::run_cli({"convert", model, "--image", dir + "/t.img"});
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_NE(with.err.find("tokenizer image "), std::string::npos) << with.err;
  const test::CommandResult without = test::run_cli({"convert", model, "--image", dir + "/n.img", "--no-tokenizer"});
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(without.err.find("tokenizer image"), std::string::npos) << without.err;
  std::vector<uint8_t> mem(1 << 20);
  for (const char* name : {"/t.img", "/n.img"}) {
    BoardImage img;
    ASSERT_OK(open_bytes(test::read_file(dir + name), &img));
    Arena arena(Tier::kSram, mem.data(), mem.size());
    BoardModel m;
    ASSERT_OK(board_model_from_image(img, arena, &m));
    EXPECT_EQ(m.tokenizer.is_open(), name[1] == 't') << name;
    if (m.tokenizer.is_open()) {
      EXPECT_EQ(m.tokenizer.vocab_size(), 512);
    }
  }
  // The cluster: the master's image carries it, the nodes' never.
  const std::string gguf = dir + "/q.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", gguf}).exit_code, 0);
  const test::CommandResult all = test::run_cli({"convert", gguf, "--image", dir + "/c.img", "--nodes", "2"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (const char* name : {"/c.master.img", "/c.node1.img", "/c.node2.img"}) {
    BoardImage img;
    ASSERT_OK(open_bytes(test::read_file(dir + name), &img));
    EXPECT_EQ(img.find(board_tensor_id(BoardRole::kTokenizer)) != nullptr, name[3] == 'm') << name;
  }
  const test::CommandResult master = test::run_cli({"convert", gguf, "--image", dir + "/m.img", "--layers", "master", "--no-tokenizer"});
  ASSERT_EQ(master.exit_code, 0) << master.err;
  BoardImage img;
  ASSERT_OK(open_bytes(test::read_file(dir + "/m.img"), &img));
  EXPECT_EQ(img.find(board_tensor_id(BoardRole::kTokenizer)), nullptr);
}

TEST(BoardImageCli, ConvertWritesAPleImage) {
  MC_REQUIRE_SHARED();
  const std::string out = test::temp_dir() + "/ple.img";
  ASSERT_EQ(test::run_cli({"convert", test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"), "--image", out}).exit_code, 0);
  const std::vector<uint8_t> bytes = test::read_file(out);
  BoardImage img;
  ASSERT_TRUE(open_bytes(bytes, &img).ok());
  EXPECT_EQ(img.arch(), BoardArch::kPle);
  EXPECT_EQ(img.config().input_vocab, 4096);
  EXPECT_TRUE(open_and_run(bytes).ok());
}

TEST(BoardImageCli, ConvertWritesAnImageAndRefusesBadFlags) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  const std::string model = test::shared_path("models/stories260K/stories260K.bin");
  const test::CommandResult ok = test::run_cli({"convert", model, "--image", dir + "/s.img"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  BoardImage img;
  ASSERT_TRUE(open_bytes(test::read_file(dir + "/s.img"), &img).ok());
  EXPECT_EQ(img.config().bos_id, 1);
  EXPECT_EQ(img.config().eos_id, 2);
  const test::CommandResult typed = test::run_cli({"convert", model, "--image", dir + "/t.img", "--type", "q8_0"});
  EXPECT_NE(typed.exit_code, 0);
  EXPECT_NE(typed.err.find("--image keeps the weights"), std::string::npos) << typed.err;
  const test::CommandResult none = test::run_cli({"convert", model});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("--output FILE.gguf or --image"), std::string::npos) << none.err;
  const test::CommandResult both = test::run_cli({"convert", model, "-o", dir + "/x.gguf", "--image", dir + "/x.img"});
  EXPECT_NE(both.exit_code, 0);
}

// Per-node images from the command line: one slice (--layers), or the master's and every node's
// image of the planner's split (--nodes), each recording its slice; bad requests get messages.
TEST(BoardImageCli, ConvertWritesPerNodeImages) {
  const std::string dir = test::temp_dir();
  const std::string gguf = dir + "/q.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", gguf}).exit_code, 0);
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(gguf, &lm));
  BoardImage img;
  const test::CommandResult one = test::run_cli({"convert", gguf, "--image", dir + "/n.img", "--layers", "1:3"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_OK(open_bytes(test::read_file(dir + "/n.img"), &img));
  EXPECT_EQ(img.slice().first, 1);
  EXPECT_EQ(img.slice().end, 3);
  EXPECT_EQ(img.slice().hash, slice_hash(lm->model, SliceRange{1, 3, false}));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(img.slice().hash));
  EXPECT_NE(one.err.find(hex), std::string::npos) << one.err;  // the hash a master will see
  const test::CommandResult all = test::run_cli({"convert", gguf, "--image", dir + "/c.img", "--nodes", "2"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("node2"), std::string::npos) << all.out;  // the planner's table
  ASSERT_OK(open_bytes(test::read_file(dir + "/c.master.img"), &img));
  EXPECT_TRUE(img.slice().embedding && img.slice().head && img.slice().first == img.slice().end);
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kSram, mem.data(), mem.size());
  BoardModel master;  // it carries the nodes' plan: their layers and hashes
  ASSERT_OK(board_model_from_image(img, arena, &master));
  ASSERT_EQ(master.plan_nodes, 2);
  int next = 0, k = 0;
  for (const char* node : {"/c.node1.img", "/c.node2.img"}) {
    ASSERT_OK(open_bytes(test::read_file(dir + node), &img));
    EXPECT_EQ(img.slice().first, next);
    EXPECT_GT(img.slice().end, next);
    EXPECT_FALSE(img.slice().embedding || img.slice().head);
    EXPECT_EQ(master.plan_ranges[k].first, img.slice().first);
    EXPECT_EQ(master.plan_ranges[k].end, img.slice().end);
    EXPECT_EQ(master.plan_hashes[k], img.slice().hash);
    next = img.slice().end;
    ++k;
  }
  EXPECT_EQ(next, 4);
  const test::CommandResult outside = test::run_cli({"convert", gguf, "--image", dir + "/x.img", "--layers", "2:9"});
  EXPECT_NE(outside.err.find("not a range inside the model's 4 layers"), std::string::npos) << outside.err;
  const test::CommandResult no_image = test::run_cli({"convert", gguf, "-o", dir + "/x.gguf", "--layers", "0:2"});
  EXPECT_NE(no_image.err.find("give --image"), std::string::npos) << no_image.err;
  const test::CommandResult too_many = test::run_cli({"convert", gguf, "--image", dir + "/x.img", "--nodes", "5"});
  EXPECT_NE(too_many.err.find("5 nodes for 4 layers"), std::string::npos) << too_many.err;
}

// A board profile like the preset but taking images of at most `limit` bytes, as a JSON file.
std::string board_with_image_limit(const std::string& dir, uint64_t limit) {
  BoardProfile b;
  EXPECT_OK(board_preset("esp32s3-psram80", &b));
  b.name = "tight-board";
  b.image_bytes_max = limit;
  const std::string path = dir + "/tight" + std::to_string(limit) + ".json", json = board_profile_to_json(b);
  test::write_file(path, std::vector<uint8_t>(json.begin(), json.end()));
  return path;
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

// convert --image (whole, --layers, --nodes) refuses an image larger than --board's image_bytes_max
// (the partition it is flashed into) with exit code 3, writing nothing and naming what shrinks it;
// exactly at the limit it is written.
TEST(BoardImageCli, ConvertRefusesAnImageLargerThanTheBoardTakes) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  const std::string model = test::shared_path("models/stories260K/stories260K.bin");
  ASSERT_EQ(test::run_cli({"convert", model, "--image", dir + "/s.img"}).exit_code, 0);  // the default board takes it
  const uint64_t whole = test::read_file(dir + "/s.img").size();
  const test::CommandResult at = test::run_cli({"convert", model, "--image", dir + "/at.img", "--board", board_with_image_limit(dir, whole)});
  ASSERT_EQ(at.exit_code, 0) << at.err;
  EXPECT_EQ(test::read_file(dir + "/at.img"), test::read_file(dir + "/s.img"));
  const test::CommandResult over =
      test::run_cli({"convert", model, "--image", dir + "/over.img", "--board", board_with_image_limit(dir, whole - 1)});
  EXPECT_EQ(over.exit_code, 3) << over.err;
  EXPECT_FALSE(exists(dir + "/over.img"));
  for (const std::string& want : {dir + "/over.img would be " + std::to_string(whole) + " bytes", std::string("1 more than board tight-board"),
                                  "at most " + std::to_string(whole - 1) + " bytes", std::string("--no-tokenizer (the tokenizer image is"),
                                  std::string("--nodes N")})
    EXPECT_NE(over.err.find(want), std::string::npos) << want << " in " << over.err;
  const test::CommandResult bad = test::run_cli({"convert", model, "--image", dir + "/bad.img", "--board", dir + "/none.json"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("neither a preset"), std::string::npos) << bad.err;
  EXPECT_FALSE(exists(dir + "/bad.img"));

  // One node's layers: no tokenizer, no embedding to shrink; fewer layers.
  const std::string gguf = dir + "/q.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", gguf}).exit_code, 0);
  ASSERT_EQ(test::run_cli({"convert", gguf, "--image", dir + "/n.img", "--layers", "1:3"}).exit_code, 0);
  const uint64_t node = test::read_file(dir + "/n.img").size();
  EXPECT_EQ(test::run_cli({"convert", gguf, "--image", dir + "/n2.img", "--layers", "1:3", "--board", board_with_image_limit(dir, node)})
                .exit_code,
            0);
  const test::CommandResult node_over =
      test::run_cli({"convert", gguf, "--image", dir + "/n3.img", "--layers", "1:3", "--board", board_with_image_limit(dir, node - 1)});
  EXPECT_EQ(node_over.exit_code, 3) << node_over.err;
  EXPECT_FALSE(exists(dir + "/n3.img"));
  EXPECT_NE(node_over.err.find("To shrink it: fewer --layers"), std::string::npos) << node_over.err;
  EXPECT_EQ(node_over.err.find("--no-tokenizer"), std::string::npos) << node_over.err;

  // --nodes 4 (one layer each): the master's image without the tokenizer is the largest.
  ASSERT_EQ(test::run_cli({"convert", gguf, "--image", dir + "/c.img", "--nodes", "4", "--no-tokenizer"}).exit_code, 0);
  uint64_t largest = 0;
  for (const char* part : {"master", "node1", "node2", "node3", "node4"})
    largest = std::max<uint64_t>(largest, test::read_file(dir + "/c." + part + ".img").size());
  ASSERT_EQ(largest, test::read_file(dir + "/c.master.img").size());
  const std::string tight = board_with_image_limit(dir, largest);
  const test::CommandResult split = test::run_cli({"convert", gguf, "--image", dir + "/t.img", "--nodes", "4", "--no-tokenizer", "--board", tight});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(test::read_file(dir + "/t.master.img"), test::read_file(dir + "/c.master.img"));
  // One byte less: the planner counts weights only (they fit), the image itself does not: nothing written.
  const test::CommandResult split_over = test::run_cli(
      {"convert", gguf, "--image", dir + "/u.img", "--nodes", "4", "--no-tokenizer", "--board", board_with_image_limit(dir, largest - 1)});
  EXPECT_EQ(split_over.exit_code, 3) << split_over.err;
  EXPECT_NE(split_over.err.find(dir + "/u.master.img would be " + std::to_string(largest) + " bytes"), std::string::npos) << split_over.err;
  // With the tokenizer the planner refuses the master first (its weights + the tokenizer image).
  const test::CommandResult with_tok = test::run_cli({"convert", gguf, "--image", dir + "/v.img", "--nodes", "4", "--board", tight});
  EXPECT_EQ(with_tok.exit_code, 3) << with_tok.err;
  for (const std::string& want : {std::string("master's embedding and head do not fit tight-board"), std::string("of the tokenizer image"),
                                  std::string("--no-tokenizer (the tokenizer image is")})
    EXPECT_NE(with_tok.err.find(want), std::string::npos) << want << " in " << with_tok.err;
  for (const char* part : {"master", "node1", "node2", "node3", "node4"}) {
    EXPECT_FALSE(exists(dir + "/u." + part + ".img")) << part;
    EXPECT_FALSE(exists(dir + "/v." + part + ".img")) << part;
  }
}

}  // namespace
}  // namespace mcullm
