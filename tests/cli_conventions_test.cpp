// One CLI convention for every command (docs/cli.md): defaults in --help, --version, the seed
// (-1 = random, printed so that a run can be repeated), threads, the documented exit codes, every
// write checked (a full disk is an error, never a silent exit 0), progress only on a terminal; and
// the behaviour of flags no other test exercised.
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "test_support.h"

namespace mcullm {
namespace {

using test::run_cli;

constexpr int kUsage = 2, kIo = 4;  // docs/cli.md

std::string stories(const std::string& f) { return test::shared_path("models/stories260K/" + f); }

// A command whose stdout (or stderr) is the given descriptor; its stderr goes to a file, returned
// with the exit code.
test::CommandResult run_with_fds(const std::vector<std::string>& args, int out_fd, int err_fd = -1) {
  const std::string log = test::temp_dir() + "/stderr.txt";
  const int log_fd = err_fd >= 0 ? -1 : open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = test::spawn_cli(args, -1, out_fd, err_fd >= 0 ? err_fd : log_fd);
  if (log_fd >= 0) close(log_fd);
  test::CommandResult r;
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (err_fd < 0) r.err = test::read_text(log);
  return r;
}

// The seed a run printed ("seed N"), or -1.
long long printed_seed(const std::string& err) {
  std::smatch m;
  return std::regex_search(err, m, std::regex("seed (\\d+)")) ? std::stoll(m[1]) : -1;
}

// Physical cores as /proc/cpuinfo lists them (distinct physical id / core id pairs), else the
// logical count: an independent reading of what the CLI takes from /sys.
int cpuinfo_physical_cores() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, package = "0";
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = line.substr(std::min(line.size(), colon + 2));
    if (key == "physical id") package = value;
    if (key == "core id") cores.insert({package, value});
  }
  return cores.empty() ? static_cast<int>(std::thread::hardware_concurrency()) : static_cast<int>(cores.size());
}

TEST(CliConventions, EveryCommandsHelpShowsItsDefaults) {
  // One option per command whose default is known: CLI11 prints it after the type ("INT=256").
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run"}, "=256"},       {{"cluster"}, "=256"}, {{"eval"}, "=1000"},  {{"bench"}, "=128"},
      {{"tune"}, "=40"},       {{"plan"}, "=esp32s3-psram80"},               {{"dummy"}, "=1234"},
      {{"convert"}, "=65536"}, {{"node"}, "=16"},     {{"head"}, "=256"},   {{"serve"}, "=115200"},
  };
  for (const auto& [cmd, shown] : cases) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << cmd[0] << ": " << r.err;
    EXPECT_TRUE(std::regex_search(r.out, std::regex(shown + "\\s"))) << cmd[0] << " --help does not show " << shown << ":\n" << r.out;
  }
  // The seed and the thread count show their conventions (the value wraps to the next line).
  const auto run = run_cli({"run", "--help"});
  EXPECT_NE(run.out.find("=-1\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("in [1 - 256]=" + std::to_string(cpuinfo_physical_cores()) + "\n"), std::string::npos) << run.out;
}

TEST(CliConventions, VersionIsPrinted) {
  const auto r = run_cli({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("^mcullm \\d+\\.\\d+\\.\\d+"))) << r.out;
}

TEST(CliConventions, UsageErrorsExitWithTwo) {
  const std::string model = test::temp_dir() + "/m.gguf";
  ASSERT_EQ(run_cli({"dummy", "-o", model, "--layers", "2"}).exit_code, 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "subcommand"},
      {{"run", "-m", model, "--bogus"}, "--bogus"},
      {{"run", "-m", model, "-n", "abc"}, "-n"},
      {{"run"}, "--model"},
      {{"run", "-m", model, "--prompt-ids", ""}, "--prompt-ids is empty"},
      {{"cluster", "-m", model, "--simulate", "--prompt-ids", ""}, "--prompt-ids is empty"},
      {{"cluster", "-m", model, "-s", "-2"}, "--seed"},
      {{"eval", "-m", model, "-f", model, "-t", "0"}, "--threads"},
      {{"bench", "-m", model, "-t", "0"}, "-t"},
      {{"plan", "-m", model, "--fit"}, "--calibration"},
      {{"plan", "-m", model, "-c", "0"}, "--ctx"},
      {{"dummy", "-o", model + "2", "--arch", "qwen2", "--dim", "100"}, "--layout"},
      {{"serve", "-m", model, "--queue", "-1"}, "--queue"},
      {{"serve", "-m", model, "--queue", "many"}, "--queue"},
      {{"serve", "-m", model, "--api-key"}, "--api-key"},
      {{"serve", "-m", model, "--alias"}, "--alias"},
      {{"tokenize", "-m", model, "-p", "x", "--eos", "yes"}, ""},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_cli(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, kUsage) << joined << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << joined << "\n" << r.err;
  }
  EXPECT_EQ(access((model + "2").c_str(), F_OK), -1) << "a refused dummy wrote its file";
}

// A full disk: the dumps and stdout fail with a message and exit 4, never a silent 0.
TEST(CliConventions, WritesToAFullDiskFail) {
  MC_REQUIRE_SHARED();
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full on this machine";
  for (const char* flag : {"--dump-logits", "--dump-tokens"}) {
    const auto r = run_cli({"run", "-m", stories("stories260K.bin"), "--temp", "0", "-n", "64", "-q", flag, "/dev/full"});
    EXPECT_EQ(r.exit_code, kIo) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(flag) + ": writing /dev/full failed: No space left on device"), std::string::npos) << r.err;
  }
  const int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(full, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "-m", stories("stories260K.bin"), "--temp", "0", "-n", "64"},
        std::vector<std::string>{"tokenize", "-m", stories("tok512.bin"), "-p", "Once upon a time"},
        std::vector<std::string>{"plan", "--calibration"}}) {
    const auto r = run_with_fds(args, full);
    EXPECT_EQ(r.exit_code, kIo) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("writing the standard output failed"), std::string::npos) << args[0] << ": " << r.err;
  }
  close(full);
  // An output file that cannot be created.
  const auto r = run_cli({"dummy", "-o", "/nonexistent-dir/m.gguf"});
  EXPECT_EQ(r.exit_code, kIo) << r.err;
  EXPECT_NE(r.err.find("/nonexistent-dir/m.gguf"), std::string::npos) << r.err;
}

// -s -1 (the default) draws a seed and prints it; that seed repeats the run. run and cluster alike.
TEST(CliConventions, RandomSeedIsPrintedAndRepeats) {
  MC_REQUIRE_SHARED();
  const std::vector<std::string> base = {"-m", stories("stories260K.bin"), "-p", "Once upon a time", "-n", "24", "--temp", "1"};
  for (const std::string cmd : {"run", "cluster"}) {
    std::vector<std::string> args = {cmd};
    args.insert(args.end(), base.begin(), base.end());
    if (cmd == "cluster") args.push_back("--simulate");
    std::vector<std::string> minus_one = args;
    minus_one.insert(minus_one.end(), {"-s", "-1"});
    const auto a = run_cli(minus_one);
    ASSERT_EQ(a.exit_code, 0) << cmd << ": " << a.err;
    const long long seed = printed_seed(a.err);
    ASSERT_GT(seed, 0) << cmd << ": " << a.err;
    std::vector<std::string> again = args;
    again.insert(again.end(), {"-s", std::to_string(seed)});
    const auto b = run_cli(again);
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out) << cmd;
    EXPECT_EQ(printed_seed(b.err), seed);
    const auto plain = run_cli(args);  // no -s: a seed is drawn and printed too
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_GT(printed_seed(plain.err), 0) << plain.err;
  }
}

TEST(CliConventions, ThreadsDefaultToThePhysicalCoresAndTooManyWarn) {
  MC_REQUIRE_SHARED();
  const auto r = run_cli({"run", "-m", stories("stories260K.bin"), "--prompt-ids", "1", "-n", "2", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int cores = cpuinfo_physical_cores();
  EXPECT_NE(r.err.find(std::to_string(cores) + (cores == 1 ? " thread," : " threads,")), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  const int too_many = static_cast<int>(std::thread::hardware_concurrency()) + 1;
  const auto w = run_cli({"run", "-m", stories("stories260K.bin"), "--prompt-ids", "1", "-n", "2", "-q", "-t", std::to_string(too_many)});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.err.find("warning: -t " + std::to_string(too_many) + " is more threads than the"), std::string::npos) << w.err;
}

// On a terminal, eval draws a progress bar (rate, time left) on stderr; in a pipe (every other
// test) stderr carries none of it.
TEST(CliConventions, ProgressBarOnlyOnATerminal) {
  MC_REQUIRE_SHARED();
  const std::string text = test::temp_dir() + "/text.txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 6; ++i) f << "Once upon a time there was a little dog named Max. He liked to run in the park.\n\n";
  }
  const std::vector<std::string> args = {"eval", "-m", stories("stories260K.bin"), "-f", text, "--max-chunk-bytes", "100"};
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  fcntl(master, F_SETFD, FD_CLOEXEC);
  fcntl(slave, F_SETFD, FD_CLOEXEC);
  const pid_t pid = test::spawn_cli(args, -1, -1, slave);
  ASSERT_GT(pid, 0);
  close(slave);
  std::string tty;
  char buf[4096];
  for (ssize_t n; (n = read(master, buf, sizeof buf)) > 0;) tty.append(buf, static_cast<size_t>(n));  // EIO once the child is gone
  close(master);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << tty;
  EXPECT_NE(tty.find("\reval ["), std::string::npos) << tty;
  EXPECT_NE(tty.find("6/6 chunks"), std::string::npos) << tty;
  EXPECT_NE(tty.find("chunks/s"), std::string::npos) << tty;
  EXPECT_NE(tty.find(" left"), std::string::npos) << tty;
  const auto piped = run_cli(args);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find('\r'), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find("chunks/s"), std::string::npos) << piped.err;
}

// ---- output bugs ----

// cluster prints what run prints: the story without the BOS piece, the same text for the same seed.
TEST(CliOutput, ClusterPrintsTheStoryAsRunDoes) {
  MC_REQUIRE_SHARED();
  const std::vector<std::string> gen = {"-m", stories("stories260K.bin"), "-p", "Once upon a time", "-n", "40", "--temp", "1", "-s", "9"};
  std::vector<std::string> run = {"run"}, cluster = {"cluster", "--simulate"};
  run.insert(run.end(), gen.begin(), gen.end());
  cluster.insert(cluster.end(), gen.begin(), gen.end());
  const auto a = run_cli(run), b = run_cli(cluster);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(b.out.find("<s>"), std::string::npos) << b.out;
  EXPECT_EQ(b.out, a.out);
  EXPECT_EQ(a.out.rfind("Once upon a time", 0), 0u) << a.out;
}

// bitllama2.c models keep scratch in both arenas: the arena line names each class once.
TEST(CliOutput, ArenaLineNamesEachClassOnce) {
  MC_REQUIRE_SHARED();
  const auto r = run_cli({"run", "-m", test::shared_path("models/bitnet-tinystories/bit1M_msb.bin"), "-z", stories("tok512.bin"),
                          "--prompt-ids", "1", "-n", "2", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.err.find("arena peak");
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
  std::set<std::string> seen;
  std::smatch m;
  for (std::string rest = line.substr(line.find('(') + 1); std::regex_search(rest, m, std::regex("([a-z_]+) [0-9.]+ MiB"));
       rest = m.suffix())
    EXPECT_TRUE(seen.insert(m[1]).second) << m[1] << " twice: " << line;
  EXPECT_TRUE(seen.count("scratch")) << line;
}

// convert names notes only when it printed some.
TEST(CliOutput, ConvertMentionsNotesOnlyWhenThereAreSome) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  for (const char* type : {"i2_s", "tl1", "tl2"}) {
    const auto r = run_cli({"convert", test::shared_path("models/bitnet-tinystories/bit1M_msb.bin"), "-z", stories("tok512.bin"),
                            "--type", type, "-o", dir + "/" + type + ".gguf"});
    ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
    EXPECT_EQ(r.err.find("see the notes"), std::string::npos) << r.err;
    if (r.err.find("notes above") != std::string::npos) {
      EXPECT_NE(r.err.find("mcullm: note: "), std::string::npos) << r.err;
    }
  }
}

// ---- flags no other test exercised ----

std::string fingerprint_of(std::vector<std::string> extra) {
  std::vector<std::string> args = {"run", "-m", stories("stories260K.bin"), "-p", "Once upon a time", "-n", "40", "--fingerprint", "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(CliFlags, TopKOneAndMinPOneAreGreedy) {
  MC_REQUIRE_SHARED();
  const std::string greedy = fingerprint_of({"--temp", "0"});
  ASSERT_NE(greedy.find("fingerprint"), std::string::npos);
  EXPECT_EQ(fingerprint_of({"--temp", "1.5", "--top-k", "1", "-s", "3"}), greedy);
  EXPECT_EQ(fingerprint_of({"--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "1", "-s", "3"}), greedy);
  EXPECT_NE(fingerprint_of({"--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "0", "-s", "3"}), greedy);
}

// The generated ids of a greedy run (the TOK lines' sampled token).
std::vector<int> greedy_tokens(const std::vector<std::string>& extra) {
  const std::string dump = test::temp_dir() + "/t.txt";
  std::vector<std::string> args = {"run", "-m", stories("stories260K.bin"), "--temp", "0", "-n", "200", "-q", "--dump-tokens", dump};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(test::read_text(dump));
  std::vector<int> out;
  for (std::string line; std::getline(in, line);) {
    int pos, token, next;
    if (std::sscanf(line.c_str(), "TOK %d %d %d", &pos, &token, &next) == 3) out.push_back(next);
  }
  return out;
}

// Tokens that already appeared among the 64 before them.
int repeats(const std::vector<int>& t) {
  int n = 0;
  for (size_t i = 0; i < t.size(); ++i)
    for (size_t j = i >= 64 ? i - 64 : 0; j < i; ++j)
      if (t[j] == t[i]) {
        ++n;
        break;
      }
  return n;
}

TEST(CliFlags, RepeatPenaltyRepeatsLess) {
  MC_REQUIRE_SHARED();
  const std::vector<int> plain = greedy_tokens({}), penalised = greedy_tokens({"--repeat-penalty", "1.5"});
  ASSERT_GT(plain.size(), 100u);
  ASSERT_GT(penalised.size(), 100u);
  EXPECT_NE(plain, penalised);
  // Per token generated (a story may end at a different length).
  EXPECT_LT(static_cast<double>(repeats(penalised)) / penalised.size(), static_cast<double>(repeats(plain)) / plain.size());
  EXPECT_EQ(greedy_tokens({"--repeat-penalty", "1"}), plain);
}

// -sys puts the system prompt before the first user message: more tokens fed on turn 1.
TEST(CliFlags, SystemPromptIsFedFirst) {
  MC_REQUIRE_SHARED();
  auto fed = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", "-m", stories("stories260K.bin"), "-cnv", "--chat-template", "llama2", "--temp", "0", "-n", "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args, "Hello there\n");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    return std::regex_search(r.err, m, std::regex("turn 1: fed (\\d+) tokens")) ? std::stoi(m[1]) : -1;
  };
  const int plain = fed({}), with_sys = fed({"--sys", "You tell short stories about dogs."});
  ASSERT_GT(plain, 0);
  EXPECT_GT(with_sys, plain + 5);  // the system text is several tokens
}

std::vector<int> ids_of(const std::string& out) {
  std::istringstream in(out);
  std::vector<int> ids;
  for (int v; in >> v;) ids.push_back(v);
  return ids;
}

// llama2.c's vocabulary: BOS is 1, EOS is 2 (run.c).
TEST(CliFlags, TokenizeEosAppendsTheEosId) {
  MC_REQUIRE_SHARED();
  const auto plain = run_cli({"tokenize", "-m", stories("tok512.bin"), "-p", "Once upon a time", "--ids"});
  const auto eos = run_cli({"tokenize", "-m", stories("tok512.bin"), "-p", "Once upon a time", "--ids", "--eos"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(eos.exit_code, 0) << eos.err;
  std::vector<int> want = ids_of(plain.out);
  ASSERT_FALSE(want.empty());
  want.push_back(2);
  EXPECT_EQ(ids_of(eos.out), want);
}

TEST(CliFlags, DetokenizeSkipSpecialDropsTheBosPiece) {
  MC_REQUIRE_SHARED();
  const auto ids = run_cli({"tokenize", "-m", stories("tok512.bin"), "-p", "Once upon a time", "--ids", "--bos"});
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  ASSERT_EQ(ids_of(ids.out).front(), 1) << ids.out;
  const auto all = run_cli({"detokenize", "-m", stories("tok512.bin"), "-p", ids.out});
  const auto skip = run_cli({"detokenize", "-m", stories("tok512.bin"), "-p", ids.out, "--skip-special"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_EQ(skip.out.find("Once upon a time"), skip.out.find_first_not_of(' ')) << skip.out;
  EXPECT_NE(all.out.find("<s>"), std::string::npos) << all.out;
  EXPECT_EQ(skip.out.find("<s>"), std::string::npos) << skip.out;
  ASSERT_GT(all.out.size(), skip.out.size());
  EXPECT_EQ(all.out.substr(all.out.size() - skip.out.size()), skip.out);
}

// --psram-budget caps the weight bytes the board image places in PSRAM; the rest goes to flash.
TEST(CliFlags, ConvertPsramBudgetCapsThePsramSection) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  auto tiers = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"convert", stories("stories260K.bin"), "--image", dir + "/m.img"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    std::array<long long, 3> t{-1, -1, -1};
    if (std::regex_search(r.err, m, std::regex("weights sram (\\d+), psram (\\d+), flash (\\d+) bytes")))
      t = {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3])};
    return t;
  };
  const auto def = tiers({}), none = tiers({"--psram-budget", "0"}), some = tiers({"--psram-budget", "200000"});
  ASSERT_GE(def[1], 0);
  EXPECT_GT(def[1], 200000);  // the model is about 1 MB: the default 2 MiB budget takes more than the cap below
  EXPECT_EQ(none[1], 0);
  EXPECT_GT(some[1], 0);
  EXPECT_LE(some[1], 200000);
  for (const auto& t : {none, some}) EXPECT_EQ(t[0] + t[1] + t[2], def[0] + def[1] + def[2]);  // every byte placed somewhere
}

TEST(CliFlags, PlanFitRefitsTheCalibration) {
  const auto presets = run_cli({"plan", "--calibration"});
  const auto fitted = run_cli({"plan", "--calibration", "--fit"});
  ASSERT_EQ(presets.exit_code, 0) << presets.err;
  ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
  EXPECT_EQ(presets.out.rfind("the presets' figures", 0), 0u) << presets.out;
  EXPECT_EQ(fitted.out.rfind("fitted", 0), 0u) << fitted.out;
}

// --alias names the model in the server's start-up line (the API's model id: serve_test).
TEST(CliFlags, ServeAliasIsTheModelId) {
  MC_REQUIRE_SHARED();
  const std::string log = test::temp_dir() + "/serve.txt";
  const pid_t pid = test::spawn_cli_logging({"serve", "-m", stories("stories260K.bin"), "--port", "0", "--alias", "tiny-stories",
                                             "--api-key", "k"},
                                            log);
  ASSERT_GT(pid, 0);
  std::string text;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a hang guard only
  while (text.find("on http://") == std::string::npos && std::chrono::steady_clock::now() < until) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    text = test::read_text(log);
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_NE(text.find("serving tiny-stories on http://"), std::string::npos) << text;
}

}  // namespace
}  // namespace mcullm
