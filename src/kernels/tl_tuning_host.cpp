#include "kernels/tl_tuning_host.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace mcullm {

namespace {
constexpr long kMaxFile = 1 << 20;
}

std::string tl_tuning_default_path() {
  const char* env = std::getenv("MCULLM_TUNING");
  return env && *env ? env : "mcullm-tuning.txt";
}

Status tl_tuning_load_file(const std::string& path, TlTuningTable* out) {
  out->count = 0;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::Error(Code::kNotFound, "cannot open the tuning file %s (run `mcullm tune` first)", path.c_str());
  std::vector<char> text(kMaxFile + 1);
  const size_t n = std::fread(text.data(), 1, text.size(), f);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::Error(Code::kIo, "reading the tuning file %s failed", path.c_str());
  if (n > static_cast<size_t>(kMaxFile))
    return Status::Error(Code::kCorrupt, "the tuning file %s is larger than %ld bytes", path.c_str(), kMaxFile);
  Status st = tl_tuning_parse(text.data(), n, out);
  if (!st.ok()) st.prefix("%s: ", path.c_str());
  return st;
}

Status tl_tuning_save_file(const std::string& path, const TlTuningTable& table) {
  std::vector<char> text(64 + static_cast<size_t>(kTlTuningMax) * 80);
  if (!tl_tuning_format(table, text.data(), text.size()))
    return Status::Error(Code::kInternal, "the tuning table does not fit its text buffer");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::Error(Code::kIo, "cannot write the tuning file %s", path.c_str());
  const size_t len = std::char_traits<char>::length(text.data());
  const bool ok = std::fwrite(text.data(), 1, len, f) == len;
  if (std::fclose(f) != 0 || !ok) return Status::Error(Code::kIo, "writing the tuning file %s failed", path.c_str());
  return Status::Ok();
}

}  // namespace mcullm
