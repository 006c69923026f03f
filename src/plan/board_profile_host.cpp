#include "plan/board_profile_host.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace mcullm {

namespace {

using nlohmann::json;

const char* const kTierKeys[3] = {"sram", "psram", "flash"};
const char* const kKindKeys[kKernelKindCount] = {"f32", "int8", "int4", "ternary", "f32_c", "int8_c", "int4_c"};
constexpr double kMaxValue = 1e15;

constexpr double MB = 1e6;
// The fit's output (`mcullm plan --calibration --fit`), rounded to 4 digits.
constexpr double FITTED_INT8_C = 5.718, FITTED_INT4_C = 8.442, FITTED_MATVEC = 12106, FITTED_ENTRY = 229.5, FITTED_ENTRY_C = 462.1;

// The fitted figures: printed by `mcullm plan --calibration --fit`, which runs calibration_fit
// (plan/cost_model_calibration_host.cpp); CostCalibration.PresetsCarryTheFit checks they agree.
// Fitted: int8_c, int4_c, matvec_cycles, attn_entry_cycles (and attn_entry_cycles_c, used only by the
// calibration's C peers). The rest are FACTS or Espressif figures, or assumptions (docs/cost-model.md).
Esp32s3Compute preset_compute() {
  Esp32s3Compute c;
  const double fixed[kKernelKindCount] = {
      432.0 / 256,    // f32: esp-dsp's benchmark table, dsps_dotprod_f32 on the ESP32-S3, 432 cycles for 256
      6.2 / 21.0,     // int8 PIE: "PIE vs plain C | 21x on the kernel", 6.2 cycles/MAC C kernel
      0.47,           // int4 PIE: "0.47 with PIE 4-bit"
      0.47,           // ternary PIE: no figure in FACTS; assumed as the 4-bit PIE kernel
      1311.0 / 256,   // f32_c: the same table's ANSI C dsps_dotprod_f32 (Xtensa, -O2), 1311 cycles for 256
      FITTED_INT8_C,  // int8_c: fitted
      FITTED_INT4_C,  // int4_c: fitted
  };
  for (int k = 0; k < kKernelKindCount; ++k) c.cycles_per_mac[k] = fixed[k];
  c.matvec_cycles = FITTED_MATVEC;
  c.attn_entry_cycles = FITTED_ENTRY;
  c.attn_entry_cycles_c = FITTED_ENTRY_C;
  return c;
}

}  // namespace

const Esp32s3Compute& esp32s3_preset_compute() {
  static const Esp32s3Compute c = preset_compute();
  return c;
}

// ESP32-S3, ../shared/FACTS.md section 6 (the row each figure comes from is named beside it).
BoardProfile esp32s3_board(const char* name, double psram_one_core_mb_s, double psram_two_cores_mb_s,
                           const Esp32s3Compute& compute) {
  BoardProfile p;
  p.name = name;
  p.clock_hz = 240e6;  // "CPU | 2 x Xtensa LX7, 240 MHz"
  // "internal SRAM free for the app | ... ~210 KB usable for weights"
  p.tiers[0].capacity_bytes = 210 * 1024;
  // "SRAM stream | 232 MB/s scalar, 947 MB/s with PIE"; FACTS gives no two-core figure: assumed to
  // double (the two cores read different banks). SRAM reads are part of the kernels' cycles per MAC,
  // so the time model does not add them (docs/cost-model.md).
  p.tiers[0].read_bytes_per_s[0] = 947 * MB;
  p.tiers[0].read_bytes_per_s[1] = 2 * 947 * MB;
  // PSRAM size is not in FACTS: 8 MB, the common N16R8 module. Bandwidth: the "PSRAM octal" rows.
  p.tiers[1].capacity_bytes = 8ull << 20;
  p.tiers[1].read_bytes_per_s[0] = psram_one_core_mb_s * MB;
  p.tiers[1].read_bytes_per_s[1] = psram_two_cores_mb_s * MB;
  // Flash size is not in FACTS: 16 MB (N16R8; FACTS section 5 uses 16 MB partitions).
  // "flash mmap stream | ~25.8 MB/s", one or two cores (one bus).
  p.tiers[2].capacity_bytes = 16ull << 20;
  p.tiers[2].read_bytes_per_s[0] = p.tiers[2].read_bytes_per_s[1] = 25.8 * MB;
  // A board image goes into the firmware's model partition, not the whole flash.
  p.image_bytes_max = kEsp32s3ModelPartitionBytes;
  // Compute per core; two cores split every matmul, so twice that.
  for (int k = 0; k < kKernelKindCount; ++k) {
    p.macs_per_s[k][0] = p.clock_hz / compute.cycles_per_mac[k];
    p.macs_per_s[k][1] = 2 * p.macs_per_s[k][0];
  }
  p.matvec_cycles = compute.matvec_cycles;
  p.attn_entry_cycles = compute.attn_entry_cycles;
  // "cross-core hand-off | 83-93 cycles with a spinning second core": the middle, 88.
  p.handoff_s = 88 / p.clock_hz;
  return p;
}

namespace {

Status bad(const std::string& what) {
  return Status::Error(Code::kInvalidArgument, "board profile: %s", what.c_str());
}

Status number(const json& obj, const char* key, const std::string& where, double* out, bool zero_ok = false) {
  if (!obj.is_object() || !obj.contains(key)) return bad("missing field " + where + key);
  const json& v = obj.at(key);
  if (!v.is_number()) return bad("field " + where + key + " is not a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || (d == 0 && !zero_ok) || d > kMaxValue)
    return bad("field " + where + key + (zero_ok ? " must be a finite number >= 0" : " must be a finite number > 0") +
               " and <= 1e15");
  *out = d;
  return Status::Ok();
}

// A byte count: a whole number > 0.
Status bytes(const json& obj, const char* key, const std::string& where, uint64_t* out) {
  double d = 0;
  MC_TRY(number(obj, key, where, &d));
  if (d != std::floor(d)) return bad("field " + where + key + " must be a whole number");
  *out = static_cast<uint64_t>(d);
  return Status::Ok();
}

Status pair(const json& obj, const char* key, const std::string& where, double scale, double out[2]) {
  if (!obj.is_object() || !obj.contains(key)) return bad("missing field " + where + key);
  const json& v = obj.at(key);
  if (!v.is_array() || v.size() != 2) return bad("field " + where + key + " must be [one core, two cores]");
  for (int i = 0; i < 2; ++i) {
    const json holder = {{"v", v[i]}};
    MC_TRY(number(holder, "v", where + key + "[" + std::to_string(i) + "].", &out[i]));
    out[i] *= scale;
  }
  return Status::Ok();
}

}  // namespace

bool kernel_overlaps_memory(KernelKind k) {
  return k == KernelKind::kInt8 || k == KernelKind::kInt4 || k == KernelKind::kTernary;
}

const char* kernel_kind_name(KernelKind k) {
  const int i = static_cast<int>(k);
  return i >= 0 && i < kKernelKindCount ? kKindKeys[i] : "?";
}

const char* board_preset_names() { return "esp32s3-psram80, esp32s3-psram120"; }

Status board_preset(const std::string& name, BoardProfile* out) {
  // "PSRAM octal, 80 MHz | 60-81 MB/s one core, ~91 MB/s both cores": one core at the range's middle.
  if (name == "esp32s3-psram80") *out = esp32s3_board("esp32s3-psram80", 70, 91, esp32s3_preset_compute());
  // "PSRAM 120 MHz (experimental) | 81 MB/s one core, 131 MB/s both"
  else if (name == "esp32s3-psram120") *out = esp32s3_board("esp32s3-psram120", 81, 131, esp32s3_preset_compute());
  else return bad("unknown preset '" + name + "' (presets: " + board_preset_names() + ")");
  return Status::Ok();
}

Status board_profile_from_json(const std::string& text, BoardProfile* out) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return bad(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return bad("the top level must be an object");
  BoardProfile p;
  if (!j.contains("name") || !j["name"].is_string()) return bad("missing field name (a string)");
  p.name = j["name"].get<std::string>();
  double mhz = 0;
  MC_TRY(number(j, "clock_mhz", "", &mhz));
  p.clock_hz = mhz * 1e6;
  if (!j.contains("tiers") || !j["tiers"].is_object()) return bad("missing field tiers (an object)");
  for (int t = 0; t < 3; ++t) {
    const std::string where = std::string("tiers.") + kTierKeys[t] + ".";
    if (!j["tiers"].contains(kTierKeys[t])) return bad("missing field tiers." + std::string(kTierKeys[t]));
    const json& tier = j["tiers"][kTierKeys[t]];
    MC_TRY(bytes(tier, "capacity_bytes", where, &p.tiers[t].capacity_bytes));
    MC_TRY(pair(tier, "read_mb_s", where, MB, p.tiers[t].read_bytes_per_s));
  }
  if (!j.contains("compute_mmac_s") || !j["compute_mmac_s"].is_object())
    return bad("missing field compute_mmac_s (an object)");
  for (int k = 0; k < kKernelKindCount; ++k)
    MC_TRY(pair(j["compute_mmac_s"], kKindKeys[k], "compute_mmac_s.", 1e6, p.macs_per_s[k]));
  if (!j.contains("overheads") || !j["overheads"].is_object()) return bad("missing field overheads (an object)");
  const json& o = j["overheads"];
  MC_TRY(number(o, "matvec_cycles", "overheads.", &p.matvec_cycles, true));
  MC_TRY(number(o, "attn_entry_cycles", "overheads.", &p.attn_entry_cycles, true));
  MC_TRY(number(o, "handoff_us", "overheads.", &p.handoff_s, true));
  p.handoff_s *= 1e-6;
  // Optional: profiles written before it keep the presets' model partition.
  if (j.contains("image_bytes_max")) MC_TRY(bytes(j, "image_bytes_max", "", &p.image_bytes_max));
  *out = p;
  return Status::Ok();
}

std::string board_profile_to_json(const BoardProfile& p) {
  json j;
  j["name"] = p.name;
  j["clock_mhz"] = p.clock_hz / 1e6;
  for (int t = 0; t < 3; ++t) {
    j["tiers"][kTierKeys[t]]["capacity_bytes"] = p.tiers[t].capacity_bytes;
    j["tiers"][kTierKeys[t]]["read_mb_s"] = {p.tiers[t].read_bytes_per_s[0] / MB, p.tiers[t].read_bytes_per_s[1] / MB};
  }
  for (int k = 0; k < kKernelKindCount; ++k)
    j["compute_mmac_s"][kKindKeys[k]] = {p.macs_per_s[k][0] / 1e6, p.macs_per_s[k][1] / 1e6};
  j["overheads"]["matvec_cycles"] = p.matvec_cycles;
  j["overheads"]["attn_entry_cycles"] = p.attn_entry_cycles;
  j["overheads"]["handoff_us"] = p.handoff_s * 1e6;
  j["image_bytes_max"] = p.image_bytes_max;
  return j.dump(2);
}

Status load_board_profile(const std::string& preset_or_file, BoardProfile* out) {
  if (board_preset(preset_or_file, out).ok()) return Status::Ok();
  std::ifstream in(preset_or_file, std::ios::binary);
  if (!in)
    return bad("'" + preset_or_file + "' is neither a preset (" + board_preset_names() + ") nor a readable file");
  std::stringstream ss;
  ss << in.rdbuf();
  return board_profile_from_json(ss.str(), out);
}

}  // namespace mcullm
