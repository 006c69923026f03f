// Absmean ternarization of a dense model's linear layers, as BitNet b1.58 quantizes: per tensor
// s = f32(mean |W| in double), d = max(s, 1e-5), w = clamp(round(W / d), -1, 1) (round half to even,
// as torch.round), weight = s * w; packed as i2_s. Host code: `mcullm convert --type i2_s|tl1|tl2` of a
// Hugging Face folder or of a dense GGUF of an architecture whose files may hold ternary layers
// (ArchInfo::dense_or_ternary: qwen2). train/quant.py ternary_values_absmean is the same in torch.
#pragma once
#include <cstdint>
#include <vector>

#include "model/transformer_runner.h"
#include "mcullm/status.h"

namespace mcullm {

// Replaces the seven matrices of every layer m holds (any dense type: read as f32) by their ternary
// form, the packed bytes appended to `packed` (keep it as long as m), and marks the spec ternary.
// Errors: a matrix that is already ternary or whose type cannot be read as f32, a row length the
// i2_s packing does not take (columns a multiple of 128).
Status ternarize_layers(TransformerModel* m, std::vector<std::vector<uint8_t>>* packed);

}  // namespace mcullm
