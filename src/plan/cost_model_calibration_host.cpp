#include "plan/cost_model_calibration_host.h"

#include <cmath>
#include <cstdio>

namespace mcullm {

namespace {

constexpr int kSram = static_cast<int>(Tier::kSram), kPsram = static_cast<int>(Tier::kPsram),
              kFlash = static_cast<int>(Tier::kFlash);
constexpr double kNotifyS = 34e-6;  // FACTS: "~34 us with FreeRTOS notify"

enum class Psram { k80, k120, kQuad80 };

// One peer engine's run. Shapes are the models' headers; everything else is from the peer's code or
// documents (docs/cost-model.md, "Calibration points").
struct PeerRun {
  const char* id;
  const char* what;
  // shape (ple_dim 0: a llama2.c model)
  int head_rows, dim, layers, heads, kv_heads, ffn, ple_dim;
  // layer matrices (and the PLE input projection)
  double layer_bpw;     // bytes per weight, scales included
  double layer_sram;    // bytes of them kept in SRAM; the rest in layer_tier
  int layer_tier;
  KernelKind layer_kind;
  int layer_cores;
  // head (tied to the token embedding)
  double head_bpw;
  KernelKind head_kind;
  int head_cores;
  double head_share;    // share of the head's bytes and MACs read per token (two-stage head < 1)
  // attention: KV cache (PSRAM) bytes per element, kind of its MACs, cores
  double kv_bytes;
  KernelKind attn_kind;
  int attn_cores;
  double handoff_s;     // per matvec on two cores
  Psram psram;
  int first_pos, n_tokens;  // the run's positions (the prediction is their mean time)
  int stage;                // -1: the token's total, else the Stage measured
  double measured_ms;
  bool fit;
};

// What the 28.9M PLE model (V 32768, D 96, L 6, H 4, F 66, P 128; esp32-tinyLLM's model.bin header)
// reads per token, and the 3.4M fixture (../shared/models/esp32-ai-ple: V 4096, D 128, F 415, P 64).
#define M29 32768, 96, 6, 4, 4, 66, 128
#define M34 4096, 128, 6, 4, 4, 415, 64
// The head esp32-tinyLLM's C firmware stages (rows capped at 25,353, unpacked to int8 in PSRAM).
#define M29_CAPPED 25353, 96, 6, 4, 4, 66, 128
#define S260 512, 64, 5, 8, 4, 172, 0

// esp32-ai's file format: int4 codes, an f16 scale per 128 weights.
constexpr double kQ4e = 0.5 + 2.0 / 128;
constexpr double kSeedSram = 210 * 1024;  // FACTS: ~210 KB of SRAM usable for weights
constexpr double kTwoStage = 0.297;       // `mcullm head`, fixture, 256 groups, top 16 (docs/single-board.md)
constexpr double kSpin = 88 / 240e6;      // FACTS: 83-93 cycles spinning

using K = KernelKind;
const PeerRun kRuns[] = {
    // esp32-tinyLLM's C reference (its benchmarks/device.toml, run.c): layers int4 from flash mmap,
    // f32 activations, one core; head int8 in PSRAM on both cores (notify); f32 KV cache in PSRAM.
    // 400 tokens after an 18-token prompt.
    {"tinyllm-c.input", "esp32-tinyLLM C, 28.9M, stage input", M29_CAPPED, kQ4e, 0, kFlash, K::kInt4C, 1, 1.0, K::kInt8C, 2,
     1.0, 4, K::kF32C, 1, kNotifyS, Psram::k80, 18, 400, 0, 4.4, true},
    {"tinyllm-c.attn", "esp32-tinyLLM C, 28.9M, stage attn", M29_CAPPED, kQ4e, 0, kFlash, K::kInt4C, 1, 1.0, K::kInt8C, 2,
     1.0, 4, K::kF32C, 1, kNotifyS, Psram::k80, 18, 400, 1, 42.9, true},
    {"tinyllm-c.ffn", "esp32-tinyLLM C, 28.9M, stage ffn", M29_CAPPED, kQ4e, 0, kFlash, K::kInt4C, 1, 1.0, K::kInt8C, 2, 1.0,
     4, K::kF32C, 1, kNotifyS, Psram::k80, 18, 400, 2, 6.9, true},
    {"tinyllm-c.ple", "esp32-tinyLLM C, 28.9M, stage ple", M29_CAPPED, kQ4e, 0, kFlash, K::kInt4C, 1, 1.0, K::kInt8C, 2, 1.0,
     4, K::kF32C, 1, kNotifyS, Psram::k80, 18, 400, 3, 8.5, true},
    {"tinyllm-c.head", "esp32-tinyLLM C, 28.9M, stage head", M29_CAPPED, kQ4e, 0, kFlash, K::kInt4C, 1, 1.0, K::kInt8C, 2,
     1.0, 4, K::kF32C, 1, kNotifyS, Psram::k80, 18, 400, 4, 57.1, true},
    // The same firmware with its sketch defaults (200 tokens after 4): only attn moves (BENCHMARKING.md).
    {"tinyllm-c.attn@200", "esp32-tinyLLM C, 28.9M, attn, 200 tokens after 4", M29_CAPPED, kQ4e, 0, kFlash, K::kInt4C, 1, 1.0,
     K::kInt8C, 2, 1.0, 4, K::kF32C, 1, kNotifyS, Psram::k80, 4, 200, 1, 26.2, false},
    // esp32-ai's firmware, "8-bit plain C, full head" (FACTS): the sketch esp32-tinyLLM mirrors, built
    // with int8 activations, at the sketch's defaults (200 tokens after a 4-token prompt).
    {"esp32-ai", "esp32-ai firmware, 28.9M, 8-bit plain C, full head, 80 MHz", M29_CAPPED, kQ4e, 0, kFlash, K::kInt8C, 1,
     1.0, K::kInt8C, 2, 1.0, 4, K::kF32C, 1, kNotifyS, Psram::k80, 4, 200, -1, 94.1, true},
    // The seed article's engine on the same weights: int4 PIE on both cores (spinning hand-off),
    // layers in SRAM as far as they fit, head in PSRAM, int8 KV cache; a 256-token run from BOS.
    {"seed.full@80", "seed engine, 28.9M, full head 4-bit, 80 MHz", M29, kQ4e, kSeedSram, kPsram, K::kInt4, 2, kQ4e,
     K::kInt4, 2, 1.0, 1, K::kInt8, 2, kSpin, Psram::k80, 0, 256, -1, 25.0, true},
    {"seed.two-stage@80", "seed engine, 28.9M, two-stage head, 80 MHz", M29, kQ4e, kSeedSram, kPsram, K::kInt4, 2, kQ4e,
     K::kInt4, 2, kTwoStage, 1, K::kInt8, 2, kSpin, Psram::k80, 0, 256, -1, 11.52, true},
    {"seed.full@120", "seed engine, 28.9M, full head 4-bit, 120 MHz", M29, kQ4e, kSeedSram, kPsram, K::kInt4, 2, kQ4e,
     K::kInt4, 2, 1.0, 1, K::kInt8, 2, kSpin, Psram::k120, 0, 256, -1, 18.9, false},
    {"seed.two-stage@120", "seed engine, 28.9M, two-stage head, 120 MHz", M29, kQ4e, kSeedSram, kPsram, K::kInt4, 2, kQ4e,
     K::kInt4, 2, kTwoStage, 1, K::kInt8, 2, kSpin, Psram::k120, 0, 256, -1, 9.17, false},
    // Its own 3.4M model: ~91 tok/s at the start of a context.
    {"seed.3.4M@0", "seed engine, 3.4M model, position 0 (~91 tok/s)", M34, kQ4e, kSeedSram, kPsram, K::kInt4, 2, kQ4e,
     K::kInt4, 2, 1.0, 1, K::kInt8, 2, kSpin, Psram::k80, 0, 1, -1, 1000.0 / 91, false},
    // DaveBben/esp32-llm (its sdkconfig: QUAD PSRAM at 80 MHz, 64 KB data cache): stories260K f32 in
    // PSRAM, esp-dsp dot products on both cores with semaphores, f32 KV cache, 256 steps.
    {"esp32-llm", "DaveBben/esp32-llm, stories260K f32, 2 cores, esp-dsp", S260, 4, 0, kPsram, K::kF32, 2, 4, K::kF32, 2,
     1.0, 4, K::kF32C, 2, kNotifyS, Psram::kQuad80, 0, 256, -1, 1000.0 / 19.13, false},
};

// FACTS's PSRAM rows; the quad one is derived (docs/cost-model.md): a 32-byte cache line takes 64
// data clocks on 4 lines at 80 MHz plus the octal part's measured ~20 clocks of command, address and
// dummy cycles: 32 B / (84 / 80 MHz) = 30.5 MB/s, and 32 / (76 / 80 MHz) = 33.7 MB/s with two cores.
BoardProfile board_for(Psram p, const Esp32s3Compute& c) {
  switch (p) {
    case Psram::k80: return esp32s3_board("esp32s3-psram80", 70, 91, c);
    case Psram::k120: return esp32s3_board("esp32s3-psram120", 81, 131, c);
    default: return esp32s3_board("esp32s3-quadpsram80", 30.5, 33.7, c);
  }
}

void matvecs(StageWork* w, const PeerRun& r, double rows, double cols, double n, bool head = false) {
  const double bpw = head ? r.head_bpw : r.layer_bpw;
  const double share = head ? r.head_share : 1.0;
  const K kind = head ? r.head_kind : r.layer_kind;
  w->macs[static_cast<int>(kind)] += n * rows * cols * share;
  const double bytes = n * rows * cols * bpw * share;
  if (head) {
    w->bytes[kPsram] += bytes;
  } else {
    const double layer_weights = static_cast<double>(r.layers) *
        (r.ple_dim ? 4.0 * r.dim * r.dim + 3.0 * r.ffn * r.dim + 2.0 * r.ple_dim * r.dim
                   : 2.0 * r.dim * r.dim + 2.0 * r.dim * (r.dim / r.heads * r.kv_heads) + 3.0 * r.ffn * r.dim) +
        (r.ple_dim ? static_cast<double>(r.layers) * r.ple_dim * r.dim : 0);
    const double in_sram = std::min(1.0, r.layer_sram / (layer_weights * r.layer_bpw));
    w->bytes[kSram] += bytes * in_sram;
    w->bytes[r.layer_tier] += bytes * (1 - in_sram);
  }
  w->matvecs += n;
}

// The work of each stage of the token at `pos`.
void peer_work(const PeerRun& r, const Esp32s3Compute& c, int pos, StageWork w[kStageCount]) {
  for (int s = 0; s < kStageCount; ++s) {
    w[s] = StageWork();
    w[s].cores = r.layer_cores;
    w[s].handoff_s = r.handoff_s;
  }
  const double d = r.dim, L = r.layers, hd = r.dim / r.heads, kv_dim = hd * r.kv_heads;
  StageWork& in = w[static_cast<int>(Stage::kInput)];
  StageWork& att = w[static_cast<int>(Stage::kAttention)];
  in.bytes[kPsram] += d * r.head_bpw;  // the token's embedding row
  if (r.ple_dim) {
    in.bytes[kFlash] += L * r.ple_dim * r.layer_bpw;  // its PLE row
    matvecs(&in, r, L * r.ple_dim, d, 1);
    matvecs(&att, r, 3 * d, d, L);  // fused QKV
    matvecs(&att, r, d, d, L);
    matvecs(&w[static_cast<int>(Stage::kPle)], r, r.ple_dim, d, 2 * L);  // PLE gate and projection
  } else {
    matvecs(&att, r, d, d, 2 * L);  // wq, wo
    matvecs(&att, r, kv_dim, d, 2 * L);
  }
  matvecs(&w[static_cast<int>(Stage::kFfn)], r, r.ffn, d, 3 * L);
  StageWork& head = w[static_cast<int>(Stage::kHead)];
  head.cores = r.head_cores;
  matvecs(&head, r, r.head_rows, d, 1, true);
  // Attention proper: keys and values of positions 0..pos (PSRAM), scores and mixing.
  const double n = pos + 1.0;
  att.bytes[kPsram] += 2 * L * kv_dim * n * r.kv_bytes;
  att.macs[static_cast<int>(r.attn_kind)] += 2 * L * r.heads * hd * n;
  att.attn_entries = L * r.heads * n;
  att.cores = r.attn_cores;
  if (r.attn_kind == K::kF32C) att.entry_cycles = c.attn_entry_cycles_c;
}

// Mean ms per stage over the run's positions.
void predict(const PeerRun& r, const Esp32s3Compute& c, double stage_ms[kStageCount]) {
  const BoardProfile b = board_for(r.psram, c);
  for (int s = 0; s < kStageCount; ++s) stage_ms[s] = 0;
  StageWork w[kStageCount];
  for (int p = r.first_pos; p < r.first_pos + r.n_tokens; ++p) {
    peer_work(r, c, p, w);
    for (int s = 0; s < kStageCount; ++s) stage_ms[s] += 1e3 * stage_seconds(w[s], b) / r.n_tokens;
  }
}

CalibrationResult result_of(const PeerRun& r, const Esp32s3Compute& c) {
  CalibrationResult x;
  x.id = r.id;
  x.what = r.what;
  x.fit = r.fit;
  x.measured = r.measured_ms;
  predict(r, c, x.stage_ms);
  if (r.stage >= 0) {
    x.predicted = x.stage_ms[r.stage];
  } else {
    for (double v : x.stage_ms) x.predicted += v;
  }
  return x;
}

// The fitted figures as a vector of logs (positive by construction).
constexpr int kFree = 5;
const K kFreeKinds[2] = {K::kInt8C, K::kInt4C};
void to_vec(const Esp32s3Compute& c, double v[kFree]) {
  for (int i = 0; i < 2; ++i) v[i] = std::log(c.cycles_per_mac[static_cast<int>(kFreeKinds[i])]);
  v[2] = std::log(c.matvec_cycles);
  v[3] = std::log(c.attn_entry_cycles);
  v[4] = std::log(c.attn_entry_cycles_c);
}
Esp32s3Compute from_vec(Esp32s3Compute c, const double v[kFree]) {
  for (int i = 0; i < 2; ++i) c.cycles_per_mac[static_cast<int>(kFreeKinds[i])] = std::exp(v[i]);
  c.matvec_cycles = std::exp(v[2]);
  c.attn_entry_cycles = std::exp(v[3]);
  c.attn_entry_cycles_c = std::exp(v[4]);
  return c;
}
std::vector<double> residuals(const Esp32s3Compute& c) {
  std::vector<double> r;
  for (const CalibrationResult& p : calibration_points(c))
    if (p.fit) r.push_back(std::log(p.predicted / p.measured));
  return r;
}

// Solves a (n x n) x = b by Gaussian elimination with partial pivoting (a is overwritten).
void solve(double a[kFree][kFree], double b[kFree], double x[kFree]) {
  for (int i = 0; i < kFree; ++i) {
    int p = i;
    for (int j = i + 1; j < kFree; ++j)
      if (std::fabs(a[j][i]) > std::fabs(a[p][i])) p = j;
    std::swap(a[i], a[p]);
    std::swap(b[i], b[p]);
    for (int j = i + 1; j < kFree; ++j) {
      const double f = a[j][i] / a[i][i];
      for (int k = i; k < kFree; ++k) a[j][k] -= f * a[i][k];
      b[j] -= f * b[i];
    }
  }
  for (int i = kFree - 1; i >= 0; --i) {
    double s = b[i];
    for (int k = i + 1; k < kFree; ++k) s -= a[i][k] * x[k];
    x[i] = s / a[i][i];
  }
}

double sum_sq(const std::vector<double>& r) {
  double s = 0;
  for (double v : r) s += v * v;
  return s;
}

}  // namespace

std::vector<CalibrationResult> calibration_points(const Esp32s3Compute& compute) {
  std::vector<CalibrationResult> out;
  for (const PeerRun& r : kRuns) out.push_back(result_of(r, compute));
  // The seed article's 3.4M model slows ~1.6x from the start to the end of a 256-token context.
  PeerRun end = kRuns[sizeof kRuns / sizeof kRuns[0] - 2];
  end.first_pos = 255;
  CalibrationResult x = result_of(end, compute);
  const double start = out[out.size() - 2].predicted;
  x.id = "seed.3.4M@255/@0";
  x.what = "seed engine, 3.4M model, slowdown from position 0 to 255 (~1.6x)";
  x.ratio = true;
  x.fit = true;
  x.measured = 1.6;
  x.predicted = x.predicted / start;
  out.push_back(x);
  return out;
}

// Levenberg-Marquardt on log(predicted / measured) over the fit points, in log parameters, with a
// numerical Jacobian. Deterministic: same start, same result.
Esp32s3Compute calibration_fit(const Esp32s3Compute& start) {
  double v[kFree];
  to_vec(start, v);
  double lambda = 1e-3;
  std::vector<double> r = residuals(from_vec(start, v));
  for (int it = 0; it < 200; ++it) {
    std::vector<std::vector<double>> jac(r.size(), std::vector<double>(kFree));
    for (int k = 0; k < kFree; ++k) {
      double u[kFree];
      for (int i = 0; i < kFree; ++i) u[i] = v[i];
      u[k] += 1e-6;
      const std::vector<double> rk = residuals(from_vec(start, u));
      for (size_t i = 0; i < r.size(); ++i) jac[i][k] = (rk[i] - r[i]) / 1e-6;
    }
    double a[kFree][kFree] = {}, g[kFree] = {}, step[kFree];
    for (size_t i = 0; i < r.size(); ++i)
      for (int k = 0; k < kFree; ++k) {
        g[k] -= jac[i][k] * r[i];
        for (int m = 0; m < kFree; ++m) a[k][m] += jac[i][k] * jac[i][m];
      }
    for (int k = 0; k < kFree; ++k) a[k][k] += lambda * (1 + a[k][k]);
    solve(a, g, step);
    double u[kFree];
    for (int k = 0; k < kFree; ++k) u[k] = v[k] + std::max(-2.0, std::min(2.0, step[k]));
    const std::vector<double> ru = residuals(from_vec(start, u));
    if (sum_sq(ru) < sum_sq(r)) {
      const double gain = sum_sq(r) - sum_sq(ru);
      for (int k = 0; k < kFree; ++k) v[k] = u[k];
      r = ru;
      lambda = std::max(1e-9, lambda / 3);
      if (gain < 1e-14) break;
    } else {
      lambda *= 4;
      if (lambda > 1e9) break;
    }
  }
  return from_vec(start, v);
}

std::string format_calibration(const Esp32s3Compute& c, const std::vector<CalibrationResult>& points) {
  std::string s;
  char line[320];
  std::snprintf(line, sizeof line,
                "compute (cycles per MAC, one core): f32 (esp-dsp) %.4g, int8 PIE %.4g, int4 PIE %.4g, ternary PIE %.4g, "
                "f32_c %.4g, int8_c %.4g, int4_c %.4g; matvec %.5g cycles; attention entry %.4g cycles (C peers %.4g)\n",
                c.cycles_per_mac[0], c.cycles_per_mac[1], c.cycles_per_mac[2], c.cycles_per_mac[3], c.cycles_per_mac[4],
                c.cycles_per_mac[5], c.cycles_per_mac[6], c.matvec_cycles, c.attn_entry_cycles, c.attn_entry_cycles_c);
  s += line;
  std::snprintf(line, sizeof line, "%-20s %-5s %9s %9s %7s  %-35s  %s\n", "point", "use", "published", "predicted", "error",
                "predicted input/attn/ffn/ple/head ms", "what (ms per token unless a ratio)");
  s += line;
  for (const CalibrationResult& p : points) {
    char stages[64];
    std::snprintf(stages, sizeof stages, "%.2f/%.2f/%.2f/%.2f/%.2f", p.stage_ms[0], p.stage_ms[1], p.stage_ms[2],
                  p.stage_ms[3], p.stage_ms[4]);
    std::snprintf(line, sizeof line, "%-20s %-5s %9.2f %9.2f %+6.1f%%  %-35s  %s\n", p.id.c_str(), p.fit ? "fit" : "check",
                  p.measured, p.predicted, 100 * p.error(), p.ratio ? "(at position 255)" : stages, p.what.c_str());
    s += line;
  }
  return s;
}

}  // namespace mcullm
