// A read-only memory map of a whole file (host only): how weights "stay where they are" on a PC.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "mcullm/status.h"

namespace mcullm {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile() { close(); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  // Maps `path` read-only (closing any earlier mapping first). An empty file is fine: size() 0,
  // data() nullptr. Errors are kIo naming the path and the OS reason.
  Status open(const std::string& path);
  void close();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool is_open() const { return open_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool open_ = false;
  std::string path_;
};

}  // namespace mcullm
