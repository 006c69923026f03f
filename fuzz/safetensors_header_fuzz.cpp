// Any bytes as a safetensors file (format/safetensors_host.h): parse() must refuse it with a message
// or give tensors whose bytes lie inside the input, of the size their shape and dtype imply, without
// overlaps; widening a float tensor to f32 reads only its bytes (ASan checks). With
// MCULLM_FUZZ_SEEDS=DIR set, a few small valid files (F32 / F16 / BF16, __metadata__, an empty
// tensor) are written there first.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "format/safetensors_host.h"
#include "fuzz_support.h"

using namespace mcullm;

namespace {

void write_file(const std::string& path, const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

void write_seeds(const std::string& dir) {
  write_file(dir + "/f32", R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", std::vector<uint8_t>(16, 0x3f));
  write_file(dir + "/mixed",
             R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},)"
             R"("h":{"dtype":"F16","shape":[1,2],"data_offsets":[6,10]},"e":{"dtype":"F32","shape":[0],"data_offsets":[10,10]},)"
             R"("i":{"dtype":"I64","shape":[1],"data_offsets":[10,18]}})",
             {0x80, 0x3f, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x3c, 0x00, 0x35, 1, 0, 0, 0, 0, 0, 0, 0});
  write_file(dir + "/padded", R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}    )", {1, 2, 3, 4});
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("MCULLM_FUZZ_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> copy(data, data + size);  // an exact-size heap buffer: ASan sees any read past it
  SafetensorsFile f;
  const Status st = f.parse(copy.data(), copy.size(), "fuzz");
  if (!st.ok()) {
    FUZZ_CHECK(st.message()[0] != '\0');
    return 0;
  }
  size_t total = 0;
  for (const SafetensorsTensor& t : f.tensors()) {
    FUZZ_CHECK(t.nbytes == 0 || (t.data >= copy.data() && t.data + t.nbytes <= copy.data() + copy.size()));
    FUZZ_CHECK(f.find(t.name) == &t);
    total += t.nbytes;
    if (t.type != StDType::kOther && t.elements() <= (1 << 16)) {
      std::vector<float> out(static_cast<size_t>(t.elements()) + 1);
      FUZZ_CHECK(safetensors_to_f32(t, "fuzz", out.data()).ok());
    }
  }
  FUZZ_CHECK(total <= copy.size());  // no overlaps: the ranges fit side by side
  return 0;
}
