// Ternary matvec micro benchmarks: i2_s rows times int8 activations (one scale), reference vs AVX2 vs AVX-512 VNNI,
// one thread, at the shapes of bitnet.cpp's models (125M: 768x768, 3072x768, 768x3072; 2B-4T:
// 2560x2560, 6912x2560) and bitllama2.c's 3M (256x256). Shapes are rows x cols. Bytes/s counts
// the packed weight bytes read; items/s counts weights.
//   build/release/bench/ternary_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "quant/ternary.h"

namespace mcullm {
namespace {

struct Shape {
  int rows, cols;
};
const Shape kShapes[] = {{256, 256}, {768, 768}, {3072, 768}, {768, 3072}, {2560, 2560}, {6912, 2560}};

void bench_i2s(benchmark::State& state, const KernelSet* k, Shape s) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> t(-1, 1);
  const size_t row_bytes = ternary_row_bytes(TernaryLayout::kI2S, s.cols);
  std::vector<uint8_t> packed(row_bytes * static_cast<size_t>(s.rows));
  std::vector<int8_t> row(static_cast<size_t>(s.cols));
  for (int r = 0; r < s.rows; ++r) {
    for (auto& v : row) v = static_cast<int8_t>(t(rng));
    ternary_pack_row(TernaryLayout::kI2S, row.data(), s.cols, packed.data() + row_bytes * static_cast<size_t>(r));
  }
  MatRef w{DType::kI2_S, packed.data(), s.rows, s.cols, row_bytes};
  w.scale = 0.02f;
  std::vector<float> xf(static_cast<size_t>(s.cols));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : xf) v = normal(rng);
  std::vector<int8_t> xq(static_cast<size_t>(s.cols));
  float xs = 0;
  quantize_bitlinear(xf.data(), s.cols, xq.data(), &xs);
  std::vector<float> y(static_cast<size_t>(s.rows));
  for (auto _ : state) {
    k->matvec_i2s(w, xq.data(), &xs, y.data(), 0, s.rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(packed.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * s.rows * s.cols);
  state.SetLabel(k->name);
}

// Batched (prefill) form: 64 columns at once; items/s counts weight x column products.
void bench_i2s_matmat(benchmark::State& state, const KernelSet* k, Shape s) {
  constexpr int kN = 64;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> t(-1, 1), xd(-127, 127);
  const size_t row_bytes = ternary_row_bytes(TernaryLayout::kI2S, s.cols);
  std::vector<uint8_t> packed(row_bytes * static_cast<size_t>(s.rows));
  std::vector<int8_t> row(static_cast<size_t>(s.cols));
  for (int r = 0; r < s.rows; ++r) {
    for (auto& v : row) v = static_cast<int8_t>(t(rng));
    ternary_pack_row(TernaryLayout::kI2S, row.data(), s.cols, packed.data() + row_bytes * static_cast<size_t>(r));
  }
  MatRef w{DType::kI2_S, packed.data(), s.rows, s.cols, row_bytes};
  w.scale = 0.02f;
  std::vector<int8_t> xq(static_cast<size_t>(s.cols) * kN);
  for (auto& v : xq) v = static_cast<int8_t>(xd(rng));
  std::vector<float> xs(kN, 0.01f), y(static_cast<size_t>(s.rows) * kN);
  for (auto _ : state) {
    k->matmat_i2s(w, xq.data(), static_cast<size_t>(s.cols), xs.data(), kN, y.data(), static_cast<size_t>(s.rows), 0, s.rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * s.rows * s.cols * kN);
  state.SetLabel(k->name);
}

const bool kRegistered = [] {
  for (const Shape& s : kShapes)
    for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avx512(), kernels_amx()}) {
      if (k == nullptr) continue;
      const std::string name = "matvec/i2_s/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/" + k->name;
      benchmark::RegisterBenchmark(name.c_str(), bench_i2s, k, s);
      if (k != &kernels_ref()) {
        const std::string mm = "matmat64/i2_s/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/" + k->name;
        benchmark::RegisterBenchmark(mm.c_str(), bench_i2s_matmat, k, s);
      }
    }
  return true;
}();

}  // namespace
}  // namespace mcullm
