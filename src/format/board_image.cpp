#include "format/board_image.h"

#include <inttypes.h>
#include <string.h>

#include "quant/ternary.h"

namespace mcullm {

static_assert(sizeof(BoardImageHeader) == kBoardImageHeaderBytes, "header layout");
static_assert(sizeof(BoardImageConfig) == 64, "config layout");
static_assert(sizeof(BoardImageSection) == 16, "section layout");
static_assert(sizeof(BoardImageTensor) == kBoardImageEntryBytes, "tensor entry layout");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the image is read in place as little-endian");

namespace {

constexpr uint64_t align_up(uint64_t x) { return (x + kBoardImageAlign - 1) & ~uint64_t{kBoardImageAlign - 1}; }

bool all_zero(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

}  // namespace

const char* board_arch_name(BoardArch arch) {
  switch (arch) {
    case BoardArch::kLlama: return "llama";
    case BoardArch::kBitLlama2c: return "bitnet-llama2c";
    case BoardArch::kBitnet: return "bitnet";
    case BoardArch::kBitnet25: return "bitnet-25";
    case BoardArch::kPle: return "esp32ai-ple";
    case BoardArch::kQwen2: return "qwen2";
  }
  return nullptr;
}

Status BoardImage::open(const uint8_t* data, size_t size) {
  *this = BoardImage();
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0)
    return Status::Error(Code::kInvalidArgument, "board image: the buffer must be 16-byte aligned");
  if (size < kBoardImageTableOffset)
    return Status::Error(Code::kCorrupt, "board image: truncated (%zu bytes; the header alone needs %zu)", size,
                         kBoardImageTableOffset);
  const auto* h = reinterpret_cast<const BoardImageHeader*>(data);
  if (memcmp(h->magic, kBoardImageMagic, 8) != 0)
    return Status::Error(Code::kCorrupt, "board image: bad magic (not an mcullm board image)");
  if (h->version < kBoardImageWholeVersion || h->version > kBoardImageVersion)
    return Status::Error(Code::kUnsupported, "board image: version %" PRIu32 " (this reader reads versions %" PRIu32 " to %" PRIu32 ")",
                         h->version, kBoardImageWholeVersion, kBoardImageVersion);
  if (h->total_bytes != size)
    return Status::Error(Code::kCorrupt, "board image: %s (the header says %llu bytes, the file has %zu)",
                         h->total_bytes > size ? "truncated" : "trailing bytes", static_cast<unsigned long long>(h->total_bytes),
                         size);
  const uint32_t crc = crc32_ieee(data + kBoardImageCrcStart, size - kBoardImageCrcStart);
  if (crc != h->crc32)
    return Status::Error(Code::kCorrupt, "board image: CRC mismatch (stored %08" PRIx32 ", computed %08" PRIx32 "): corrupt file",
                         h->crc32, crc);
  if (!all_zero(h->reserved, sizeof h->reserved) ||
      (h->version == kBoardImageWholeVersion && !all_zero(&h->slice_first, 5 * sizeof(uint32_t))))
    return Status::Error(Code::kCorrupt, "board image: reserved header bytes are not zero");

  // Config.
  const auto* c = reinterpret_cast<const BoardImageConfig*>(data + kBoardImageConfigOffset);
  if (!board_arch_name(static_cast<BoardArch>(c->arch)))
    return Status::Error(Code::kUnsupported, "board image: unknown architecture %" PRIu32, c->arch);
  if (c->ffn > 1 || c->rope > 1 || c->tied > 1 || c->pad != 0)
    return Status::Error(Code::kCorrupt, "board image: config flags out of range");
  const bool ple = static_cast<BoardArch>(c->arch) == BoardArch::kPle;
  if (ple ? (c->ple_dim <= 0 || c->input_vocab <= 0 || c->group <= 0 || c->group > (1 << 20))
          : (c->ple_dim != 0 || c->input_vocab != 0 || c->group != 0))
    return Status::Error(Code::kCorrupt, "board image: PLE sizes %" PRId32 " / %" PRId32 " / %" PRId32 " out of range for %s", c->ple_dim,
                         c->input_vocab, c->group, board_arch_name(static_cast<BoardArch>(c->arch)));
  if (c->bos_id < -1 || c->bos_id >= c->vocab_size || c->eos_id < -1 || c->eos_id >= c->vocab_size)
    return Status::Error(Code::kCorrupt, "board image: BOS %" PRId32 " / EOS %" PRId32 " outside the vocabulary of %" PRId32, c->bos_id,
                         c->eos_id, c->vocab_size);

  // The slice (version 2): a range inside the model's layers, and something held.
  BoardSlice slice;
  slice.end = c->n_layers;
  if (h->version > kBoardImageWholeVersion) {
    if (h->slice_parts > (kBoardSliceEmbedding | kBoardSliceHead) || c->n_layers < 0 || h->slice_end > static_cast<uint32_t>(c->n_layers) ||
        h->slice_first > h->slice_end || (h->slice_first == h->slice_end && h->slice_parts == 0))
      return Status::Error(Code::kCorrupt, "board image: slice of layers %" PRIu32 ":%" PRIu32 " (parts %" PRIu32 ") does not fit a model of %" PRId32 " layers",
                           h->slice_first, h->slice_end, h->slice_parts, c->n_layers);
    slice.first = static_cast<int>(h->slice_first);
    slice.end = static_cast<int>(h->slice_end);
    slice.embedding = (h->slice_parts & kBoardSliceEmbedding) != 0;
    slice.head = (h->slice_parts & kBoardSliceHead) != 0;
    slice.whole = false;
    slice.hash = uint64_t{h->slice_hash_lo} | uint64_t{h->slice_hash_hi} << 32;
  }

  // Tensor table.
  const uint64_t table_end = kBoardImageTableOffset + uint64_t{h->n_tensors} * kBoardImageEntryBytes;
  if (table_end > size)
    return Status::Error(Code::kCorrupt, "board image: %" PRIu32 " tensors do not fit in %zu bytes", h->n_tensors, size);
  const auto* table = reinterpret_cast<const BoardImageTensor*>(data + kBoardImageTableOffset);

  // Sections: aligned, inside the file, after the table, in tier order without overlap.
  const auto* sec = reinterpret_cast<const BoardImageSection*>(data + kBoardImageSectionsOffset);
  uint64_t prev_end = align_up(table_end);
  for (int t = 0; t < kTierCount; ++t) {
    const BoardImageSection& s = sec[t];
    if (s.bytes == 0) {
      if (s.offset != 0) return Status::Error(Code::kCorrupt, "board image: empty %s section has an offset", tier_name(static_cast<Tier>(t)));
      continue;
    }
    if (s.offset % kBoardImageAlign != 0 || s.offset < prev_end || s.offset > size || s.bytes > size - s.offset)
      return Status::Error(Code::kCorrupt, "board image: %s section [%llu, +%llu) is misplaced in %zu bytes",
                           tier_name(static_cast<Tier>(t)), static_cast<unsigned long long>(s.offset),
                           static_cast<unsigned long long>(s.bytes), size);
    prev_end = s.offset + s.bytes;
  }

  // Tensors: sorted ids, known types and classes, exact byte counts, canonical offsets.
  uint64_t next_offset[kTierCount] = {}, end[kTierCount] = {};
  for (uint32_t i = 0; i < h->n_tensors; ++i) {
    const BoardImageTensor& e = table[i];
    if (i > 0 && e.id <= table[i - 1].id)
      return Status::Error(Code::kCorrupt, "board image: tensor ids not strictly increasing at entry %" PRIu32, i);
    if (e.tier >= kTierCount || e.cls >= kClassCount || e.reserved != 0 || e.reserved2 != 0)
      return Status::Error(Code::kCorrupt, "board image: tensor %#" PRIx32 " has tier %u / class %u out of range", e.id, e.tier, e.cls);
    const DTypeInfo* info = dtype_info_by_id(e.dtype);
    if (!info) return Status::Error(Code::kUnsupported, "board image: tensor %#" PRIx32 " has unknown type %" PRIu32, e.id, e.dtype);
    if (e.rows == 0 || e.cols == 0 || e.rows > (1u << 30) || e.cols > (1u << 30) || !dtype_row_fits(info->type, e.cols))
      return Status::Error(Code::kCorrupt, "board image: tensor %#" PRIx32 " has shape %" PRIu32 " x %" PRIu32 " (%s)", e.id, e.rows, e.cols, info->name);
    const size_t want = dtype_tensor_bytes(info->type, e.rows, e.cols);
    if (want != e.bytes)
      return Status::Error(Code::kCorrupt, "board image: tensor %#" PRIx32 " holds %" PRIu32 " bytes, %" PRIu32 " x %" PRIu32 " %s needs %zu", e.id, e.bytes,
                           e.rows, e.cols, info->name, want);
    uint64_t& next = next_offset[e.tier];
    if (e.offset != next)
      return Status::Error(Code::kCorrupt, "board image: tensor %#" PRIx32 " at offset %" PRIu32 " of its section, expected %llu", e.id,
                           e.offset, static_cast<unsigned long long>(next));
    end[e.tier] = uint64_t{e.offset} + e.bytes;
    next = align_up(end[e.tier]);
    if (uint64_t{e.offset} + e.bytes > sec[e.tier].bytes)
      return Status::Error(Code::kCorrupt, "board image: tensor %#" PRIx32 " ends past its %s section (%llu bytes)", e.id,
                           tier_name(static_cast<Tier>(e.tier)), static_cast<unsigned long long>(sec[e.tier].bytes));
    if (info->type == DType::kI2_S) {
      const float scale = i2s_tensor_scale(data + sec[e.tier].offset + e.offset, e.rows, e.cols);
      if (!(scale == scale) || scale > 3.0e38f || scale < -3.0e38f)
        return Status::Error(Code::kCorrupt, "board image: tensor %#" PRIx32 " has a non-finite i2_s scale", e.id);
    }
  }

  for (int t = 0; t < kTierCount; ++t)
    if (sec[t].bytes != end[t])
      return Status::Error(Code::kCorrupt, "board image: %s section has %llu bytes, its tensors end at %llu",
                           tier_name(static_cast<Tier>(t)), static_cast<unsigned long long>(sec[t].bytes),
                           static_cast<unsigned long long>(end[t]));

  file_ = data;
  header_ = h;
  slice_ = slice;
  config_ = c;
  sections_ = sec;
  table_ = table;
  for (int t = 0; t < kTierCount; ++t) base_[t] = data + sec[t].offset;
  return Status::Ok();
}

const BoardImageTensor* BoardImage::find(uint32_t id) const {
  uint32_t lo = 0, hi = header_ ? header_->n_tensors : 0;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (table_[mid].id == id) return &table_[mid];
    if (table_[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return nullptr;
}

Status BoardImage::place(Arena* const ram[kTierCount], Arena& mapped) {
  if (!header_) return Status::Error(Code::kInternal, "board image: place() before open()");
  for (int t = 0; t < kTierCount; ++t) {
    Arena* arena = ram[t];
    uint8_t* base = nullptr;
    for (uint32_t i = 0; i < header_->n_tensors; ++i) {
      const BoardImageTensor& e = table_[i];
      if (e.tier != t) continue;
      const TensorClass cls = static_cast<TensorClass>(e.cls);
      if (!arena) {
        mapped.note_mapped(e.bytes, cls);
        continue;
      }
      void* p = nullptr;
      Status st = arena->alloc_checked(e.bytes, kBoardImageAlign, cls, &p);
      if (!st.ok()) return st.prefix("board image: %s section of %llu bytes: ", tier_name(static_cast<Tier>(t)),
                                     static_cast<unsigned long long>(sections_[t].bytes));
      if (!base) base = static_cast<uint8_t*>(p) - e.offset;
      if (static_cast<uint8_t*>(p) != base + e.offset)
        return Status::Error(Code::kInternal, "board image: the %s arena did not keep the section's layout", tier_name(static_cast<Tier>(t)));
    }
    if (base) {
      memcpy(base, file_ + sections_[t].offset, sections_[t].bytes);  // open(): the section ends with its last tensor
      base_[t] = base;
    }
  }
  return Status::Ok();
}

}  // namespace mcullm
