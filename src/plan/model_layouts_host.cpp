#include "plan/model_layouts_host.h"

namespace mcullm {

const std::vector<ModelLayout>& bitnet_layouts() {
  static const std::vector<ModelLayout> layouts = {
      // name     arch         dim   hidden layers heads kv  vocab  seq   rope theta
      {"125M", "bitnet", 768, 3072, 11, 12, 12, 32002, 2048, 10000.0f},
      {"350M", "bitnet", 1024, 3072, 24, 16, 16, 32002, 2048, 10000.0f},
      {"1B", "bitnet", 2048, 3584, 24, 32, 32, 32002, 2048, 10000.0f},
      {"1.5B", "bitnet", 1536, 9216, 28, 32, 32, 32002, 2048, 10000.0f},
      {"2.7B", "bitnet", 3072, 7680, 24, 32, 32, 32002, 2048, 10000.0f},
      {"3.8B", "bitnet", 3840, 8192, 24, 32, 32, 32002, 2048, 10000.0f},
      {"7B", "bitnet", 4096, 12032, 32, 32, 32, 32002, 2048, 10000.0f},
      {"large", "bitnet", 1536, 4096, 24, 16, 16, 32002, 2048, 10000.0f},
      {"2B-4T", "bitnet-25", 2560, 6912, 30, 20, 5, 128256, 4096, 500000.0f},
      {"tiny", "bitnet", 256, 512, 2, 4, 2, 0, 256, 10000.0f},
      {"tiny-25", "bitnet-25", 256, 384, 2, 4, 1, 0, 256, 500000.0f},
  };
  return layouts;
}

const std::vector<ModelLayout>& qwen2_layouts() {
  static const std::vector<ModelLayout> layouts = {
      // name   arch    dim  hidden layers heads kv vocab  seq  rope theta
      {"ref", "qwen2", 896, 4864, 24, 14, 2, 32000, 512, 1e6f},
      {"small", "qwen2", 256, 768, 8, 4, 2, 0, 256, 1e6f},
      {"tiny", "qwen2", 128, 384, 4, 4, 2, 0, 128, 1e6f},
  };
  return layouts;
}

const ModelLayout* layout_by_name(const std::vector<ModelLayout>& layouts, const std::string& name) {
  for (const ModelLayout& l : layouts)
    if (l.name == name) return &l;
  return nullptr;
}

std::string layout_names(const std::vector<ModelLayout>& layouts) {
  std::string s;
  for (const ModelLayout& l : layouts) s += (s.empty() ? "" : ", ") + l.name;
  return s;
}

}  // namespace mcullm
