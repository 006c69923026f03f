#include "core/serial_port_host.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

namespace mcullm {

namespace {

speed_t baud_constant(int baud) {
  switch (baud) {
    case 9600: return B9600;
    case 19200: return B19200;
    case 38400: return B38400;
    case 57600: return B57600;
    case 115200: return B115200;
    case 230400: return B230400;
    case 460800: return B460800;
    case 921600: return B921600;
    default: return 0;
  }
}

}  // namespace

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 1000) < 0 && errno != EINTR) return false;
    } else {
      return false;
    }
  }
  return true;
}

Status open_serial(const std::string& path, int baud, int* fd) {
  const speed_t speed = baud_constant(baud);
  if (!speed) return Status::Error(Code::kInvalidArgument, "--baud %d is not one of 9600 19200 38400 57600 115200 230400 460800 921600", baud);
  const int f = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (f < 0) return Status::Error(Code::kIo, "cannot open serial device %s: %s", path.c_str(), strerror(errno));
  if (::isatty(f)) {
    termios t{};
    if (::tcgetattr(f, &t) != 0) {
      ::close(f);
      return Status::Error(Code::kIo, "%s: cannot read its terminal settings: %s", path.c_str(), strerror(errno));
    }
    ::cfmakeraw(&t);
    t.c_cflag |= CLOCAL | CREAD;
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    ::cfsetispeed(&t, speed);
    ::cfsetospeed(&t, speed);
    if (::tcsetattr(f, TCSANOW, &t) != 0) {
      ::close(f);
      return Status::Error(Code::kIo, "%s: cannot set raw mode: %s", path.c_str(), strerror(errno));
    }
  }
  *fd = f;
  return Status::Ok();
}

}  // namespace mcullm
