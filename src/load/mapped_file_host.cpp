#include "load/mapped_file_host.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace mcullm {

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      open_(std::exchange(other.open_, false)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    close();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    open_ = std::exchange(other.open_, false);
    path_ = std::move(other.path_);
  }
  return *this;
}

void MappedFile::close() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
  open_ = false;
  path_.clear();
}

Status MappedFile::open(const std::string& path) {
  close();
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::Error(Code::kIo, "cannot open %s: %s", path.c_str(), std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Error(Code::kIo, "cannot stat %s: %s", path.c_str(), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(Code::kIo, "cannot map %s: %s", path.c_str(),
                         S_ISDIR(st.st_mode) ? std::strerror(EISDIR) : "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > SIZE_MAX) {
    ::close(fd);
    return Status::Error(Code::kIo, "cannot map %s: %s", path.c_str(), std::strerror(EFBIG));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = nullptr;
  if (size > 0) {  // mmap of length 0 fails with EINVAL; an empty file maps to nothing
    p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::Error(Code::kIo, "cannot map %s (%zu bytes): %s", path.c_str(), size, std::strerror(err));
    }
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  data_ = static_cast<const uint8_t*>(p);
  size_ = size;
  open_ = true;
  path_ = path;
  return Status::Ok();
}

}  // namespace mcullm
