// Reader of Hugging Face's safetensors files (host code): an 8-byte little-endian header length N,
// N bytes of JSON {"<tensor>": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]},
// ..., "__metadata__": {...}}, then the tensors' bytes; offsets count from the end of the header.
// parse() checks the whole header before anything is used: a length past the file, JSON that is not
// an object of such entries, an unknown dtype, a byte range out of the data or of the wrong size
// for its shape, two ranges that overlap. Every error names the file (and the tensor). The bytes
// stay where they are (a mapped file); to_f32 reads the float types mcullm converts.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "mcullm/status.h"

namespace mcullm {

enum class StDType : uint8_t { kF32, kF16, kBF16, kOther };  // kOther: a known dtype we do not convert

struct SafetensorsTensor {
  std::string name;
  std::string dtype;            // as the header spells it ("F32", "BF16", "I64", ...)
  StDType type = StDType::kOther;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

class SafetensorsFile {
 public:
  // The file's `size` bytes at `data` (kept by the caller while this is used); `label` (its path)
  // starts every error message. Replaces what an earlier parse read.
  Status parse(const uint8_t* data, size_t size, const std::string& label);
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const std::string& label() const { return label_; }

 private:
  std::string label_;
  std::vector<SafetensorsTensor> tensors_;  // sorted by name
};

// The tensor's values as f32 (F32 copied, F16 / BF16 widened exactly); kUnsupported for another dtype.
// `out` holds t.elements() floats.
Status safetensors_to_f32(const SafetensorsTensor& t, const std::string& label, float* out);

}  // namespace mcullm
