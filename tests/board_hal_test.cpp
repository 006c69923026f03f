// The firmware's logic (src/board) driven through the host HAL (board/hal_host.h): the line server
// answers as `mcullm serve --serial` does (same bytes but the times), hostile serial input and
// corrupt SPI transfers get clear errors and lose nothing, a master / node pair over the virtual SPI
// wire gives the tokens one process gives, and the second-core worker gives what inline runs give.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "board/dual_core_pool.h"
#include "board/hal_host.h"
#include "board/line_server.h"
#include "board/mapped_model.h"
#include "board/master.h"
#include "board/node.h"
#include "board/transport_spi_link_host.h"
#include "cluster/ring_master_host.h"
#include "cluster/transport_host.h"
#include "core/fingerprint.h"
#include "load/board_image_export_host.h"
#include "load/model_loader_host.h"
#include "model/generate.h"
#include "model/llama_slice.h"
#include "serve/engine_host.h"
#include "serve/line_protocol_host.h"
#include "serve/serial_server_host.h"
#include "test_support.h"
#include "tokenizer/tokenizer_image_writer_host.h"

namespace mcullm::board {
namespace {

using test::shared_path;

struct Files {
  std::string model, tokenizer, image;
};

// tok512's board tokenizer image (as `mcullm convert --image` embeds it).
std::vector<uint8_t> story_tokenizer_image() {
  std::unique_ptr<LoadedModel> lm;
  EXPECT_TRUE(load_model(shared_path("models/stories260K/stories260K.bin"), &lm).ok());
  Llama2cTokenizer tok;
  std::string source;
  EXPECT_TRUE(load_tokenizer(*lm, shared_path("models/stories260K/tok512.bin"), &tok, &source).ok());
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(write_tokenizer_image(tok, &bytes).ok());
  return bytes;
}

// stories260K and its board image (stop tokens: the tokenizer's BOS / EOS, and the tokenizer image,
// as `mcullm convert --image`).
Files stories_image(uint64_t sram_budget = 64 * 1024, bool with_tokenizer = true) {
  Files f;
  f.model = shared_path("models/stories260K/stories260K.bin");
  f.tokenizer = shared_path("models/stories260K/tok512.bin");
  f.image = test::temp_dir() + (with_tokenizer ? "/stories260K.img" : "/stories260K-notok.img");
  std::unique_ptr<LoadedModel> lm;
  EXPECT_TRUE(load_model(f.model, &lm).ok());
  BoardImageOptions opt;
  opt.sram_budget = sram_budget;
  opt.psram_budget = 2 * 1024 * 1024;
  opt.bos_id = 1;  // tok512: BOS 1, EOS 2
  opt.eos_id = 2;
  if (with_tokenizer) opt.tokenizer = story_tokenizer_image();
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  const Status st = export_board_image(*lm, opt, &bytes, &rep);
  EXPECT_TRUE(st.ok()) << st.message();
  std::ofstream(f.image, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  return f;
}

// Lines with the times masked: "P", "T id", "E n", "U id|piece"; X lines as they are.
std::vector<std::string> untimed(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l)) {
    if (l.rfind("P ", 0) == 0) {
      l = "P";
    } else if (l.rfind("T ", 0) == 0 || l.rfind("E ", 0) == 0) {
      l = l.substr(0, l.rfind(' '));
    } else if (l.rfind("U ", 0) == 0) {  // U id us[ piece]: the piece may hold spaces
      const size_t id_end = l.find(' ', 2), us_end = l.find(' ', id_end + 1);
      l = l.substr(0, id_end) + "|" + (us_end == std::string::npos ? "" : l.substr(us_end + 1));
    }
    lines.push_back(l);
  }
  return lines;
}

// What `mcullm serve --serial` (serve_lines over the Engine) answers to `input`.
std::string serve_serial(const Files& f, const std::string& input) {
  serve::EngineOptions eo;
  eo.model = f.model;
  eo.tokenizer = f.tokenizer;
  std::unique_ptr<serve::Engine> engine;
  const Status st = serve::Engine::create(eo, &engine);
  EXPECT_TRUE(st.ok()) << st.message();
  const std::string dir = test::temp_dir();
  std::ofstream(dir + "/in", std::ios::binary) << input;
  const int in_fd = ::open((dir + "/in").c_str(), O_RDONLY);
  const int out_fd = ::open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::atomic<bool> stop{false};
  EXPECT_TRUE(serve::serve_lines(*engine, in_fd, out_fd, stop).ok());
  ::close(in_fd);
  ::close(out_fd);
  const std::vector<uint8_t> out = test::read_file(dir + "/out");
  return std::string(out.begin(), out.end());
}

// A board running the line server over an in-memory serial line.
struct SerialBoard {
  std::unique_ptr<HostPipeEnd> pc, port;
  std::unique_ptr<HostBoard> hal;
  SerialPool serial_pool;
  std::unique_ptr<DualCorePool> dual;
  LineServer server;
  Status init(const std::string& image, size_t sram = 320 * 1024, bool two_cores = false, int prefill_batch = 0,
              int sparse_ffn_max_live = 0, bool down_columns = false) {
    make_host_pipe(&pc, &port);
    HostBoardConfig cfg;
    cfg.partitions["model"] = image;
    cfg.sram_bytes = sram;
    hal = std::make_unique<HostBoard>(cfg, port.get(), nullptr, nullptr);
    dual = std::make_unique<DualCorePool>(hal->worker());
    LineServerOptions o;
    o.kernels = kernels_by_name("auto");
    o.pool = two_cores ? static_cast<ThreadPool*>(dual.get()) : &serial_pool;
    o.work_tier = Tier::kPsram;  // as the firmware's default (a 512-token f32 KV cache is 320 KB)
    o.prefill_batch = prefill_batch;
    o.sparse_ffn_max_live = sparse_ffn_max_live;
    o.sparse_ffn_down_columns = down_columns;
    return server.init(*hal, o);
  }
  // Sends input, closes the PC's side and runs the server to the end of it.
  std::string run(const std::string& input) {
    pc->write(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    pc->close_writer();
    EXPECT_TRUE(server.serve().ok());
    return pc->read_all_available();
  }
};

std::string g_line(int n, int temp, int top_k, uint32_t seed, int flags, const std::vector<int>& ids) {
  std::ostringstream s;
  s << "G " << n << ' ' << temp << ' ' << top_k << ' ' << seed << ' ' << flags << ' ' << ids.size();
  for (int id : ids) s << ' ' << id;
  s << '\n';
  return s.str();
}

std::vector<int> story_prompt(const Files& f) {
  std::unique_ptr<LoadedModel> lm;
  EXPECT_TRUE(load_model(f.model, &lm).ok());
  Llama2cTokenizer tok;
  std::string source;
  EXPECT_TRUE(load_tokenizer(*lm, f.tokenizer, &tok, &source).ok());
  std::vector<int> ids;
  EXPECT_TRUE(tok.encode("Once upon a time, there was a little", true, false, &ids).ok());
  return ids;
}

TEST(BoardLineServer, AnswersAsServeSerialDoes) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::vector<int> prompt = story_prompt(f);
  std::string input;
  input += g_line(40, 800, 40, 12345, 0, prompt);       // a seeded story
  input += g_line(40, 0, 0, 1, 0, prompt);              // greedy
  input += "\r\n   \n";                                  // blank lines are ignored
  input += g_line(60, 1000, 0, 7, 1, {1});              // ignore_eos, BOS alone, every token
  input += g_line(0, 800, 40, 3, 0, prompt);            // nothing to generate: P then E 0
  input += g_line(8, 800, 40, 0, 0, prompt);            // seed 0: refused
  input += g_line(8, 800, 40, 5, 0, {1, 600});          // an id outside the vocabulary
  input += g_line(5, 800, 40, 5, 0, std::vector<int>(600, 1));   // longer than the context (512)
  input += g_line(5, 800, 40, 5, 0, std::vector<int>(4097, 1));  // longer than the protocol allows
  input += "T 1 2\n";                                    // a board's line, not a command
  input += "G 5 800 40 5 0 3 1 2\n";                     // fewer ids than prompt_len says
  input += "Q\n" + std::string(20000, 'A') + "\n";      // unknown command, a line too long
  input += g_line(20, 800, 40, 99, 0, prompt);           // still in step after all that
  const std::string pc = serve_serial(f, input);
  SerialBoard b;
  ASSERT_OK(b.init(f.image));
  const std::string board = b.run(input);
  EXPECT_EQ(untimed(board), untimed(pc)) << "board:\n" << board << "\npc:\n" << pc;
  // The property has content: stories, errors, and every reply's count equals its T lines.
  const std::vector<std::string> lines = untimed(board);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "P"), 5);
  EXPECT_GE(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l[0] == 'X'; }), 8);
  EXPECT_NE(board.find("X the prompt has 600 tokens, the context holds 512\n"), std::string::npos);
  EXPECT_NE(board.find("X line too long (at most 16384 bytes)\n"), std::string::npos);
  EXPECT_NE(board.find("E 60 "), std::string::npos);  // ignore_eos ran to its length
  EXPECT_EQ(b.hal->bus().activity_edges.load(), 5u);  // the LED lit once per generation, and is off
  EXPECT_FALSE(b.hal->gpio_read(Gpio::kActivity));
}

// The firmware's batched prefill (CONFIG_MCULLM_PREFILL_BATCH): the same lines as one token at a time and
// as `serve --serial`, with prompts of one batch, several batches and a partial one, greedy and sampled;
// the llama family (stories260K) and the PLE fixture (from its esp32-ai file, ids only).
TEST(BoardLineServer, BatchedPrefillAnswersAsOneTokenAtATime) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::vector<int> story = story_prompt(f);
  std::vector<int> longer = story;  // three batches of 8 and a partial one
  for (int i = 0; i < 20; ++i) longer.push_back(story[static_cast<size_t>(i) % story.size()]);
  std::string input;
  input += g_line(12, 0, 0, 1, 0, story);
  input += g_line(12, 800, 40, 12345, 0, longer);
  input += g_line(6, 1000, 0, 7, 1, {1, 403});  // a batch of one token
  input += g_line(0, 800, 40, 3, 0, longer);    // nothing to generate
  const std::string pc = serve_serial(f, input);
  SerialBoard one, eight;
  ASSERT_OK(one.init(f.image, 320 * 1024, false, 1));
  ASSERT_OK(eight.init(f.image, 320 * 1024, true, 8));
  EXPECT_EQ(one.server.max_batch(), 1);
  EXPECT_EQ(eight.server.max_batch(), 8);
  const std::string a = one.run(input), b = eight.run(input);
  const std::vector<std::string> lines = untimed(b);
  EXPECT_EQ(lines, untimed(a)) << "batch 8:\n" << b << "\nbatch 1:\n" << a;
  EXPECT_EQ(lines, untimed(pc));
  EXPECT_EQ(std::count(lines.begin(), lines.end(), std::string("P")), 4);

  // The esp32-ai PLE fixture: its board image, a 21-token prompt (8 + 8 + 4), int8 activations.
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(shared_path("models/esp32-ai-ple/ple4096_int4.bin"), &lm));
  BoardImageOptions opt;
  opt.sram_budget = 64 * 1024;
  opt.psram_budget = 2 * 1024 * 1024;
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  ASSERT_OK(export_board_image(*lm, opt, &bytes, &rep));
  const std::string ple_image = test::temp_dir() + "/ple-batch.img";
  std::ofstream(ple_image, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  const std::vector<int> ids = {1, 403, 407, 279, 261, 300, 200, 100, 50, 60, 70, 80, 90, 110, 120, 130, 140, 150, 160, 170, 180};
  const std::string ple_input = g_line(8, 0, 0, 1, 1, ids) + g_line(8, 900, 40, 5, 1, ids);
  SerialBoard ple_one, ple_eight;
  ASSERT_OK(ple_one.init(ple_image, 320 * 1024, false, 0));
  ASSERT_OK(ple_eight.init(ple_image, 320 * 1024, false, 8));
  EXPECT_EQ(ple_one.server.max_batch(), 1);
  EXPECT_EQ(ple_eight.server.max_batch(), 8);
  const std::vector<std::string> p1 = untimed(ple_one.run(ple_input)), p8 = untimed(ple_eight.run(ple_input));
  EXPECT_EQ(p8, p1);
  EXPECT_EQ(std::count(p8.begin(), p8.end(), std::string("E 8")), 2);  // ignore_eos: both ran to their length
}

// The firmware's CONFIG_MCULLM_SPARSE_FFN_MAX_LIVE: a ternary ReLU qwen2 image answers gate first
// with the dense answers' lines, greedy and sampled, one and two cores, the down product by the
// image's rows or (CONFIG_MCULLM_SPARSE_FFN_DOWN_COLUMNS) by column copies built in PSRAM at init,
// and skips neurons doing so; an out-of-range share is refused.
TEST(BoardLineServer, SparseFfnAnswersAsDenseAndSkipsNeurons) {
  const std::string gguf = test::temp_dir() + "/qwen2-relu-line.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "--ffn", "relu", "-o", gguf, "--seed", "4"}).exit_code, 0);
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(gguf, &lm));
  BoardImageOptions opt;
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  ASSERT_OK(export_board_image(*lm, opt, &bytes, &rep));
  const std::string image = test::temp_dir() + "/qwen2-relu-line.img";
  std::ofstream(image, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  const std::string input = g_line(12, 0, 0, 1, 1, {1, 40, 77}) + g_line(12, 900, 40, 5, 1, {1, 200, 31, 9});
  SerialBoard dense, rows, columns, columns2;
  ASSERT_OK(dense.init(image));
  ASSERT_OK(rows.init(image, 320 * 1024, true, 8, 1000));
  ASSERT_OK(columns.init(image, 320 * 1024, false, 8, 1000, true));
  ASSERT_OK(columns2.init(image, 320 * 1024, true, 1, 1000, true));
  const std::vector<std::string> d = untimed(dense.run(input));
  EXPECT_EQ(std::count(d.begin(), d.end(), std::string("E 12")), 2);
  EXPECT_EQ(untimed(rows.run(input)), d);
  EXPECT_EQ(untimed(columns.run(input)), d);
  EXPECT_EQ(untimed(columns2.run(input)), d);
  FfnCounts dc;
  ASSERT_TRUE(dense.server.ffn_counts(&dc));
  EXPECT_GT(dc.neurons, 0u);
  EXPECT_EQ(dc.skipped, 0u);
  for (SerialBoard* b : {&rows, &columns, &columns2}) {
    FfnCounts sc;
    ASSERT_TRUE(b->server.ffn_counts(&sc));
    EXPECT_GT(sc.skipped, 0u);
    EXPECT_EQ(sc.live, dc.live);  // the same tokens through the same gates
  }
  // The copies take PSRAM: the column boards' arena holds more than the rows board's.
  EXPECT_GT(columns.server.mapped().arena(Tier::kPsram).stats().used, rows.server.mapped().arena(Tier::kPsram).stats().used);
  SerialBoard bad;
  const Status st = bad.init(image, 320 * 1024, false, 0, 1001);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("1001 live neurons per mille"), std::string::npos) << st.message();
}

// A batch that does not fit the work tier stops init with the reason.
TEST(BoardLineServer, APrefillBatchThatDoesNotFitIsRefusedClearly) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  SerialBoard b;
  const Status st = b.init(f.image, 320 * 1024, false, 4096);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("prefill batch of 4096 tokens: "), std::string::npos) << st.message();
}

std::string s_line(int n, int temp, int top_k, uint32_t seed, int flags, const std::string& escaped_text) {
  std::ostringstream s;
  s << "S " << n << ' ' << temp << ' ' << top_k << ' ' << seed << ' ' << flags << ' ' << escaped_text << '\n';
  return s.str();
}

// The pieces of a reply's U lines, unescaped and joined, and their ids.
std::string reply_text(const std::string& out, std::vector<int>* ids = nullptr) {
  std::string text;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    lineproto::Message m;
    if (l.rfind("U ", 0) != 0 || !lineproto::parse_line(l, &m).ok()) continue;
    text += m.text;
    if (ids) ids->push_back(m.token);
  }
  return text;
}

// Text requests (S): the board encodes with the tokenizer image its board image carries and decodes
// each token with it; `serve --serial` with its host tokenizer. Same lines, pieces included.
TEST(BoardLineServer, TextRequestsAnswerAsServeSerialDoes) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  std::string input;
  input += s_line(40, 800, 40, 12345, 0, "Once upon a time, there was a little");   // a seeded story
  input += s_line(30, 0, 0, 1, 0, "Lily and Ben\\\\ went to the park.\\nThey saw a dog.\\t");  // greedy, escapes
  input += s_line(12, 1000, 0, 7, 1, "caf\\xc3\\xa9 \\xE2\\x82\\xAC \\xff\\x01 na\\xc3\\xafve \xc3\xbc" "ber");  // UTF-8, stray bytes, ignore_eos
  input += "S 20 800 40 3 0  leading space kept\r\n";                              // CRLF, a space in front
  input += g_line(12, 800, 40, 5, 0, {1, 403, 407});                                 // G lines still answered with T
  input += "S 20 800 40 3 0\n";                                                      // no text
  input += "S 20 800\n";                                                             // fields missing
  input += "S 20 800 40 3 0 \n";                                                     // empty text
  input += "S 20 800 40 3 0 bad \\q escape\n";                                       // unknown escape
  input += "S 20 800 40 3 0 cut \\x4\n";                                             // short \x
  input += "S 20 800 40 3 0 raw \x01 control\n";                                     // a raw control byte
  input += "S 20 800 40 0 0 seed zero\n";                                            // seed 0
  input += "S 20 800 40 3 8 bad flags\n";                                            // unknown flag
  input += "S 5 800 40 5 0 " + std::string(5000, 'a') + "\n";                        // past 4096 text bytes
  input += "S 5 800 40 5 0 " + std::string(4000, '7') + "\n";                        // longer than the context (512)
  input += "S 5 800 40 5 0 " + std::string(17000, 'b') + "\n";                       // a line too long
  input += "U 3 4 not a command\n";                                                  // a board's line
  input += s_line(20, 800, 40, 99, 0, "The end");                                    // still in step after all that
  const std::string pc = serve_serial(f, input);
  SerialBoard b;
  ASSERT_OK(b.init(f.image));
  const std::string board = b.run(input);
  EXPECT_EQ(untimed(board), untimed(pc)) << "board:\n" << board << "\npc:\n" << pc;
  const std::vector<std::string> lines = untimed(board);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "P"), 6);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l[0] == 'X'; }), 12);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l[0] == 'T'; }), 12);
  for (const char* x : {"X S: the prompt text is empty\n", "X S: a bad escape in the text", "X S: a control byte in the text",
                        "X S: the text passes 4096 bytes\n", "X the prompt has ", "X line too long", "X the board takes G and S lines only\n",
                        "X S: seed is not a whole number", "X S: unknown flag bits 0x8\n", "X S needs n_predict"})
    EXPECT_NE(board.find(x), std::string::npos) << x << " in\n" << board;
  EXPECT_NE(board.find("E 12 "), std::string::npos);  // ignore_eos ran to its length

  // The S request's ids are the host tokenizer's ids of the text, and its pieces are the text of those ids.
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(f.model, &lm));
  Llama2cTokenizer tok;
  std::string source;
  ASSERT_OK(load_tokenizer(*lm, f.tokenizer, &tok, &source));
  const std::string greedy_text = "Lily and Ben\\\\ went to the park.\\nThey saw a dog.\\t";
  std::string raw;  // unescaped
  for (size_t i = 0; i < greedy_text.size(); ++i) {
    if (greedy_text[i] != '\\') { raw += greedy_text[i]; continue; }
    const char e = greedy_text[++i];
    raw += e == 'n' ? '\n' : e == 't' ? '\t' : e;
  }
  std::vector<int> prompt;
  ASSERT_OK(tok.encode(raw, true, false, &prompt));
  SerialBoard g;
  ASSERT_OK(g.init(f.image));
  const std::string by_ids = g.run(g_line(30, 0, 0, 1, 0, prompt));
  SerialBoard t;
  ASSERT_OK(t.init(f.image));
  const std::string by_text = t.run(s_line(30, 0, 0, 1, 0, greedy_text));
  std::vector<int> ids_g, ids_t;
  for (const std::string& l : untimed(by_ids))
    if (l[0] == 'T') ids_g.push_back(std::stoi(l.substr(2)));
  const std::string text = reply_text(by_text, &ids_t);
  EXPECT_EQ(ids_t, ids_g);
  ASSERT_FALSE(ids_t.empty());
  std::string want;
  int prev = prompt.back();
  for (int id : ids_t) {
    want += tok.decode_step(prev, id);
    prev = id;
  }
  EXPECT_EQ(text, want);
  EXPECT_GT(text.size(), 20u);
}

// A board whose image carries no tokenizer answers S requests with an X line and keeps serving.
TEST(BoardLineServer, TextRequestWithoutATokenizerIsAClearError) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image(64 * 1024, /*with_tokenizer=*/false);
  SerialBoard b;
  ASSERT_OK(b.init(f.image));
  const std::string good = g_line(6, 800, 40, 5, 0, {1, 403, 407});
  const std::vector<std::string> lines = untimed(b.run(s_line(5, 0, 0, 1, 0, "Once") + "S 5 0 0 1 0 \\q\n" + good));
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[0], "X this board's image holds no tokenizer (S needs one: convert without --no-tokenizer)");
  EXPECT_EQ(lines[1].substr(0, 26), "X S: a bad escape in the t");
  EXPECT_EQ(lines[2], "P");
  EXPECT_EQ(lines.back(), "E 6");
}

TEST(BoardLineServer, HostileBytesGetAnswersAndLoseNothing) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::string good = g_line(12, 800, 40, 4242, 0, {1, 403, 407});
  SerialBoard clean;
  ASSERT_OK(clean.init(f.image));
  const std::vector<std::string> want = untimed(clean.run(good));
  ASSERT_EQ(want.back().substr(0, 4), "E 12");

  std::mt19937 rng(7);
  std::string noise;
  for (int i = 0; i < 300; ++i) {
    // G lines and S lines (text with escapes), a few bytes of each flipped.
    std::string line = i % 2 ? g_line(3, 800, 40, 1 + rng() % 100, 0, {1, static_cast<int>(rng() % 700)})
                             : s_line(2, 800, 40, 1 + rng() % 100, 0, "Tom\\n saw \\x41 \\\\ cat");
    line.pop_back();
    for (int k = 0, flips = static_cast<int>(rng() % 4); k < flips; ++k) line[rng() % line.size()] = static_cast<char>(rng());
    noise += line + "\n";
  }
  SerialBoard b;
  ASSERT_OK(b.init(f.image));
  const std::string out = b.run(noise + good);
  const std::vector<std::string> lines = untimed(out);
  // Every input line that is not blank got exactly one answer (an X line or an E line).
  size_t answers = 0;
  for (const auto& l : lines) answers += (l[0] == 'X' || l[0] == 'E');
  size_t asked = 0;
  std::istringstream in(noise + good);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    asked += l.find_first_not_of(' ') != std::string::npos;
  }
  EXPECT_EQ(answers, asked);
  // The good request at the end is answered as on a fresh board.
  ASSERT_GE(lines.size(), want.size());
  EXPECT_EQ(std::vector<std::string>(lines.end() - static_cast<long>(want.size()), lines.end()), want);
}

TEST(BoardLineServer, RefusesImagesThatDoNotFitOrAreDamaged) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image(/*sram_budget=*/512 * 1024);
  SerialBoard small;
  const Status st = small.init(f.image, /*sram=*/32 * 1024);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "sram"), nullptr) << st.message();

  std::vector<uint8_t> bytes = test::read_file(f.image);
  bytes.resize(bytes.size() / 2);
  const std::string cut = test::temp_dir() + "/cut.img";
  std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  SerialBoard damaged;
  const Status st2 = damaged.init(cut);
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(std::strstr(st2.message(), "partition 'model' holds no usable board image"), nullptr) << st2.message();

  SerialBoard missing;
  HostBoardConfig cfg;  // no partition at all
  make_host_pipe(&missing.pc, &missing.port);
  HostBoard hal(cfg, missing.port.get(), nullptr, nullptr);
  LineServerOptions o;
  o.kernels = kernels_by_name("auto");
  o.pool = &missing.serial_pool;
  const Status st3 = missing.server.init(hal, o);
  ASSERT_FALSE(st3.ok());
  EXPECT_NE(std::strstr(st3.message(), "no partition labelled 'model'"), nullptr) << st3.message();
}

TEST(BoardWorker, SecondCoreGivesWhatInlineGives) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::string req = g_line(24, 900, 30, 31337, 1, story_prompt(f));
  SerialBoard one, two;
  ASSERT_OK(one.init(f.image));
  ASSERT_OK(two.init(f.image, 320 * 1024, /*two_cores=*/true));
  const std::vector<std::string> a = untimed(one.run(req)), b = untimed(two.run(req));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.back(), "E 24");
  EXPECT_GT(static_cast<HostWorker&>(two.hal->worker()).jobs(), 100u);  // the worker did take shares
  // Hand-offs alone: every job runs once, in order, and wait() sees its result.
  HostWorker w;
  int sum = 0;
  for (int i = 1; i <= 1000; ++i) {
    struct Arg { int* sum; int v; } arg{&sum, i};
    w.start([](void* p) { auto* x = static_cast<Arg*>(p); *x->sum += x->v; }, &arg);
    w.wait();
  }
  EXPECT_EQ(sum, 500500);
}

// ---- the cluster over the virtual SPI wire ----

// A node board: its model from the image, its frame link over `spi`.
struct NodeBoard {
  std::unique_ptr<HostBoard> hal;
  MappedModel model;
  FrameLink link;
  Node node;
  SerialPool pool;
  Status init(const std::string& image, SpiLink* spi, HostGpioBus* bus, int max_streams = 1) {
    hal = std::make_unique<HostBoard>(HostBoardConfig{{{"model", image}}}, nullptr, spi, bus);
    MC_TRY(model.init(*hal, "model"));
    const LlamaModel* llama = nullptr;
    MC_TRY(model.llama(&llama));
    MC_TRY(link.init(hal->spi(), model.arena(Tier::kPsram)));
    NodeOptions no;
    no.send_timeout_ms = 500;
    no.held_hash = model.image().slice().hash;  // as the firmware: a per-node image's recorded hash
    no.max_streams = max_streams;
    MC_TRY(node.init(llama, link, model.arena(Tier::kPsram), &pool, kernels_by_name("auto"), no));
    hal->gpio_write(Gpio::kReady, true);
    return Status::Ok();
  }
};

// Node boards polling on threads until the object goes (a failed assertion included).
struct NodeThreads {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  void start(NodeBoard* b) {
    threads.emplace_back([this, b] {
      while (!stop) (void)b->node.poll(20);  // a failed send (the master gone) is the master's to notice
    });
  }
  ~NodeThreads() {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

// A master and one node on one SPI wire and one GPIO bus.
struct ClusterPair {
  std::unique_ptr<HostSpiEnd> master_spi, node_spi;
  HostGpioBus bus;
  NodeBoard board;
  Node& node = board.node;
  NodeThreads threads;  // last: stops before the board goes
  Status start_node(const std::string& image, int max_streams = 1) {
    make_host_spi_wire(&master_spi, &node_spi);
    MC_TRY(board.init(image, node_spi.get(), &bus, max_streams));
    threads.start(&board);
    return Status::Ok();
  }
};

// The tokens and logits of n steps of a decoder (fingerprint of generate()).
uint64_t run_fingerprint(Decoder& d, Arena& work, const std::vector<int>& prompt, int n, std::vector<int>* tokens, uint64_t seed = 77) {
  SamplerConfig sc;
  sc.seed = seed;
  Sampler s;
  EXPECT_TRUE(s.init(sc, d.vocab_size(), work).ok());
  std::vector<int> history(prompt.size() + n + 1);
  GenerateOptions go;
  go.n_predict = n;
  Fingerprint fp;
  struct Log { std::vector<int>* t; } log{tokens};
  GenerateHooks hooks{&log, nullptr, [](void* u, const GenerateStep& st) {
                        if (st.sampled) static_cast<Log*>(u)->t->push_back(st.next);
                        return true;
                      }};
  GenerateResult r;
  const Status st = generate(d, s, prompt.data(), static_cast<int>(prompt.size()), go, history.data(), &fp, hooks, &r);
  EXPECT_TRUE(st.ok()) << st.message();
  return fp.combined();
}

struct MasterBoard {
  std::unique_ptr<HostBoard> hal;
  MappedModel model;
  FrameLink link;
  Master master;
  SerialPool pool;
  Status init(const std::string& image, SpiLink* spi, HostGpioBus* bus, const MasterOptions& mo) {
    HostBoardConfig cfg;
    cfg.partitions["model"] = image;
    hal = std::make_unique<HostBoard>(cfg, nullptr, spi, bus);
    MC_TRY(model.init(*hal, "model"));
    const LlamaModel* llama = nullptr;
    MC_TRY(model.llama(&llama));
    MC_TRY(link.init(hal->spi(), model.arena(Tier::kPsram)));
    MC_TRY(master.init(llama, link, model.arena(Tier::kPsram), &pool, kernels_by_name("auto"), mo));
    return master.connect();
  }
};

// One process: the board decoder over the same image.
uint64_t local_fingerprint(const std::string& image, const std::vector<int>& prompt, int n, std::vector<int>* tokens, uint64_t seed = 77) {
  HostBoard hal(HostBoardConfig{{{"model", image}}}, nullptr, nullptr, nullptr);
  MappedModel m;
  EXPECT_TRUE(m.init(hal, "model").ok());
  SerialPool pool;
  BoardDecoder dec;
  EXPECT_TRUE(dec.init(m.model(), 0, m.arena(Tier::kPsram), &pool, kernels_by_name("auto")).ok());
  return run_fingerprint(dec.decoder(), m.arena(Tier::kPsram), prompt, n, tokens, seed);
}

TEST(BoardCluster, MasterAndNodeOverSpiGiveTheTokensOfOneProcess) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::vector<int> prompt = story_prompt(f);
  std::vector<int> want, got;
  const uint64_t fp_local = local_fingerprint(f.image, prompt, 30, &want);
  ClusterPair pair;
  ASSERT_TRUE(pair.start_node(f.image).ok());
  MasterBoard m;
  const Status st = m.init(f.image, pair.master_spi.get(), &pair.bus, MasterOptions());
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(m.hal->gpio_read(Gpio::kReady));
  const uint64_t fp_cluster = run_fingerprint(m.master, m.model.arena(Tier::kPsram), prompt, 30, &got);
  EXPECT_EQ(got, want);
  EXPECT_EQ(fp_cluster, fp_local);  // f32 hidden states: the logits too, bit for bit
  EXPECT_EQ(m.master.resends(), 0u);
  EXPECT_EQ(pair.node.hidden_served(), prompt.size() + 30 - 1);
}

// Qwen2 (q/k/v biases, NEOX RoPE, ternary layers) in a board image: one process on the PC, the
// board decoder and a master with one node over SPI give the same tokens and logits.
TEST(BoardCluster, Qwen2ImageRunsOnANodeWithThePcBits) {
  const std::string dir = test::temp_dir();
  const std::string gguf = dir + "/qwen2-tiny.gguf", image = dir + "/qwen2-tiny.img";
  const test::CommandResult d = test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", gguf});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(gguf, &lm));
  BoardImageOptions opt;
  opt.psram_budget = 2 * 1024 * 1024;
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  ASSERT_OK(export_board_image(*lm, opt, &bytes, &rep));
  std::ofstream(image, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  const std::vector<int> prompt = {1, 300, 301, 302};
  std::vector<int> pc_tokens, want, got;
  SerialPool pool;
  DecoderInstance pc;
  ASSERT_OK(make_decoder(*lm, 64, &pool, kernels_by_name("auto"), 1 << 20, &pc));
  const uint64_t fp_pc = run_fingerprint(*pc.decoder, pc.work, prompt, 12, &pc_tokens);
  const uint64_t fp_local = local_fingerprint(image, prompt, 12, &want);
  EXPECT_EQ(fp_local, fp_pc);
  EXPECT_EQ(want, pc_tokens);
  ClusterPair pair;
  ASSERT_OK(pair.start_node(image));
  MasterBoard m;
  ASSERT_OK(m.init(image, pair.master_spi.get(), &pair.bus, MasterOptions()));
  const uint64_t fp_cluster = run_fingerprint(m.master, m.model.arena(Tier::kPsram), prompt, 12, &got);
  EXPECT_EQ(got, want);
  EXPECT_EQ(fp_cluster, fp_local);
  EXPECT_EQ(pair.node.hidden_served(), prompt.size() + 12 - 1);
}

// The reference design's ring: master -> node 1 -> node 2 -> node 3 -> master, one SPI TX and one RX
// per board; stories260K's 5 layers split 2 / 2 / 1.
TEST(BoardCluster, ARingOfThreeNodesGivesTheTokensOfOneProcess) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::vector<int> prompt = story_prompt(f);
  std::vector<int> want, got;
  const uint64_t fp_local = local_fingerprint(f.image, prompt, 20, &want);
  constexpr int kNodes = 3;
  std::shared_ptr<HostSpiChannel> wire[kNodes + 1];  // wire[k]: board k's TX -> board k + 1's RX (board 0: master)
  for (auto& w : wire) w = std::make_shared<HostSpiChannel>();
  HostSpiEnd master_spi(wire[0], wire[kNodes]);
  std::unique_ptr<HostSpiEnd> node_spi[kNodes];
  NodeBoard nodes[kNodes];
  NodeThreads threads;  // after the boards: stops before they go
  for (int k = 0; k < kNodes; ++k) {
    node_spi[k] = std::make_unique<HostSpiEnd>(wire[k + 1], wire[k]);
    ASSERT_OK(nodes[k].init(f.image, node_spi[k].get(), nullptr));
    threads.start(&nodes[k]);
  }
  MasterOptions mo;
  mo.nodes = kNodes;
  MasterBoard m;
  ASSERT_OK(m.init(f.image, &master_spi, nullptr, mo));
  const uint64_t fp_ring = run_fingerprint(m.master, m.model.arena(Tier::kPsram), prompt, 20, &got);
  EXPECT_EQ(got, want);
  EXPECT_EQ(fp_ring, fp_local);
  const int layers[kNodes][2] = {{0, 2}, {2, 4}, {4, 5}};
  for (int k = 0; k < kNodes; ++k) {
    EXPECT_EQ(nodes[k].node.range().first, layers[k][0]);
    EXPECT_EQ(nodes[k].node.range().end, layers[k][1]);
    EXPECT_EQ(nodes[k].node.hidden_served(), prompt.size() + 20 - 1);
  }
}

TEST(BoardCluster, CorruptTransfersAreResentAndLoseNothing) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::vector<int> prompt = story_prompt(f);
  std::vector<int> want, got;
  const uint64_t fp_local = local_fingerprint(f.image, prompt, 20, &want);
  ClusterPair pair;
  ASSERT_TRUE(pair.start_node(f.image).ok());
  MasterBoard m;
  ASSERT_OK(m.init(f.image, pair.master_spi.get(), &pair.bus, MasterOptions()));
  // Every 7th transfer each way is damaged: a flipped bit, a cut, garbage, in turn.
  std::atomic<int> n_master{0}, n_node{0};
  auto damage = [](std::atomic<int>* count) {
    return [count](std::vector<uint8_t>* t) {
      const int k = ++*count;
      if (k % 7 != 0) return;
      switch ((k / 7) % 3) {
        case 0: (*t)[t->size() / 2] ^= 0x04; break;
        case 1: t->resize(t->size() - 4); break;
        default: for (auto& b : *t) b = static_cast<uint8_t>(b * 31 + 7); break;
      }
    };
  };
  pair.master_spi->tx().set_tamper(damage(&n_master));
  pair.node_spi->tx().set_tamper(damage(&n_node));
  const uint64_t fp_cluster = run_fingerprint(m.master, m.model.arena(Tier::kPsram), prompt, 20, &got);
  EXPECT_EQ(got, want);
  EXPECT_EQ(fp_cluster, fp_local);
  EXPECT_GT(m.master.resends(), 2u);
  EXPECT_GT(pair.node.errors_sent(), 0u);           // it told the master about the damaged ones
  EXPECT_GT(m.link.corrupt_received(), 0u);
}

TEST(BoardCluster, HostileFramesGetErrorFramesAndTheNodeKeepsServing) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  ClusterPair pair;
  ASSERT_TRUE(pair.start_node(f.image).ok());
  HostBoard probe_hal(HostBoardConfig(), nullptr, pair.master_spi.get(), &pair.bus);
  uint8_t mem[2 * cluster::kMaxFrameBytes + 64];
  Arena a(Tier::kSram, mem, sizeof mem);
  FrameLink probe;
  ASSERT_OK(probe.init(probe_hal.spi(), a));
  auto expect_error = [&](const char* fragment) {
    cluster::Frame fr;
    bool got = false;
    for (int i = 0; i < 100 && !got; ++i) ASSERT_TRUE(probe.receive(&fr, &got, 50).ok());
    ASSERT_TRUE(got);
    ASSERT_EQ(fr.header.type, cluster::FrameType::kError);
    Status remote;
    ASSERT_TRUE(cluster::decode_error(fr.payload, fr.header.payload_len, &remote).ok());
    EXPECT_NE(std::strstr(remote.message(), fragment), nullptr) << remote.message();
  };
  // Garbage that is no frame at all.
  uint8_t junk[64];
  for (int i = 0; i < 64; ++i) junk[i] = static_cast<uint8_t>(i * 37);
  ASSERT_TRUE(pair.master_spi->transmit(junk, sizeof junk, 1000).ok());
  expect_error("corrupt frame");
  // A node's hello is for the master: passed on as it is (here: back to the probe).
  cluster::Hello h;
  h.role = cluster::NodeRole::kNode;
  h.n_layers = 5;
  h.end_layer = 5;
  h.dim = 64;
  uint8_t buf[cluster::kHelloBytes];
  size_t len = 0;
  ASSERT_TRUE(cluster::encode_hello(h, buf, sizeof buf, &len).ok());
  ASSERT_TRUE(probe.send(cluster::FrameType::kHello, 0, 0, buf, len, 1000).ok());
  {
    cluster::Frame fr;
    bool got = false;
    for (int i = 0; i < 100 && !got; ++i) ASSERT_TRUE(probe.receive(&fr, &got, 50).ok());
    ASSERT_TRUE(got);
    EXPECT_EQ(fr.header.type, cluster::FrameType::kHello);
    EXPECT_EQ(std::memcmp(fr.payload, buf, len), 0);
  }
  // A master's hello for another model.
  h.role = cluster::NodeRole::kMaster;
  h.n_layers = h.end_layer = 99;
  ASSERT_TRUE(cluster::encode_hello(h, buf, sizeof buf, &len).ok());
  ASSERT_TRUE(probe.send(cluster::FrameType::kHello, 0, 0, buf, len, 1000).ok());
  expect_error("layers");
  // A hidden state of a new stream that does not start at 0, and one of the wrong width.
  std::vector<float> x(64, 0.5f);
  ASSERT_TRUE(probe.send_hidden(cluster::HiddenEncoding::kF32, 3, 9, x.data(), 64, 1000).ok());
  expect_error("starts at pos 0");
  ASSERT_TRUE(probe.send_hidden(cluster::HiddenEncoding::kF32, 3, 0, x.data(), 32, 1000).ok());
  expect_error("");
  // Then a real master connects and gets the right tokens.
  const std::vector<int> prompt = {1, 403, 407};
  std::vector<int> want, got;
  local_fingerprint(f.image, prompt, 10, &want);
  MasterBoard m;
  ASSERT_OK(m.init(f.image, pair.master_spi.get(), &pair.bus, MasterOptions()));
  run_fingerprint(m.master, m.model.arena(Tier::kPsram), prompt, 10, &got);
  EXPECT_EQ(got, want);
}

TEST(BoardCluster, ASilentNodeIsAClearError) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  std::unique_ptr<HostSpiEnd> a, b;
  make_host_spi_wire(&a, &b);  // nobody at the other end
  MasterOptions mo;
  mo.timeout_ms = 200;
  MasterBoard m;
  const Status st = m.init(f.image, a.get(), nullptr, mo);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "handshake stayed low"), nullptr) << st.message();
}

TEST(BoardCluster, LineServerAsMasterAnswersAsTheSingleBoard) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::string req = g_line(16, 800, 40, 2024, 0, story_prompt(f));
  SerialBoard single;
  ASSERT_OK(single.init(f.image));
  const std::vector<std::string> want = untimed(single.run(req));

  ClusterPair pair;
  ASSERT_TRUE(pair.start_node(f.image).ok());
  std::unique_ptr<HostPipeEnd> pc, port;
  make_host_pipe(&pc, &port);
  HostBoard hal(HostBoardConfig{{{"model", f.image}}}, port.get(), pair.master_spi.get(), &pair.bus);
  SerialPool pool;
  LineServerOptions o;
  o.kernels = kernels_by_name("auto");
  o.pool = &pool;
  o.cluster_master = true;
  o.work_tier = Tier::kPsram;
  LineServer server;
  const Status st = server.init(hal, o);
  ASSERT_TRUE(st.ok()) << st.message();
  pc->write(reinterpret_cast<const uint8_t*>(req.data()), req.size());
  pc->close_writer();
  ASSERT_TRUE(server.serve().ok());
  EXPECT_EQ(untimed(pc->read_all_available()), want);
}


// ---- stream slots: several streams through one board node ----

// The master's end of a node's SPI wire, driven by hand: a hidden state of a stream at a position
// in, the node's answer (or the text of its error frame) out.
struct StreamProbe {
  std::unique_ptr<HostBoard> hal;
  std::vector<uint8_t> mem = std::vector<uint8_t>(2 * cluster::kMaxFrameBytes + 64);
  Arena arena;
  FrameLink link;
  uint32_t dim = 0;
  Status init(ClusterPair& pair) {
    hal = std::make_unique<HostBoard>(HostBoardConfig(), nullptr, pair.master_spi.get(), &pair.bus);
    arena.reset(Tier::kSram, mem.data(), mem.size());
    const LlamaModel* llama = nullptr;
    MC_TRY(pair.board.model.llama(&llama));
    dim = static_cast<uint32_t>(llama->cfg.dim);
    return link.init(hal->spi(), arena);
  }
  // A different vector for every (stream, pos), the same every time.
  static std::vector<float> input(uint32_t stream, uint32_t pos, uint32_t dim) {
    std::vector<float> x(dim);
    for (uint32_t i = 0; i < dim; ++i)
      x[i] = 0.5f * std::sin(0.7f * static_cast<float>(stream) + 0.31f * static_cast<float>(pos) + 0.05f * static_cast<float>(i));
    return x;
  }
  Status ask(uint32_t stream, uint32_t pos, std::vector<float>* out, std::string* refused) {
    const std::vector<float> x = input(stream, pos, dim);
    MC_TRY(link.send_hidden(cluster::HiddenEncoding::kF32, stream, pos, x.data(), dim, 1000));
    out->assign(dim, 0.0f);
    refused->clear();
    cluster::HiddenAssembler as;
    as.start(out->data(), dim);
    return receive([&](const cluster::Frame& f, bool* done) -> Status {
      if (f.header.type == cluster::FrameType::kError) {
        Status remote;
        MC_TRY(cluster::decode_error(f.payload, f.header.payload_len, &remote));
        *refused = remote.message();
        *done = true;
      } else if (f.header.type == cluster::FrameType::kHidden) {
        MC_TRY(as.add(f));
        *done = as.complete();
      }
      return Status::Ok();
    });
  }
  Status reset(uint32_t stream) {  // the reset goes round (here: back to the probe)
    MC_TRY(link.send(cluster::FrameType::kReset, stream, 0, nullptr, 0, 1000));
    return receive([](const cluster::Frame& f, bool* done) {
      *done = f.header.type == cluster::FrameType::kReset;
      return Status::Ok();
    });
  }
  template <typename OnFrame>
  Status receive(OnFrame on_frame) {
    for (int i = 0; i < 200; ++i) {  // a hang guard, not a clock assertion
      cluster::Frame f;
      bool got = false, done = false;
      MC_TRY(link.receive(&f, &got, 50));
      if (got) MC_TRY(on_frame(f, &done));
      if (done) return Status::Ok();
    }
    return Status::Error(Code::kOutOfRange, "the node did not answer");
  }
};

// A node with two stream slots serving two streams interleaved gives each the bits a one-slot node
// gives it alone; a third stream is refused with an error frame that says why while the two go on;
// a reset frees a slot and the third then fits.
TEST(BoardCluster, TwoStreamSlotsServeInterleavedStreamsWithTheBitsOfOneSlotEach) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const uint32_t a = 3, b = 9, c = 7;
  constexpr uint32_t kPos = 6;
  std::map<uint32_t, std::vector<std::vector<float>>> alone;  // [stream][pos]
  {
    ClusterPair one;
    ASSERT_OK(one.start_node(f.image));
    StreamProbe p;
    ASSERT_OK(p.init(one));
    for (uint32_t s : {a, b, c})  // one after the other: each new stream at pos 0 takes the one cache over
      for (uint32_t pos = 0; pos <= kPos; ++pos) {
        std::vector<float> y;
        std::string refused;
        ASSERT_OK(p.ask(s, pos, &y, &refused));
        ASSERT_EQ(refused, "");
        alone[s].push_back(y);
      }
  }
  ClusterPair two;
  ASSERT_OK(two.start_node(f.image, 2));
  StreamProbe p;
  ASSERT_OK(p.init(two));
  auto expect_alone = [&](uint32_t s, uint32_t pos) {
    std::vector<float> y;
    std::string refused;
    ASSERT_OK(p.ask(s, pos, &y, &refused));
    ASSERT_EQ(refused, "") << "stream " << s << " pos " << pos;
    EXPECT_EQ(std::memcmp(y.data(), alone[s][pos].data(), y.size() * sizeof(float)), 0) << "stream " << s << " pos " << pos;
  };
  auto expect_refused = [&](uint32_t s, uint32_t pos, const char* why) {
    std::vector<float> y;
    std::string refused;
    ASSERT_OK(p.ask(s, pos, &y, &refused));
    EXPECT_NE(refused.find(why), std::string::npos) << refused;
  };
  for (uint32_t pos = 0; pos < kPos; ++pos) {
    expect_alone(a, pos);
    expect_alone(b, pos);
  }
  expect_refused(c, 0, "stream 7 at pos 0: all 2 stream slots are in use (reset one)");
  expect_alone(a, kPos);  // still serving
  ASSERT_OK(p.reset(b));
  for (uint32_t pos = 0; pos <= kPos; ++pos) expect_alone(c, pos);  // in b's slot
  expect_refused(b, 1, "stream 9 at pos 1: this node keeps no cache of it");
  expect_refused(b, 0, "all 2 stream slots are in use");
  ASSERT_OK(p.reset(cluster::kAllStreams));
  expect_alone(b, 0);
  expect_alone(c, 0);
  EXPECT_EQ(two.node.hidden_served(), 2 * kPos + 1 + (kPos + 1) + 2);
}

// At hello a master with more streams in flight than a node keeps slots refuses the ring, saying
// which node and how many; a node with enough slots is taken.
TEST(BoardCluster, AMasterRefusesANodeWithFewerStreamSlotsThanItsStreams) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  MasterOptions mo;
  mo.timeout_ms = 1000;
  mo.streams = 2;
  {
    ClusterPair one;
    ASSERT_OK(one.start_node(f.image));
    MasterBoard m;
    const Status st = m.init(f.image, one.master_spi.get(), &one.bus, mo);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(std::strstr(st.message(), "node 1 (layers 0:5) keeps 1 stream, 2 streams asked"), nullptr) << st.message();
  }
  ClusterPair two;
  ASSERT_OK(two.start_node(f.image, 2));
  mo.streams = 3;
  MasterBoard refused;
  const Status st = refused.init(f.image, two.master_spi.get(), &two.bus, mo);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "keeps 2 streams, 3 streams asked"), nullptr) << st.message();
  mo.streams = 2;
  MasterBoard m;
  ASSERT_OK(m.init(f.image, two.master_spi.get(), &two.bus, mo));
}

// The PC's ring master (`mcullm cluster --topology ring --streams 3`) over two board nodes with three
// stream slots each: three streams in flight at once, each with the tokens and logits of the board
// decoder run alone with its seed; once they are closed a fourth stream takes a freed slot.
TEST(BoardCluster, APcRingMasterPipelinesThreeStreamsThroughBoardNodes) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(f.model, &lm));
  const std::vector<int> prompt = story_prompt(f);
  constexpr int kNodes = 2, kStreams = 3, kTokens = 16;
  // hop k: board k's TX (0: the master) -> board k + 1's RX (kNodes + 1: the master)
  std::unique_ptr<cluster::Transport> tx[kNodes + 1], rx[kNodes + 1];
  for (int k = 0; k <= kNodes; ++k) cluster::make_inproc_pair(&tx[k], &rx[k]);
  std::unique_ptr<TransportSpiLink> spi[kNodes];
  NodeBoard nodes[kNodes];
  NodeThreads threads;  // after the boards: stops before they go
  for (int k = 0; k < kNodes; ++k) {
    spi[k] = std::make_unique<TransportSpiLink>(std::move(tx[k + 1]), std::move(rx[k]));
    ASSERT_OK(nodes[k].init(f.image, spi[k].get(), nullptr, kStreams));
    threads.start(&nodes[k]);
  }
  cluster::RingOptions ro;
  ro.ranges = {SliceRange{0, 3, false}, SliceRange{3, 5, false}};
  ro.master.streams = kStreams;
  ro.wire = [&](std::unique_ptr<cluster::Transport>* to_first, std::unique_ptr<cluster::Transport>* from_last) {
    if (!tx[0]) return Status::Error(Code::kIo, "the test wires one ring");
    *to_first = std::move(tx[0]);
    *from_last = std::move(rx[kNodes]);
    return Status::Ok();
  };
  SerialPool pool;
  cluster::RingMaster master(&lm->model, &pool, kernels_by_name("auto"), ro);
  ASSERT_OK(master.start());
  std::unique_ptr<cluster::RingStream> streams[kStreams];
  for (auto& s : streams) ASSERT_OK(master.open_stream(&s));
  std::unique_ptr<cluster::RingStream> extra;
  EXPECT_FALSE(master.open_stream(&extra).ok());
  std::vector<int> got[kStreams];
  uint64_t fp[kStreams] = {};
  std::vector<std::vector<uint8_t>> work(kStreams, std::vector<uint8_t>(1 << 20));
  std::vector<std::thread> gen;
  for (int i = 0; i < kStreams; ++i)
    gen.emplace_back([&, i] {
      Arena arena(Tier::kHost, work[i].data(), work[i].size());
      fp[i] = run_fingerprint(*streams[i], arena, prompt, kTokens, &got[i], 77 + i);
    });
  for (std::thread& t : gen) t.join();
  for (int i = 0; i < kStreams; ++i) {
    std::vector<int> want;
    EXPECT_EQ(fp[i], local_fingerprint(f.image, prompt, kTokens, &want, 77 + i)) << "stream " << i;
    EXPECT_EQ(got[i], want) << "stream " << i;
  }
  EXPECT_NE(got[0], got[1]);  // three seeds, three stories: no stream got another's answers by chance
  for (const NodeBoard& n : nodes) EXPECT_EQ(n.node.hidden_served(), kStreams * (prompt.size() + kTokens - 1));
  EXPECT_EQ(master.resends(), 0u);
  // Closed streams free their slots on the nodes (a reset each): a new stream then fits.
  for (auto& s : streams) s.reset();
  ASSERT_OK(master.open_stream(&extra));
  std::vector<int> again, want;
  Arena arena(Tier::kHost, work[0].data(), work[0].size());
  EXPECT_EQ(run_fingerprint(*extra, arena, prompt, kTokens, &again, 80), local_fingerprint(f.image, prompt, kTokens, &want, 80));
  EXPECT_EQ(again, want);
}

// ---- per-node images (format/board_image.h version 2) ----

// The board image of `lm`: whole, or holding only `r` (a node's layers, or the master's part).
std::string write_image(const LoadedModel& lm, const std::string& path, const SliceRange* r) {
  BoardImageOptions opt;
  opt.psram_budget = 2 * 1024 * 1024;
  if (r) {
    opt.sliced = true;
    opt.slice = *r;
  }
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  const Status st = export_board_image(lm, opt, &bytes, &rep);
  EXPECT_TRUE(st.ok()) << st.message();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  return path;
}

// What a node image says it holds (its slice record), as a board's build script would read it.
BoardSlice image_slice(const std::string& path) {
  const std::vector<uint8_t> b = test::read_file(path);
  std::vector<uint64_t> aligned(b.size() / 8 + 1);
  std::memcpy(aligned.data(), b.data(), b.size());
  BoardImage img;
  const Status st = img.open(reinterpret_cast<const uint8_t*>(aligned.data()), b.size());
  EXPECT_TRUE(st.ok()) << st.message();
  return st.ok() ? img.slice() : BoardSlice();
}

// A master board and a ring of node boards, each with its own image; the master is told each node's
// layers and slice hash from the node images (the master's image holds no layers).
struct Ring {
  std::vector<std::shared_ptr<HostSpiChannel>> wire;  // wire[k]: board k's TX -> board k + 1's RX (0: the master)
  std::unique_ptr<HostSpiEnd> master_spi;
  std::vector<std::unique_ptr<HostSpiEnd>> node_spi;
  std::vector<std::unique_ptr<NodeBoard>> nodes;
  MasterBoard master;
  NodeThreads threads;  // last: stops before the boards go
  std::vector<SliceRange> ranges;
  std::vector<uint64_t> hashes;
  // The nodes only (master_spi is the master's end of the ring); their layers and hashes from their images.
  Status start_nodes(const std::vector<std::string>& node_images) {
    const int n = static_cast<int>(node_images.size());
    for (int k = 0; k <= n; ++k) wire.push_back(std::make_shared<HostSpiChannel>());
    master_spi = std::make_unique<HostSpiEnd>(wire[0], wire[n]);
    for (int k = 0; k < n; ++k) {
      node_spi.push_back(std::make_unique<HostSpiEnd>(wire[k + 1], wire[k]));
      nodes.push_back(std::make_unique<NodeBoard>());
      MC_TRY(nodes[k]->init(node_images[k], node_spi[k].get(), nullptr));
      threads.start(nodes[k].get());
      const BoardSlice s = image_slice(node_images[k]);
      ranges.push_back(SliceRange{s.first, s.end, false});
      hashes.push_back(s.hash);
    }
    return Status::Ok();
  }
  Status start(const std::string& master_image, const std::vector<std::string>& node_images) {
    MC_TRY(start_nodes(node_images));
    MasterOptions mo;
    mo.nodes = static_cast<int>(node_images.size());
    mo.node_ranges = ranges.data();
    mo.node_hashes = hashes.data();
    mo.timeout_ms = 2000;
    return master.init(master_image, master_spi.get(), nullptr, mo);
  }
};

// Every way of cutting the model into node images gives the whole image's tokens and logits (and,
// for a GGUF, those of `mcullm run`'s decoder): a master image with embedding and head only, and
// 1 node with every layer, 2 nodes cut at every layer, one node per layer.
void expect_node_images_give_the_whole_bits(const std::string& model, const std::string& name, const std::vector<int>& prompt,
                                            int n) {
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(model, &lm));
  const std::string dir = test::temp_dir();
  const int L = lm->model.cfg.n_layers;
  std::vector<int> want;
  const uint64_t fp_whole = local_fingerprint(write_image(*lm, dir + "/" + name + ".img", nullptr), prompt, n, &want);
  {
    SerialPool pool;
    DecoderInstance pc;  // `mcullm run`'s decoder
    ASSERT_OK(make_decoder(*lm, 0, &pool, kernels_by_name("auto"), 1 << 20, &pc));
    std::vector<int> pc_tokens;
    EXPECT_EQ(run_fingerprint(*pc.decoder, pc.work, prompt, n, &pc_tokens), fp_whole);
  }
  const SliceRange head{0, 0, true};
  const std::string master_image = write_image(*lm, dir + "/" + name + ".master.img", &head);
  EXPECT_EQ(image_slice(master_image).hash, slice_hash(lm->model, head));
  std::vector<std::vector<int>> cuts = {{0, L}};  // boundaries of each split
  for (int c = 1; c < L; ++c) cuts.push_back({0, c, L});
  std::vector<int> each;
  for (int l = 0; l <= L; ++l) each.push_back(l);
  cuts.push_back(each);
  for (const std::vector<int>& cut : cuts) {
    std::vector<std::string> images;
    std::string text;
    for (size_t k = 0; k + 1 < cut.size(); ++k) {
      const SliceRange r{cut[k], cut[k + 1], false};
      images.push_back(write_image(*lm, dir + "/" + name + ".node" + std::to_string(k + 1) + ".img", &r));
      const BoardSlice s = image_slice(images.back());
      EXPECT_FALSE(s.whole);
      EXPECT_EQ(s.first, r.first);
      EXPECT_EQ(s.end, r.end);
      EXPECT_FALSE(s.embedding || s.head);
      EXPECT_EQ(s.hash, slice_hash(lm->model, r));  // what a master holding the whole model computes
      text += std::to_string(r.first) + ":" + std::to_string(r.end) + " ";
    }
    Ring ring;
    const Status st = ring.start(master_image, images);
    ASSERT_TRUE(st.ok()) << text << st.message();
    std::vector<int> got;
    EXPECT_EQ(run_fingerprint(ring.master.master, ring.master.model.arena(Tier::kPsram), prompt, n, &got), fp_whole) << text;
    EXPECT_EQ(got, want) << text;
  }
}

TEST(BoardCluster, NodeImagesOfEveryCutGiveTheWholeImagesBitsLlama) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  expect_node_images_give_the_whole_bits(f.model, "stories", story_prompt(f), 10);
}

TEST(BoardCluster, NodeImagesOfEveryCutGiveTheWholeImagesBitsQwen2) {
  const std::string gguf = test::temp_dir() + "/qwen2-tiny.gguf";
  const test::CommandResult d = test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", gguf});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  expect_node_images_give_the_whole_bits(gguf, "qwen2", {1, 300, 301, 302}, 10);
}

// A node whose image holds other layers than the master assigns, or the same layers of other
// weights, is refused at hello with a message that says so.
TEST(BoardCluster, AWrongSliceIsRefusedAtHello) {
  const std::string dir = test::temp_dir();
  const std::string a = dir + "/qa.gguf", b = dir + "/qb.gguf";
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", a}).exit_code, 0);
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "--seed", "99", "-o", b}).exit_code, 0);
  std::unique_ptr<LoadedModel> ma, mb;
  ASSERT_OK(load_model(a, &ma));
  ASSERT_OK(load_model(b, &mb));
  const SliceRange r02{0, 2, false}, r24{2, 4, false};
  const std::string whole = write_image(*ma, dir + "/qa.img", nullptr);
  // Other layers: the master (whole image, even split 0:2, 2:4) meets a node holding 2:4 first.
  {
    const std::string n1 = write_image(*ma, dir + "/qa.node24.img", &r24), n2 = write_image(*ma, dir + "/qa.node02.img", &r02);
    std::vector<std::shared_ptr<HostSpiChannel>> wire = {std::make_shared<HostSpiChannel>(), std::make_shared<HostSpiChannel>(),
                                                         std::make_shared<HostSpiChannel>()};
    HostSpiEnd master_spi(wire[0], wire[2]), s1(wire[1], wire[0]), s2(wire[2], wire[1]);
    NodeBoard nodes[2];
    NodeThreads threads;
    ASSERT_OK(nodes[0].init(n1, &s1, nullptr));
    ASSERT_OK(nodes[1].init(n2, &s2, nullptr));
    threads.start(&nodes[0]);
    threads.start(&nodes[1]);
    MasterOptions mo;
    mo.nodes = 2;
    mo.timeout_ms = 1000;
    MasterBoard m;
    const Status st = m.init(whole, &master_spi, nullptr, mo);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(std::strstr(st.message(), "this node's image holds layers 2:4"), nullptr) << st.message();
  }
  // The same layers of another model: the slice hash differs.
  {
    ClusterPair pair;
    const SliceRange all{0, 4, false};
    ASSERT_OK(pair.start_node(write_image(*mb, dir + "/qb.node.img", &all)));
    MasterBoard m;
    MasterOptions mo;
    mo.timeout_ms = 1000;
    const Status st = m.init(whole, pair.master_spi.get(), &pair.bus, mo);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(std::strstr(st.message(), "other weights than the master's"), nullptr) << st.message();
  }
  // A master image without layers and without the nodes' hashes cannot check them: refused at init.
  {
    const SliceRange head{0, 0, true};
    ClusterPair pair;
    ASSERT_OK(pair.start_node(whole));
    MasterBoard m;
    const Status st = m.init(write_image(*ma, dir + "/qa.master.img", &head), pair.master_spi.get(), &pair.bus, MasterOptions());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(std::strstr(st.message(), "give the nodes' slice hashes"), nullptr) << st.message();
  }
}

// The firmware's master (the line server) from a master image that carries its nodes' plan and the
// tokenizer: the nodes' layers and slice hashes come from the image, and the answers (to G and to S
// text requests) are the single board's.
TEST(BoardCluster, LineServerRunsFromAMasterImageWithItsNodesPlan) {
  MC_REQUIRE_SHARED();
  const Files f = stories_image();
  const std::string req = g_line(12, 800, 40, 7, 0, story_prompt(f)) + s_line(12, 800, 40, 8, 0, "Once upon a time, a cat") +
                          s_line(10, 0, 0, 1, 0, "The dog\\n ran");
  SerialBoard single;
  ASSERT_OK(single.init(f.image));
  const std::vector<std::string> want = untimed(single.run(req));
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(f.model, &lm));
  const std::string dir = test::temp_dir();
  BoardImageOptions opt;
  opt.sliced = true;
  opt.slice = SliceRange{0, 0, true};
  opt.node_plan = {SliceRange{0, 3, false}, SliceRange{3, 5, false}};
  opt.bos_id = 1;
  opt.eos_id = 2;
  opt.tokenizer = story_tokenizer_image();
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
  ASSERT_OK(export_board_image(*lm, opt, &bytes, &rep));
  const std::string master_image = dir + "/stories.master-plan.img";
  std::ofstream(master_image, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  BoardImageOptions node_opt = opt;  // a node's image carries no tokenizer
  node_opt.slice = opt.node_plan[0];
  node_opt.node_plan.clear();
  const Status refused = export_board_image(*lm, node_opt, &bytes, &rep);
  EXPECT_NE(std::strstr(refused.message(), "a node's image carries no tokenizer"), nullptr) << refused.message();
  ASSERT_OK(export_board_image(*lm, opt, &bytes, &rep));
  Ring ring;
  ASSERT_OK(ring.start_nodes({write_image(*lm, dir + "/s03.img", &opt.node_plan[0]), write_image(*lm, dir + "/s35.img", &opt.node_plan[1])}));
  std::unique_ptr<HostPipeEnd> pc, port;
  make_host_pipe(&pc, &port);
  HostBoard hal(HostBoardConfig{{{"model", master_image}}}, port.get(), ring.master_spi.get(), nullptr);
  SerialPool pool;
  LineServerOptions o;
  o.kernels = kernels_by_name("auto");
  o.pool = &pool;
  o.cluster_master = true;
  o.work_tier = Tier::kPsram;
  LineServer server;
  ASSERT_OK(server.init(hal, o));  // o.master.nodes is 1: the image's plan says 2
  pc->write(reinterpret_cast<const uint8_t*>(req.data()), req.size());
  pc->close_writer();
  ASSERT_TRUE(server.serve().ok());
  EXPECT_EQ(untimed(pc->read_all_available()), want);
  EXPECT_EQ(std::count_if(want.begin(), want.end(), [](const std::string& l) { return l[0] == 'U'; }), 22);
  EXPECT_EQ(ring.nodes[0]->node.range().end, 3);
  EXPECT_EQ(ring.nodes[1]->node.range().first, 3);
  // A plan whose hash does not match the node's weights: refused at hello.
  std::vector<uint8_t> bad = bytes;
  BoardImage img;
  std::vector<uint64_t> aligned(bad.size() / 8 + 1);
  std::memcpy(aligned.data(), bad.data(), bad.size());
  ASSERT_OK(img.open(reinterpret_cast<const uint8_t*>(aligned.data()), bad.size()));
  const BoardImageTensor* t = img.find(board_tensor_id(BoardRole::kNodePlan));
  ASSERT_NE(t, nullptr);
  const size_t at = img.section(static_cast<Tier>(t->tier)).offset + t->offset + 2 * 4;  // node 1's lowest hash piece
  float piece;
  std::memcpy(&piece, bad.data() + at, 4);
  piece = piece == 0.0f ? 1.0f : 0.0f;
  std::memcpy(bad.data() + at, &piece, 4);
  const uint32_t crc = crc32_ieee(bad.data() + kBoardImageCrcStart, bad.size() - kBoardImageCrcStart);
  std::memcpy(bad.data() + offsetof(BoardImageHeader, crc32), &crc, 4);
  std::ofstream(dir + "/bad-plan.img", std::ios::binary).write(reinterpret_cast<const char*>(bad.data()), static_cast<long>(bad.size()));
  MasterOptions mo;
  mo.timeout_ms = 1000;
  Ring ring2;
  ASSERT_OK(ring2.start_nodes({dir + "/s03.img", dir + "/s35.img"}));
  HostBoard hal2(HostBoardConfig{{{"model", dir + "/bad-plan.img"}}}, nullptr, ring2.master_spi.get(), nullptr);
  MappedModel mm;
  ASSERT_OK(mm.init(hal2, "model"));
  EXPECT_EQ(mm.model().plan_nodes, 2);
  const LlamaModel* llama = nullptr;
  ASSERT_OK(mm.llama(&llama));
  FrameLink link;
  ASSERT_OK(link.init(hal2.spi(), mm.arena(Tier::kPsram)));
  mo.nodes = 2;
  mo.node_ranges = mm.model().plan_ranges;
  mo.node_hashes = mm.model().plan_hashes;
  Master master;
  ASSERT_OK(master.init(llama, link, mm.arena(Tier::kPsram), &pool, kernels_by_name("auto"), mo));
  const Status st = master.connect();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::strstr(st.message(), "node 1's layers 0:3 are other weights"), nullptr) << st.message();
}

}  // namespace
}  // namespace mcullm::board
