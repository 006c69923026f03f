#include "serve/web_assets_host.h"

namespace mcullm::serve {

const WebAsset* find_web_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (size_t i = 0; i < kWebAssetCount; ++i)
    if (path == kWebAssets[i].path) return &kWebAssets[i];
  return nullptr;
}

}  // namespace mcullm::serve
