#include "core/file_io_host.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mcullm {

namespace {

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::Error(Code::kIo, "writing %s: %s", path.c_str(), w < 0 ? std::strerror(errno) : "no progress");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

}  // namespace

Status write_file_atomic(const std::string& path, const void* data, size_t n) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(Code::kIo, "cannot create %s: %s", tmp.c_str(), std::strerror(errno));
  Status s = write_all(fd, static_cast<const uint8_t*>(data), n, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Status::Error(Code::kIo, "syncing %s: %s", tmp.c_str(), std::strerror(errno));
  if (::close(fd) != 0 && s.ok()) s = Status::Error(Code::kIo, "closing %s: %s", tmp.c_str(), std::strerror(errno));
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = Status::Error(Code::kIo, "renaming %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(errno));
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace mcullm
