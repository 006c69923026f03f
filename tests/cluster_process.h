// Processes for the cluster tests: `mcullm` started in the background with spawn_cli (nothing runs
// in the child but dup2 and the exec), its stdout and stderr in files, waited for with a deadline
// and killed when the test ends.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace mcullm::test {

class CliProcess {
 public:
  CliProcess() = default;
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;
  ~CliProcess() { kill_now(); }

  // Starts `mcullm args...` (argv prepared before spawning); output in dir/tag.out and dir/tag.err.
  bool start(const std::vector<std::string>& args, const std::string& dir, const std::string& tag) {
    out_path_ = dir + "/" + tag + ".out";
    err_path_ = dir + "/" + tag + ".err";
    const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out >= 0 && err >= 0) pid_ = spawn_cli(args, -1, out, err);
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    return pid_ > 0;
  }
  // The exit status (WEXITSTATUS; 128 + signal when killed), or -1 after timeout_ms (then killed).
  int wait(int timeout_ms) {
    if (pid_ < 0) return exit_code_;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        kill_now();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }
  void kill_now() {
    if (pid_ < 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // The port a `mcullm node --listen HOST:0` printed ("listening PORT"), 0 after timeout_ms.
  int port(int timeout_ms) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < until) {
      unsigned p = 0;
      if (std::sscanf(read_text(out_path_).c_str(), "listening %u", &p) == 1) return static_cast<int>(p);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  }
  pid_t pid() const { return pid_; }
  std::string out() const { return read_text(out_path_); }
  std::string err() const { return read_text(err_path_); }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string out_path_, err_path_;
};

}  // namespace mcullm::test
