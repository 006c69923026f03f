#include "format/vocab_head_gguf.h"

#include <string.h>

#include "quant/f16.h"
#include "quant/q4e.h"

namespace mcullm {

namespace {

constexpr const char* kRows = "head_groups.rows";
constexpr const char* kScales = "head_groups.rows.scales";
constexpr const char* kCentroids = "head_groups.centroids";
constexpr const char* kTokenOfRow = "head_groups.token_of_row";
constexpr const char* kGroupStart = "head_groups.group_start";
constexpr const char* kRadius = "head_groups.radius";
constexpr const char* kRowNormMax = "head_groups.row_norm_max";
constexpr const char* kRouter = "head_groups.router";
constexpr const char* kRouterScale = "head_groups.router_scale";
constexpr const char* kRouterBias = "head_groups.router_bias";

// An array of exactly `count` elements, copied into the tables (GGUF values are unaligned).
template <typename T>
Status copy_array(const GgufFile& f, const char* key, GgufType type, uint64_t count, Arena& tables, T** out) {
  const uint8_t* p = nullptr;
  uint64_t n = 0;
  MC_TRY(f.get_array(key, type, &p, &n));
  if (n != count)
    return Status::Error(Code::kCorrupt, "%s has %llu entries, the head needs %llu", key, static_cast<unsigned long long>(n),
                         static_cast<unsigned long long>(count));
  MC_TRY(tables.alloc_array(static_cast<size_t>(count), TensorClass::kHead, out));
  memcpy(*out, p, static_cast<size_t>(count) * sizeof(T));
  return Status::Ok();
}

bool finite_nonneg(float v) { return v >= 0.0f && v < 3.0e38f; }

}  // namespace

bool gguf_has_vocab_head(const GgufFile& f) { return f.find_tensor(kRows) != nullptr; }

Status check_vocab_head(const VocabHead& h, const MatRef& head, Arena& scratch) {
  const int V = head.rows, D = head.cols, K = h.n_groups;
  if (K < 1 || K > kMaxHeadGroups || K > V)
    return Status::Error(Code::kCorrupt, "head groups: %d groups for a head of %d rows (1 to %d)", K, V, kMaxHeadGroups);
  if (h.dim != D || h.rows.rows != V || h.rows.cols != D || h.rows.type != head.type || h.rows.row_bytes != head.row_bytes ||
      (head.type == DType::kQ4E && h.rows.group != head.group))
    return Status::Error(Code::kCorrupt, "head groups: the stored rows (%d x %d, type %u) do not match the head (%d x %d, type %u)",
                         h.rows.rows, h.rows.cols, static_cast<unsigned>(h.rows.type), V, D, static_cast<unsigned>(head.type));
  if (h.group_start[0] != 0 || h.group_start[K] != V)
    return Status::Error(Code::kCorrupt, "head groups: group bounds run from %d to %d, not 0 to %d", static_cast<int>(h.group_start[0]),
                         static_cast<int>(h.group_start[K]), V);
  for (int g = 0; g < K; ++g) {
    if (h.group_start[g + 1] < h.group_start[g])
      return Status::Error(Code::kCorrupt, "head groups: group %d ends before it starts", g);
    if (!finite_nonneg(h.radius[g]) || !finite_nonneg(h.row_norm_max[g]))
      return Status::Error(Code::kCorrupt, "head groups: group %d has radius %g and row norm %g", g,
                           static_cast<double>(h.radius[g]), static_cast<double>(h.row_norm_max[g]));
  }
  for (size_t i = 0; i < static_cast<size_t>(K) * D; ++i)
    if (!(h.centroids[i] > -3.0e38f && h.centroids[i] < 3.0e38f))
      return Status::Error(Code::kCorrupt, "head groups: centroid value %zu is not finite", i);
  if (h.router || h.router_scale || h.router_bias) {
    if (!h.router || !h.router_scale || !h.router_bias)
      return Status::Error(Code::kCorrupt, "head groups: the router needs its int8 table, scales and biases together");
    for (int g = 0; g < K; ++g)
      if (!(h.router_scale[g] > 0.0f && h.router_scale[g] < 3.0e38f) || !(h.router_bias[g] > -3.0e38f && h.router_bias[g] < 3.0e38f))
        return Status::Error(Code::kCorrupt, "head groups: group %d's router scale %g / bias %g (scale > 0, both finite)", g,
                             static_cast<double>(h.router_scale[g]), static_cast<double>(h.router_bias[g]));
    for (size_t i = 0; i < static_cast<size_t>(K) * D; ++i)
      if (h.router[i] < -127) return Status::Error(Code::kCorrupt, "head groups: router value %zu is -128 (int8 in [-127, 127])", i);
  }
  const Arena::Mark mark = scratch.mark();
  uint8_t* seen = nullptr;
  MC_TRY(scratch.alloc_array(static_cast<size_t>(V), TensorClass::kScratch, &seen));
  memset(seen, 0, static_cast<size_t>(V));
  const size_t sb = head.type == DType::kQ4E ? static_cast<size_t>(q4e_groups(D, head.group)) * 2 : 0;
  Status st;
  for (int r = 0; r < V && st.ok(); ++r) {
    const int t = h.token_of_row[r];
    if (t < 0 || t >= V || seen[t]) {
      st = Status::Error(Code::kCorrupt, "head groups: row %d stands for token %d (not a permutation of the %d tokens)", r, t, V);
      break;
    }
    seen[t] = 1;
    const bool same = memcmp(h.rows.row(r), head.row(t), head.row_bytes) == 0 &&
                      (sb == 0 || memcmp(h.rows.scales + r * sb, head.scales + static_cast<size_t>(t) * sb, sb) == 0);
    if (!same) st = Status::Error(Code::kCorrupt, "head groups: stored row %d is not the head's row %d", r, t);
  }
  scratch.rollback(mark);
  return st;
}

Status vocab_head_default_from_gguf(const GgufFile& f, HeadMode* mode, int* top) {
  *mode = HeadMode::kFull;
  *top = 0;
  if (f.find_kv("head_groups.default_mode")) {
    GgufStr s;
    MC_TRY(f.get_string("head_groups.default_mode", &s));
    char name[16] = {0};
    if (s.size >= sizeof name || (memcpy(name, s.data, s.size), !parse_head_mode(name, mode)))
      return Status::Error(Code::kCorrupt, "head_groups.default_mode is not full, two-stage or pruned");
  }
  if (f.find_kv("head_groups.default_top")) {
    uint32_t t = 0;
    MC_TRY(f.get_u32("head_groups.default_top", &t));
    if (t < 1 || t > kMaxHeadGroups) return Status::Error(Code::kCorrupt, "head_groups.default_top %u is not in 1..%d", static_cast<unsigned>(t), kMaxHeadGroups);
    *top = static_cast<int>(t);
  }
  return Status::Ok();
}

Status vocab_head_from_gguf(const GgufFile& f, const MatRef& head, Arena& tables, VocabHead* out) {
  const GgufTensor* rows = f.find_tensor(kRows);
  if (!rows) return Status::Error(Code::kNotFound, "tensor %s is missing", kRows);
  const int V = head.rows, D = head.cols;
  if (rows->type != head.type || rows->n_dims != 2 || rows->ne[0] != D || rows->ne[1] != V)
    return Status::Error(Code::kCorrupt, "tensor %s should have the head's type %u and shape [%d, %d]", kRows,
                         static_cast<unsigned>(head.type), D, V);
  const GgufTensor* cent = f.find_tensor(kCentroids);
  if (!cent) return Status::Error(Code::kNotFound, "tensor %s is missing", kCentroids);
  if (cent->type != DType::kF16 || cent->n_dims != 2 || cent->ne[0] != D || cent->ne[1] < 1 || cent->ne[1] > kMaxHeadGroups)
    return Status::Error(Code::kCorrupt, "tensor %s should be f16 [%d, 1..%d]", kCentroids, D, kMaxHeadGroups);
  VocabHead h;
  h.n_groups = static_cast<int>(cent->ne[1]);
  h.dim = D;
  h.rows = head;
  h.rows.data = rows->data;
  if (head.type == DType::kQ4E) {
    const GgufTensor* sc = f.find_tensor(kScales);
    const int ng = q4e_groups(D, head.group);
    if (!sc) return Status::Error(Code::kNotFound, "tensor %s is missing (a q4e head)", kScales);
    if (sc->type != DType::kF16 || sc->n_dims != 2 || sc->ne[0] != ng || sc->ne[1] != V)
      return Status::Error(Code::kCorrupt, "tensor %s should be f16 [%d, %d]", kScales, ng, V);
    h.rows.scales = sc->data;
  }
  const uint64_t K = static_cast<uint64_t>(h.n_groups);
  int32_t *tok = nullptr, *start = nullptr;
  float *rad = nullptr, *nmax = nullptr, *c = nullptr;
  MC_TRY(copy_array(f, kTokenOfRow, GgufType::kI32, static_cast<uint64_t>(V), tables, &tok));
  MC_TRY(copy_array(f, kGroupStart, GgufType::kI32, K + 1, tables, &start));
  MC_TRY(copy_array(f, kRadius, GgufType::kF32, K, tables, &rad));
  MC_TRY(copy_array(f, kRowNormMax, GgufType::kF32, K, tables, &nmax));
  if (f.find_kv(kRouter) || f.find_kv(kRouterScale) || f.find_kv(kRouterBias)) {
    int8_t* router = nullptr;
    float *rs = nullptr, *rb = nullptr;
    MC_TRY(copy_array(f, kRouter, GgufType::kI8, K * static_cast<uint64_t>(D), tables, &router));
    MC_TRY(copy_array(f, kRouterScale, GgufType::kF32, K, tables, &rs));
    MC_TRY(copy_array(f, kRouterBias, GgufType::kF32, K, tables, &rb));
    h.router = router;
    h.router_scale = rs;
    h.router_bias = rb;
  }
  MC_TRY(tables.alloc_array(static_cast<size_t>(K) * D, TensorClass::kHead, &c));
  for (size_t i = 0; i < static_cast<size_t>(K) * D; ++i) {
    uint16_t v;
    memcpy(&v, cent->data + 2 * i, 2);
    c[i] = f16_to_f32(v);
  }
  h.token_of_row = tok;
  h.group_start = start;
  h.centroids = c;
  h.radius = rad;
  h.row_norm_max = nmax;
  MC_TRY(check_vocab_head(h, head, tables));
  tables.note_mapped(static_cast<size_t>(rows->nbytes), TensorClass::kHead);
  *out = h;
  return Status::Ok();
}

}  // namespace mcullm
