// A board's memory tiers and compute rates, the input of the cost model (plan/cost_model_host.h): built-in
// presets (esp32s3-psram80, esp32s3-psram120, from ../shared/FACTS.md section 6) or a JSON file:
//   {"name": "...", "clock_mhz": 240,
//    "tiers": {"sram":  {"capacity_bytes": N, "read_mb_s": [one core, two cores]},
//              "psram": {...}, "flash": {...}},
//    "compute_mmac_s": {"f32": [1, 2], "int8": [1, 2], "int4": [1, 2], "ternary": [1, 2],
//                       "f32_c": [1, 2], "int8_c": [1, 2], "int4_c": [1, 2]},
//    "overheads": {"matvec_cycles": C, "attn_entry_cycles": C, "handoff_us": U},
//    "image_bytes_max": N}
// (MB = 1e6 bytes; MMAC/s = 1e6 multiply-accumulates per second.) Kernel kinds: "f32" (an optimized
// f32 dot product, esp-dsp's), "int8"/"int4"/"ternary" (PIE SIMD: int8 activations times weights of
// that kind), and the plain C kernels of the peers the model is calibrated on: "f32_c" (f32 x f32,
// attention with an f32 KV cache), "int8_c" (int8 x int8), "int4_c" (f32 activations x int4 codes).
// Overheads: cycles per matvec call, cycles per attention entry (one head at one position: score,
// softmax, mixing, beyond the MACs), and the cross-core hand-off per matvec on two cores.
// image_bytes_max: the largest board image the board takes (the flash partition it is written to);
// optional, the ESP32-S3 presets' model partition when left out (files written before it existed).
// Every other field is required, every number finite, > 0 (overheads >= 0) and at most 1e15.
// docs/cost-model.md gives the equations and where each preset figure comes from.
#pragma once
#include <stdint.h>

#include <string>

#include "core/arena.h"
#include "mcullm/status.h"

namespace mcullm {

enum class KernelKind : int { kF32 = 0, kInt8, kInt4, kTernary, kF32C, kInt8C, kInt4C, kCount };
constexpr int kKernelKindCount = static_cast<int>(KernelKind::kCount);
const char* kernel_kind_name(KernelKind k);
// PIE kernels stream their weights (DMA / preload, double-buffered): their compute hides under the
// memory time of the same stage. Plain C and esp-dsp kernels stall on every cache miss: added.
bool kernel_overlaps_memory(KernelKind k);

struct TierProfile {
  uint64_t capacity_bytes = 0;
  double read_bytes_per_s[2] = {};  // streaming reads with 1 and with 2 cores
};

// The firmware's model partition: the `model` row of firmware/esp32s3/partitions.csv (0xEF0000 at
// 0x110000, the rest of a 16 MB flash), where a board image is written. BoardProfile.PartitionTable-
// MatchesTheModelPartition reads the CSV, so the two cannot drift.
constexpr uint64_t kEsp32s3ModelPartitionBytes = 0xEF0000;

struct BoardProfile {
  std::string name;
  double clock_hz = 0;
  TierProfile tiers[3];                       // Tier::kSram, kPsram, kFlash
  double macs_per_s[kKernelKindCount][2] = {};  // 1 and 2 cores
  double matvec_cycles = 0;      // fixed cost of one matvec call
  double attn_entry_cycles = 0;  // per (head, position) of attention, on one core
  double handoff_s = 0;          // per matvec, when two cores split it
  // The largest board image (format/board_image.h) this board takes: the partition it is flashed into.
  // `mcullm convert --image` refuses a bigger one; the planner counts a board image's stage against it.
  uint64_t image_bytes_max = kEsp32s3ModelPartitionBytes;
};

// The ESP32-S3's compute figures: cycles per MAC on one core for each kernel kind, and the fixed
// overheads. Some come from FACTS.md section 6, the rest are fitted by calibration_fit
// (plan/cost_model_calibration_host.h) on published board measurements; docs/cost-model.md says which.
struct Esp32s3Compute {
  double cycles_per_mac[kKernelKindCount] = {};
  double matvec_cycles = 0;
  double attn_entry_cycles = 0;    // PIE kernels, int8 KV cache (the seed engine; ours on the board)
  double attn_entry_cycles_c = 0;  // plain C, f32 KV cache, expf (the C peers; calibration only)
};
// The figures the presets carry (the fit's output, checked by tests/cost_model_test.cpp).
const Esp32s3Compute& esp32s3_preset_compute();
// An ESP32-S3 at 240 MHz with FACTS's memory tiers, PSRAM at the given bandwidth (MB/s, one and two
// cores), and these compute figures; hand-off = a spinning second core (FACTS: 83-93 cycles).
BoardProfile esp32s3_board(const char* name, double psram_one_core_mb_s, double psram_two_cores_mb_s,
                           const Esp32s3Compute& compute);

// The names of the built-in presets, comma-separated (for messages).
const char* board_preset_names();
Status board_preset(const std::string& name, BoardProfile* out);
Status board_profile_from_json(const std::string& text, BoardProfile* out);
std::string board_profile_to_json(const BoardProfile& p);
// A preset name, else a JSON file's path.
Status load_board_profile(const std::string& preset_or_file, BoardProfile* out);

}  // namespace mcullm
