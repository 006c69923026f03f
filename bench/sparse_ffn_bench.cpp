// The ternary ReLU FFN of one token, gate first (model/sparse_ffn.h ffn_relu_sparse_q with an i2_s
// column-stored down matrix) against the dense path after the same gate (max_live_permille 0: every up
// row, relu_mul, quantize_i8s, the row-major i2_s down matvec: the work of the dense FFN), at a chosen
// share of live neurons. Random ternary weights; the gate row of each neuron is negated (codes
// 0 <-> 2) until the neuron's sign gives the wanted live set. Shapes dim x hidden: BitNet b1.58
// 2B-4T (2560 x 6912), the cluster reference Qwen2 (896 x 4864), the tiny qwen2 (128 x 384). Each
// iteration reads the next of >= 96 MiB of copies of the weights (from DRAM, as a model's layers).
//   build/release/bench/sparse_ffn_bench --benchmark_filter='2560' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/thread_pool_host.h"
#include "kernels/kernels.h"
#include "model/sparse_ffn.h"
#include "quant/ternary.h"

namespace mcullm {
namespace {

struct Shape {
  int dim, hidden;
};
const Shape kShapes[] = {{2560, 6912}, {896, 4864}, {128, 384}};

MatRef random_i2s(std::mt19937& rng, int rows, int cols, std::vector<uint8_t>* bytes) {
  std::uniform_int_distribution<int> t(-1, 1);
  const size_t rb = ternary_row_bytes(TernaryLayout::kI2S, cols);
  bytes->assign(rb * static_cast<size_t>(rows), 0);
  std::vector<int8_t> row(static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    for (auto& v : row) v = static_cast<int8_t>(t(rng));
    ternary_pack_row(TernaryLayout::kI2S, row.data(), cols, bytes->data() + rb * static_cast<size_t>(r));
  }
  MatRef w{DType::kI2_S, bytes->data(), rows, cols, rb};
  w.scale = 0.02f;
  return w;
}

struct Ffn {
  std::vector<uint8_t> gate, up, down, mem;
  std::unique_ptr<Arena> arena;
  ReluFfnQ f;
  std::vector<float> x, g, u, h, y;
  std::vector<int8_t> xq, hq;
  std::vector<float> xs, hs;
  std::vector<int32_t> live;
  ActVec act;
  FfnScratchQ scratch() {
    return {g.data(), u.data(), h.data(), hq.data(), hs.data(), live.data()};
  }
};

void make_ffn(Shape s, int live_permille, Ffn* o) {
  std::mt19937 rng(7);
  o->f.gate = random_i2s(rng, s.hidden, s.dim, &o->gate);
  o->f.up = random_i2s(rng, s.hidden, s.dim, &o->up);
  o->f.down_rows = random_i2s(rng, s.dim, s.hidden, &o->down);
  o->mem.resize(static_cast<size_t>(s.dim) * s.hidden / 4 + 4096);
  o->arena = std::make_unique<Arena>(Tier::kHost, o->mem.data(), o->mem.size());
  build_down_cols(o->f.down_rows, *o->arena, &o->f.down);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  o->x.resize(s.dim);
  for (float& v : o->x) v = normal(rng);
  o->xq.resize(s.dim);
  o->xs.resize(1);
  quantize_i8s(o->x.data(), s.dim, o->xq.data(), o->xs.data());
  o->act.f = o->x.data();
  o->act.q = o->xq.data();
  o->act.scales = o->xs.data();
  o->act.block = s.dim;
  o->g.resize(s.hidden);
  o->u.resize(s.hidden);
  o->h.resize(s.hidden);
  o->hq.resize(s.hidden);
  o->hs.resize(1);
  o->live.resize(s.hidden);
  o->y.resize(s.dim);
  // Negate gate rows (code c -> 2 - c) so that neuron i is live exactly for the wanted share.
  const KernelSet& k = kernels_ref();
  k.matvec_i2s(o->f.gate, o->xq.data(), o->xs.data(), o->g.data(), 0, s.hidden);
  uint8_t* gate = o->gate.data();
  for (int i = 0; i < s.hidden; ++i) {
    const bool want = (static_cast<long long>(i) * 7919 % 1000) < live_permille;
    if ((o->g[i] > 0.0f) == want || o->g[i] == 0.0f) continue;
    uint8_t* row = gate + static_cast<size_t>(i) * o->f.gate.row_bytes;
    for (size_t b = 0; b < o->f.gate.row_bytes; ++b) {
      uint8_t v = 0;
      for (int sh = 0; sh < 8; sh += 2) v |= static_cast<uint8_t>((2 - ((row[b] >> sh) & 3)) << sh);
      row[b] = v;
    }
  }
}

// Copies of one FFN's weights (its column copy included) at other addresses: a model's layers,
// enough of them (>= 96 MiB) that every token reads its weights from DRAM, not from the 32 MiB L3.
struct Layers {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<ReluFfnQ> f;
};
Layers copies_of(const Ffn& o) {
  const size_t per = o.gate.size() + o.up.size() + o.down.size() + o.mem.size();
  const size_t n = (size_t{96} << 20) / per + 1;
  Layers l;
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t> b;
    for (const auto* v : {&o.gate, &o.up, &o.down, &o.mem}) b.insert(b.end(), v->begin(), v->end());
    ReluFfnQ f = o.f;
    f.gate.data = b.data();
    f.up.data = b.data() + o.gate.size();
    f.down_rows.data = b.data() + o.gate.size() + o.up.size();
    const uint8_t* mem = b.data() + o.gate.size() + o.up.size() + o.down.size();
    f.down.w = mem + (o.f.down.w - o.mem.data());
    f.down.scales = reinterpret_cast<const float*>(mem + (reinterpret_cast<const uint8_t*>(o.f.down.scales) - o.mem.data()));
    l.bytes.push_back(std::move(b));
    l.f.push_back(f);
  }
  return l;
}

void bench_ffn(benchmark::State& state, Shape s, int live_permille, bool sparse, int threads, const char* table) {
  const KernelSet* k = kernels_by_name(table);
  if (!k) {
    state.SkipWithError("table not available");
    return;
  }
  Ffn o;
  make_ffn(s, live_permille, &o);
  Layers layers = copies_of(o);
  HostThreadPool pool(threads);
  FfnStats st;
  size_t i = 0;
  for (auto _ : state) {
    ReluFfnQ& f = layers.f[i++ % layers.f.size()];
    f.max_live_permille = sparse ? 1000 : 0;
    ffn_relu_sparse_q(pool, *k, f, o.act, o.scratch(), o.y.data(), &st);
    benchmark::DoNotOptimize(o.y.data());
    benchmark::ClobberMemory();
  }
  state.counters["live%"] = 100.0 * st.live / st.neurons;
  state.counters["KB_read"] = static_cast<double>(st.bytes_read) / 1024.0;
  state.SetLabel(std::string(k->name) + (sparse ? " sparse" : " dense"));
}

// The down product alone: the row-major i2_s matvec over every column against matvec_down_cols over
// the live share of them (every other neuron's int8 activation zeroed).
void bench_down(benchmark::State& state, Shape s, int live_permille, bool sparse, const char* table) {
  const KernelSet* k = kernels_by_name(table);
  if (!k) {
    state.SkipWithError("table not available");
    return;
  }
  Ffn o;
  make_ffn(s, live_permille, &o);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> qd(-127, 127);
  int n = 0;
  for (int i = 0; i < s.hidden; ++i) {
    const bool live = (static_cast<long long>(i) * 7919 % 1000) < live_permille;
    o.hq[i] = live ? static_cast<int8_t>(qd(rng) | 1) : 0;
    if (live) o.live[n++] = i;
  }
  o.hs[0] = 0.01f;
  const Layers layers = copies_of(o);
  size_t i = 0;
  for (auto _ : state) {
    const ReluFfnQ& f = layers.f[i++ % layers.f.size()];
    if (sparse)
      k->matvec_down_cols(f.down, o.hq.data(), o.hs.data(), o.live.data(), n, o.y.data(), 0, s.dim);
    else
      k->matvec_i2s(f.down_rows, o.hq.data(), o.hs.data(), o.y.data(), 0, s.dim);
    benchmark::DoNotOptimize(o.y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(sparse ? static_cast<size_t>(n) * o.f.down.col_bytes : o.down.size()));
  state.SetLabel(std::string(k->name) + (sparse ? " columns" : " rows"));
}

const bool kRegistered = [] {
  for (const Shape& s : kShapes)
    for (int live : {100, 250, 500})
      for (const char* table : {"avx512", "avx2"})
        for (bool sparse : {false, true}) {
          const std::string name = "down_i2s/" + std::to_string(s.dim) + "x" + std::to_string(s.hidden) + "/live" +
                                   std::to_string(live) + "/" + table + (sparse ? "/columns" : "/rows");
          benchmark::RegisterBenchmark(name.c_str(), bench_down, s, live, sparse, table);
        }
  for (const Shape& s : kShapes)
    for (int live : {50, 100, 250, 500})
      for (int threads : {1, 2})
        for (const char* table : {"avx512", "avx2"})
          for (bool sparse : {false, true}) {
            const std::string name = "ffn_i2s/" + std::to_string(s.dim) + "x" + std::to_string(s.hidden) + "/live" +
                                     std::to_string(live) + "/t" + std::to_string(threads) + "/" + table +
                                     (sparse ? "/sparse" : "/dense");
            benchmark::RegisterBenchmark(name.c_str(), bench_ffn, s, live, sparse, threads, table)->UseRealTime();
          }
  return true;
}();

}  // namespace
}  // namespace mcullm
