// Head groups stored with the model (format/vocab_head_gguf.h, `mcullm head --write`): a file with
// stored groups gives the two-stage and pruned heads exactly what groups computed on the fly give,
// runs to the same fingerprint, and a file whose groups do not fit its head, or are cut or corrupt,
// is refused with a message naming the part.
#include <cstring>
#include <memory>
#include <vector>

#include <random>

#include "core/thread_pool.h"
#include "format/board_image_model.h"
#include "format/vocab_head_gguf_writer_host.h"
#include "quant/blocks.h"
#include "quant/q4e.h"
#include "load/model_loader_host.h"
#include "model/vocab_head_build_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

using test::run_cli;

// stories260K as a GGUF (f32 head, 512 x 64).
std::string stories_gguf() {
  const std::string path = test::temp_dir() + "/s.gguf";
  const auto r = run_cli({"convert", test::shared_path("models/stories260K/stories260K.bin"), "-o", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

// A board image's bytes in 8-byte-aligned storage, as BoardImage::open reads them.
std::vector<uint64_t> aligned_copy(const std::vector<uint8_t>& bytes) {
  std::vector<uint64_t> words(bytes.size() / 8 + 1);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

// The printed table of `mcullm head` (its first line names the file and how the groups were made).
std::string head_table(const std::vector<std::string>& args) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out.substr(r.out.find('\n') + 1);
}

TEST(HeadGroups, StoredGroupsGiveTheSameHeadsAsGroupsBuiltOnTheFly) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  const std::string ple = dir + "/ple.gguf";
  ASSERT_EQ(run_cli({"convert", test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"), "-o", ple}).exit_code, 0);
  for (const std::string& model : {stories_gguf(), ple}) {
    const std::string out = model + ".groups.gguf";
    const std::string built = head_table({"head", "-m", model, "-n", "30", "--groups", "32", "--top", "2,8", "--write", out});
    const auto stored = run_cli({"head", "-m", out, "-n", "30", "--top", "2,8"});
    ASSERT_EQ(stored.exit_code, 0) << stored.err;
    EXPECT_NE(stored.out.find("32 groups (stored in the file)"), std::string::npos) << stored.out;
    EXPECT_EQ(stored.out.substr(stored.out.find('\n') + 1), built);
    // The stored groups change nothing else: the same fingerprint as the model without them.
    auto fp = [](const std::string& m) {
      const auto r = run_cli({"run", "-m", m, "--prompt-ids", "1,20,30", "--temp", "0", "-n", "8", "-q", "--fingerprint"});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      return r.out;
    };
    EXPECT_EQ(fp(out), fp(model));
  }
  // --write needs a GGUF to copy.
  const auto r = run_cli({"head", "-m", test::shared_path("models/stories260K/stories260K.bin"), "-n", "2", "--write", dir + "/x.gguf"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("convert"), std::string::npos) << r.err;
}

// A head whose stored groups are edited before writing.
struct Variant {
  std::vector<int32_t> tok, start;
  std::vector<float> rad, nmax, cent;
  VocabHead h;
  explicit Variant(const VocabHead& src) {
    const int V = src.rows.rows, K = src.n_groups;
    tok.assign(src.token_of_row, src.token_of_row + V);
    start.assign(src.group_start, src.group_start + K + 1);
    rad.assign(src.radius, src.radius + K);
    nmax.assign(src.row_norm_max, src.row_norm_max + K);
    cent.assign(src.centroids, src.centroids + static_cast<size_t>(K) * src.dim);
    h = src;
    h.token_of_row = tok.data();
    h.group_start = start.data();
    h.radius = rad.data();
    h.row_norm_max = nmax.data();
    h.centroids = cent.data();
  }
};

TEST(HeadGroups, CorruptOrMismatchedGroupsAreRefusedClearly) {
  MC_REQUIRE_SHARED();
  const std::string base = stories_gguf(), dir = test::temp_dir();
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(base, &lm).ok());
  std::vector<uint8_t> mem(4 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  VocabHead vh;
  ASSERT_TRUE(build_vocab_head(lm->model.output, 16, 5, arena, &vh).ok());
  // A head of another model (stories260K with rows swapped): the stored rows no longer match.
  std::vector<uint8_t> swapped(static_cast<const uint8_t*>(vh.rows.data),
                               static_cast<const uint8_t*>(vh.rows.data) + vh.rows.rows * vh.rows.row_bytes);
  std::swap_ranges(swapped.begin(), swapped.begin() + vh.rows.row_bytes, swapped.begin() + vh.rows.row_bytes);
  auto write = [&](const VocabHead& h, const std::string& name) {
    GgufWriter w;
    EXPECT_TRUE(copy_gguf(lm->gguf, &w).ok());
    EXPECT_TRUE(add_vocab_head(h, &w).ok());
    const std::string path = dir + "/" + name;
    EXPECT_TRUE(w.write_file(path).ok());
    return path;
  };
  auto expect_refused = [](const std::string& path, const std::string& words) {
    std::unique_ptr<LoadedModel> m;
    const Status st = load_model(path, &m);
    EXPECT_FALSE(st.ok()) << path;
    EXPECT_NE(std::string(st.message()).find(words), std::string::npos) << st.message();
  };
  const std::string good = write(vh, "good.gguf");
  {
    std::unique_ptr<LoadedModel> m;
    const Status st = load_model(good, &m);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(m->has_head_groups);
    EXPECT_EQ(m->head_groups.n_groups, 16);
  }
  { Variant v(vh); v.tok[6] = v.tok[5]; expect_refused(write(v.h, "dup.gguf"), "not a permutation"); }
  { Variant v(vh); v.tok[0] = 512; expect_refused(write(v.h, "range.gguf"), "not a permutation"); }
  { Variant v(vh); v.start[16] = 500; expect_refused(write(v.h, "end.gguf"), "group bounds"); }
  { Variant v(vh); std::swap(v.start[3], v.start[4]); if (v.start[3] != v.start[4]) expect_refused(write(v.h, "order.gguf"), "ends before it starts"); }
  { Variant v(vh); v.rad[2] = -1.0f; expect_refused(write(v.h, "rad.gguf"), "radius"); }
  { Variant v(vh); v.h.rows.data = swapped.data(); expect_refused(write(v.h, "rows.gguf"), "is not the head's row"); }
  { Variant v(vh); v.h.n_groups = 15; expect_refused(write(v.h, "fewer.gguf"), "group bounds run from 0 to"); }
  {  // an array of the wrong length, a missing tensor
    GgufWriter w;
    ASSERT_TRUE(copy_gguf(lm->gguf, &w).ok());
    ASSERT_TRUE(add_vocab_head(vh, &w).ok());
    w.set_f32_array("head_groups.radius", {1.0f, 2.0f, 3.0f});
    ASSERT_TRUE(w.write_file(dir + "/short.gguf").ok());
    expect_refused(dir + "/short.gguf", "head_groups.radius has 3 entries, the head needs 16");
    GgufWriter w2;
    ASSERT_TRUE(copy_gguf(lm->gguf, &w2).ok());
    ASSERT_TRUE(w2.add_tensor("head_groups.rows", vh.rows.type, {vh.rows.cols, vh.rows.rows}, vh.rows.data,
                              vh.rows.rows * vh.rows.row_bytes).ok());
    ASSERT_TRUE(w2.write_file(dir + "/nocent.gguf").ok());
    expect_refused(dir + "/nocent.gguf", "head_groups.centroids is missing");
  }
  {  // a router: stored and read back bit for bit; hostile values and a partial router refused
    std::vector<float> calib(400 * static_cast<size_t>(vh.dim));
    std::mt19937 rng(2);
    std::normal_distribution<float> n01;
    for (float& v : calib) v = n01(rng);
    VocabHead routed;
    ASSERT_OK(fit_head_router(vh, calib.data(), 400, arena, &routed));
    const int K = vh.n_groups, D = vh.dim;
    {
      std::unique_ptr<LoadedModel> m;
      const Status st = load_model(write(routed, "routed.gguf"), &m);
      ASSERT_TRUE(st.ok()) << st.message();
      const VocabHead& r = m->head_groups;
      ASSERT_NE(r.router, nullptr);
      EXPECT_EQ(0, std::memcmp(r.router, routed.router, static_cast<size_t>(K) * D));
      EXPECT_EQ(0, std::memcmp(r.router_scale, routed.router_scale, K * 4));
      EXPECT_EQ(0, std::memcmp(r.router_bias, routed.router_bias, K * 4));
    }
    std::vector<int8_t> w(routed.router, routed.router + static_cast<size_t>(K) * D);
    std::vector<float> sc(routed.router_scale, routed.router_scale + K), bi(routed.router_bias, routed.router_bias + K);
    auto variant = [&](auto edit, const std::string& name, const std::string& words) {
      std::vector<int8_t> w2 = w;
      std::vector<float> sc2 = sc, bi2 = bi;
      VocabHead h = routed;
      h.router = w2.data();
      h.router_scale = sc2.data();
      h.router_bias = bi2.data();
      edit(h, w2, sc2, bi2);
      expect_refused(write(h, name), words);
    };
    using I8 = std::vector<int8_t>;
    using F = std::vector<float>;
    variant([](VocabHead&, I8&, F& s, F&) { s[3] = 0.0f; }, "rs0.gguf", "router scale");
    variant([](VocabHead&, I8&, F& s, F&) { s[1] = -__builtin_nanf(""); }, "rsnan.gguf", "router scale");
    variant([](VocabHead&, I8&, F&, F& b) { b[0] = __builtin_huge_valf(); }, "rbinf.gguf", "router scale");
    variant([](VocabHead&, I8& r, F&, F&) { r[5] = -128; }, "r128.gguf", "router value 5 is -128");
    GgufWriter wr;  // a router without its scales and biases; one of the wrong length
    ASSERT_TRUE(copy_gguf(lm->gguf, &wr).ok());
    ASSERT_TRUE(add_vocab_head(vh, &wr).ok());
    ASSERT_TRUE(wr.set_array("head_groups.router", GgufType::kI8, w.data(), w.size()).ok());
    ASSERT_TRUE(wr.write_file(dir + "/partial.gguf").ok());
    expect_refused(dir + "/partial.gguf", "head_groups.router_scale");
    ASSERT_TRUE(wr.set_array("head_groups.router", GgufType::kI8, w.data(), w.size() - 1).ok());
    wr.set_f32_array("head_groups.router_scale", sc);
    wr.set_f32_array("head_groups.router_bias", bi);
    ASSERT_TRUE(wr.write_file(dir + "/shortrouter.gguf").ok());
    expect_refused(dir + "/shortrouter.gguf", "head_groups.router has");
  }
  // Cut anywhere: a clear error, never a crash.
  const std::vector<uint8_t> bytes = test::read_file(good);
  for (size_t cut : {bytes.size() - 1, bytes.size() - 1000, bytes.size() / 2, size_t{200}}) {
    const std::string path = dir + "/cut.gguf";
    test::write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
    std::unique_ptr<LoadedModel> m;
    EXPECT_FALSE(load_model(path, &m).ok()) << "cut at " << cut;
  }
}

// The board image carries the stored groups: the board binds the same tables, and the two-stage
// and pruned heads give the same tokens and read the same bytes as on the host.
TEST(HeadGroups, BoardImageCarriesThemAndTheBoardChecksThem) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir(), ple = dir + "/ple.gguf";
  ASSERT_EQ(run_cli({"convert", test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"), "-o", ple}).exit_code, 0);
  for (const std::string& model : {stories_gguf(), ple}) {
    const std::string with = model + ".g.gguf", image = model + ".img";
    ASSERT_EQ(run_cli({"head", "-m", model, "-n", "2", "--groups", "24", "--calib-sampled", "300", "--write", with}).exit_code, 0);
    const auto conv = run_cli({"convert", with, "--image", image});
    ASSERT_EQ(conv.exit_code, 0) << conv.err;
    std::unique_ptr<LoadedModel> lm;
    ASSERT_TRUE(load_model(with, &lm).ok());
    ASSERT_TRUE(lm->has_head_groups);
    std::vector<uint8_t> bytes = test::read_file(image);
    std::vector<uint64_t> words = aligned_copy(bytes);
    BoardImage img;
    ASSERT_TRUE(img.open(reinterpret_cast<const uint8_t*>(words.data()), bytes.size()).ok());
    std::vector<uint8_t> mem(1 << 20);
    Arena tables(Tier::kHost, mem.data(), mem.size());
    BoardModel bm;
    const Status st = board_model_from_image(img, tables, &bm);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(bm.has_head_groups);
    const VocabHead &a = lm->head_groups, &b = bm.head_groups;
    ASSERT_EQ(a.n_groups, b.n_groups);
    const int V = a.rows.rows, D = a.dim, K = a.n_groups;
    EXPECT_EQ(0, std::memcmp(a.token_of_row, b.token_of_row, V * 4));
    EXPECT_EQ(0, std::memcmp(a.group_start, b.group_start, (K + 1) * 4));
    EXPECT_EQ(0, std::memcmp(a.centroids, b.centroids, static_cast<size_t>(K) * D * 4));
    EXPECT_EQ(0, std::memcmp(a.radius, b.radius, K * 4));
    EXPECT_EQ(0, std::memcmp(a.row_norm_max, b.row_norm_max, K * 4));
    ASSERT_NE(a.router, nullptr);  // the router too
    ASSERT_NE(b.router, nullptr);
    EXPECT_EQ(0, std::memcmp(a.router, b.router, static_cast<size_t>(K) * D));
    EXPECT_EQ(0, std::memcmp(a.router_scale, b.router_scale, K * 4));
    EXPECT_EQ(0, std::memcmp(a.router_bias, b.router_bias, K * 4));
    // The heads on random inputs (quantized as each head type's kernels want them).
    std::mt19937 rng(7);
    std::normal_distribution<float> n01;
    std::vector<float> x(D), la(V), lb(V), xs(D + 64);
    std::vector<int8_t> xq(D + 64);
    for (int trial = 0; trial < 20; ++trial) {
      for (float& v : x) v = n01(rng);
      ActVec act;
      act.f = x.data();
      if (a.rows.type == DType::kQ4E) {
        q4e_quantize_activations(x.data(), D, xq.data(), xs.data());
        act.q = xq.data();
        act.scales = xs.data();
        act.block = D;
      }
      HeadStats sa, sb;
      EXPECT_EQ(pruned_argmax(kernels_best(), a, act, la.data(), &sa), pruned_argmax(kernels_best(), b, act, lb.data(), &sb));
      EXPECT_EQ(sa.bytes_read, sb.bytes_read);
      EXPECT_EQ(two_stage_argmax(kernels_best(), a, act, 4, la.data(), &sa), two_stage_argmax(kernels_best(), b, act, 4, lb.data(), &sb));
      EXPECT_EQ(sa.bytes_read, sb.bytes_read);
    }
    // A corrupt router value and a corrupt token table (a non-integer id) are refused by name.
    for (BoardRole role : {BoardRole::kHeadRouter, BoardRole::kHeadTokenOfRow}) {
      bytes = test::read_file(image);
      const BoardImageTensor* t = img.find(board_tensor_id(role));
      ASSERT_NE(t, nullptr);
      const size_t at = static_cast<size_t>(img.section(static_cast<Tier>(t->tier)).offset) + t->offset + 8;
      const float bad = 1.5f;
      std::memcpy(bytes.data() + at, &bad, 4);
      const uint32_t crc = crc32_ieee(bytes.data() + kBoardImageCrcStart, bytes.size() - kBoardImageCrcStart);
      std::memcpy(bytes.data() + offsetof(BoardImageHeader, crc32), &crc, 4);
      std::memcpy(words.data(), bytes.data(), bytes.size());  // in place: the first image's buffer stays valid
      BoardImage img2;
      ASSERT_TRUE(img2.open(reinterpret_cast<const uint8_t*>(words.data()), bytes.size()).ok());
      Arena tables2(Tier::kHost, mem.data(), mem.size());
      const Status bad_st = board_model_from_image(img2, tables2, &bm);
      EXPECT_FALSE(bad_st.ok());
      EXPECT_NE(std::string(bad_st.message()).find("is not an integer"), std::string::npos) << bad_st.message();
    }
  }
}

// The default head rides into the board image (`head --write --default-head`, then `convert --image`):
// the board decoder runs it, and its greedy tokens and computed logits are the PC's full head's; when
// the generation samples, a pruned default gives way to the full head (the same bits as the PC).
TEST(HeadGroups, TheBoardRunsTheImagesDefaultHead) {
  MC_REQUIRE_SHARED();
  const std::string model = stories_gguf(), with = model + ".p.gguf", image = model + ".p.img";
  ASSERT_EQ(run_cli({"head", "-m", model, "-n", "2", "--groups", "24", "--write", with, "--default-head", "pruned",
                     "--default-top", "5"}).exit_code, 0);
  const auto conv = run_cli({"convert", with, "--image", image});
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(model, &lm).ok());
  const std::vector<uint8_t> bytes = test::read_file(image);
  const std::vector<uint64_t> words = aligned_copy(bytes);
  BoardImage img;
  ASSERT_TRUE(img.open(reinterpret_cast<const uint8_t*>(words.data()), bytes.size()).ok());
  std::vector<uint8_t> mem(8 << 20);
  Arena tables(Tier::kHost, mem.data(), mem.size() / 2);
  Arena work(Tier::kHost, mem.data() + mem.size() / 2, mem.size() / 2);
  BoardModel bm;
  ASSERT_TRUE(board_model_from_image(img, tables, &bm).ok());
  EXPECT_EQ(bm.default_head, HeadMode::kPruned);
  EXPECT_EQ(bm.default_head_top, 5);
  ASSERT_EQ(bm.head().mode, HeadMode::kPruned);
  SerialPool pool;
  BoardDecoder board;
  ASSERT_TRUE(board.init(bm, 0, work, &pool, &kernels_best()).ok());
  DecoderInstance pc;
  ASSERT_TRUE(make_decoder(*lm, 0, &pool, &kernels_best(), 0, &pc).ok());
  const int V = pc.decoder->vocab_size();
  int token = 1, skipped = 0;
  for (int pos = 0; pos < 30; ++pos) {
    ASSERT_TRUE(board.choose_head(pos % 3 != 2).ok());  // every third step as a sampled one would
    const float *lb = nullptr, *lp = nullptr;
    ASSERT_TRUE(board.decoder().forward(token, pos, &lb).ok());
    ASSERT_TRUE(pc.decoder->forward(token, pos, &lp).ok());
    int best = 0;
    for (int v = 0; v < V; ++v) {
      if (lp[v] > lp[best]) best = v;
      if (lb[v] == -__builtin_huge_valf() && pos % 3 != 2) { ++skipped; continue; }
      ASSERT_EQ(0, std::memcmp(&lb[v], &lp[v], 4)) << "pos " << pos << " token " << v;
    }
    int board_best = 0;
    for (int v = 1; v < V; ++v)
      if (lb[v] > lb[board_best]) board_best = v;
    ASSERT_EQ(board_best, best) << "pos " << pos;
    token = best;
  }
  EXPECT_GT(skipped, 0);  // the pruned head did leave rows out (stories260K's head prunes about half)
}

}  // namespace
}  // namespace mcullm
