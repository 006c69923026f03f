#include "quant/dtype.h"

#include <string.h>

#include "quant/ternary.h"

namespace mcullm {

namespace {
const DTypeInfo kInfos[] = {
    {DType::kF32, "f32", 1, 4, false, 0},
    {DType::kF16, "f16", 1, 2, false, 0},
    {DType::kQ4_0, "q4_0", 32, 18, false, 32},
    {DType::kQ8_0, "q8_0", 32, 34, false, 32},
    {DType::kQ4G64, "q4g64", 64, 34, true, 64},
    {DType::kTQ1_0, "tq1_0", 256, 54, false, 0},
    {DType::kTQ2_0, "tq2_0", 256, 66, false, 0},
    {DType::kI2_S, "i2_s", 128, 32, false, 0, 32},
    {DType::kQ4E, "q4e", 2, 1, true, 0},
    {DType::kTL1, "tl1", 4, 1, false, 0, kTlFileTailBytes},
    // TL2 rows are not whole blocks (tl_file_row_bytes): 24 / 5 is their triple part's rate, which
    // the GGUF reader's first size guard uses; row sizes come from tl_file_row_bytes.
    {DType::kTL2, "tl2", 24, 5, false, 0, kTlFileTailBytes},
};
}  // namespace

const DTypeInfo* dtype_info(DType type) { return dtype_info_by_id(static_cast<uint32_t>(type)); }

const DTypeInfo* dtype_info_by_id(uint32_t id) {
  for (const DTypeInfo& info : kInfos)
    if (static_cast<uint32_t>(info.type) == id) return &info;
  return nullptr;
}

const DTypeInfo* dtype_info_by_name(const char* name) {
  for (const DTypeInfo& info : kInfos)
    if (strcmp(info.name, name) == 0) return &info;
  return nullptr;
}

bool dtype_row_fits(DType type, int64_t cols) {
  const DTypeInfo* info = dtype_info(type);
  if (!info || cols <= 0) return false;
  if (type == DType::kTL2) return tl_file_row_bytes(TlType::kTL2, cols) > 0;
  return info->pads_rows || cols % info->block == 0;
}

size_t dtype_row_bytes(DType type, int64_t cols) {
  const DTypeInfo* info = dtype_info(type);
  if (!info || cols <= 0) return 0;
  if (type == DType::kTL2) return tl_file_row_bytes(TlType::kTL2, cols);
  const int64_t blocks = (cols + info->block - 1) / info->block;
  return static_cast<size_t>(blocks) * static_cast<size_t>(info->block_bytes);
}

size_t dtype_tensor_bytes(DType type, int64_t rows, int64_t cols) {
  const DTypeInfo* info = dtype_info(type);
  if (!info || rows <= 0 || !dtype_row_fits(type, cols)) return 0;
  return static_cast<size_t>(rows) * dtype_row_bytes(type, cols) + static_cast<size_t>(info->tensor_tail_bytes);
}

}  // namespace mcullm
