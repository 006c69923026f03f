// The board image: one flat file that a board reads in place (from a flash mapping, or from the
// host through semihosting on the emulated MCUs). No strings to parse, no allocation per tensor:
// a fixed header, the model config, one section descriptor per memory tier, a table of tensors
// sorted by id, then the sections. `mcullm convert --image` writes it (load/board_image_export_host.h).
//
// Layout (little-endian, every offset a multiple of 64 from the start of the file):
//   0    header (64 bytes)    magic "MCUIMAGE", version, CRC-32 (IEEE, as zlib) of every byte from
//                             offset 16 to the end, total bytes, tensor count, the slice record
//                             (version 2; zeros in version 1), zeros
//   64   config (64 bytes)    architecture, llama sizes, norm eps, rope theta, FFN / RoPE kind,
//                             tied head, BOS / EOS ids (-1: none), PLE sizes (zero for the others)
//   128  sections (4 x 16)    per tier (sram, psram, flash, host): offset and bytes
//   192  tensors (n x 32)     id, dtype, rows, cols, offset within its tier's section, bytes,
//                             tier, tensor class; sorted by id (strictly increasing)
//   then the sections, each 64-byte aligned. Within a section the tensors lie in table order,
//   each at the first multiple of 64 after the previous one (a canonical layout the reader checks,
//   so a bump arena that copies a section tensor by tensor rebuilds the same offsets).
// Tensor bytes are exactly dtype_tensor_bytes(type, rows, cols) (i2_s keeps its scale in its tail).
// Version 1 holds the whole model. Version 2 (a per-node image, `mcullm convert --image --layers`)
// holds a slice of a llama-family model (model/layer_slice.h): layers [first, end) of the config's
// n_layers and / or the embedding and the final norm and head (the cluster master's part), with
// slice_hash of that slice, which a node reports at hello and a master checks. The writer
// writes version 1 for a whole model, so boards with a version-1 reader keep reading those.
// A q4e matrix (esp32-ai int4, PLE) is its codes under its id plus its f16 group scales, [rows,
// n_groups], under board_scales_id(id); its group size is the config's `group`.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/crc32.h"
#include "mcullm/status.h"
#include "quant/dtype.h"

namespace mcullm {

constexpr char kBoardImageMagic[8] = {'M', 'C', 'U', 'I', 'M', 'A', 'G', 'E'};
constexpr uint32_t kBoardImageVersion = 2;       // the newest this reader reads
constexpr uint32_t kBoardImageWholeVersion = 1;  // what the writer writes for a whole model
constexpr size_t kBoardImageAlign = 64;
constexpr size_t kBoardImageHeaderBytes = 64;
constexpr size_t kBoardImageConfigOffset = 64;
constexpr size_t kBoardImageSectionsOffset = 128;
constexpr size_t kBoardImageTableOffset = 192;
constexpr size_t kBoardImageEntryBytes = 32;
constexpr size_t kBoardImageCrcStart = 16;  // the CRC covers [16, total)

enum class BoardArch : uint32_t { kLlama = 1, kBitLlama2c = 2, kBitnet = 3, kBitnet25 = 4, kPle = 5, kQwen2 = 6 };
const char* board_arch_name(BoardArch arch);  // nullptr for an unknown value

// Tensor ids: a global role (< 16, or kHeadRouter) or (layer << 8) | layer role (16 .. 0x6f).
enum class BoardRole : uint32_t {
  kTokEmb = 1, kOutput = 2, kOutNorm = 3, kPleModelProj = 4, kPleProjNorm = 5, kPleTable = 6,
  // Head groups (model/vocab_head.h, optional): the rows in group order (the head's type), centroids
  // f32 [n_groups, dim], token of each row and group bounds as f32 holding exact integers, radii and
  // row norms f32 [n_groups]; the default head generation uses (optional) f32 [1, 2]: HeadMode and
  // top groups (0: unset).
  kHeadRows = 7, kHeadCentroids = 8, kHeadTokenOfRow = 9, kHeadGroupStart = 10, kHeadRadius = 11, kHeadRowNormMax = 12,
  kHeadDefault = 13,
  // The cluster master's nodes (optional, in a master's per-node image): f32 [1, 6 x nodes] holding
  // exact integers, per node its first and end layer and its slice hash in four 16-bit pieces (low first).
  kNodePlan = 14,
  // The board tokenizer image (tokenizer/tokenizer_image.h; optional, in a whole image or a master's, never
  // in a node's): its bytes as f32 [1, ceil(bytes / 4)] (raw bytes, not floats; zero padding), kept in flash.
  // A reader that does not know the role ignores it, so the image keeps its version.
  kTokenizer = 15,
  // The two-stage head's router (model/vocab_head.h, optional, with the head groups): f32 [n_groups, dim + 2],
  // per group its int8 values as exact f32 integers in [-127, 127], then its scale and bias. Global roles
  // past 15 sit in layer 0's ids above the layer roles.
  kHeadRouter = 0x70,
  kAttnNorm = 16, kFfnNorm, kAttnSubNorm, kFfnSubNorm, kWq, kWk, kWv, kWo, kW1, kW2, kW3,
  kWqkv, kPleNorm, kPleGate, kPleProj,  // PLE: fused QKV, the per-layer gate's norm and matrices
  kBq, kBk, kBv,                        // qwen2: the q, k and v biases
};
constexpr int kBoardMaxPlanNodes = 16;       // nodes a kNodePlan lists (the board master's ring)
constexpr uint32_t kBoardScalesFlag = 0x80;  // roles stay below it
inline uint32_t board_tensor_id(BoardRole role, int layer = 0) {
  return static_cast<uint32_t>(role) < 16 || role == BoardRole::kHeadRouter ? static_cast<uint32_t>(role)
                                          : (static_cast<uint32_t>(layer) << 8) | static_cast<uint32_t>(role);
}
// The id of a q4e matrix's group scales.
inline uint32_t board_scales_id(uint32_t id) { return id | kBoardScalesFlag; }

// The on-file records (their sizes are part of the format; static_asserts in the .cpp).
struct BoardImageHeader {
  char magic[8];
  uint32_t version;
  uint32_t crc32;
  uint64_t total_bytes;
  uint32_t n_tensors;
  // Version 2: the slice held (version 1: zero, the whole model).
  uint32_t slice_first, slice_end;  // layers [first, end) of config.n_layers
  uint32_t slice_parts;             // kBoardSliceEmbedding | kBoardSliceHead
  uint32_t slice_hash_lo, slice_hash_hi;  // slice_hash of the slice (model/llama_slice.h)
  uint32_t reserved[4];  // zero
};
constexpr uint32_t kBoardSliceEmbedding = 1;  // the token embedding
constexpr uint32_t kBoardSliceHead = 2;       // the final norm and the head (with head groups, if any)

// What an image holds: every layer, embedding and head for version 1.
struct BoardSlice {
  int first = 0, end = 0;
  bool embedding = true, head = true;
  bool whole = true;   // version 1 (no slice record)
  uint64_t hash = 0;   // version 2 only
};

struct BoardImageConfig {
  uint32_t arch;  // BoardArch
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  float norm_eps, rope_theta;
  uint8_t ffn;   // 1: FfnAct kReluSqr (bitnet archs) / kRelu (llama, PLE); 0: kSilu
  uint8_t rope;  // RopeStyle (bitnet archs), 0 otherwise
  uint8_t tied;  // 1: the head is the token embedding (no kOutput tensor)
  uint8_t pad;
  int32_t bos_id, eos_id;  // -1: none (the runner stops on them, as `mcullm run` does)
  int32_t ple_dim;         // kPle: per-layer input size; zero for the other archs
  int32_t input_vocab;     // kPle: rows of the embedding and the PLE table (vocab_size: the head's)
  int32_t group;           // kPle: weights per q4e scale group
};

struct BoardImageSection {
  uint64_t offset;  // from the start of the file; a multiple of 64 (0 with 0 bytes: empty)
  uint64_t bytes;
};

struct BoardImageTensor {
  uint32_t id;
  uint32_t dtype;  // DType
  uint32_t rows;   // 1 for a vector
  uint32_t cols;
  uint32_t offset;  // within its tier's section
  uint32_t bytes;
  uint8_t tier;     // Tier
  uint8_t cls;      // TensorClass
  uint16_t reserved;
  uint32_t reserved2;
};

// A validated view of an image. open() checks everything the rest of the code relies on; after it,
// every tensor lies inside its section, has the bytes its type and shape need, and ids are unique.
class BoardImage {
 public:
  // data must stay valid and be 16-byte aligned (tensors are read in place).
  Status open(const uint8_t* data, size_t size);

  const BoardImageConfig& config() const { return *config_; }
  const BoardSlice& slice() const { return slice_; }
  BoardArch arch() const { return static_cast<BoardArch>(config_->arch); }
  uint32_t n_tensors() const { return header_->n_tensors; }
  const BoardImageTensor& tensor(uint32_t i) const { return table_[i]; }
  const BoardImageSection& section(Tier tier) const { return sections_[static_cast<int>(tier)]; }
  // Binary search by id; nullptr when absent.
  const BoardImageTensor* find(uint32_t id) const;
  // Where a tensor's bytes are now: its section's base (in the file, or where place() copied it).
  const uint8_t* data(const BoardImageTensor& t) const { return base_[t.tier] + t.offset; }

  // Copies the sections of the tiers that have an arena in `ram` (e.g. sram, psram on a board)
  // into them, tensor by tensor with each tensor's class; the other tiers stay in place and are
  // recorded with note_mapped() in `mapped` (the flash stand-in). An arena too small fails with
  // the arena's message (which tier, how many bytes).
  Status place(Arena* const ram[kTierCount], Arena& mapped);

 private:
  const uint8_t* file_ = nullptr;
  const BoardImageHeader* header_ = nullptr;
  const BoardImageConfig* config_ = nullptr;
  const BoardImageSection* sections_ = nullptr;
  const BoardImageTensor* table_ = nullptr;
  const uint8_t* base_[kTierCount] = {};
  BoardSlice slice_;
};

}  // namespace mcullm
