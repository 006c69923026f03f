#include "load/ternarize_host.h"

#include <cmath>

#include "format/ternary_gguf_host.h"
#include "quant/blocks.h"
#include "quant/dtype.h"

namespace mcullm {

Status ternarize_layers(TransformerModel* m, std::vector<std::vector<uint8_t>>* packed) {
  packed->reserve(packed->size() + static_cast<size_t>(m->end() - m->first_layer) * 7);
  std::vector<float> w;
  for (int l = m->first_layer; l < m->end(); ++l) {
    TransformerLayer& L = m->layers[l - m->first_layer];
    for (MatRef* mat : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3}) {
      const size_t n = static_cast<size_t>(mat->rows) * mat->cols;
      w.resize(n);
      for (int r = 0; r < mat->rows; ++r)
        if (!dequantize_row_any(mat->type, mat->row(r), w.data() + static_cast<size_t>(r) * mat->cols, mat->cols)) {
          const DTypeInfo* info = dtype_info(mat->type);
          return Status::Error(Code::kUnsupported, "layer %d: a %s matrix is not ternarized (dense types only)", l,
                               info ? info->name : "?");
        }
      double sum = 0.0;
      for (size_t i = 0; i < n; ++i) sum += std::fabs(w[i]);
      const float s = static_cast<float>(sum / static_cast<double>(n));
      const float d = s > 1e-5f ? s : 1e-5f;  // BitNet's clamp of the mean
      std::vector<int8_t> t(n);
      for (size_t i = 0; i < n; ++i) {
        const float q = std::nearbyint(w[i] / d);  // round half to even, as torch.round
        t[i] = static_cast<int8_t>(q > 1.0f ? 1 : q < -1.0f ? -1 : q);
      }
      std::vector<uint8_t> bytes;
      DType written;
      std::string note;
      if (Status st = ternary_tensor_pack(DType::kI2_S, t.data(), mat->rows, mat->cols, s, &bytes, &written, &note); !st.ok())
        return st.prefix("layer %d: ", l);
      packed->push_back(std::move(bytes));
      MatRef r;
      r.type = DType::kI2_S;
      r.data = packed->back().data();
      r.rows = mat->rows;
      r.cols = mat->cols;
      r.row_bytes = dtype_row_bytes(DType::kI2_S, mat->cols);
      r.scale = s;
      *mat = r;
    }
  }
  m->spec.ternary = true;
  return m->check_shapes();
}

}  // namespace mcullm
