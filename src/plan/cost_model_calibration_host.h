// The cost model's calibration on published ESP32-S3 measurements (../shared/FACTS.md section 6 and
// the peers' own benchmark files): each point is a peer engine's run described by what it reads from
// which tier with which kernel, on how many cores, at which positions; the same stage_seconds as
// `mcullm plan` predicts it. calibration_fit fits the free figures (Esp32s3Compute's fitted fields)
// on the points marked `fit` and the presets carry its result; the other points are held out.
// docs/cost-model.md describes every point, its assumptions and the fit.
#pragma once
#include <string>
#include <vector>

#include "plan/board_profile_host.h"
#include "plan/cost_model_host.h"

namespace mcullm {

struct CalibrationResult {
  std::string id, what;
  bool fit = false;           // used by the fit (else held out)
  bool ratio = false;         // measured/predicted are a ratio, not ms
  double measured = 0, predicted = 0;
  double stage_ms[kStageCount] = {};  // the prediction by stage (ms; the mean over the run's positions)
  double error() const { return predicted / measured - 1; }
};

// Predicts every calibration point with these compute figures (the memory tiers are FACTS's).
std::vector<CalibrationResult> calibration_points(const Esp32s3Compute& compute);
// Fits the free figures (int8_c and int4_c cycles per MAC, matvec_cycles, attn_entry_cycles,
// attn_entry_cycles_c) on the fit points, least squares of log(predicted / measured), from `start`.
Esp32s3Compute calibration_fit(const Esp32s3Compute& start);
// The table `mcullm plan --calibration` prints.
std::string format_calibration(const Esp32s3Compute& compute, const std::vector<CalibrationResult>& points);

}  // namespace mcullm
