// Matvec micro benchmarks: reference vs AVX2 tables, one thread, for f32, f16, q8_0, q4_0 and q4g64
// at the shapes that matter (stories260K's 512x64 head and 64x64 / 172x64 layers, 768x768, 2048x2048),
// plus BitNet 125M's tied head (32002x768, f16 as bitnet.cpp writes it, or q8_0).
// Bytes/s counts the weight bytes read; items/s counts weights (multiply-adds).
// attn_heads: one layer's attention at one position, stories260K's heads (8 of size 8, 4 KV heads)
// over n cached positions: the per-head default (the table's own per-head kernels) against the
// table's entry. items/s counts positions times heads.
//   build/release/bench/kernels_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/dtype.h"

namespace mcullm {
namespace {

struct Shape {
  int rows, cols;
};
const Shape kShapes[] = {{512, 64}, {64, 64}, {172, 64}, {768, 768}, {2048, 2048}};
const DType kTypes[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4G64};
const Shape kHead = {32002, 768};

// A quantized weight matrix and activation vector in every form the kernels read.
struct Problem {
  std::vector<uint8_t> weights;
  MatRef w;
  std::vector<float> xf;
  std::vector<int8_t> xq;
  std::vector<float> xs;
  ActVec x;
  std::vector<float> y;

  Problem(DType type, int rows, int cols) {
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t row_bytes = dtype_row_bytes(type, cols);
    weights.resize(row_bytes * static_cast<size_t>(rows));
    std::vector<float> src(static_cast<size_t>(cols));
    for (int r = 0; r < rows; ++r) {
      for (float& v : src) v = normal(rng);
      quantize_row(type, src.data(), weights.data() + row_bytes * static_cast<size_t>(r), cols);
    }
    w = MatRef{type, weights.data(), rows, cols, row_bytes};
    xf.resize(static_cast<size_t>(cols));
    for (float& v : xf) v = normal(rng);
    x.f = xf.data();
    const int block = dtype_info(type)->act_block;
    if (block > 0) {
      const int nb = (cols + block - 1) / block;
      xq.resize(static_cast<size_t>(nb) * block);
      xs.resize(static_cast<size_t>(nb));
      quantize_activations(xf.data(), cols, block, xq.data(), xs.data());
      x.q = xq.data();
      x.scales = xs.data();
      x.block = block;
    }
    y.resize(static_cast<size_t>(rows));
  }
};

void bench_matvec(benchmark::State& state, const KernelSet* k, DType type, Shape shape) {
  Problem p(type, shape.rows, shape.cols);
  for (auto _ : state) {
    matvec(*k, p.w, p.x, p.y.data(), 0, shape.rows);
    benchmark::DoNotOptimize(p.y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(p.weights.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * shape.rows * shape.cols);
  state.SetLabel(k->name);
}

void bench_attn_heads(benchmark::State& state, const KernelSet* k, bool by_head, int n) {
  const int heads = 8, kv_heads = 4, hs = 8;
  const size_t stride = static_cast<size_t>(kv_heads) * hs;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> keys(stride * n), values(stride * n), q(static_cast<size_t>(heads) * hs);
  for (float& v : keys) v = normal(rng);
  for (float& v : values) v = normal(rng);
  for (float& v : q) v = normal(rng);
  std::vector<float> att(static_cast<size_t>(heads) * n), out(q.size());
  const AttnHeads a{q.data(), keys.data(), values.data(), stride, att.data(), static_cast<size_t>(n),
                    out.data(), n, hs, heads / kv_heads, 2.828427f};
  for (auto _ : state) {
    if (by_head) attn_heads_by_head(*k, a, 0, heads);
    else k->attn_heads(*k, a, 0, heads);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n * heads);
  state.SetLabel(k->name);
}

// Registered at start-up: ref and avx2 side by side for each (type, shape).
const bool kRegistered = [] {
  auto add = [](DType type, Shape s) {
    for (const KernelSet* k : {&kernels_ref(), kernels_avx2()}) {
      if (k == nullptr) continue;  // no AVX2 on this CPU: the reference alone
      const std::string name = std::string("matvec/") + dtype_info(type)->name + "/" + std::to_string(s.rows) + "x" +
                               std::to_string(s.cols) + "/" + k->name;
      benchmark::RegisterBenchmark(name.c_str(), bench_matvec, k, type, s);
    }
  };
  for (DType type : kTypes)
    for (const Shape& s : kShapes) add(type, s);
  add(DType::kF16, kHead);
  add(DType::kQ8_0, kHead);
  for (int n : {64, 256, 512})
    for (const KernelSet* k : {&kernels_ref(), kernels_avx2()}) {
      if (k == nullptr) continue;
      for (bool by_head : {true, false}) {
        const std::string name = std::string("attn_heads/8x8/n") + std::to_string(n) + "/" + k->name +
                                 (by_head ? "/by_head" : "/entry");
        benchmark::RegisterBenchmark(name.c_str(), bench_attn_heads, k, by_head, n);
      }
    }
  return true;
}();

}  // namespace
}  // namespace mcullm
