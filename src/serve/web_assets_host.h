// The web page's files (web/), compiled into the binary by cmake/EmbedWeb.cmake.
#pragma once
#include <stddef.h>

#include <string_view>

namespace mcullm::serve {

struct WebAsset {
  const char* path;  // "/index.html"
  const char* mime;
  const unsigned char* data;
  size_t size;
};

extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

// The asset served at `path` ("/" is /index.html), or null.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace mcullm::serve
