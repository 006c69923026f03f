// The cluster partition planner (docs/cluster.md): a model's layers split into contiguous ranges
// over a chain of nodes (master -> node 1 -> ... -> node N -> master), each range fitting its
// node's memory tiers, the slowest node as fast as possible (exact: dynamic programming over the
// cut points, min of the max stage time). The master keeps the tokenizer, the embedding, the final
// norm, the head and sampling, and may take layers too (ClusterOptions::master_layers).
//
// Times come from the ESP32-S3 cost model (plan/cost_model_host.h, stage_seconds, docs/cost-model.md):
// a stage's bytes read per tier, MACs per kernel kind, matvec calls and attention entries. The
// placement on one node: activations in SRAM, the KV cache of its layers (whole context) in SRAM if
// it fits beside them, else PSRAM; then the weights fill what SRAM and PSRAM have left, in order,
// and the rest stays in flash (read through the flash cache, as the reference design does); every
// weight is also stored in flash, which must hold them. The link: each hop sends the hidden state
// (f32, f16, or int8 with one f32 scale) in frames of at most 32 KB, lengths a multiple of 4.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/board_profile_host.h"
#include "plan/cost_model_host.h"
#include "load/model_loader_host.h"

namespace mcullm {

// What one layer costs per token, independent of where it is placed.
struct LayerWork {
  uint64_t weight_bytes = 0;               // matrices, norms, biases as stored
  double macs[kKernelKindCount] = {};      // of its matrices
  int matvecs = 0;
  uint64_t kv_bytes_per_pos = 0;           // keys + values of one position
  double attn_macs_per_pos = 0;            // scores + mixing, per position of the context
  KernelKind attn_kind = KernelKind::kF32; // int8 with an int8 KV cache
  int heads = 0;                           // attention entries per position
  // Emulated instructions (plan/instruction_table_host.h) on the busier core of a board with
  // [0] one core, [1] two (the pool's split terms halved): without attention, and attention's per
  // position of the context.
  double instructions[2] = {};
  double attn_instr_per_pos[2] = {};
};

// What the master's own work costs per token: one embedding row, the final norm and the head.
struct MasterWork {
  uint64_t embedding_bytes = 0;   // stored (a tied head's matrix is this one)
  uint64_t embedding_row_bytes = 0;
  uint64_t head_bytes = 0;        // stored, when untied (0 when tied)
  uint64_t head_read_bytes = 0;   // read per token (the whole head, or a two-stage head's part)
  uint64_t norm_bytes = 0;
  double head_macs = 0;
  KernelKind head_kind = KernelKind::kF32;
  double instructions[2] = {};    // the head's matvec, final norm and sampling (one core; the busier of two)
};

struct ClusterModel {
  std::string name;
  int dim = 0, hidden_dim = 0, n_layers = 0, ctx_len = 0, vocab = 0;
  std::vector<LayerWork> layers;
  MasterWork master;
  std::string instr_unsupported;  // kernels without an emulated figure: no instruction bound
};

// The model of a loaded file (any architecture the cost model reads), with a KV cache of
// kv_bytes per element (1 = int8 with a scale per head and position) and a context of ctx_len
// (0: the model's). head_groups / head_top > 0: a two-stage head on the master.
Status cluster_model_from_loaded(const LoadedModel& m, int ctx_len, int kv_bytes, int head_groups, int head_top,
                                 ClusterModel* out);
// A Qwen2 layout (plan/model_layouts_host.h, e.g. "ref") with linear layers of `linear`
// type, the embedding (tied head) of `embedding` type, f32 norms and biases: computed, no file.
Status cluster_model_from_qwen2_layout(const std::string& layout, DType linear, DType embedding, int ctx_len,
                                       int kv_bytes, int head_groups, int head_top, ClusterModel* out);

enum class HiddenPrecision : uint8_t { kF32 = 0, kF16, kInt8 };
const char* hidden_precision_name(HiddenPrecision p);
bool parse_hidden_precision(const std::string& s, HiddenPrecision* out);

struct LinkOptions {
  double mhz = 10;                  // SPI clock (bits per second = mhz * 1e6)
  HiddenPrecision precision = HiddenPrecision::kF32;
  double frame_overhead_s = 50e-6;  // per frame: DMA setup and the handshake line
  bool ack = true;                  // each hidden state answered by a header-only ack frame
};

struct LinkCost {
  // Bytes and frames as the link protocol (cluster/frame.h) sends the hidden state: frames of at
  // most 32 KB (one SPI DMA transfer), each a header, a chunk head and the encoded values.
  uint64_t payload_bytes = 0;  // the frames' payloads (chunk heads + values; int8: + one scale per 64)
  int frames = 0;
  uint64_t wire_bytes = 0;     // frames with headers (and the ack), as clocked out
  double hop_s = 0;
};
Status link_cost(int dim, const LinkOptions& o, LinkCost* out);

struct ClusterOptions {
  int nodes = 6;               // layer nodes in the chain (besides the master)
  bool master_layers = false;  // the master may also hold the first layers
  int threads = 1;             // cores per board: 1 or 2
  int pos = -1;                // position of the predicted token (-1: the context's last)
  int streams = 1;             // sequences in flight: each node keeps one KV cache per stream
  LinkOptions link;
  // Stages that become board images (plan_board_split): a stage's stored bytes (its weights, and on
  // the master master_image_extra: the tokenizer image its image carries) must also fit the board's
  // image_bytes_max, the partition an image is flashed into. Off, the flash tier's capacity only:
  // `mcullm plan --cluster` prices designs (the reference's, with a 16 MB flash), not our images.
  bool board_images = false;
  uint64_t master_image_extra = 0;
};

// What a stage of board `b` may store: its flash, and with o.board_images the board's image size.
uint64_t stage_store_bytes_max(const BoardProfile& b, const ClusterOptions& o);

struct StagePlan {
  std::string name;            // "master", "node1", ...
  int first = 0, end = 0;      // layers [first, end)
  uint64_t placed[kTierCount] = {};  // bytes per tier (weights, KV cache, activations)
  uint64_t weight_bytes = 0, kv_bytes = 0;
  uint64_t weights_placed[2] = {};  // of placed[]: weight bytes in sram, psram (a per-node image's budgets)
  double compute_s = 0;        // per token at the position
  double bytes_s = 0;          // of it: PSRAM and flash reads at the tiers' bandwidth (the byte bound)
  double instr_s = 0;          // the instruction bound on one core (0 without one)
  // What the plan counts on: the cost model, but never less than either bound.
  double planned_s() const { return std::max({compute_s, bytes_s, instr_s}); }
  bool fits = true;
  std::string overflow;
};

struct ClusterPlan {
  std::vector<StagePlan> stages;  // the master first, then the nodes in chain order
  std::vector<int> cuts;          // stage i holds layers [cuts[i], cuts[i + 1])
  LinkCost link;
  int hops = 0;                   // master -> node 1 -> ... -> node N -> master
  double bottleneck_s = 0;        // max over stages and hops (the pipeline's period)
  double latency_s = 0;           // one token through the whole chain
  int pos = 0;
  int streams = 1;
  // tokens/s with this plan's streams in flight: min(streams / latency, 1 / bottleneck).
  double tokens_per_s() const;
};

// Time and memory of `board` holding layers [first, end) (and, for the master, its own work).
StagePlan plan_stage(const ClusterModel& m, const BoardProfile& board, int first, int end, bool master,
                     const ClusterOptions& o);

// The exact min-max partition. Errors (kInvalidArgument / kOutOfRange) say what cannot fit and why:
// more nodes than layers, or no split where every node fits (naming the smallest single layer's
// need and the board's tiers).
Status plan_cluster(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                    const ClusterOptions& o, ClusterPlan* out);
// A given partition (cuts: nodes + 1 boundaries from 0 to n_layers, or master_layers first) priced
// the same way: what the reference design's fixed 4-per-node split costs, and the brute-force check.
Status price_partition(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                       const ClusterOptions& o, const std::vector<int>& cuts, ClusterPlan* out);

// The split of a loaded model over `nodes` boards of one profile (the master on the same board), for
// the model's context, an f32 KV cache, one stream and the default link, every stage a board image
// (ClusterOptions::board_images; master_extra: the bytes the master's image carries beside its weights,
// the tokenizer image): what `mcullm convert --image --nodes N` cuts the board images by and `mcullm
// cluster --local N --split plan` runs on PC nodes. *cm and *co are what it was priced with (for
// format_cluster_plan).
Status plan_board_split(const LoadedModel& lm, const BoardProfile& board, int nodes, uint64_t master_extra, ClusterModel* cm,
                        ClusterOptions* co, ClusterPlan* out);
// The nodes' layer ranges of a plan, in chain order (the master's stage left out).
std::vector<SliceRange> plan_node_ranges(const ClusterPlan& p);

// The plan's split priced for 1 .. max_streams streams (each stream's KV caches take memory, so
// the weights placed in PSRAM shrink): tokens/s per stream count, 0 where a node no longer fits.
std::vector<double> stream_table(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                                 const ClusterOptions& o, const ClusterPlan& p, int max_streams);

// The table `mcullm plan --cluster` prints.
std::string format_cluster_plan(const ClusterModel& m, const BoardProfile& master_board, const BoardProfile& node_board,
                                const ClusterOptions& o, const ClusterPlan& p);

}  // namespace mcullm
