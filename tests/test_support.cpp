#include "test_support.h"

#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mcullm::test {

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

CommandResult run_cli(const std::vector<std::string>& args, const std::string& input) {
  int out_pipe[2], err_pipe[2], in_pipe[2];
  CommandResult r;
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0 || pipe(in_pipe) != 0) return r;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    close(in_pipe[1]);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    std::vector<char*> argv;
    std::string bin = cli_path();
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  if (!input.empty() && write(in_pipe[1], input.data(), input.size()) != static_cast<ssize_t>(input.size())) r.err = "stdin write failed";
  close(in_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Drain both pipes together so that neither can fill up and block the child.
  std::string out, err;
  {
    fd_set fds;
    bool out_open = true, err_open = true;
    char buf[65536];
    while (out_open || err_open) {
      FD_ZERO(&fds);
      if (out_open) FD_SET(out_pipe[0], &fds);
      if (err_open) FD_SET(err_pipe[0], &fds);
      const int maxfd = std::max(out_pipe[0], err_pipe[0]) + 1;
      if (select(maxfd, &fds, nullptr, nullptr, nullptr) < 0) break;
      if (out_open && FD_ISSET(out_pipe[0], &fds)) {
        const ssize_t n = read(out_pipe[0], buf, sizeof buf);
        if (n <= 0) out_open = false; else out.append(buf, static_cast<size_t>(n));
      }
      if (err_open && FD_ISSET(err_pipe[0], &fds)) {
        const ssize_t n = read(err_pipe[0], buf, sizeof buf);
        if (n <= 0) err_open = false; else err.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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

}  // namespace mcullm::test
