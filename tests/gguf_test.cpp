// GGUF reader/writer: round trips, getter type checks, hostile input, the real shared files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "format/gguf.h"
#include "format/gguf_writer_host.h"
#include "load/mapped_file_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

using test::shared_path;

struct TestArena {
  explicit TestArena(size_t bytes = 1 << 20) : buf(bytes), arena(Tier::kHost, buf.data(), buf.size()) {}
  std::vector<uint8_t> buf;
  Arena arena;
};

std::string str(const GgufStr& s) { return std::string(s.data, static_cast<size_t>(s.size)); }

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Raw little-endian bytes, for files the writer refuses to produce.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) { b.push_back(v); return *this; }
  Bytes& u32(uint32_t v) { for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i))); return *this; }
  Bytes& u64(uint64_t v) { for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i))); return *this; }
  Bytes& s(const std::string& v) { u64(v.size()); b.insert(b.end(), v.begin(), v.end()); return *this; }
  Bytes& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(tensors).u64(kvs);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return s(key).u32(uint32_t(GgufType::kU32)).u32(v); }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    s(name).u32(uint32_t(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t align = 32) { while (b.size() % align) b.push_back(0); return *this; }
  Bytes& zeros(size_t n) { b.insert(b.end(), n, 0); return *this; }
};

// Opens `bytes` (copied into an exactly sized buffer, so ASan sees any read past the end).
struct Opened {
  std::vector<uint8_t> bytes;
  TestArena arena;
  GgufFile file;
  Status status;
  explicit Opened(const std::vector<uint8_t>& b) : bytes(b) { status = file.open(bytes.data(), bytes.size(), arena.arena); }
};

void expect_error(const std::vector<uint8_t>& bytes, Code code, const std::string& needle) {
  Opened o(bytes);
  ASSERT_FALSE(o.status.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(o.status.code(), code) << o.status.message();
  EXPECT_NE(std::string(o.status.message()).find(needle), std::string::npos) << o.status.message();
  EXPECT_EQ(o.file.kv_count(), 0u);
  EXPECT_EQ(o.file.tensor_count(), 0u);
  EXPECT_EQ(o.arena.arena.stats().used, 0u) << "a failed open must roll the arena back";
}

// A small file with metadata and tensors; its last tensor is 32 bytes, so the file ends exactly
// where that tensor ends and every shorter prefix is incomplete.
std::vector<uint8_t> small_valid_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<s>", "a", "bc", ""});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.5f, 3.0f});
  w.set_i32_array("tokenizer.ggml.token_type", {3, 1, 1, 1});
  const auto q8 = pattern(2 * 34, 1);
  const auto f32 = pattern(8 * 4, 2);
  EXPECT_TRUE(w.add_tensor("blk.0.ffn.weight", DType::kQ8_0, {32, 2}, q8.data(), q8.size()).ok());
  EXPECT_TRUE(w.add_tensor("output_norm.weight", DType::kF32, {8}, f32.data(), f32.size()).ok());
  return w.to_bytes();
}

// --- round trips -------------------------------------------------------------------------------

TEST(GgufRoundTrip, EveryKvType) {
  GgufWriter w;
  w.set_u8("a.u8", 200), w.set_i8("a.i8", -100), w.set_u16("a.u16", 60000), w.set_i16("a.i16", -30000);
  w.set_u32("a.u32", 4000000000u), w.set_i32("a.i32", -2000000000), w.set_f32("a.f32", 1.5f);
  w.set_bool("a.bool", true), w.set_bool("a.false", false), w.set_string("a.string", std::string("h\0llo", 5));
  w.set_u64("a.u64", 0xFEDCBA9876543210ull), w.set_i64("a.i64", INT64_MIN), w.set_f64("a.f64", 0.1);
  w.set_string_array("a.strings", {"x", "", "yz"});
  w.set_f32_array("a.f32s", {1.0f, -2.0f, 0.25f});
  w.set_i32_array("a.i32s", {7, -8});
  w.set_string_array("a.no_strings", {});
  const uint8_t flags[3] = {1, 0, 1};
  ASSERT_TRUE(w.set_array("a.bools", GgufType::kBool, flags, 3).ok());
  const uint16_t shorts[2] = {1, 65535};
  ASSERT_TRUE(w.set_array("a.u16s", GgufType::kU16, shorts, 2).ok());
  EXPECT_EQ(w.set_array("a.bad", GgufType::kString, flags, 1).code(), Code::kInvalidArgument);

  Opened o(w.to_bytes());
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  const GgufFile& f = o.file;
  EXPECT_EQ(f.version(), 3u); EXPECT_EQ(f.tensor_count(), 0u); EXPECT_EQ(f.alignment(), 32u);
  ASSERT_EQ(f.kv_count(), 19u);
  const char* order[] = {"a.u8", "a.i8", "a.u16", "a.i16", "a.u32", "a.i32", "a.f32", "a.bool", "a.false", "a.string",
                         "a.u64", "a.i64", "a.f64", "a.strings", "a.f32s", "a.i32s", "a.no_strings", "a.bools", "a.u16s"};
  for (uint64_t i = 0; i < f.kv_count(); ++i) EXPECT_EQ(str(f.kv(i)->key), order[i]);
  EXPECT_EQ(f.kv(19), nullptr);
  EXPECT_EQ(f.find_kv("a.u8")->type, GgufType::kU8);
  EXPECT_EQ(f.find_kv("a.f64")->type, GgufType::kF64);
  EXPECT_EQ(f.find_kv("a.strings")->type, GgufType::kArray);
  EXPECT_EQ(f.find_kv("a.strings")->array_type, GgufType::kString);
  EXPECT_EQ(f.find_kv("a.strings")->array_count, 3u);

  uint32_t u32 = 0; int32_t i32 = 0; uint64_t u64 = 0; int64_t i64 = 0; float f32 = 0; bool b = false; GgufStr s{};
  ASSERT_TRUE(f.get_u32("a.u8", &u32).ok()); EXPECT_EQ(u32, 200u);
  ASSERT_TRUE(f.get_i32("a.i8", &i32).ok()); EXPECT_EQ(i32, -100);
  ASSERT_TRUE(f.get_u32("a.u16", &u32).ok()); EXPECT_EQ(u32, 60000u);
  ASSERT_TRUE(f.get_i32("a.i16", &i32).ok()); EXPECT_EQ(i32, -30000);
  ASSERT_TRUE(f.get_u32("a.u32", &u32).ok()); EXPECT_EQ(u32, 4000000000u);
  ASSERT_TRUE(f.get_i32("a.i32", &i32).ok()); EXPECT_EQ(i32, -2000000000);
  ASSERT_TRUE(f.get_f32("a.f32", &f32).ok()); EXPECT_EQ(f32, 1.5f);
  ASSERT_TRUE(f.get_bool("a.bool", &b).ok()); EXPECT_TRUE(b);
  ASSERT_TRUE(f.get_bool("a.false", &b).ok()); EXPECT_FALSE(b);
  ASSERT_TRUE(f.get_string("a.string", &s).ok()); EXPECT_EQ(str(s), std::string("h\0llo", 5));
  ASSERT_TRUE(f.get_u64("a.u64", &u64).ok()); EXPECT_EQ(u64, 0xFEDCBA9876543210ull);
  ASSERT_TRUE(f.get_i64("a.i64", &i64).ok()); EXPECT_EQ(i64, INT64_MIN);
  ASSERT_TRUE(f.get_f32("a.f64", &f32).ok()); EXPECT_EQ(f32, 0.1f);

  TestArena scratch;
  GgufStr* strs = nullptr;
  uint64_t n = 0;
  ASSERT_TRUE(f.get_string_array("a.strings", scratch.arena, &strs, &n).ok());
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(str(strs[0]) + "|" + str(strs[1]) + "|" + str(strs[2]), "x||yz");
  ASSERT_TRUE(f.get_string_array("a.no_strings", scratch.arena, &strs, &n).ok());
  EXPECT_EQ(n, 0u);

  const uint8_t* e = nullptr;
  ASSERT_TRUE(f.get_array("a.f32s", GgufType::kF32, &e, &n).ok());
  ASSERT_EQ(n, 3u);
  float fv[3];
  std::memcpy(fv, e, sizeof(fv));
  EXPECT_EQ(fv[0], 1.0f); EXPECT_EQ(fv[1], -2.0f); EXPECT_EQ(fv[2], 0.25f);
  ASSERT_TRUE(f.get_array("a.i32s", GgufType::kI32, &e, &n).ok());
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(int32_t(gguf_load_u32(e)), 7);
  EXPECT_EQ(int32_t(gguf_load_u32(e + 4)), -8);
  ASSERT_TRUE(f.get_array("a.bools", GgufType::kBool, &e, &n).ok());
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(std::vector<uint8_t>(e, e + 3), std::vector<uint8_t>({1, 0, 1}));
  ASSERT_TRUE(f.get_array("a.u16s", GgufType::kU16, &e, &n).ok());
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(gguf_load_u16(e + 2), 65535);
}

TEST(GgufRoundTrip, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.set_u32("first", 1), w.set_string("second", "two"), w.set_u32("third", 3);
  w.set_string("first", "one"), w.set_u32("third", 33);  // replaced in place (even with a new type)
  EXPECT_EQ(w.kv_count(), 3u);
  Opened o(w.to_bytes());
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  ASSERT_EQ(o.file.kv_count(), 3u);
  EXPECT_EQ(str(o.file.kv(0)->key), "first");
  EXPECT_EQ(str(o.file.kv(2)->key), "third");
  GgufStr s{};
  uint32_t v = 0;
  ASSERT_TRUE(o.file.get_string("first", &s).ok() && o.file.get_u32("third", &v).ok());
  EXPECT_EQ(str(s), "one");
  EXPECT_EQ(v, 33u);
}

TEST(GgufRoundTrip, TensorsOfEveryType) {
  struct Case { std::string name; DType type; std::vector<int64_t> ne; size_t nbytes; };
  const std::vector<Case> cases = {
      {"t.f32", DType::kF32, {5, 3}, 5 * 3 * 4},
      {"t.f16", DType::kF16, {7, 2}, 7 * 2 * 2},
      {"t.q8_0", DType::kQ8_0, {64, 3}, 3 * 2 * 34},
      {"t.q4_0", DType::kQ4_0, {32, 2, 2}, 4 * 18},
      {"t.q4g64", DType::kQ4G64, {100, 3}, 3 * 2 * 34},  // padded rows: 100 columns take 2 groups
      {"t.4d", DType::kF32, {1, 2, 3, 4}, 24 * 4},
  };
  GgufWriter w;
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < cases.size(); ++i) {
    data.push_back(pattern(cases[i].nbytes, uint32_t(10 + i)));
    const Status s = w.add_tensor(cases[i].name, cases[i].type, cases[i].ne, data[i].data(), data[i].size());
    ASSERT_TRUE(s.ok()) << cases[i].name << ": " << s.message();
  }
  w.set_string("general.architecture", "test");
  Opened o(w.to_bytes());
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  ASSERT_EQ(o.file.tensor_count(), cases.size());
  EXPECT_EQ(o.file.data_offset() % 32, 0u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensor* t = o.file.find_tensor(cases[i].name.c_str());
    ASSERT_NE(t, nullptr) << cases[i].name;
    EXPECT_EQ(t, o.file.tensor(i)) << "tensors keep the file order";
    EXPECT_EQ(t->type, cases[i].type);
    ASSERT_EQ(t->n_dims, cases[i].ne.size());
    int64_t rows = 1;
    for (size_t d = 0; d < 4; ++d) {
      EXPECT_EQ(t->ne[d], d < cases[i].ne.size() ? cases[i].ne[d] : 1) << cases[i].name << " dim " << d;
      if (d > 0 && d < cases[i].ne.size()) rows *= cases[i].ne[d];
    }
    EXPECT_EQ(t->rows(), rows);
    EXPECT_EQ(t->nbytes, cases[i].nbytes);
    EXPECT_EQ(t->offset % 32, 0u);
    EXPECT_EQ(size_t(t->data - o.bytes.data()) % 32, 0u);
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->nbytes), data[i]) << cases[i].name;
  }
  EXPECT_EQ(o.file.find_tensor("t.missing"), nullptr);
  EXPECT_EQ(o.file.tensor(cases.size()), nullptr);
}

TEST(GgufRoundTrip, CustomAlignment) {
  GgufWriter w;
  w.set_u32("general.alignment", 64);
  const auto a = pattern(3 * 4, 1), b = pattern(5 * 4, 2);
  ASSERT_TRUE(w.add_tensor("a", DType::kF32, {3}, a.data(), a.size()).ok());
  ASSERT_TRUE(w.add_tensor("b", DType::kF32, {5}, b.data(), b.size()).ok());
  Opened o(w.to_bytes());
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_EQ(o.file.alignment(), 64u);
  EXPECT_EQ(o.file.data_offset() % 64, 0u);
  EXPECT_EQ(o.file.find_tensor("b")->offset, 64u);
  EXPECT_EQ(std::vector<uint8_t>(o.file.find_tensor("b")->data, o.file.find_tensor("b")->data + 20), b);

  GgufWriter bad;
  bad.set_u32("general.alignment", 48);
  EXPECT_TRUE(bad.to_bytes().empty());
  EXPECT_EQ(bad.write_file(test::temp_dir() + "/bad.gguf").code(), Code::kInvalidArgument);
}

TEST(GgufRoundTrip, WriteFileThenMap) {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/model.gguf";
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  const auto d = pattern(34, 3);
  ASSERT_TRUE(w.add_tensor("w", DType::kQ8_0, {32}, d.data(), d.size()).ok());
  const Status s = w.write_file(path);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(test::read_file(path), w.to_bytes());

  MappedFile m;
  ASSERT_TRUE(m.open(path).ok());
  TestArena arena;
  GgufFile f;
  ASSERT_TRUE(f.open(m.data(), m.size(), arena.arena).ok());
  EXPECT_EQ(std::vector<uint8_t>(f.find_tensor("w")->data, f.find_tensor("w")->data + 34), d);

  // A directory that does not exist: an I/O error naming the path, and no file anywhere.
  const std::string missing = dir + "/no/such/dir/model.gguf";
  const Status e = w.write_file(missing);
  EXPECT_EQ(e.code(), Code::kIo);
  EXPECT_NE(std::string(e.message()).find(missing), std::string::npos) << e.message();
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_FALSE(std::filesystem::exists(missing + ".tmp"));
}

TEST(GgufWriterChecks, RefusesBadTensors) {
  GgufWriter w;
  const auto d = pattern(1024, 4);
  EXPECT_EQ(w.add_tensor("a", DType::kF32, {4}, d.data(), 15).code(), Code::kInvalidArgument);  // size
  EXPECT_EQ(w.add_tensor("a", DType::kQ8_0, {33}, d.data(), 68).code(), Code::kInvalidArgument);  // 33 % 32
  EXPECT_EQ(w.add_tensor("a", DType::kF32, {}, d.data(), 4).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("a", DType::kF32, {1, 1, 1, 1, 1}, d.data(), 4).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("a", DType::kF32, {4, 0}, d.data(), 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("a", static_cast<DType>(999), {4}, d.data(), 16).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("a", DType::kF32, {INT64_MAX}, d.data(), 16).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.tensor_count(), 0u);
  ASSERT_TRUE(w.add_tensor("a", DType::kF32, {4}, d.data(), 16).ok());
  EXPECT_EQ(w.add_tensor("a", DType::kF32, {4}, d.data(), 16).code(), Code::kInvalidArgument);  // duplicate
  EXPECT_EQ(w.tensor_count(), 1u);
}

// --- getters -----------------------------------------------------------------------------------

TEST(GgufGetters, TypeAndRangeChecks) {
  GgufWriter w;
  w.set_i32("neg", -1), w.set_u64("big", 1ull << 32), w.set_i64("i32min", INT32_MIN);
  w.set_i64("below_i32", int64_t(INT32_MIN) - 1), w.set_u64("u64max", UINT64_MAX), w.set_string("name", "x");
  w.set_f64("huge", 1e300), w.set_u8("byte", 1), w.set_f32_array("floats", {1.0f});
  Opened o(w.to_bytes());
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  const GgufFile& f = o.file;
  auto expect = [](const Status& s, Code code, const char* key) {
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(std::string(s.message()).find(key), std::string::npos) << "message should name the key: " << s.message();
  };
  uint32_t u32; int32_t i32; uint64_t u64; int64_t i64; float f32; bool b; GgufStr s;
  expect(f.get_u32("neg", &u32), Code::kCorrupt, "neg");
  expect(f.get_u64("neg", &u64), Code::kCorrupt, "neg");
  expect(f.get_u32("big", &u32), Code::kCorrupt, "big");
  expect(f.get_i32("big", &i32), Code::kCorrupt, "big");
  ASSERT_TRUE(f.get_u64("big", &u64).ok());
  EXPECT_EQ(u64, 1ull << 32);
  ASSERT_TRUE(f.get_i32("i32min", &i32).ok());
  EXPECT_EQ(i32, INT32_MIN);
  expect(f.get_i32("below_i32", &i32), Code::kCorrupt, "below_i32");
  expect(f.get_i64("u64max", &i64), Code::kCorrupt, "u64max");
  expect(f.get_u32("name", &u32), Code::kCorrupt, "name");
  expect(f.get_f32("name", &f32), Code::kCorrupt, "name");
  expect(f.get_f32("byte", &f32), Code::kCorrupt, "byte");
  expect(f.get_f32("huge", &f32), Code::kCorrupt, "huge");
  expect(f.get_bool("byte", &b), Code::kCorrupt, "byte");
  expect(f.get_string("byte", &s), Code::kCorrupt, "byte");
  expect(f.get_u32("floats", &u32), Code::kCorrupt, "floats");
  expect(f.get_u32("missing.key", &u32), Code::kNotFound, "missing.key");
  expect(f.get_string("missing.key", &s), Code::kNotFound, "missing.key");
  const uint8_t* e; uint64_t n; GgufStr* strs;
  expect(f.get_array("floats", GgufType::kI32, &e, &n), Code::kCorrupt, "floats");
  expect(f.get_array("name", GgufType::kU8, &e, &n), Code::kCorrupt, "name");
  expect(f.get_array("floats", GgufType::kString, &e, &n), Code::kInvalidArgument, "floats");
  TestArena scratch;
  expect(f.get_string_array("floats", scratch.arena, &strs, &n), Code::kCorrupt, "floats");
  // A string array too big for the arena: kOutOfMemory, not a crash.
  GgufWriter w2;
  w2.set_string_array("many", std::vector<std::string>(1000, "t"));
  Opened o2(w2.to_bytes());
  ASSERT_TRUE(o2.status.ok());
  TestArena tiny(256);
  EXPECT_EQ(o2.file.get_string_array("many", tiny.arena, &strs, &n).code(), Code::kOutOfMemory);
}

// --- hostile input -----------------------------------------------------------------------------

TEST(GgufHostile, EveryTruncationIsRejected) {
  const std::vector<uint8_t> full = small_valid_file();
  {
    Opened o(full);
    ASSERT_TRUE(o.status.ok()) << o.status.message();
    const GgufTensor* last = o.file.tensor(o.file.tensor_count() - 1);
    ASSERT_EQ(size_t(last->data + last->nbytes - o.bytes.data()), full.size()) << "the last tensor must end the file";
  }
  for (size_t n = 0; n < full.size(); ++n) {
    Opened o(std::vector<uint8_t>(full.begin(), full.begin() + n));
    ASSERT_FALSE(o.status.ok()) << "a prefix of " << n << " of " << full.size() << " bytes was accepted";
    EXPECT_EQ(o.status.code(), Code::kCorrupt) << n << ": " << o.status.message();
    EXPECT_EQ(o.arena.arena.stats().used, 0u);
  }
  expect_error({}, Code::kCorrupt, "truncated: magic");
}

TEST(GgufHostile, WrongMagic) {
  std::vector<uint8_t> b = small_valid_file();
  b[3] = 'G';
  expect_error(b, Code::kCorrupt, "magic");
  expect_error({'l', 'l', 'a', 'm', 'a', '2', 0, 0}, Code::kCorrupt, "not a GGUF file");
}

TEST(GgufHostile, UnsupportedVersions) {
  for (uint32_t v : {0u, 1u, 4u}) {
    std::vector<uint8_t> b = small_valid_file();
    b[4] = uint8_t(v);
    expect_error(b, Code::kUnsupported, "version " + std::to_string(v));
  }
  std::vector<uint8_t> be = small_valid_file();
  be[4] = 0; be[7] = 3;
  expect_error(be, Code::kUnsupported, "big-endian");
  std::vector<uint8_t> v2 = small_valid_file();
  v2[4] = 2;  // version 2 has the same layout
  Opened o(v2);
  EXPECT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_EQ(o.file.version(), 2u);
}

TEST(GgufHostile, AbsurdCounts) {
  const std::vector<uint8_t> valid = small_valid_file();
  auto patch_u64 = [&](size_t at, uint64_t v) {
    std::vector<uint8_t> b = valid;
    for (int i = 0; i < 8; ++i) b[at + i] = uint8_t(v >> (8 * i));
    return b;
  };
  expect_error(patch_u64(8, 1ull << 63), Code::kCorrupt, "tensor_count");
  expect_error(patch_u64(8, UINT64_MAX), Code::kCorrupt, "tensor_count");
  expect_error(patch_u64(16, 1ull << 63), Code::kCorrupt, "kv_count");
  expect_error(patch_u64(16, UINT64_MAX / 13 + 1), Code::kCorrupt, "kv_count");
  expect_error(patch_u64(24, UINT64_MAX), Code::kCorrupt, "length");  // the first key's length
  // A string value whose length is 2^64-1.
  expect_error(Bytes().header(0, 1).s("k").u32(uint32_t(GgufType::kString)).u64(UINT64_MAX).b, Code::kCorrupt,
               "length");
  // Array counts whose byte size wraps around 2^64 (2^62 * 4 == 0 mod 2^64).
  for (uint64_t count : {uint64_t(1) << 62, uint64_t(1) << 63, UINT64_MAX})
    for (GgufType t : {GgufType::kU8, GgufType::kU32, GgufType::kF64, GgufType::kString, GgufType::kArray})
      expect_error(Bytes().header(0, 1).s("k").u32(9).u32(uint32_t(t)).u64(count).zeros(24).b, Code::kCorrupt,
                   "array of " + std::to_string(count));
  // Unknown value and element types.
  expect_error(Bytes().header(0, 1).s("k").u32(13).u32(0).b, Code::kCorrupt, "value type");
  expect_error(Bytes().header(0, 1).s("k").u32(9).u32(0xFFFFFFFF).u64(0).b, Code::kCorrupt, "element type");
}

TEST(GgufHostile, NestedArrays) {
  // key "n" = [[1, 2], []] (arrays of u8), then "after" = 7: nested arrays are skipped safely.
  Bytes ok;
  ok.header(0, 2).s("n").u32(9).u32(9).u64(2);
  ok.u32(0).u64(2).u8(1).u8(2);
  ok.u32(0).u64(0);
  ok.kv_u32("after", 7);
  Opened o(ok.b);
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_EQ(o.file.find_kv("n")->array_type, GgufType::kArray);
  EXPECT_EQ(o.file.find_kv("n")->array_count, 2u);
  uint32_t v = 0;
  ASSERT_TRUE(o.file.get_u32("after", &v).ok());
  EXPECT_EQ(v, 7u);
  const uint8_t* e; uint64_t n;
  EXPECT_EQ(o.file.get_array("n", GgufType::kArray, &e, &n).code(), Code::kInvalidArgument);
  // 1000 levels of nesting: refused at the depth limit, no stack exhaustion.
  Bytes deep;
  deep.header(0, 1).s("deep").u32(9);
  for (int i = 0; i < 1000; ++i) deep.u32(9).u64(1);
  deep.u32(0).u64(0);
  expect_error(deep.b, Code::kUnsupported, "nested");
}

TEST(GgufHostile, BoolMustBeZeroOrOne) {
  expect_error(Bytes().header(0, 1).s("b").u32(uint32_t(GgufType::kBool)).u8(2).b, Code::kCorrupt, "bool");
  expect_error(Bytes().header(0, 1).s("b").u32(9).u32(uint32_t(GgufType::kBool)).u64(2).u8(1).u8(0xFF).b,
               Code::kCorrupt, "bool");
}

TEST(GgufHostile, BadDimensions) {
  auto file = [](std::vector<uint64_t> ne, uint32_t type = 0) {
    return Bytes().header(1, 0).tensor("w", ne, type, 0).pad().zeros(64).b;
  };
  ASSERT_TRUE(Opened(file({16})).status.ok());  // the same layout with a sane shape opens
  expect_error(file({}), Code::kCorrupt, "n_dims");
  expect_error(file({1, 1, 1, 1, 1}), Code::kCorrupt, "n_dims");
  expect_error(file({0}), Code::kCorrupt, "dimension 0");
  expect_error(file({4, 0}), Code::kCorrupt, "dimension 1");
  expect_error(file({1ull << 63}), Code::kCorrupt, "dimension 0");
  expect_error(file({1ull << 32, 1ull << 32}), Code::kCorrupt, "overflow");
  expect_error(file({3, 1ull << 62}), Code::kCorrupt, "overflow");
  expect_error(file({1ull << 40, 1ull << 20}), Code::kCorrupt, "larger than the file");
  expect_error(file({1ull << 40}), Code::kCorrupt, "larger than the file");
  expect_error(file({33}, uint32_t(DType::kQ8_0)), Code::kCorrupt, "33 columns");
}

TEST(GgufHostile, TensorOffsets) {
  auto file = [](uint64_t offset, size_t data_bytes) {
    return Bytes().header(1, 0).tensor("w", {8}, 0, offset).pad().zeros(data_bytes).b;
  };
  ASSERT_TRUE(Opened(file(32, 64)).status.ok());
  expect_error(file(64, 64), Code::kCorrupt, "past the end");
  expect_error(file(32, 63), Code::kCorrupt, "past the end");
  expect_error(file(UINT64_MAX - 31, 64), Code::kCorrupt, "past the end");  // offset + size wraps
  expect_error(file(16, 64), Code::kCorrupt, "not a multiple of the alignment");
  // Tensor infos but no data section at all.
  expect_error(Bytes().header(1, 0).tensor("w", {8}, 0, 0).b, Code::kCorrupt, "data section");
}

TEST(GgufHostile, UnknownTensorType) {
  // 37 is bitnet.cpp's TL1, which this reader does not know.
  const auto b = Bytes().header(1, 0).tensor("blk.0.attn_q.weight", {128, 2}, 37, 0).pad().zeros(128).b;
  expect_error(b, Code::kUnsupported, "tensor 'blk.0.attn_q.weight' has unknown tensor type id 37");
}

TEST(GgufHostile, I2sTensorNeedsItsScaleTail) {
  // i2_s (id 36): 2 rows of 128 weights = 64 bytes, then 32 bytes holding the tensor's f32 scale.
  Opened ok(Bytes().header(1, 0).tensor("w", {128, 2}, 36, 0).pad().zeros(96).b);
  ASSERT_TRUE(ok.status.ok()) << ok.status.message();
  EXPECT_EQ(ok.file.tensor(0)->nbytes, 96u);
  expect_error(Bytes().header(1, 0).tensor("w", {128, 2}, 36, 0).pad().zeros(95).b, Code::kCorrupt, "end past the end");
  expect_error(Bytes().header(1, 0).tensor("w", {100, 2}, 36, 0).pad().zeros(96).b, Code::kCorrupt, "100 columns");
}

TEST(GgufHostile, TlTensorsNeedTheirSizeAndTail) {
  // tl1 (id 1026): 2 bits a weight, then 32 bytes (scale, tiling); tl2 (1027): K = 96 is all triples,
  // 5 bytes per 24 weights of a row; K = 80 stores 48 as triples and 32 as pairs (10 + 8 bytes a row).
  Opened tl1(Bytes().header(1, 0).tensor("w", {128, 2}, 1026, 0).pad().zeros(96).b);
  ASSERT_TRUE(tl1.status.ok()) << tl1.status.message();
  EXPECT_EQ(tl1.file.tensor(0)->nbytes, 96u);
  Opened tl2(Bytes().header(1, 0).tensor("w", {96, 64}, 1027, 0).pad().zeros(64 * 20 + 32).b);
  ASSERT_TRUE(tl2.status.ok()) << tl2.status.message();
  EXPECT_EQ(tl2.file.tensor(0)->nbytes, 64u * 20 + 32);
  Opened tl2p(Bytes().header(1, 0).tensor("w", {80, 32}, 1027, 0).pad().zeros(32 * 18 + 32).b);
  ASSERT_TRUE(tl2p.status.ok()) << tl2p.status.message();
  EXPECT_EQ(tl2p.file.tensor(0)->nbytes, 32u * 18 + 32);
  expect_error(Bytes().header(1, 0).tensor("w", {128, 2}, 1026, 0).pad().zeros(95).b, Code::kCorrupt, "end past the end");
  expect_error(Bytes().header(1, 0).tensor("w", {96, 64}, 1027, 0).pad().zeros(64 * 20 + 31).b, Code::kCorrupt,
               "end past the end");
  expect_error(Bytes().header(1, 0).tensor("w", {130, 2}, 1026, 0).pad().zeros(96).b, Code::kCorrupt, "130 columns");
  expect_error(Bytes().header(1, 0).tensor("w", {100, 4}, 1027, 0).pad().zeros(160).b, Code::kCorrupt,
               "100 columns cannot be stored as tl2");
  expect_error(Bytes().header(1, 0).tensor("w", {1ull << 40, 2}, 1027, 0).pad().zeros(96).b, Code::kCorrupt, "");
}

TEST(GgufHostile, BadAlignment) {
  auto file = [](uint32_t align) {
    return Bytes().header(1, 1).kv_u32("general.alignment", align).tensor("w", {8}, 0, 0).pad(64).zeros(64).b;
  };
  Opened ok(file(64));
  ASSERT_TRUE(ok.status.ok()) << ok.status.message();
  EXPECT_EQ(ok.file.alignment(), 64u);
  expect_error(file(0), Code::kCorrupt, "general.alignment is 0");
  expect_error(file(3), Code::kCorrupt, "general.alignment is 3");
  expect_error(file(96), Code::kCorrupt, "general.alignment is 96");
  expect_error(Bytes().header(0, 1).s("general.alignment").u32(8).s("32").b, Code::kCorrupt, "general.alignment");
}

TEST(GgufHostile, DuplicateKey) {
  expect_error(Bytes().header(0, 3).kv_u32("a", 1).kv_u32("b", 2).kv_u32("a", 3).b, Code::kCorrupt,
               "duplicate key 'a'");
}

TEST(GgufHostile, DuplicateTensorName) {
  const auto b = Bytes().header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad().zeros(64).b;
  expect_error(b, Code::kCorrupt, "duplicate tensor name 'w'");
}

// Every pointer a successfully opened file hands out must stay inside the buffer.
void check_in_bounds(const GgufFile& f, const std::vector<uint8_t>& bytes) {
  const uint8_t* lo = bytes.data();
  const uint8_t* hi = bytes.data() + bytes.size();
  auto inside = [&](const void* p, uint64_t n) {
    const uint8_t* q = static_cast<const uint8_t*>(p);
    return q >= lo && q <= hi && n <= uint64_t(hi - q);
  };
  TestArena scratch(1 << 16);
  for (uint64_t i = 0; i < f.kv_count(); ++i) {
    const GgufKv* kv = f.kv(i);
    ASSERT_TRUE(inside(kv->key.data, kv->key.size));
    ASSERT_TRUE(inside(kv->value, 0));
    const std::string key = str(kv->key);
    if (key.find('\0') != std::string::npos) continue;  // not reachable by name
    GgufStr s;
    if (kv->type == GgufType::kString && f.get_string(key.c_str(), &s).ok()) {
      ASSERT_TRUE(inside(s.data, s.size));
    }
    if (kv->type == GgufType::kArray && kv->array_type == GgufType::kString) {
      GgufStr* strs = nullptr;
      uint64_t n = 0;
      if (f.get_string_array(key.c_str(), scratch.arena, &strs, &n).ok()) {
        for (uint64_t j = 0; j < n; ++j) ASSERT_TRUE(inside(strs[j].data, strs[j].size));
      }
    }
    const uint8_t* e = nullptr;
    uint64_t n = 0;
    const uint32_t size = gguf_type_size(kv->array_type);
    if (kv->type == GgufType::kArray && size && f.get_array(key.c_str(), kv->array_type, &e, &n).ok()) {
      ASSERT_TRUE(inside(e, n * size));
    }
  }
  for (uint64_t i = 0; i < f.tensor_count(); ++i) {
    const GgufTensor* t = f.tensor(i);
    ASSERT_TRUE(inside(t->name.data, t->name.size));
    ASSERT_TRUE(inside(t->data, t->nbytes));
    ASSERT_EQ(t->nbytes, uint64_t(t->rows()) * dtype_row_bytes(t->type, t->ne[0]));
  }
}

TEST(GgufHostile, RandomCorruptionsNeverCrash) {
  const std::vector<uint8_t> valid = small_valid_file();
  std::mt19937 rng(20240601);
  int failed = 0, opened = 0;
  // Single random bytes, then 8-byte runs of values that tend to hit edge cases.
  const uint64_t edges[] = {0, 1, 0x7F, 0xFF, 0xFFFFFFFFull, 1ull << 31, 1ull << 63, UINT64_MAX, UINT64_MAX / 4 + 1};
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<uint8_t> b = valid;
    if (iter < 3500) {
      const size_t at = rng() % b.size();
      b[at] = uint8_t(b[at] ^ (1 + rng() % 255));
    } else {
      const size_t at = rng() % (b.size() - 8);
      const uint64_t v = edges[rng() % (sizeof(edges) / sizeof(edges[0]))];
      for (int i = 0; i < 8; ++i) b[at + i] = uint8_t(v >> (8 * i));
    }
    Opened o(b);
    if (o.status.ok()) {
      ++opened;
      check_in_bounds(o.file, o.bytes);
      if (HasFatalFailure()) FAIL() << "iteration " << iter;
    } else {
      ++failed;
      EXPECT_EQ(o.arena.arena.stats().used, 0u);
      EXPECT_NE(o.status.message()[0], '\0');
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(opened, 0);  // corrupting tensor data or string contents keeps the file valid
}

// --- the real files in ../shared ----------------------------------------------------------------

// Re-encodes every kv of `f` with the writer (no tensors, so no padding either).
void rewrite_kvs(const GgufFile& f, GgufWriter* w) {
  TestArena scratch(64 << 20);
  for (uint64_t i = 0; i < f.kv_count(); ++i) {
    const GgufKv* kv = f.kv(i);
    const std::string key = str(kv->key);
    const uint8_t* v = kv->value;
    switch (kv->type) {
      case GgufType::kU8: w->set_u8(key, v[0]); break;
      case GgufType::kI8: w->set_i8(key, int8_t(v[0])); break;
      case GgufType::kU16: w->set_u16(key, gguf_load_u16(v)); break;
      case GgufType::kI16: w->set_i16(key, int16_t(gguf_load_u16(v))); break;
      case GgufType::kU32: w->set_u32(key, gguf_load_u32(v)); break;
      case GgufType::kI32: w->set_i32(key, int32_t(gguf_load_u32(v))); break;
      case GgufType::kU64: w->set_u64(key, gguf_load_u64(v)); break;
      case GgufType::kI64: w->set_i64(key, int64_t(gguf_load_u64(v))); break;
      case GgufType::kBool: w->set_bool(key, v[0] != 0); break;
      case GgufType::kF32: { float x; std::memcpy(&x, v, 4); w->set_f32(key, x); break; }
      case GgufType::kF64: { double x; std::memcpy(&x, v, 8); w->set_f64(key, x); break; }
      case GgufType::kString: { GgufStr s; ASSERT_TRUE(f.get_string(key.c_str(), &s).ok()); w->set_string(key, str(s)); break; }
      case GgufType::kArray:
        if (kv->array_type == GgufType::kString) {
          GgufStr* strs; uint64_t n;
          ASSERT_TRUE(f.get_string_array(key.c_str(), scratch.arena, &strs, &n).ok());
          std::vector<std::string> all;
          for (uint64_t j = 0; j < n; ++j) all.push_back(str(strs[j]));
          w->set_string_array(key, all);
        } else {
          const uint8_t* e; uint64_t n;
          ASSERT_TRUE(f.get_array(key.c_str(), kv->array_type, &e, &n).ok()) << key;
          ASSERT_TRUE(w->set_array(key, kv->array_type, e, n).ok());
        }
        break;
    }
  }
}

TEST(GgufRealFiles, VocabFiles) {
  MC_REQUIRE_SHARED();
  const std::string dir = shared_path("tokenizers/vocab-gguf");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    ++files;
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    MappedFile m;
    ASSERT_TRUE(m.open(path).ok());
    TestArena arena, scratch(64 << 20);
    GgufFile f;
    const Status s = f.open(m.data(), m.size(), arena.arena);
    ASSERT_TRUE(s.ok()) << s.message();
    GgufStr arch;
    ASSERT_TRUE(f.get_string("general.architecture", &arch).ok());
    EXPECT_GT(arch.size, 0u);
    GgufStr* tokens = nullptr;
    uint64_t n_tokens = 0;
    ASSERT_TRUE(f.get_string_array("tokenizer.ggml.tokens", scratch.arena, &tokens, &n_tokens).ok());
    EXPECT_GT(n_tokens, 1000u);
    const uint8_t* e;
    uint64_t n;
    if (f.find_kv("tokenizer.ggml.scores")) {
      ASSERT_TRUE(f.get_array("tokenizer.ggml.scores", GgufType::kF32, &e, &n).ok());
      EXPECT_EQ(n, n_tokens);
    }
    if (f.find_kv("tokenizer.ggml.token_type")) {
      ASSERT_TRUE(f.get_array("tokenizer.ggml.token_type", GgufType::kI32, &e, &n).ok());
      EXPECT_EQ(n, n_tokens);
    }
    // The writer reproduces the file byte for byte (checks both sides against llama.cpp's layout).
    GgufWriter w;
    rewrite_kvs(f, &w);
    const std::vector<uint8_t> again = w.to_bytes();
    EXPECT_TRUE(again.size() == m.size() && std::memcmp(again.data(), m.data(), m.size()) == 0)
        << "re-encoded " << again.size() << " bytes, file has " << m.size();
  }
  EXPECT_GE(files, 9);
}

TEST(GgufRealFiles, BitnetDummyOpensOrNamesItsType) {
  MC_REQUIRE_SHARED();
  MappedFile m;
  const Status ms = m.open(shared_path("models/bitnet-dummy/dummy-bitnet-125m.i2_s.gguf"));
  ASSERT_TRUE(ms.ok()) << ms.message();
  TestArena arena(16 << 20);
  GgufFile f;
  const Status s = f.open(m.data(), m.size(), arena.arena);
  if (s.ok()) {
    EXPECT_GT(f.tensor_count(), 0u);
    GgufStr arch;
    EXPECT_TRUE(f.get_string("general.architecture", &arch).ok());
  } else {
    EXPECT_EQ(s.code(), Code::kUnsupported) << s.message();
    EXPECT_NE(std::string(s.message()).find("unknown tensor type id 36"), std::string::npos) << s.message();
    EXPECT_NE(std::string(s.message()).find("tensor '"), std::string::npos) << s.message();
  }
}

// --- MappedFile --------------------------------------------------------------------------------

TEST(GgufMappedFile, ErrorsNameThePath) {
  MappedFile m;
  const std::string missing = test::temp_dir() + "/missing.gguf";
  const Status s = m.open(missing);
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(std::string(s.message()).find(missing), std::string::npos) << s.message();
  EXPECT_NE(std::string(s.message()).find("No such file"), std::string::npos) << s.message();
  const std::string dir = test::temp_dir();
  const Status d = m.open(dir);
  EXPECT_EQ(d.code(), Code::kIo);
  EXPECT_NE(std::string(d.message()).find(dir), std::string::npos) << d.message();
  EXPECT_FALSE(m.is_open());
}

TEST(GgufMappedFile, EmptyFileAndMoves) {
  const std::string dir = test::temp_dir();
  test::write_file(dir + "/empty", {});
  MappedFile m;
  ASSERT_TRUE(m.open(dir + "/empty").ok());
  EXPECT_TRUE(m.is_open());
  EXPECT_EQ(m.size(), 0u);
  TestArena arena;
  GgufFile f;
  EXPECT_EQ(f.open(m.data(), m.size(), arena.arena).code(), Code::kCorrupt);

  test::write_file(dir + "/four", {1, 2, 3, 4});
  ASSERT_TRUE(m.open(dir + "/four").ok());
  MappedFile moved(std::move(m));
  EXPECT_FALSE(m.is_open());
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved.data()[3], 4);
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(moved.data(), nullptr);
  ASSERT_EQ(assigned.size(), 4u);
  EXPECT_EQ(assigned.data()[0], 1);
}

}  // namespace
}  // namespace mcullm
