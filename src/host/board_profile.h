// A board's memory tiers and compute rates, the input of the cost model (host/cost_model.h): built-in
// presets (esp32s3-psram80, esp32s3-psram120, from ../shared/FACTS.md section 6) or a JSON file:
//   {"name": "...", "clock_mhz": 240,
//    "tiers": {"sram":  {"capacity_bytes": N, "read_mb_s": [one core, two cores]},
//              "psram": {...}, "flash": {...}},
//    "compute_mmac_s": {"f32": [1, 2], "int8": [1, 2], "int4": [1, 2], "ternary": [1, 2]}}
// (MB = 1e6 bytes; MMAC/s = 1e6 multiply-accumulates per second; "int8"/"int4"/"ternary" are int8
// activations times weights of that kind.) Every field is required, every number finite, > 0 and at
// most 1e15.
#pragma once
#include <stdint.h>

#include <string>

#include "core/arena.h"
#include "mcullm/status.h"

namespace mcullm {

enum class KernelKind : int { kF32 = 0, kInt8, kInt4, kTernary, kCount };
constexpr int kKernelKindCount = static_cast<int>(KernelKind::kCount);
const char* kernel_kind_name(KernelKind k);

struct TierProfile {
  uint64_t capacity_bytes = 0;
  double read_bytes_per_s[2] = {};  // streaming reads with 1 and with 2 cores
};

struct BoardProfile {
  std::string name;
  double clock_hz = 0;
  TierProfile tiers[3];                       // Tier::kSram, kPsram, kFlash
  double macs_per_s[kKernelKindCount][2] = {};  // 1 and 2 cores
};

// The names of the built-in presets, comma-separated (for messages).
const char* board_preset_names();
Status board_preset(const std::string& name, BoardProfile* out);
Status board_profile_from_json(const std::string& text, BoardProfile* out);
std::string board_profile_to_json(const BoardProfile& p);
// A preset name, else a JSON file's path.
Status load_board_profile(const std::string& preset_or_file, BoardProfile* out);

}  // namespace mcullm
