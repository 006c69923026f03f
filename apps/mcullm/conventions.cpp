// The conventions every command shares: seed, threads, version, checked output (cli.h).
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "cli.h"
#include "kernels/kernels.h"

#ifndef MCULLM_VERSION
#define MCULLM_VERSION "unknown"
#endif

namespace mcullm::cli {

void add_seed_option(CLI::App* cmd, int64_t* seed, const std::string& what) {
  cmd->add_option("-s,--seed", *seed, what + " (-1: a random one, printed so that the run can be repeated)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 62));
}

int64_t resolve_seed(int64_t seed) {
  if (seed >= 0) return seed;
  // getentropy, not std::random_device: libstdc++'s probes the CPU (CPUID, ~14 us a leaf in a VM)
  // before its first number; this is one getrandom system call.
  uint32_t r = 0;
  if (getentropy(&r, sizeof r) != 0) r = static_cast<uint32_t>(time(nullptr)) ^ static_cast<uint32_t>(getpid());
  // 1 .. 2^31 - 1, as llama.cpp prints it; 0 would lock the xorshift generator.
  return static_cast<int64_t>(r % 0x7FFFFFFEu) + 1;
}

int logical_cores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

// Distinct (package, core) pairs of the CPUs Linux lists; the logical count when it lists none.
namespace {
// The integer at the start of a small file (leading blanks skipped), or false. Plain open / read:
// every command's --threads default reads two of them per CPU at start-up, and an ifstream
// (locale, 8 KB buffer) cost several times the read.
bool read_int_file(const std::string& path, int* value) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(buf, &end, 10);
  if (end == buf || errno != 0 || v < INT_MIN || v > INT_MAX) return false;
  *value = static_cast<int>(v);
  return true;
}
}  // namespace

int physical_cores() {
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < 4096; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int c = -1, p = -1;
    if (!read_int_file(dir + "core_id", &c)) break;
    if (!read_int_file(dir + "physical_package_id", &p)) p = 0;
    cores.insert({p, c});
  }
  const int n = static_cast<int>(cores.size());
  return n > 0 && n <= logical_cores() ? n : logical_cores();
}

void add_kernels_option(CLI::App* cmd, std::string* kernels) {
  int n = 0;
  const KernelTable* tables = kernel_tables(&n);
  std::vector<std::string> names;
  std::string help = "Kernel table: ";
  for (int i = 0; i < n; ++i) {
    names.push_back(tables[i].name);
    help += std::string(tables[i].name) + ", ";
  }
  names.push_back("auto");
  help += "or auto (the first of these this CPU runs)";
  cmd->add_option("--kernels", *kernels, help)->check(CLI::IsMember(names));
}

Status find_kernels(const std::string& name, const KernelSet** kernels) {
  *kernels = kernels_by_name(name.c_str());
  if (!*kernels) return Status::Error(Code::kInvalidArgument, "--kernels %s is unknown or not supported by this CPU", name.c_str());
  return Status::Ok();
}

void add_threads_option(CLI::App* cmd, int* threads, const std::string& what) {
  *threads = physical_cores();
  cmd->add_option("-t,--threads", *threads, what + " (default: the physical cores)")->check(CLI::Range(1, 256));
}

void warn_threads(int threads) {
  if (threads > logical_cores())
    std::fprintf(stderr, "mcullm: warning: -t %d is more threads than the %d logical cores: expect a large slowdown\n", threads,
                 logical_cores());
}

Status split_host_port(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const long p = colon == std::string::npos ? -1 : std::strtol(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || !end || *end != '\0' || end == text.c_str() + colon + 1 || p < 0 || p > 65535)
    return Status::Error(Code::kInvalidArgument, "'%s' is not HOST:PORT", text.c_str());
  *host = text.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(p);
  return Status::Ok();
}

Status parse_prompt_ids(const std::string& text, int vocab, std::vector<int>* ids) {
  std::string s = text;
  for (char& c : s)
    if (c == ',') c = ' ';
  std::istringstream in(s);
  std::string item;
  while (in >> item) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || v < 0 || v >= vocab)
      return Status::Error(Code::kInvalidArgument, "--prompt-ids: '%s' is not a token id below %d", item.c_str(), vocab);
    ids->push_back(static_cast<int>(v));
  }
  if (ids->empty()) return Status::Error(Code::kInvalidArgument, "--prompt-ids is empty");
  return Status::Ok();
}

const char* version_string() { return MCULLM_VERSION; }

OutputFile::~OutputFile() {
  if (f_) std::fclose(f_);
}

Status OutputFile::open(const std::string& path, const char* flag) {
  path_ = path;
  flag_ = flag;
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) return Status::Error(Code::kIo, "%s: cannot write %s: %s", flag, path.c_str(), std::strerror(errno));
  return Status::Ok();
}

void OutputFile::write(const void* data, size_t n) {
  if (f_ && !err_ && std::fwrite(data, 1, n, f_) != n) err_ = errno ? errno : EIO;
}

void OutputFile::printf(const char* fmt, ...) {
  if (!f_ || err_) return;
  va_list ap;
  va_start(ap, fmt);
  if (std::vfprintf(f_, fmt, ap) < 0) err_ = errno ? errno : EIO;
  va_end(ap);
}

Status OutputFile::close() {
  if (!f_) return Status::Ok();
  if (std::fflush(f_) != 0 && !err_) err_ = errno ? errno : EIO;
  if (std::fclose(f_) != 0 && !err_) err_ = errno ? errno : EIO;
  f_ = nullptr;
  if (err_) return Status::Error(Code::kIo, "%s: writing %s failed: %s", flag_.c_str(), path_.c_str(), std::strerror(err_));
  return Status::Ok();
}

namespace {
int g_stdout_errno = 0;  // the first failed write_stdout's errno
}  // namespace

bool write_stdout(std::string_view text) {
  if (std::ferror(stdout)) return false;
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    g_stdout_errno = errno;
    return false;
  }
  return true;
}

Status stdout_status() {
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int err = errno ? errno : g_stdout_errno;
  if (flush_failed || std::ferror(stdout))
    return Status::Error(Code::kIo, "writing the standard output failed: %s",
                         err ? std::strerror(err) : "a write failed before (e.g. a full disk)");
  return Status::Ok();
}

}  // namespace mcullm::cli
