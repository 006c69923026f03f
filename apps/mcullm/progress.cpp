#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mcullm::cli {

Progress::Progress(std::string what, long long total, std::string unit, bool quiet)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), on_(!quiet && total > 0 && isatty(2) == 1) {
  start_ = last_ = Clock::now();
}

void Progress::update(long long done) {
  done_ = done;
  if (!on_) return;
  const Clock::time_point now = Clock::now();
  if (done < total_ && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  const double rate = s > 0 ? done / s : 0;
  constexpr int kWidth = 24;
  const long long filled = total_ > 0 ? kWidth * (done < total_ ? done : total_) / total_ : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  char left[32] = "?";
  if (rate > 0) {
    const long long secs = static_cast<long long>((total_ - done) / rate + 0.5);
    std::snprintf(left, sizeof left, "%lld:%02lld", secs / 60, secs % 60);
  }
  std::fprintf(stderr, "\r%s [%s] %3lld%% %lld/%lld %s, %.1f %s/s, %s left\033[K", what_.c_str(), bar.c_str(),
               total_ > 0 ? 100 * done / total_ : 0, done, total_, unit_.c_str(), rate, unit_.c_str(), left);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (!on_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace mcullm::cli
