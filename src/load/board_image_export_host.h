// Any model we load -> a board image (format/board_image.h), with a simple tier placement until the
// planner (src/plan) exists: the tensors read in full every token (norms first, then the layers'
// matrices in order, then the head) fill the SRAM budget, then the PSRAM budget, in that order;
// the rest, and an untied token embedding (one row read per token), stay in flash.
#pragma once
#include <stdint.h>

#include <vector>

#include "load/model_loader_host.h"

namespace mcullm {

struct BoardImageOptions {
  uint64_t sram_budget = 0;   // weight bytes the SRAM section may hold
  uint64_t psram_budget = 0;  // weight bytes the PSRAM section may hold
  int bos_id = -1;            // stop tokens the board runner uses (-1: none)
  int eos_id = -1;
  // A per-node image (llama family only): layers [slice.first, slice.end) and, with slice.master, the
  // token embedding, final norm and head (the cluster master's part). false: the whole model.
  bool sliced = false;
  SliceRange slice;
  // A master's image (slice.master): the nodes' layers in ring order (consecutive, 0 to n_layers), stored
  // with their slice hashes so the board master checks each node's hello (BoardRole::kNodePlan).
  std::vector<SliceRange> node_plan;
  // The board tokenizer image (tokenizer/tokenizer_image_writer_host.h) to embed (BoardRole::kTokenizer): whole
  // and master images only. Empty: none.
  std::vector<uint8_t> tokenizer;
};

struct BoardImageReport {
  int tensors = 0;
  uint64_t slice_hash = 0;  // a sliced image's slice_hash
  uint64_t tier_bytes[kTierCount] = {};  // weight bytes per tier (the tokenizer apart)
  uint64_t tokenizer_bytes = 0;          // the embedded tokenizer image's tensor (padded to 4 bytes; in flash)
};

// The placement rule itself (also the cost model's, plan/cost_model_host.h): items in rank order (stable;
// 0 norms, 1 layer matrices, 2 head, kRankFlashOnly tables read one row per token) take the SRAM
// budget, then the PSRAM budget, each with kBoardImageAlign bytes of padding; the rest go to flash.
constexpr int kRankFlashOnly = 3;
struct PlacementItem {
  uint64_t bytes = 0;
  int rank = 0;
  Tier tier = Tier::kFlash;  // the result
};
void place_in_tiers(std::vector<PlacementItem>* items, uint64_t sram_budget, uint64_t psram_budget);

Status export_board_image(const LoadedModel& model, const BoardImageOptions& opt, std::vector<uint8_t>* image,
                          BoardImageReport* report);

}  // namespace mcullm
