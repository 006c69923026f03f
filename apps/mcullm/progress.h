// A one-line progress bar on stderr for long jobs (eval, tune, bench, cluster start-up, convert):
// "eval [#####.....] 52% 13/25 chunks, 3.1 chunks/s, 0:04 left". Only when stderr is a terminal and
// the command is not quiet: logs and tests see no change.
#pragma once
#include <chrono>
#include <string>

namespace mcullm::cli {

class Progress {
 public:
  // `total` steps of `unit` (e.g. "chunks"); quiet or a stderr that is not a terminal: no output.
  Progress(std::string what, long long total, std::string unit, bool quiet = false);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // `done` of total steps so far (redrawn at most 10 times a second, and at the end).
  void update(long long done);
  void step() { update(done_ + 1); }
  // Clears the line (the command's own output follows on a clean line).
  void finish();
  bool shown() const { return on_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_, unit_;
  long long total_ = 0, done_ = 0;
  bool on_ = false, drawn_ = false;
  Clock::time_point start_, last_;
};

}  // namespace mcullm::cli
