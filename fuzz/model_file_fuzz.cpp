// Any bytes as a model file. The first byte picks the reader: even = the file loader of `mcullm run`
// (GGUF of every architecture, llama2.c legacy / v1 / v2, bitllama2.c ternary, esp32-ai), odd = a board
// image (its CRC is recomputed first, so mutations reach the header, table and model checks instead of
// stopping at the checksum). Each must refuse with a message or give a model that then runs a few
// tokens (forward and, where the model batches, prefill) without a crash.
// With MCULLM_FUZZ_SEEDS=DIR set, seeds are written there first: a tiny llama2.c model built here, its
// GGUF in f32 / q8_0 / q4g64, a tiny BitNet GGUF, a tiny Qwen2 GGUF, board images (the Qwen2's also with
// the tokenizer image embedded, which an accepted image then encodes and decodes with), and the small
// shared models. An accepted Qwen2 file is also loaded as a layer slice (load/layer_slice_loader_host.h).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "dummy_gguf.h"
#include "format/board_image.h"
#include "format/board_image_model.h"
#include "format/gguf_writer_host.h"
#include "format/transformer_gguf_writer_host.h"
#include "fuzz_support.h"
#include "load/board_image_export_host.h"
#include "load/layer_slice_loader_host.h"
#include "load/model_loader_host.h"
#include "model/llama_slice.h"
#include "tokenizer/tokenizer_image_writer_host.h"

using namespace mcullm;

namespace {

constexpr int kSteps = 3;  // positions each accepted model runs

// A llama2.c legacy checkpoint with random small weights (shared classifier).
std::vector<uint8_t> tiny_llama2c() {
  const int32_t dim = 16, hidden = 32, layers = 1, heads = 2, kv_heads = 1, vocab = 32, seq = 8;
  const int head = dim / heads, kv_dim = head * kv_heads;
  const size_t floats = size_t{vocab} * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden) +
                        dim + size_t{seq} * head;
  std::vector<uint8_t> out(7 * 4 + floats * 4);
  const int32_t header[7] = {dim, hidden, layers, heads, kv_heads, vocab, seq};
  std::memcpy(out.data(), header, sizeof header);
  uint32_t state = 12345;
  for (size_t i = 0; i < floats; ++i) {
    state = state * 1664525u + 1013904223u;
    const float v = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.5f;
    std::memcpy(out.data() + 28 + i * 4, &v, 4);
  }
  return out;
}

std::string temp_path() { return "/tmp/mcullm_model_fuzz_" + std::to_string(getpid()) + ".bin"; }

void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr);
  if (size) FUZZ_CHECK(std::fwrite(data, 1, size, f) == size);
  std::fclose(f);
}

// The loaded model as seeds: its board image, and (llama models) its GGUF in a few weight types. With a
// tokenizer image, the whole and the master's images carry it (BoardRole::kTokenizer).
void seeds_of(const std::string& dir, const std::string& name, const std::string& model_path,
              const std::vector<uint8_t>* tokenizer = nullptr) {
  std::unique_ptr<LoadedModel> lm;
  if (!load_model(model_path, &lm).ok()) return;
  BoardImageOptions opt;
  opt.sram_budget = 4096;
  opt.psram_budget = 16384;
  if (tokenizer) {
    opt.tokenizer = *tokenizer;
    std::vector<uint8_t> image;
    BoardImageReport rep;
    if (export_board_image(*lm, opt, &image, &rep).ok()) fuzz::write_seed(dir + "/" + name + "_image_tokenizer", 1, image);
    if (lm->is(ArchFamily::kTransformer)) {
      opt.sliced = true;
      opt.slice = SliceRange{0, 0, true};
      if (export_board_image(*lm, opt, &image, &rep).ok()) fuzz::write_seed(dir + "/" + name + "_master_image_tokenizer", 1, image);
    }
    return;
  }
  std::vector<uint8_t> image;
  BoardImageReport rep;
  if (export_board_image(*lm, opt, &image, &rep).ok()) fuzz::write_seed(dir + "/" + name + "_image", 1, image);
  if (lm->is(ArchFamily::kTransformer) && lm->model.cfg.n_layers > 1) {  // per-node images: a node's layers, the master's part
    opt.sliced = true;
    opt.slice = SliceRange{1, 2, false};
    if (export_board_image(*lm, opt, &image, &rep).ok()) fuzz::write_seed(dir + "/" + name + "_node_image", 1, image);
    opt.slice = SliceRange{0, 0, true};
    opt.node_plan = {SliceRange{0, 1, false}, SliceRange{1, lm->model.cfg.n_layers, false}};  // the master's nodes
    if (export_board_image(*lm, opt, &image, &rep).ok()) fuzz::write_seed(dir + "/" + name + "_master_image", 1, image);
  }
  if (lm->arch != arch_info("llama")) return;
  for (const DType t : {DType::kF32, DType::kQ8_0, DType::kQ4G64}) {
    GgufWriter w;
    GgufExportOptions eo;
    eo.weight_type = t;
    GgufExportReport er;
    if (export_transformer_gguf(lm->model, nullptr, eo, &w, &er).ok())
      fuzz::write_seed(dir + "/" + name + "_gguf_" + std::to_string(static_cast<int>(t)), 0, w.to_bytes());
  }
}

void write_seeds(const std::string& dir) {
  const std::vector<uint8_t> llama = tiny_llama2c();
  fuzz::write_seed(dir + "/llama2c", 0, llama);
  write_bytes(temp_path(), llama.data(), llama.size());
  seeds_of(dir, "llama2c", temp_path());
  // A tiny BitNet b1.58 GGUF (i2_s layers) over the 512-token vocabulary.
  Llama2cTokenizer tok;
  if (tok.load_file(fuzz::shared_path("models/stories260K/tok512.bin"), 512).ok()) {
    GgufDummyOptions bo;
    bo.layout = {"fuzz", "bitnet", 128, 256, 1, 4, 2, 512, 16};
    bo.embedding_type = DType::kQ8_0;
    GgufWriter w;
    GgufDummyReport br;
    if (write_gguf_dummy(bo, tok, &w, &br).ok()) {
      const std::vector<uint8_t> bytes = w.to_bytes();
      fuzz::write_seed(dir + "/bitnet_gguf", 0, bytes);
      write_bytes(temp_path(), bytes.data(), bytes.size());
      seeds_of(dir, "bitnet", temp_path());
    }
    // A tiny Qwen2 (i2_s layers, q4_0 tied embedding).
    GgufDummyOptions qo;
    qo.layout = {"fuzz", "qwen2", 128, 256, 2, 4, 2, 512, 16, 1e6f};
    qo.embedding_type = DType::kQ4_0;
    GgufWriter qw;
    GgufDummyReport qr;
    if (write_gguf_dummy(qo, tok, &qw, &qr).ok()) {
      const std::vector<uint8_t> bytes = qw.to_bytes();
      fuzz::write_seed(dir + "/qwen2_gguf", 0, bytes);
      write_bytes(temp_path(), bytes.data(), bytes.size());
      seeds_of(dir, "qwen2", temp_path());  // its board images: whole, a node's (layer 1), the master's
      std::vector<uint8_t> tok_image;  // and the whole and master's images with tok512's tokenizer image
      if (write_tokenizer_image(tok, &tok_image).ok()) seeds_of(dir, "qwen2", temp_path(), &tok_image);
    }
  }
  // The shared models small enough for -max_len.
  for (const char* rel : {"models/bitnet-tinystories/bit1M_msb.bin", "models/esp32-ai-ple/ple4096_int4.bin"}) {
    const std::vector<uint8_t> bytes = fuzz::read_all(fuzz::shared_path(rel));
    if (bytes.empty()) continue;
    std::string name = rel;
    name = name.substr(name.rfind('/') + 1);
    fuzz::write_seed(dir + "/" + name, 0, bytes);
    write_bytes(temp_path(), bytes.data(), bytes.size());
    seeds_of(dir, name, temp_path());
  }
  std::remove(temp_path().c_str());
}

// Runs a few tokens; any token id the model has.
void run_tokens(Decoder& d, int vocab) {
  for (int pos = 0; pos < kSteps; ++pos) {
    const float* logits = nullptr;
    if (!d.forward((pos * 7 + 1) % vocab, pos, &logits).ok()) return;
    FUZZ_CHECK(logits != nullptr);
  }
  if (d.max_batch() > 1) {
    const int tokens[2] = {1 % vocab, 2 % vocab};
    const float* logits = nullptr;
    (void)d.prefill(tokens, 2, 0, &logits);
  }
}

void fuzz_model_file(const uint8_t* data, size_t size) {
  const std::string path = temp_path();
  write_bytes(path, data, size);
  std::unique_ptr<LoadedModel> lm;
  const Status st = load_model(path, &lm);
  if (!st.ok()) {
    FUZZ_CHECK(st.message()[0] != '\0');
    return;
  }
  SerialPool pool;
  DecoderInstance dec;
  if (!make_decoder(*lm, kSteps, &pool, &kernels_best(), 0, &dec).ok()) return;
  FUZZ_CHECK(dec.decoder->vocab_size() > 0);
  run_tokens(*dec.decoder, dec.decoder->vocab_size());
  if (lm->arch->slices == ArchSlices::kRanges) {  // the same file as a node's slice: its last layer with the head
    const int layers = lm->model.cfg.n_layers;
    SliceOptions so;
    so.ctx_len = kSteps;
    std::unique_ptr<LoadedSlice> slice;
    const Status ss = load_layer_slice(path, layers - 1, layers, false, true, so, &slice);
    if (!ss.ok()) {  // only tl1 / tl2 layers are refused as slices
      FUZZ_CHECK(model_has_tl(*lm));
      return;
    }
    std::vector<float> hidden(static_cast<size_t>(slice->slice().dim()), 0.25f);
    const float* logits = nullptr;
    FUZZ_CHECK(slice->slice().run_layers(hidden.data(), 0).ok());
    FUZZ_CHECK(slice->slice().head(hidden.data(), &logits).ok());
  }
}

void fuzz_board_image(const uint8_t* data, size_t size) {
  // In place, as a board reads it: 64-byte aligned, the CRC made to match.
  std::unique_ptr<uint8_t[], decltype(&std::free)> buf(
      static_cast<uint8_t*>(std::aligned_alloc(kBoardImageAlign, (size + kBoardImageAlign) & ~(kBoardImageAlign - 1))),
      &std::free);
  std::memcpy(buf.get(), data, size);
  if (size >= sizeof(BoardImageHeader)) {
    const uint32_t crc = crc32_ieee(buf.get() + kBoardImageCrcStart, size - kBoardImageCrcStart);
    std::memcpy(buf.get() + offsetof(BoardImageHeader, crc32), &crc, 4);
  }
  BoardImage img;
  Status st = img.open(buf.get(), size);
  if (!st.ok()) {
    FUZZ_CHECK(st.message()[0] != '\0');
    return;
  }
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kSram, mem.data(), mem.size());
  BoardModel model;
  if (!board_model_from_image(img, arena, &model).ok()) return;
  if (model.tokenizer.is_open()) {  // an accepted tokenizer image encodes and decodes without a crash
    static const char kText[] = "Once upon a time, \xe2\x98\x83 <|im_start|>\n";
    int32_t ids[sizeof kText + 3], work[sizeof kText + 3];
    size_t n = 0;
    if (model.tokenizer.encode(kText, sizeof kText - 1, true, false, true, ids, work, sizeof kText + 3, &n).ok()) {
      FUZZ_CHECK(n <= sizeof kText + 2);
      int prev = -1;
      for (size_t i = 0; i < n; ++i) {
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < model.tokenizer.vocab_size());
        size_t len = 0;
        model.tokenizer.decode_step(prev, ids[i], &len);
        prev = ids[i];
      }
    }
  }
  if (!img.slice().whole) {  // a per-node image: its layers (and the master's part) as a slice
    LlamaSlice slice;
    SerialPool pool;
    if (!slice.init(&model.transformer, kSteps, arena, &pool, &kernels_best()).ok()) return;
    std::vector<float> hidden(static_cast<size_t>(model.transformer.cfg.dim), 0.25f);
    const float* logits = nullptr;
    for (int pos = 0; pos < kSteps; ++pos) {
      if (slice.has_embedding()) FUZZ_CHECK(slice.embed(pos % model.transformer.cfg.vocab_size, hidden.data()).ok());
      FUZZ_CHECK(slice.run_layers(hidden.data(), pos).ok());
      if (slice.has_head()) FUZZ_CHECK(slice.head(hidden.data(), &logits).ok());
    }
    return;
  }
  BoardDecoder dec;
  SerialPool pool;
  if (!dec.init(model, kSteps, arena, &pool, &kernels_best()).ok()) return;
  run_tokens(dec.decoder(), model.cfg().vocab_size);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("MCULLM_FUZZ_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1)
    fuzz_board_image(data + 1, size - 1);
  else
    fuzz_model_file(data + 1, size - 1);
  return 0;
}
