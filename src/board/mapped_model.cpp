#include "board/mapped_model.h"

namespace mcullm::board {

Status tier_arena(Hal& hal, Tier tier, Arena* out) {
  void* base = nullptr;
  size_t bytes = 0;
  MC_TRY(hal.tier_memory(tier, &base, &bytes));
  out->reset(tier, base, bytes);
  return Status::Ok();
}

Status MappedModel::init(Hal& hal, const char* partition) {
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (Status st = hal.map_partition(partition, &data, &size); !st.ok()) return st.prefix("partition '%s': ", partition);
  MC_TRY(tier_arena(hal, Tier::kSram, &arena(Tier::kSram)));
  MC_TRY(tier_arena(hal, Tier::kPsram, &arena(Tier::kPsram)));
  arena(Tier::kFlash).reset(Tier::kFlash, nullptr, 0);  // records what stays mapped
  if (Status st = image_.open(data, size); !st.ok()) return st.prefix("partition '%s' holds no usable board image: ", partition);
  Arena* const ram[kTierCount] = {&arena(Tier::kSram), &arena(Tier::kPsram), nullptr, nullptr};
  if (Status st = image_.place(ram, arena(Tier::kFlash)); !st.ok()) return st.prefix("placing the image: ");
  return board_model_from_image(image_, arena(Tier::kSram), &model_);
}

Status MappedModel::llama(const LlamaModel** out) const {
  if (!model_.arch || model_.arch->family != ArchFamily::kTransformer)
    return Status::Error(Code::kUnsupported, "the cluster roles run llama-family images; this image is %s",
                         board_arch_name(image_.arch()));
  *out = &model_.transformer;
  return Status::Ok();
}

}  // namespace mcullm::board
