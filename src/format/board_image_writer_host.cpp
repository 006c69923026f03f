#include "format/board_image_writer_host.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace mcullm {

namespace {
uint64_t align_up(uint64_t x) { return (x + kBoardImageAlign - 1) & ~uint64_t{kBoardImageAlign - 1}; }
}  // namespace

Status write_board_image(const BoardImageConfig& cfg, std::vector<BoardTensorSource> tensors, std::vector<uint8_t>* out,
                         const BoardSlice& slice) {
  if (!slice.whole &&
      (slice.first < 0 || slice.end < slice.first || slice.end > cfg.n_layers || (slice.first == slice.end && !slice.embedding && !slice.head)))
    return Status::Error(Code::kInvalidArgument, "board image: slice %d:%d of %d layers holds nothing or lies outside the model",
                         slice.first, slice.end, cfg.n_layers);
  std::sort(tensors.begin(), tensors.end(), [](const BoardTensorSource& a, const BoardTensorSource& b) { return a.id < b.id; });
  std::vector<BoardImageTensor> table(tensors.size());
  uint64_t section_end[kTierCount] = {};  // end of the last tensor in each section
  for (size_t i = 0; i < tensors.size(); ++i) {
    const BoardTensorSource& s = tensors[i];
    if (i > 0 && s.id == tensors[i - 1].id) return Status::Error(Code::kInvalidArgument, "board image: tensor id %#x twice", s.id);
    if (!dtype_info(s.type) || !dtype_row_fits(s.type, s.cols) || s.rows == 0 || s.cols == 0 || !s.data)
      return Status::Error(Code::kInvalidArgument, "board image: tensor %#x: %u x %u of type %u cannot be stored", s.id,
                           s.rows, s.cols, static_cast<unsigned>(s.type));
    const int tier = static_cast<int>(s.tier);
    if (tier < 0 || tier >= kTierCount) return Status::Error(Code::kInvalidArgument, "board image: tensor %#x has no tier", s.id);
    const uint64_t bytes = dtype_tensor_bytes(s.type, s.rows, s.cols);
    const uint64_t offset = section_end[tier] ? align_up(section_end[tier]) : 0;
    if (offset + bytes > UINT32_MAX)
      return Status::Error(Code::kUnsupported, "board image: the %s section passes 4 GiB", tier_name(s.tier));
    BoardImageTensor& e = table[i];
    std::memset(&e, 0, sizeof e);
    e.id = s.id;
    e.dtype = static_cast<uint32_t>(s.type);
    e.rows = s.rows;
    e.cols = s.cols;
    e.offset = static_cast<uint32_t>(offset);
    e.bytes = static_cast<uint32_t>(bytes);
    e.tier = static_cast<uint8_t>(tier);
    e.cls = static_cast<uint8_t>(s.cls);
    section_end[tier] = offset + bytes;
  }

  BoardImageSection sections[kTierCount] = {};
  uint64_t pos = align_up(kBoardImageTableOffset + table.size() * kBoardImageEntryBytes);
  for (int t = 0; t < kTierCount; ++t) {
    if (!section_end[t]) continue;
    sections[t].offset = pos;
    sections[t].bytes = section_end[t];
    pos = align_up(pos + section_end[t]);
  }
  const uint64_t total = pos;
  out->assign(total, 0);
  uint8_t* img = out->data();

  BoardImageHeader h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kBoardImageMagic, 8);
  h.version = kBoardImageWholeVersion;
  h.total_bytes = total;
  h.n_tensors = static_cast<uint32_t>(table.size());
  if (!slice.whole) {
    h.version = kBoardImageVersion;
    h.slice_first = static_cast<uint32_t>(slice.first);
    h.slice_end = static_cast<uint32_t>(slice.end);
    h.slice_parts = (slice.embedding ? kBoardSliceEmbedding : 0) | (slice.head ? kBoardSliceHead : 0);
    h.slice_hash_lo = static_cast<uint32_t>(slice.hash);
    h.slice_hash_hi = static_cast<uint32_t>(slice.hash >> 32);
  }
  std::memcpy(img + kBoardImageConfigOffset, &cfg, sizeof cfg);
  std::memcpy(img + kBoardImageSectionsOffset, sections, sizeof sections);
  if (!table.empty()) std::memcpy(img + kBoardImageTableOffset, table.data(), table.size() * kBoardImageEntryBytes);
  for (size_t i = 0; i < tensors.size(); ++i)
    std::memcpy(img + sections[table[i].tier].offset + table[i].offset, tensors[i].data, table[i].bytes);
  std::memcpy(img, &h, sizeof h);
  // The CRC field sits before kBoardImageCrcStart: storing it does not change the sum.
  h.crc32 = crc32_ieee(img + kBoardImageCrcStart, total - kBoardImageCrcStart);
  std::memcpy(img + offsetof(BoardImageHeader, crc32), &h.crc32, 4);
  static_assert(offsetof(BoardImageHeader, crc32) + 4 <= kBoardImageCrcStart, "CRC field inside its own range");
  return Status::Ok();
}

}  // namespace mcullm
