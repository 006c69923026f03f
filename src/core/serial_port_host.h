// A serial device or pseudo-terminal in raw mode: the host I/O that `serve --serial`, the board
// bridge (serve/board_link_host.h) and the cluster's serial transport (cluster/transport_host.h) share.
#pragma once
#include <string>

#include "mcullm/status.h"

namespace mcullm {

// Opens a serial device or a pty in raw mode (8N1, no echo, no line editing) at `baud`.
Status open_serial(const std::string& path, int baud, int* fd);

// Writes all of s (waiting while the device is full); false when the other end is gone.
bool write_all(int fd, const std::string& s);

}  // namespace mcullm
