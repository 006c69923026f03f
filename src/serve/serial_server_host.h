// `mcullm serve --serial PATH`: the PC engine speaks the board's line protocol (docs/protocol.md) on a
// serial device or a pseudo-terminal, so that anything written for a board can talk to the PC.
#pragma once
#include <atomic>
#include <string>

#include "core/serial_port_host.h"
#include "serve/engine_host.h"

namespace mcullm::serve {

// Answers G lines read from in_fd on out_fd, one generation at a time, until the other end hangs up
// (returns Ok) or `stop` becomes true (checked at least every 100 ms and at every token).
Status serve_lines(Engine& engine, int in_fd, int out_fd, const std::atomic<bool>& stop);

}  // namespace mcullm::serve
