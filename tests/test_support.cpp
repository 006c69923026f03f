#include "test_support.h"

#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "model/decoder.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm::test {

void expect_prefill_matches_forward(Decoder& single, Decoder& batched, const std::vector<int>& tokens) {
  const int n = static_cast<int>(tokens.size());
  const size_t vocab = static_cast<size_t>(single.vocab_size());
  ASSERT_GT(batched.max_batch(), 3);
  ASSERT_GE(n, batched.max_batch() + 6);
  std::vector<float> want;
  for (int pos = 0; pos < n; ++pos) {
    const float* l = nullptr;
    ASSERT_TRUE(single.forward(tokens[pos], pos, &l).ok());
    want.insert(want.end(), l, l + vocab);
  }
  const float* rows = nullptr;
  const int big = batched.max_batch();
  EXPECT_FALSE(batched.prefill(tokens.data(), 0, 0, &rows).ok());
  EXPECT_FALSE(batched.prefill(tokens.data(), big + 1, 0, &rows).ok());
  const std::vector<int> bad = {0, single.vocab_size()};
  EXPECT_FALSE(batched.prefill(bad.data(), 2, 0, &rows).ok());
  const int chunks[] = {1, 3, big, 2};
  int pos = 0;
  for (int c = 0; pos < n - 1; ++c) {
    const int m = std::min(c < 4 ? chunks[c] : big, n - 1 - pos);
    if (c == 3) {  // no logits: the cache must still be the same
      ASSERT_TRUE(batched.prefill(tokens.data() + pos, m, pos, nullptr).ok());
    } else {
      ASSERT_TRUE(batched.prefill(tokens.data() + pos, m, pos, &rows).ok());
      for (int i = 0; i < m; ++i)
        EXPECT_EQ(std::memcmp(rows + i * vocab, want.data() + (pos + i) * vocab, vocab * 4), 0)
            << "position " << pos + i << " (chunk of " << m << ")";
    }
    pos += m;
  }
  const float* l = nullptr;
  ASSERT_TRUE(batched.forward(tokens[pos], pos, &l).ok());
  EXPECT_EQ(std::memcmp(l, want.data() + pos * vocab, vocab * 4), 0) << "forward after the batches";
}


namespace {
bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string shared_dir() {
  if (const char* env = std::getenv("MCULLM_SHARED"); env && is_dir(env)) return env;
  const std::string beside = std::string(MCULLM_SOURCE_DIR) + "/../shared";
  return is_dir(beside) ? beside : std::string();
}

std::string shared_path(const std::string& relative) {
  const std::string dir = shared_dir();
  if (dir.empty()) {
    ADD_FAILURE() << "../shared is missing; cannot find " << relative;
    return "/nonexistent/../shared/" + relative;
  }
  return dir + "/" + relative;
}

std::string cli_path() { return MCULLM_CLI_PATH; }

std::string temp_dir() {
  static std::atomic<int> counter{0};
  const char* base = std::getenv("TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/mcullm-test-" + std::to_string(getpid()) + "-" +
                    std::to_string(counter++);
  mkdir(dir.c_str(), 0755);
  return dir;
}

CommandResult run_cli(const std::vector<std::string>& args) { return run_cli(args, std::string()); }

pid_t spawn_cli(const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd) {
  const std::string bin = cli_path();
  std::vector<std::string> copy = args;
  std::vector<char*> argv{const_cast<char*>("mcullm")};
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if ((in_fd >= 0 && dup2(in_fd, 0) < 0) || (out_fd >= 0 && dup2(out_fd, 1) < 0) || (err_fd >= 0 && dup2(err_fd, 2) < 0)) _exit(126);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

pid_t spawn_cli_logging(const std::vector<std::string>& args, const std::string& log) {
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  const pid_t pid = spawn_cli(args, -1, -1, fd);
  close(fd);
  return pid;
}

CommandResult run_cli(const std::vector<std::string>& args, const std::string& input) {
  int out_pipe[2], err_pipe[2], in_pipe[2];
  CommandResult r;
  // Close-on-exec: a CLI that another thread spawns at the same time must not hold our pipes open.
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 || pipe2(in_pipe, O_CLOEXEC) != 0) return r;
  const pid_t pid = spawn_cli(args, in_pipe[0], out_pipe[1], err_pipe[1]);
  close(in_pipe[0]);
  if (pid < 0) {
    for (int fd : {in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    r.err = "fork failed";
    return r;
  }
  // A CLI that refuses its arguments may exit before it reads stdin; writing to its closed pipe must
  // then be EPIPE for us, not a SIGPIPE that kills the whole test binary (seen under load). What the
  // CLI did is in its exit code and output either way.
  static const bool sigpipe_ignored = [] { return signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)sigpipe_ignored;
  for (size_t done = 0; done < input.size();) {
    const ssize_t w = write(in_pipe[1], input.data() + done, input.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;  // EPIPE: the CLI closed its stdin
    done += static_cast<size_t>(w);
  }
  close(in_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Drain both pipes together so that neither can fill up and block the child; past the limit the
  // child is killed (its pipes then close).
  std::string out, err;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kCliLimitSeconds);
  bool killed = false;
  {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&out, &err};
    char buf[65536];
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 && !killed) {
        kill(pid, SIGKILL);
        killed = true;
      }
      const int n = poll(fds, 2, killed ? 1000 : static_cast<int>(std::min<int64_t>(left.count(), 60000)));
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (n == 0) {
        if (killed) break;  // killed, yet a grandchild holds the pipes open: stop reading
        continue;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        const ssize_t got = read(fds[i].fd, buf, sizeof buf);
        if (got <= 0) fds[i].fd = -1; else sinks[i]->append(buf, static_cast<size_t>(got));
      }
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (killed) {
    std::string cmd = "mcullm";
    for (const auto& a : args) cmd += " " + a;
    ADD_FAILURE() << cmd << ": still running after " << kCliLimitSeconds << " s, killed (a hang?)";
    r.exit_code = -1;
  }
  r.out = std::move(out);
  r.err = std::move(err);
  return r;
}

std::string json_raw(const std::string& json, const std::string& key) {
  const std::string tag = "\"" + key + "\": ";
  const size_t at = json.find(tag);
  if (at == std::string::npos) return "";
  const size_t end = json.find_first_of(",}", at);
  return json.substr(at + tag.size(), end - at - tag.size());
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Llama2cTokenizer small_vocab(int n) {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
  }
  while (static_cast<int>(pieces.size()) < n) pieces.push_back(" w" + std::to_string(pieces.size()));
  Llama2cTokenizer tok;
  EXPECT_TRUE(tok.load_vocab(pieces, std::vector<float>(pieces.size(), 0.0f)).ok());
  return tok;
}

}  // namespace mcullm::test
