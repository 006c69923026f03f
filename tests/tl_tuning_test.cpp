// The LUT tuning file (kernels/tl_tuning.h): parsing with hostile input (truncated, corrupt, oversized,
// invalid tilings, duplicates, binary bytes), formatting round trips, the process-wide table, the file
// loader, and the CLI: `mcullm tune` and --use-pretuned on run and bench.
#include "kernels/tl_tuning.h"

#include <string>

#include "kernels/tl_tuning_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

using test::run_cli;

Status parse(const std::string& s, TlTuningTable* t) { return tl_tuning_parse(s.data(), s.size(), t); }

TEST(TlTuning, ParsesAndFormatsRoundTrip) {
  TlTuningTable t;
  const Status st = parse("# comment\n\nmcullm-tl-tuning 1\r\ntl2 768 768 256 192 32\n  tl1\t256 2560 128 256 64  \n", &t);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(t.count, 2);
  EXPECT_EQ(t.entries[0].type, TlType::kTL2);
  EXPECT_EQ(t.entries[0].tiling.BK, 192);
  EXPECT_EQ(t.entries[1].M, 256);
  EXPECT_EQ(t.entries[1].tiling.bm, 64);
  char buf[512];
  ASSERT_TRUE(tl_tuning_format(t, buf, sizeof buf));
  TlTuningTable back;
  ASSERT_TRUE(parse(buf, &back).ok());
  ASSERT_EQ(back.count, 2);
  EXPECT_EQ(back.entries[1].tiling.BM, 128);
  EXPECT_FALSE(tl_tuning_format(t, buf, 20));  // too small: refused, not truncated silently
  EXPECT_FALSE(tl_tuning_format(t, buf, 0));
  ASSERT_TRUE(parse("mcullm-tl-tuning 1", &back).ok());  // no final newline, no records
  EXPECT_EQ(back.count, 0);
}

TEST(TlTuning, RefusesHostileText) {
  const char* bad[] = {
      "",                                                  // empty
      "# only a comment\n",                                // no header
      "mcullm-tl-tuning 2\n",                              // other version
      "tl2 768 768 256 96 32\n",                           // record before the header
      "mcullm-tl-tuning 1\ntl2 768 768 256 96\n",          // truncated record
      "mcullm-tl-tuning 1\ntl2 768 768 256 96 32 7\n",     // extra field
      "mcullm-tl-tuning 1\ntl3 768 768 256 96 32\n",       // unknown type
      "mcullm-tl-tuning 1\ntl2 768 768 -256 96 32\n",      // sign
      "mcullm-tl-tuning 1\ntl2 768 768 0 96 32\n",         // zero
      "mcullm-tl-tuning 1\ntl2 768 768 256 9x6 32\n",      // junk
      "mcullm-tl-tuning 1\ntl2 768 99999999999999999999 256 96 32\n",  // overflow
      "mcullm-tl-tuning 1\ntl2 768 768 100 96 32\n",       // BM does not divide M
      "mcullm-tl-tuning 1\ntl2 768 768 256 64 32\n",       // BK not a multiple of 24
      "mcullm-tl-tuning 1\ntl1 768 768 256 128 48\n",      // bad bm
      "mcullm-tl-tuning 1\ntl2 768 768 256 96 32\ntl2 768 768 128 96 32\n",  // duplicate
  };
  for (const char* text : bad) {
    TlTuningTable t;
    t.count = 5;
    const Status st = parse(text, &t);
    EXPECT_FALSE(st.ok()) << "accepted: " << text;
    EXPECT_EQ(st.code(), Code::kCorrupt) << text;
    EXPECT_EQ(t.count, 0) << text;
  }
  TlTuningTable t;
  std::string nul = std::string("mcullm-tl-tuning 1\ntl2 768 768 256 96 32") + '\0' + "\n";
  EXPECT_FALSE(parse(nul, &t).ok());
  EXPECT_FALSE(parse("mcullm-tl-tuning 1\n\xff\xfe\n", &t).ok());
  EXPECT_FALSE(parse("mcullm-tl-tuning 1\n" + std::string(300, '#') + "\n", &t).ok());  // overlong line
  std::string many = "mcullm-tl-tuning 1\n";
  for (int i = 1; i <= kTlTuningMax + 1; ++i) many += "tl2 " + std::to_string(32 * i) + " 96 32 96 32\n";
  const Status st = parse(many, &t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("more than"), std::string::npos) << st.message();
  // Truncations of a good file at every byte: either a clean parse or a clear error, never a crash.
  const std::string good = "mcullm-tl-tuning 1\ntl2 768 768 256 192 32\ntl1 256 2560 128 256 64\n";
  for (size_t n = 0; n <= good.size(); ++n) {
    const Status s = tl_tuning_parse(good.data(), n, &t);
    if (s.ok()) {
      EXPECT_LE(t.count, 2);
    }
  }
}

TEST(TlTuning, PretunedTableOverridesDefaults) {
  TlTuningTable t;
  TlTiling custom;
  custom.BM = 64;
  custom.BK = 192;
  custom.bm = 32;
  ASSERT_TRUE(tl_tuning_put(&t, TlType::kTL2, 768, 768, custom));
  EXPECT_FALSE(tl_tuning_put(&t, TlType::kTL2, 100, 768, custom));  // invalid for the shape
  tl_set_pretuned(&t);
  EXPECT_EQ(tl_tiling_for(TlType::kTL2, 768, 768).BK, 192);
  EXPECT_EQ(tl_tiling_for(TlType::kTL2, 3072, 768).BK, tl_default_tiling(TlType::kTL2, 3072, 768).BK);  // not stored
  EXPECT_EQ(tl_tiling_for(TlType::kTL1, 768, 768).BM, tl_default_tiling(TlType::kTL1, 768, 768).BM);
  tl_set_pretuned(nullptr);
  EXPECT_EQ(tl_tiling_for(TlType::kTL2, 768, 768).BK, 96);
}

TEST(TlTuning, FileLoader) {
  const std::string dir = test::temp_dir();
  TlTuningTable t;
  Status st = tl_tuning_load_file(dir + "/missing.txt", &t);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(std::string(st.message()).find("mcullm tune"), std::string::npos);
  const std::string big = dir + "/big.txt";
  test::write_file(big, std::vector<uint8_t>((1 << 20) + 10, '#'));
  st = tl_tuning_load_file(big, &t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("larger than"), std::string::npos) << st.message();
  const std::string bad = dir + "/bad.txt";
  test::write_file(bad, {'G', 'G', 'U', 'F', 3, 0, 0, 0});
  st = tl_tuning_load_file(bad, &t);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(std::string(st.message()).find(bad), std::string::npos) << st.message();
  ASSERT_TRUE(tl_tuning_put(&t, TlType::kTL1, 768, 768, tl_default_tiling(TlType::kTL1, 768, 768)));
  const std::string good = dir + "/good.txt";
  ASSERT_TRUE(tl_tuning_save_file(good, t).ok());
  TlTuningTable back;
  ASSERT_TRUE(tl_tuning_load_file(good, &back).ok());
  EXPECT_EQ(back.count, 1);
}

TEST(TlTuningCli, TuneWritesAFileThatRunAndBenchRead) {
  const std::string dir = test::temp_dir(), file = dir + "/tune.txt", model = dir + "/tiny.gguf";
  auto r = run_cli({"tune", "--shapes", "64x96,128x256", "--time-ms", "0", "-o", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| tl2 | 64x96 |"), std::string::npos) << r.out;
  TlTuningTable t;
  ASSERT_TRUE(tl_tuning_load_file(file, &t).ok());
  EXPECT_EQ(t.count, 4);
  ASSERT_EQ(run_cli({"dummy", "--arch", "bitnet", "--layout", "tiny", "-o", model}).exit_code, 0);
  r = run_cli({"run", "-m", model, "--prompt-ids", "1,2", "-n", "2", "--temp", "0", "-q", "--use-pretuned", "--tuning", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"bench", "-m", model, "-p", "0", "-n", "2", "-r", "1", "--use-pretuned", "--tuning", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Bad tuning input: clear errors, non-zero exits.
  test::write_file(dir + "/bad.txt", {'x', '\n'});
  r = run_cli({"run", "-m", model, "-n", "1", "--use-pretuned", "--tuning", dir + "/bad.txt"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("header"), std::string::npos) << r.err;
  r = run_cli({"bench", "-m", model, "-n", "1", "--use-pretuned", "--tuning", dir + "/none.txt"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("mcullm tune"), std::string::npos) << r.err;
  r = run_cli({"run", "-m", model, "-n", "1", "--tuning", file});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--use-pretuned"), std::string::npos) << r.err;
  for (const char* shapes : {"768", "0x768", "axb", "", "768x768x2"}) {
    r = run_cli({"tune", "--shapes", shapes, "--time-ms", "0", "-o", dir + "/x.txt"});
    EXPECT_EQ(r.exit_code, 2) << shapes;
  }
  r = run_cli({"tune", "--types", "tl9", "--time-ms", "0", "-o", dir + "/x.txt"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli({"tune", "--shapes", "17x96", "--time-ms", "0", "-o", dir + "/y.txt"});  // no tiling fits: reported
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("no tiling fits"), std::string::npos);
}

}  // namespace
}  // namespace mcullm
