// Head groups stored with the model (format/vocab_head_gguf.h, `mcullm head --write`): a file with
// stored groups gives the two-stage and pruned heads exactly what groups computed on the fly give,
// runs to the same fingerprint, and a file whose groups do not fit its head, or are cut or corrupt,
// is refused with a message naming the part.
#include <cstring>
#include <memory>
#include <vector>

#include "format/vocab_head_gguf_writer_host.h"
#include "host/model_loader.h"
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
  // Cut anywhere: a clear error, never a crash.
  const std::vector<uint8_t> bytes = test::read_file(good);
  for (size_t cut : {bytes.size() - 1, bytes.size() - 1000, bytes.size() / 2, size_t{200}}) {
    const std::string path = dir + "/cut.gguf";
    test::write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
    std::unique_ptr<LoadedModel> m;
    EXPECT_FALSE(load_model(path, &m).ok()) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace mcullm
