// Checked file writes for the host tools: every byte written or a clear error.
#pragma once
#include <cstddef>
#include <string>

#include "mcullm/status.h"

namespace mcullm {

// Writes `n` bytes to `path` through `path`.tmp, synced and renamed over `path` (a reader never sees
// half a file); a full disk, a closed descriptor or a failed rename is an Io error naming the path.
Status write_file_atomic(const std::string& path, const void* data, size_t n);

}  // namespace mcullm
