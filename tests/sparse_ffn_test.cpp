// Gate-first ReLU feed-forward: equals the dense computation bit for bit on synthetic weights
// (f32 and q8_0 gate / up, every kernel table, signed zeros in the input) and on stories260K's FFN
// weights run as a ReLU FFN over its own normalised token embeddings; reports the share skipped.
#include "model/sparse_ffn.h"

#include <cstring>
#include <random>
#include <vector>

#include "load/model_loader_host.h"
#include "model/transformer.h"
#include "quant/blocks.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Ffn {
  std::vector<uint8_t> gate, up;
  std::vector<float> down, down_t;
  ReluFfn f;
};

MatRef pack(DType type, const std::vector<float>& w, int rows, int cols, std::vector<uint8_t>* out) {
  const size_t rb = dtype_row_bytes(type, cols);
  out->assign(rows * rb, 0);
  for (int r = 0; r < rows; ++r) quantize_row(type, &w[static_cast<size_t>(r) * cols], out->data() + r * rb, cols);
  MatRef m;
  m.type = type;
  m.data = out->data();
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = rb;
  return m;
}

void make_ffn(DType type, const float* gate, const float* up, const float* down, int ffn, int dim, Ffn* out) {
  std::vector<float> g(gate, gate + static_cast<size_t>(ffn) * dim), u(up, up + static_cast<size_t>(ffn) * dim);
  out->f.gate = pack(type, g, ffn, dim, &out->gate);
  out->f.up = pack(type, u, ffn, dim, &out->up);
  out->down.assign(down, down + static_cast<size_t>(dim) * ffn);
  out->down_t.assign(static_cast<size_t>(dim) * ffn, 0.0f);
  for (int d = 0; d < dim; ++d)
    for (int i = 0; i < ffn; ++i) out->down_t[static_cast<size_t>(i) * dim + d] = out->down[static_cast<size_t>(d) * ffn + i];
  out->f.down = f32_matrix(out->down.data(), dim, ffn);
  out->f.down_t = out->down_t.data();
}

// Dense vs sparse on one input; returns the live share.
double check_one(const KernelSet& k, const Ffn& f, DType type, const std::vector<float>& x) {
  const int ffn = f.f.gate.rows, dim = f.f.down.rows;
  std::vector<int8_t> xq(dim + 64);
  std::vector<float> xs(dim / 32 + 2);
  ActVec act;
  act.f = x.data();
  if (const int block = dtype_info(type)->act_block; block > 0) {
    quantize_activations(x.data(), dim, block, xq.data(), xs.data());
    act.q = xq.data();
    act.scales = xs.data();
    act.block = block;
  }
  std::vector<float> g(ffn), u(ffn), h(ffn), y1(dim), y2(dim), lanes(static_cast<size_t>(dim) * 16);
  FfnStats dense, sparse;
  ffn_relu_dense(k, f.f, act, g.data(), u.data(), h.data(), y1.data(), &dense);
  ffn_relu_sparse(k, f.f, act, g.data(), u.data(), h.data(), y2.data(), lanes.data(), &sparse);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << k.name << " " << dtype_info(type)->name;
  EXPECT_EQ(dense.live, sparse.live);
  EXPECT_LE(sparse.bytes_read, dense.bytes_read);
  return static_cast<double>(sparse.live) / ffn;
}

std::vector<const KernelSet*> tables() {
  std::vector<const KernelSet*> t = {&kernels_ref()};
  if (kernels_avx2()) t.push_back(kernels_avx2());
  return t;
}

TEST(SparseFfn, EqualsDenseOnSyntheticWeights) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int dim = 64, ffn = 200;
  std::vector<float> gate(ffn * dim), up(ffn * dim), down(dim * ffn);
  for (auto* v : {&gate, &up, &down})
    for (float& w : *v) w = normal(rng);
  for (DType type : {DType::kF32, DType::kQ8_0}) {
    Ffn f;
    make_ffn(type, gate.data(), up.data(), down.data(), ffn, dim, &f);
    for (const KernelSet* k : tables()) {
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<float> x(dim);
        for (int j = 0; j < dim; ++j) x[j] = j % 7 == 0 ? -0.0f : normal(rng);
        const double live = check_one(*k, f, type, x);
        EXPECT_GT(live, 0.0);
        EXPECT_LT(live, 1.0);
      }
    }
  }
}

TEST(SparseFfn, EqualsDenseOnStories260kWeightsRunAsRelu) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(test::shared_path("models/stories260K/stories260K.bin"), &lm).ok());
  const LlamaModel& m = lm->model;
  const int dim = m.cfg.dim, ffn = m.cfg.hidden_dim;
  std::vector<float> emb(dim);
  double live_sum = 0;
  int n = 0;
  for (int l = 0; l < m.cfg.n_layers; ++l) {
    const LlamaLayer& L = m.layers[l];
    Ffn f;
    make_ffn(DType::kF32, reinterpret_cast<const float*>(L.w1.data), reinterpret_cast<const float*>(L.w3.data),
             reinterpret_cast<const float*>(L.w2.data), ffn, dim, &f);
    for (int tok = 0; tok < 100; ++tok) {
      ASSERT_TRUE(dequantize_row(m.tok_emb.type, m.tok_emb.row(tok), emb.data(), dim));
      std::vector<float> x(dim);
      rmsnorm(kernels_ref(), x.data(), emb.data(), L.ffn_norm, dim, m.cfg.norm_eps);
      for (const KernelSet* k : tables()) live_sum += check_one(*k, f, DType::kF32, x), ++n;
    }
  }
  std::printf("stories260K FFN weights as ReLU over normalised embeddings: %.1f%% of neurons skipped\n", 100.0 * (1 - live_sum / n));
  RecordProperty("skipped_percent", static_cast<int>(100.0 * (1 - live_sum / n)));
}

}  // namespace
}  // namespace mcullm
