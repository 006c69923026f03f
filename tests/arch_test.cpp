// The architecture registry (model/arch.h): every row is found by its name, its GGUF architecture
// and its board image id, and anything else is refused.
#include "model/arch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "format/board_image.h"
#include "format/gguf_writer_host.h"
#include "load/model_loader_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

TEST(ArchRegistry, EveryRowIsFoundByNameGgufNameAndBoardId) {
  ASSERT_GT(n_archs(), 0);
  std::set<std::string> names, ggufs;
  std::set<uint32_t> boards;
  for (int i = 0; i < n_archs(); ++i) {
    const ArchInfo& a = arch_table()[i];
    EXPECT_EQ(arch_info(a.name), &a) << a.name;
    EXPECT_EQ(arch_info_by_gguf(a.gguf_arch), &a) << a.name;
    EXPECT_EQ(arch_info_by_board(a.board_arch), &a) << a.name;
    EXPECT_NE(board_arch_name(static_cast<BoardArch>(a.board_arch)), nullptr) << a.name;  // the image format knows it
    names.insert(a.name);
    ggufs.insert(a.gguf_arch);
    boards.insert(a.board_arch);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(n_archs()));  // one row per architecture
  EXPECT_EQ(ggufs.size(), static_cast<size_t>(n_archs()));
  EXPECT_EQ(boards.size(), static_cast<size_t>(n_archs()));
}

TEST(ArchRegistry, RowsSayWhatTheCodeAsks) {
  const ArchInfo* q = arch_info("qwen2");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->family, ArchFamily::kTransformer);
  EXPECT_TRUE(q->spec.qkv_bias);
  EXPECT_EQ(q->spec.rope, RopeStyle::kNeox);
  EXPECT_TRUE(q->dense_or_ternary);
  EXPECT_EQ(q->slices, ArchSlices::kRanges);
  EXPECT_EQ(arch_info_by_board(static_cast<uint32_t>(BoardArch::kQwen2)), q);

  const ArchInfo* b = arch_info("bitnet-25");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->spec.sub_norms && b->spec.ternary);
  EXPECT_EQ(b->spec.act, FfnAct::kReluSqr);
  EXPECT_EQ(b->spec.rope, RopeStyle::kAdjacent);
  EXPECT_EQ(arch_info_by_board(static_cast<uint32_t>(BoardArch::kBitnet25)), b);

  // The two families that keep their own decoders are found by their file names too.
  const ArchInfo* bl = arch_info_by_gguf("bitllama2c");
  ASSERT_NE(bl, nullptr);
  EXPECT_STREQ(bl->name, "bitnet-llama2c");
  EXPECT_EQ(bl->family, ArchFamily::kBitLlama2c);
  EXPECT_EQ(arch_info_by_board(static_cast<uint32_t>(BoardArch::kBitLlama2c)), bl);
  const ArchInfo* p = arch_info_by_gguf("esp32ai-ple");
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(p->name, "ple");
  EXPECT_EQ(p->family, ArchFamily::kPle);
  EXPECT_TRUE(p->head_groups);
  EXPECT_EQ(arch_info_by_board(static_cast<uint32_t>(BoardArch::kPle)), p);

  const ArchInfo* l = arch_info("llama");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->slices, ArchSlices::kMapped);
  EXPECT_FALSE(l->spec.ternary);
  EXPECT_EQ(arch_info_by_board(static_cast<uint32_t>(BoardArch::kLlama)), l);
}

TEST(ArchRegistry, UnknownNamesAreNull) {
  EXPECT_EQ(arch_info("gpt2"), nullptr);
  EXPECT_EQ(arch_info(""), nullptr);
  EXPECT_EQ(arch_info(nullptr), nullptr);
  EXPECT_EQ(arch_info("qwen"), nullptr);   // no prefix matches
  EXPECT_EQ(arch_info("qwen22"), nullptr);
  EXPECT_EQ(arch_info_by_gguf("ple"), nullptr);  // the loader's name, not a GGUF architecture
  EXPECT_EQ(arch_info_by_gguf(nullptr), nullptr);
  EXPECT_EQ(arch_info_by_board(0), nullptr);
  EXPECT_EQ(arch_info_by_board(99), nullptr);
}

TEST(ArchRegistry, LoaderNamesAnUnknownGgufArchitecture) {
  GgufWriter w;
  w.set_string("general.architecture", "gpt2");
  const std::string path = test::temp_dir() + "/arch_gpt2.gguf";
  ASSERT_TRUE(w.write_file(path).ok());
  std::unique_ptr<LoadedModel> lm;
  const Status st = load_model(path, &lm);
  ASSERT_FALSE(st.ok());
  const std::string msg = st.message();
  EXPECT_NE(msg.find("'gpt2' is not one mcullm runs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen2"), std::string::npos) << msg;  // the known ones are listed
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

}  // namespace
}  // namespace mcullm
