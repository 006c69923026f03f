// The reduction-order contract of kernels.h, as scalar building blocks shared by every variant's
// tails and by the reference kernels.
#pragma once

namespace mcullm {

constexpr int kF32Lanes = 16;
constexpr int kBlockLanes = 8;

static inline float fold_lanes16(float* acc) {
  for (int s = 8; s > 0; s /= 2)
    for (int i = 0; i < s; ++i) acc[i] += acc[i + s];
  return acc[0];
}

static inline float fold_lanes8(float* acc) {
  for (int s = 4; s > 0; s /= 2)
    for (int i = 0; i < s; ++i) acc[i] += acc[i + s];
  return acc[0];
}

}  // namespace mcullm
