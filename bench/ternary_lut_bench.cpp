// LUT-kernel micro benchmarks (kernels.h "LUT kernels"): TL1 and TL2 at bitnet.cpp's shapes (125M:
// 768x768, 3072x768, 768x3072; 2B-4T: 2560x2560, 6912x2560; rows x cols), one token, one thread,
// beside the i2_s matvec, for every kernel table compiled in and supported (ref, avx2, avx512).
// Bytes/s counts the packed weight bytes read (so GB/s compare across formats of different sizes).
//   lut/<type>/<shape>/<kernels>        the matmul alone, LUT built beforehand (compare with i2s/...,
//                                       whose activations are quantized beforehand too)
//   lut_full/<type>/<shape>/<kernels>   tl_mul_mat: activation quantization + LUT build + matmul
//   i2s/<shape>/<kernels>               matvec_i2s
//   build/release/bench/ternary_lut_bench --benchmark_min_time=0.1
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
const Shape kShapes[] = {{768, 768}, {3072, 768}, {768, 3072}, {2560, 2560}, {6912, 2560}};

std::vector<int8_t> random_weights(Shape s) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> t(-1, 1);
  std::vector<int8_t> w(static_cast<size_t>(s.rows) * s.cols);
  for (auto& v : w) v = static_cast<int8_t>(t(rng));
  return w;
}

std::vector<float> random_activations(int n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

void finish(benchmark::State& state, const KernelSet* k, size_t weight_bytes, Shape s) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weight_bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * s.rows * s.cols);
  state.SetLabel(k->name);
}

void bench_lut(benchmark::State& state, const KernelSet* k, TlType type, Shape s, bool full) {
  const TlTiling t = tl_default_tiling(type, s.rows, s.cols);
  std::vector<uint8_t> bytes(tl_tensor_bytes(type, s.rows, s.cols, t));
  tl_pack(type, t, random_weights(s).data(), s.rows, s.cols, bytes.data());
  TlTensor w;
  tl_tensor_init(&w, type, bytes.data(), bytes.size(), s.rows, s.cols, t);
  const std::vector<float> x = random_activations(s.cols);
  std::vector<float> y(static_cast<size_t>(s.rows));
  std::vector<uint8_t> work(tl_workspace_bytes(w, 1));
  std::vector<int8_t> q(static_cast<size_t>(s.cols));
  std::vector<uint8_t> lut(tl_lut_bytes(w));
  float inv = 0;
  tl_quantize_activations(x.data(), 1, s.cols, TlActQuant::kPerToken, q.data(), q.size(), &inv);
  k->tl_lut_build(w, q.data(), lut.data());
  const int tiles = s.rows / t.BM;
  for (auto _ : state) {
    if (full) tl_mul_mat(*k, w, x.data(), 1, y.data(), work.data(), work.size(), nullptr);
    else k->tl_matmul(w, lut.data(), lut.size(), &inv, 1, y.data(), y.size(), 0, tiles);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  finish(state, k, tl_packed_bytes(type, s.rows, s.cols, t), s);
}

void bench_i2s(benchmark::State& state, const KernelSet* k, Shape s) {
  const size_t row_bytes = ternary_row_bytes(TernaryLayout::kI2S, s.cols);
  std::vector<uint8_t> packed(row_bytes * static_cast<size_t>(s.rows));
  const std::vector<int8_t> w8 = random_weights(s);
  for (int r = 0; r < s.rows; ++r)
    ternary_pack_row(TernaryLayout::kI2S, w8.data() + static_cast<size_t>(r) * s.cols, s.cols,
                     packed.data() + row_bytes * static_cast<size_t>(r));
  MatRef w{DType::kI2_S, packed.data(), s.rows, s.cols, row_bytes};
  w.scale = 0.02f;
  const std::vector<float> x = random_activations(s.cols);
  std::vector<int8_t> xq(static_cast<size_t>(s.cols));
  float inv = 0;
  quantize_i8s(x.data(), s.cols, xq.data(), &inv);
  std::vector<float> y(static_cast<size_t>(s.rows));
  for (auto _ : state) {
    k->matvec_i2s(w, xq.data(), &inv, y.data(), 0, s.rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  finish(state, k, packed.size(), s);
}

const bool kRegistered = [] {
  for (const Shape& s : kShapes) {
    const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avx512()}) {
      if (k == nullptr) continue;
      benchmark::RegisterBenchmark(("i2s/" + shape + "/" + k->name).c_str(), bench_i2s, k, s);
      for (TlType type : {TlType::kTL1, TlType::kTL2}) {
        const std::string tn = tl_type_name(type);
        benchmark::RegisterBenchmark(("lut/" + tn + "/" + shape + "/" + k->name).c_str(), bench_lut, k, type, s, false);
        benchmark::RegisterBenchmark(("lut_full/" + tn + "/" + shape + "/" + k->name).c_str(), bench_lut, k, type, s, true);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace mcullm
