#include "plan/cluster_plan_host.h"

#include "cluster/frame.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "plan/model_layouts_host.h"
#include "model/transformer.h"

namespace mcullm {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Keys + values of one position and layer for kv_bytes per element (1: int8 with an f32 scale per head).
uint64_t kv_per_pos(const LlamaConfig& c, int kv_bytes) {
  if (kv_bytes == 1) return kv_bytes_per_layer_position(c, KvType::kInt8);
  return 2ull * static_cast<uint64_t>(c.kv_dim()) * static_cast<uint64_t>(kv_bytes);
}

Status check_kv_head(int ctx_len, int kv_bytes, int head_groups, int head_top) {
  if (kv_bytes != 1 && kv_bytes != 2 && kv_bytes != 4)
    return Status::Error(Code::kInvalidArgument, "cluster plan: KV cache bytes per element must be 1, 2 or 4 (not %d)", kv_bytes);
  if (ctx_len < 0 || ctx_len > (1 << 24)) return Status::Error(Code::kInvalidArgument, "cluster plan: context %d out of range", ctx_len);
  if (head_groups < 0 || head_groups > 65536 || head_top < 0 || (head_groups > 0 && head_top < 1))
    return Status::Error(Code::kInvalidArgument, "cluster plan: a two-stage head needs 1..65536 groups and a top >= 1");
  return Status::Ok();
}

void fill_attention(const LlamaConfig& c, int kv_bytes, LayerWork* w) {
  w->kv_bytes_per_pos = kv_per_pos(c, kv_bytes);
  w->attn_macs_per_pos = 2.0 * c.n_heads * c.head_dim();
  w->attn_kind = kv_bytes == 1 ? KernelKind::kInt8 : KernelKind::kF32;
  w->heads = c.n_heads;
}

// The head's bytes and MACs read per token: whole, or a two-stage head's centroids and best groups
// (as the cost model counts them, plan/cost_model_host.cpp).
void head_read(uint64_t rows, uint64_t cols, uint64_t row_bytes, int groups, int top, MasterWork* m) {
  if (groups <= 0) {
    m->head_read_bytes = rows * row_bytes;
    m->head_macs = static_cast<double>(rows * cols);
    return;
  }
  const uint64_t g = static_cast<uint64_t>(groups), t = std::min<uint64_t>(static_cast<uint64_t>(top), g);
  const uint64_t best = (rows * t + g - 1) / g;
  m->head_read_bytes = g * (2 * cols + 8) + best * row_bytes;
  m->head_macs = static_cast<double>((g + best) * cols);
}

}  // namespace

Status cluster_model_from_qwen2_layout(const std::string& name, DType linear, DType embedding, int ctx_len, int kv_bytes,
                                       int head_groups, int head_top, ClusterModel* out) {
  MC_TRY(check_kv_head(ctx_len, kv_bytes, head_groups, head_top));
  const ModelLayout* L = qwen2_layout_by_name(name);
  if (!L)
    return Status::Error(Code::kInvalidArgument, "layout %s is unknown for qwen2 (%s)", name.c_str(), layout_names(qwen2_layouts()).c_str());
  LlamaConfig c;
  c.dim = L->dim;
  c.hidden_dim = L->hidden;
  c.n_layers = L->layers;
  c.n_heads = L->heads;
  c.n_kv_heads = L->kv_heads;
  c.vocab_size = L->vocab > 0 ? L->vocab : 32000;
  c.seq_len = L->seq_len;
  MC_TRY(c.validate());
  if (!dtype_row_fits(linear, c.dim) || !dtype_row_fits(linear, c.hidden_dim) || !dtype_row_fits(embedding, c.dim))
    return Status::Error(Code::kInvalidArgument, "layout %s: its rows do not fit the types", name.c_str());
  ClusterModel m;
  m.instr_unsupported = "a layout without a model file (the instruction table needs the loaded tensors)";
  m.name = "qwen2 layout " + name + " (" + dtype_info(linear)->name + " linear, " + dtype_info(embedding)->name + " tied embedding)";
  m.dim = c.dim;
  m.hidden_dim = c.hidden_dim;
  m.n_layers = c.n_layers;
  m.vocab = c.vocab_size;
  m.ctx_len = ctx_len > 0 ? ctx_len : c.seq_len;
  const int d = c.dim, kv = c.kv_dim(), h = c.hidden_dim;
  const int rows[7] = {d, kv, kv, d, h, d, h}, cols[7] = {d, d, d, d, d, h, d};
  LayerWork w;
  for (int i = 0; i < 7; ++i) {
    w.weight_bytes += dtype_tensor_bytes(linear, rows[i], cols[i]);
    w.macs[static_cast<int>(kernel_kind_of(linear))] += static_cast<double>(rows[i]) * cols[i];
  }
  w.weight_bytes += 4ull * (2 * d + d + 2 * kv);  // two norms, three biases (f32)
  w.matvecs = 7;
  fill_attention(c, kv_bytes, &w);
  m.layers.assign(static_cast<size_t>(c.n_layers), w);
  MasterWork& ms = m.master;
  ms.embedding_bytes = dtype_tensor_bytes(embedding, c.vocab_size, d);
  ms.embedding_row_bytes = dtype_row_bytes(embedding, d);
  ms.norm_bytes = 4ull * d;
  ms.head_kind = kernel_kind_of(embedding);
  head_read(static_cast<uint64_t>(c.vocab_size), static_cast<uint64_t>(d), ms.embedding_row_bytes, head_groups, head_top, &ms);
  *out = std::move(m);
  return Status::Ok();
}

Status cluster_model_from_loaded(const LoadedModel& lm, int ctx_len, int kv_bytes, int head_groups, int head_top,
                                 ClusterModel* out) {
  MC_TRY(check_kv_head(ctx_len, kv_bytes, head_groups, head_top));
  // The cost model's own accounting of every tensor (bytes, MACs, kinds), on a board where
  // everything fits; only the tensors' figures are used, not its placement.
  BoardProfile roomy;
  MC_TRY(board_preset("esp32s3-psram80", &roomy));
  for (TierProfile& t : roomy.tiers) t.capacity_bytes = uint64_t{1} << 50;
  CostOptions co;
  co.ctx_len = ctx_len;
  co.kv_bytes = kv_bytes;
  co.head_groups = head_groups;
  co.head_top = head_top;
  CostReport r;
  MC_TRY(cost_model(lm, roomy, co, &r));
  const LlamaConfig& c = lm.model.cfg;
  ClusterModel m;
  m.name = lm.path + " (" + lm.arch_name() + ")";
  m.dim = c.dim;
  m.hidden_dim = c.hidden_dim;
  m.n_layers = c.n_layers;
  m.vocab = c.vocab_size;
  m.ctx_len = r.ctx_len;
  m.layers.assign(static_cast<size_t>(c.n_layers), LayerWork());
  m.instr_unsupported = r.instr.unsupported;
  for (LayerWork& w : m.layers) {
    fill_attention(c, kv_bytes, &w);
    for (int k = 0; k < 2; ++k) {
      w.instructions[k] = r.instr.elementwise_instructions(k + 1) / c.n_layers;
      w.attn_instr_per_pos[k] = c.n_heads * InstrUnits::attention_entry_instructions(c.head_dim(), kv_bytes == 1, k + 1);
    }
  }
  InstrUnits sampling;
  sampling[InstrTerm::kLogit] = r.instr[InstrTerm::kLogit];
  for (int k = 0; k < 2; ++k) m.master.instructions[k] = sampling.instructions(k + 1);
  for (const CostTensor& t : r.tensors) {
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "layer%d.", &layer) == 1 && layer >= 0 && layer < c.n_layers) {
      LayerWork& w = m.layers[static_cast<size_t>(layer)];
      w.weight_bytes += t.bytes;
      w.macs[static_cast<int>(t.kind)] += static_cast<double>(t.macs_per_token);
      w.matvecs += t.macs_per_token > 0 ? 1 : 0;
      w.instructions[0] += t.instructions;
      w.instructions[1] += t.instructions_cores2;
    } else if (t.cls == TensorClass::kNorm) {
      m.master.norm_bytes += t.bytes;
    } else if (t.cls == TensorClass::kEmbedding || t.cls == TensorClass::kHead) {
      // Tied: one tensor of class head read in full plus a row; untied: a row table and a head.
      MasterWork& ms = m.master;
      if (t.row_read) {
        ms.embedding_bytes += t.bytes;
        ms.embedding_row_bytes += t.read_per_token;
      } else {
        const bool tied = t.name == "tok_emb";
        (tied ? ms.embedding_bytes : ms.head_bytes) += t.bytes;
        if (tied) ms.embedding_row_bytes += t.bytes / static_cast<uint64_t>(c.vocab_size);
        ms.head_read_bytes += t.read_per_token - (tied ? t.bytes / static_cast<uint64_t>(c.vocab_size) : 0);
        ms.head_macs += static_cast<double>(t.macs_per_token);
        ms.head_kind = t.kind;
        ms.instructions[0] += t.instructions;
        ms.instructions[1] += t.instructions_cores2;
      }
    } else if (t.cls != TensorClass::kKvCache) {
      return Status::Error(Code::kUnsupported, "cluster plan: tensor %s of this architecture has no place in a layer chain",
                           t.name.c_str());
    }
  }
  *out = std::move(m);
  return Status::Ok();
}

const char* hidden_precision_name(HiddenPrecision p) {
  return p == HiddenPrecision::kInt8 ? "int8" : p == HiddenPrecision::kF16 ? "f16" : "f32";
}

bool parse_hidden_precision(const std::string& s, HiddenPrecision* out) {
  for (HiddenPrecision p : {HiddenPrecision::kF32, HiddenPrecision::kF16, HiddenPrecision::kInt8})
    if (s == hidden_precision_name(p)) {
      *out = p;
      return true;
    }
  return false;
}

Status link_cost(int dim, const LinkOptions& o, LinkCost* out) {
  if (dim <= 0 || dim > (1 << 20)) return Status::Error(Code::kInvalidArgument, "link: hidden size %d", dim);
  if (!(o.mhz > 0 && o.mhz <= 1000)) return Status::Error(Code::kInvalidArgument, "link: %g MHz (0 < MHz <= 1000)", o.mhz);
  if (!(o.frame_overhead_s >= 0 && o.frame_overhead_s < 1))
    return Status::Error(Code::kInvalidArgument, "link: frame overhead %g s", o.frame_overhead_s);
  const cluster::HiddenEncoding enc = o.precision == HiddenPrecision::kInt8  ? cluster::HiddenEncoding::kInt8
                                      : o.precision == HiddenPrecision::kF16 ? cluster::HiddenEncoding::kF16
                                                                             : cluster::HiddenEncoding::kF32;
  LinkCost c;
  c.frames = static_cast<int>(cluster::hidden_frame_count(enc, static_cast<uint32_t>(dim)));
  c.wire_bytes = cluster::hidden_wire_bytes(enc, static_cast<uint32_t>(dim));
  c.payload_bytes = c.wire_bytes - static_cast<uint64_t>(c.frames) * cluster::kFrameHeaderBytes;
  int frames = c.frames;
  if (o.ack) {  // a header and the acknowledged seq
    c.wire_bytes += cluster::kFrameHeaderBytes + 4;
    ++frames;
  }
  c.hop_s = static_cast<double>(c.wire_bytes) * 8.0 / (o.mhz * 1e6) + frames * o.frame_overhead_s;
  *out = c;
  return Status::Ok();
}

double ClusterPlan::tokens_per_s() const {
  if (latency_s <= 0 || bottleneck_s <= 0 || streams < 1) return 0;
  return std::min(static_cast<double>(streams) / latency_s, 1.0 / bottleneck_s);
}

uint64_t stage_store_bytes_max(const BoardProfile& b, const ClusterOptions& o) {
  return o.board_images ? std::min(b.tiers[2].capacity_bytes, b.image_bytes_max) : b.tiers[2].capacity_bytes;
}

StagePlan plan_stage(const ClusterModel& m, const BoardProfile& b, int first, int end, bool master, const ClusterOptions& o) {
  StagePlan s;
  s.first = first;
  s.end = end;
  const int n = end - first;
  const int ctx = m.ctx_len;
  const int pos = o.pos < 0 ? ctx - 1 : std::min(o.pos, ctx - 1);
  const uint64_t sram = b.tiers[0].capacity_bytes, psram = b.tiers[1].capacity_bytes, flash = b.tiers[2].capacity_bytes;
  StageWork w;
  w.cores = o.threads;
  const int cores = o.threads >= 2 ? 2 : 1;
  // Activations in SRAM (as the cost model sizes them; the master also holds the logits).
  const uint64_t heads = n > 0 ? static_cast<uint64_t>(m.layers[static_cast<size_t>(first)].heads) : 0;
  const uint64_t act = 4ull * (4ull * m.dim + 3ull * m.hidden_dim + (master ? m.vocab : 0) + heads * ctx);
  uint64_t kv = 0, kv_read = 0;
  for (int l = first; l < end; ++l) {
    const LayerWork& L = m.layers[static_cast<size_t>(l)];
    kv += L.kv_bytes_per_pos * static_cast<uint64_t>(ctx);
    kv_read += L.kv_bytes_per_pos * static_cast<uint64_t>(pos + 1);
    for (int k = 0; k < kKernelKindCount; ++k) w.macs[k] += L.macs[k];
    w.macs[static_cast<int>(L.attn_kind)] += L.attn_macs_per_pos * (pos + 1);
    w.matvecs += L.matvecs;
    w.attn_entries += static_cast<double>(L.heads) * (pos + 1);
    s.instr_s += L.instructions[cores - 1] + L.attn_instr_per_pos[cores - 1] * (pos + 1);
  }
  kv *= static_cast<uint64_t>(o.streams);  // one cache per stream; a token reads its own stream's
  s.kv_bytes = kv;
  const Tier kv_tier = act + kv <= sram ? Tier::kSram : Tier::kPsram;
  s.placed[0] += act;
  s.placed[static_cast<int>(kv_tier)] += kv;
  w.bytes[static_cast<int>(kv_tier)] += static_cast<double>(kv_read);
  if (act > sram) {
    s.fits = false;
    s.overflow = "sram: activations need " + std::to_string(act) + " bytes, sram has " + std::to_string(sram);
  } else if (kv_tier == Tier::kPsram && kv > psram) {
    s.fits = false;
    s.overflow = "psram: the KV cache of " + std::to_string(n) + " layers x " + std::to_string(ctx) + " positions needs " +
                 std::to_string(kv) + " bytes, psram has " + std::to_string(psram);
  }
  // Weights read in full every token, in order (layers, then the master's head), fill SRAM, then
  // PSRAM; the rest is read from flash. Tables read one row per token stay in flash.
  uint64_t left[2] = {sram - std::min(sram, s.placed[0]), psram - std::min(psram, s.placed[1])};
  auto place = [&](uint64_t bytes, uint64_t read) {
    s.weight_bytes += bytes;
    const double frac = bytes > 0 ? static_cast<double>(read) / static_cast<double>(bytes) : 0;
    const bool full = read == bytes;  // partly read tensors (tables, a two-stage head) stay in flash
    for (int t = 0; t < 2 && full; ++t) {
      const uint64_t here = std::min(left[t], bytes);
      left[t] -= here;
      bytes -= here;
      s.placed[t] += here;
      s.weights_placed[t] += here;
      w.bytes[t] += static_cast<double>(here);
    }
    s.placed[2] += bytes;
    w.bytes[2] += static_cast<double>(bytes) * frac;
  };
  for (int l = first; l < end; ++l) place(m.layers[static_cast<size_t>(l)].weight_bytes, m.layers[static_cast<size_t>(l)].weight_bytes);
  if (master) {
    const MasterWork& ms = m.master;
    place(ms.norm_bytes, ms.norm_bytes);
    const bool tied = ms.head_bytes == 0;
    // A tied head is the embedding: read in full as the head (plus one row as the embedding).
    if (tied) {
      place(ms.embedding_bytes, ms.head_read_bytes);
      w.bytes[2] += static_cast<double>(ms.embedding_row_bytes);  // the row: where the table is, flash at worst
    } else {
      place(ms.head_bytes, ms.head_read_bytes);
      place(ms.embedding_bytes, ms.embedding_row_bytes);
    }
    w.macs[static_cast<int>(ms.head_kind)] += ms.head_macs;
    w.matvecs += 1;
    s.instr_s += ms.instructions[cores - 1];
  }
  // Every weight is stored in flash (copied to SRAM / PSRAM at boot); a board image also holds the
  // master's extra (the tokenizer image) and must fit the board's image partition.
  const uint64_t extra = master && o.board_images ? o.master_image_extra : 0;
  const uint64_t room = stage_store_bytes_max(b, o);
  if (s.fits && s.weight_bytes + extra > room) {
    s.fits = false;
    s.overflow = room < flash ? "image: " + std::to_string(s.weight_bytes) + " bytes of weights" +
                                    (extra ? " + " + std::to_string(extra) + " of the tokenizer image" : std::string()) +
                                    ", the board's image partition holds " + std::to_string(room)
                              : "flash: " + std::to_string(s.weight_bytes) + " bytes of weights, flash has " + std::to_string(flash);
  }
  s.compute_s = stage_seconds(w, b);
  s.instr_s = m.instr_unsupported.empty() ? s.instr_s / b.clock_hz : 0;  // on the busier core (instruction_table_host.h)
  const int core = o.threads >= 2 ? 1 : 0;
  for (int t = static_cast<int>(Tier::kPsram); t <= static_cast<int>(Tier::kFlash); ++t) s.bytes_s += w.bytes[t] / b.tiers[t].read_bytes_per_s[core];
  return s;
}

namespace {

Status check_options(const ClusterModel& m, const ClusterOptions& o) {
  if (o.streams < 1 || o.streams > 64) return Status::Error(Code::kInvalidArgument, "cluster plan: %d streams (1..64)", o.streams);
  if (o.nodes < 1 || o.nodes > 256) return Status::Error(Code::kInvalidArgument, "cluster plan: %d nodes (1..256)", o.nodes);
  if (o.threads != 1 && o.threads != 2) return Status::Error(Code::kInvalidArgument, "cluster plan: threads must be 1 or 2");
  if (m.n_layers < 1 || static_cast<int>(m.layers.size()) != m.n_layers || m.ctx_len < 1)
    return Status::Error(Code::kInvalidArgument, "cluster plan: an empty model");
  if (o.pos >= m.ctx_len)
    return Status::Error(Code::kInvalidArgument, "cluster plan: position %d outside the context of %d", o.pos, m.ctx_len);
  if (o.nodes > m.n_layers)
    return Status::Error(Code::kInvalidArgument, "cluster plan: %d nodes for %d layers (every node holds at least one layer)",
                         o.nodes, m.n_layers);
  return Status::Ok();
}

// Fills the plan's totals from its stages and the link.
Status finish(const ClusterModel& m, const ClusterOptions& o, ClusterPlan* p) {
  MC_TRY(link_cost(m.dim, o.link, &p->link));
  p->hops = o.nodes + 1;
  p->streams = o.streams;
  p->pos = o.pos < 0 ? m.ctx_len - 1 : o.pos;
  p->latency_s = p->hops * p->link.hop_s;
  p->bottleneck_s = p->link.hop_s;
  for (const StagePlan& s : p->stages) {
    p->latency_s += s.planned_s();
    p->bottleneck_s = std::max(p->bottleneck_s, s.planned_s());
  }
  return Status::Ok();
}

}  // namespace

Status price_partition(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                       const ClusterOptions& o, const std::vector<int>& cuts, ClusterPlan* out) {
  MC_TRY(check_options(m, o));
  if (static_cast<int>(cuts.size()) != o.nodes + 2 || cuts.front() != 0 || cuts.back() != m.n_layers)
    return Status::Error(Code::kInvalidArgument, "cluster plan: %zu cut points for a master and %d nodes over %d layers",
                         cuts.size(), o.nodes, m.n_layers);
  if (!o.master_layers && cuts[1] != 0)
    return Status::Error(Code::kInvalidArgument, "cluster plan: the master holds no layers here");
  ClusterPlan p;
  for (int i = 0; i <= o.nodes; ++i) {
    if (cuts[static_cast<size_t>(i + 1)] < cuts[static_cast<size_t>(i)] + (i > 0 ? 1 : 0))
      return Status::Error(Code::kInvalidArgument, "cluster plan: cut points must rise, each node holding a layer");
    StagePlan s = plan_stage(m, i == 0 ? master_board : node_board, cuts[static_cast<size_t>(i)],
                             cuts[static_cast<size_t>(i + 1)], i == 0, o);
    s.name = i == 0 ? "master" : "node" + std::to_string(i);
    p.stages.push_back(s);
  }
  p.cuts = cuts;
  MC_TRY(finish(m, o, &p));
  *out = std::move(p);
  return Status::Ok();
}

Status plan_cluster(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                    const ClusterOptions& o, ClusterPlan* out) {
  MC_TRY(check_options(m, o));
  const int L = m.n_layers, N = o.nodes;
  // cost[a][b]: a node holding [a, b) (inf when it does not fit); master[b]: the master holding [0, b).
  std::vector<std::vector<double>> cost(static_cast<size_t>(L + 1), std::vector<double>(static_cast<size_t>(L + 1), kInf));
  for (int a = 0; a < L; ++a)
    for (int b = a + 1; b <= L; ++b) {
      const StagePlan s = plan_stage(m, node_board, a, b, false, o);
      if (!s.fits) break;  // more layers only need more memory
      cost[static_cast<size_t>(a)][static_cast<size_t>(b)] = s.planned_s();
    }
  std::vector<double> master(static_cast<size_t>(L + 1), kInf);
  for (int b = 0; b <= (o.master_layers ? L : 0); ++b) {
    const StagePlan s = plan_stage(m, master_board, 0, b, true, o);
    if (!s.fits) {
      if (b == 0)
        return Status::Error(Code::kOutOfRange, "cluster plan: the master's embedding and head do not fit %s: %s",
                             master_board.name.c_str(), s.overflow.c_str());
      break;
    }
    master[static_cast<size_t>(b)] = s.planned_s();
  }
  // best[i][j]: the smallest bottleneck of the master and nodes 1..i covering layers [0, j).
  std::vector<std::vector<double>> best(static_cast<size_t>(N + 1), std::vector<double>(static_cast<size_t>(L + 1), kInf));
  std::vector<std::vector<int>> from(static_cast<size_t>(N + 1), std::vector<int>(static_cast<size_t>(L + 1), -1));
  best[0] = master;
  for (int i = 1; i <= N; ++i)
    for (int j = i; j <= L; ++j)
      for (int k = 0; k < j; ++k) {
        const double v = std::max(best[static_cast<size_t>(i - 1)][static_cast<size_t>(k)], cost[static_cast<size_t>(k)][static_cast<size_t>(j)]);
        if (v < best[static_cast<size_t>(i)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(i)][static_cast<size_t>(j)] = v;
          from[static_cast<size_t>(i)][static_cast<size_t>(j)] = k;
        }
      }
  if (!(best[static_cast<size_t>(N)][static_cast<size_t>(L)] < kInf)) {
    // Say why: the largest layer alone, or the whole model over the nodes' memory.
    uint64_t biggest = 0, total = 0;
    for (const LayerWork& w : m.layers) {
      biggest = std::max(biggest, w.weight_bytes + w.kv_bytes_per_pos * static_cast<uint64_t>(m.ctx_len));
      total += w.weight_bytes + w.kv_bytes_per_pos * static_cast<uint64_t>(m.ctx_len);
    }
    const StagePlan one = plan_stage(m, node_board, 0, 1, false, o);
    const uint64_t room = stage_store_bytes_max(node_board, o);
    return Status::Error(Code::kOutOfRange,
                         "cluster plan: %d layers (%llu bytes of weights and KV cache, the largest layer %llu) do not fit on "
                         "%d nodes of %s (%s %llu, psram %llu bytes each)%s%s",
                         L, static_cast<unsigned long long>(total), static_cast<unsigned long long>(biggest), N,
                         node_board.name.c_str(), room < node_board.tiers[2].capacity_bytes ? "image" : "flash",
                         static_cast<unsigned long long>(room),
                         static_cast<unsigned long long>(node_board.tiers[1].capacity_bytes), one.fits ? "" : "; one layer alone: ",
                         one.fits ? "" : one.overflow.c_str());
  }
  std::vector<int> cuts(static_cast<size_t>(N + 2), 0);
  cuts[static_cast<size_t>(N + 1)] = L;
  for (int i = N, j = L; i >= 1; --i) {
    j = from[static_cast<size_t>(i)][static_cast<size_t>(j)];
    cuts[static_cast<size_t>(i)] = j;
  }
  return price_partition(m, master_board, node_board, o, cuts, out);
}

Status plan_board_split(const LoadedModel& lm, const BoardProfile& board, int nodes, uint64_t master_extra, ClusterModel* cm,
                        ClusterOptions* co, ClusterPlan* out) {
  MC_TRY(cluster_model_from_loaded(lm, 0, 4, 0, 0, cm));
  *co = ClusterOptions();
  co->nodes = nodes;
  co->board_images = true;
  co->master_image_extra = master_extra;
  return plan_cluster(*cm, board, board, *co, out);
}

std::vector<SliceRange> plan_node_ranges(const ClusterPlan& p) {
  std::vector<SliceRange> r;
  for (size_t i = 1; i < p.stages.size(); ++i) r.push_back(SliceRange{p.stages[i].first, p.stages[i].end, false});
  return r;
}

std::vector<double> stream_table(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                                 const ClusterOptions& o, const ClusterPlan& p, int max_streams) {
  std::vector<double> t;
  for (int k = 1; k <= max_streams; ++k) {
    ClusterOptions ok = o;
    ok.streams = k;
    ClusterPlan q;
    bool fits = price_partition(m, master_board, node_board, ok, p.cuts, &q).ok();
    for (const StagePlan& s : q.stages) fits = fits && s.fits;
    t.push_back(fits ? q.tokens_per_s() : 0.0);
  }
  return t;
}

std::string format_cluster_plan(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                                const ClusterOptions& o, const ClusterPlan& p) {
  std::string s;
  char line[320];
  std::snprintf(line, sizeof line,
                "cluster: %s; %d layers, dim %d; master (%s) + %d nodes (%s), %d core(s) each; context %d, token at position %d\n",
                m.name.c_str(), m.n_layers, m.dim, master_board.name.c_str(), o.nodes, node_board.name.c_str(), o.threads,
                m.ctx_len, p.pos);
  s += line;
  std::snprintf(line, sizeof line,
                "%-8s %-9s %12s %12s %12s %12s %12s %10s %9s %9s   (bytes; sram / psram / flash: what is read from there; "
                "ms: the cost model, the byte bound, the instruction bound; the plan counts the largest)\n",
                "stage", "layers", "weights", "kv_cache", "sram", "psram", "flash", "ms/token", "bytes_ms", "instr_ms");
  s += line;
  for (const StagePlan& st : p.stages) {
    char range[32];
    if (st.end > st.first)
      std::snprintf(range, sizeof range, "[%d,%d)", st.first, st.end);
    else
      std::snprintf(range, sizeof range, "-");
    std::snprintf(line, sizeof line, "%-8s %-9s %12llu %12llu %12llu %12llu %12llu %10.2f %9.2f %9.2f%s\n", st.name.c_str(),
                  range, static_cast<unsigned long long>(st.weight_bytes), static_cast<unsigned long long>(st.kv_bytes),
                  static_cast<unsigned long long>(st.placed[0]), static_cast<unsigned long long>(st.placed[1]),
                  static_cast<unsigned long long>(st.placed[2]), 1e3 * st.compute_s, 1e3 * st.bytes_s, 1e3 * st.instr_s,
                  st.fits ? "" : "  DOES NOT FIT");
    s += line;
  }
  std::snprintf(line, sizeof line,
                "link: hidden state %s, %llu payload bytes in %d frame(s), %llu bytes on the wire per hop (ack %s) at %g MHz: "
                "%.3f ms per hop, %d hops\n",
                hidden_precision_name(o.link.precision), static_cast<unsigned long long>(p.link.payload_bytes), p.link.frames,
                static_cast<unsigned long long>(p.link.wire_bytes), o.link.ack ? "included" : "none", o.link.mhz,
                1e3 * p.link.hop_s, p.hops);
  s += line;
  std::snprintf(line, sizeof line, "per token: %.2f ms through the chain (%.2f ms of links); slowest stage or hop %.2f ms\n",
                1e3 * p.latency_s, 1e3 * p.hops * p.link.hop_s, 1e3 * p.bottleneck_s);
  s += line;
  std::snprintf(line, sizeof line, "planned for %d stream(s): %.3f tokens/s\n", p.streams, p.tokens_per_s());
  s += line;
  if (!m.instr_unsupported.empty()) {
    s += "no instruction bound: no emulated figure for " + m.instr_unsupported + "\n";
  } else {  // one stream: a token passes every stage and hop in turn
    double bytes = p.hops * p.link.hop_s, instr = bytes;
    for (const StagePlan& st : p.stages) {
      bytes += st.bytes_s;
      instr += st.instr_s;
    }
    std::snprintf(line, sizeof line,
                  "bounds through the chain (stages + links, one stream): bytes %.2f ms (%.1f tok/s), instructions (%d core(s) "
                  "per board) %.2f ms (%.1f tok/s): the %s bind\n",
                  1e3 * bytes, 1.0 / bytes, o.threads, 1e3 * instr, 1.0 / instr, instr > bytes ? "instructions" : "bytes");
    s += line;
  }
  s += "streams  tokens/s  (the same split; each stream one token in flight and its own KV caches)\n";
  const std::vector<double> t = stream_table(m, master_board, node_board, o, p, o.nodes + 1);
  for (size_t k = 0; k < t.size(); ++k) {
    if (t[k] > 0)
      std::snprintf(line, sizeof line, "%7zu  %8.3f\n", k + 1, t[k]);
    else
      std::snprintf(line, sizeof line, "%7zu  does not fit (KV caches)\n", k + 1);
    s += line;
  }
  return s;
}

}  // namespace mcullm
