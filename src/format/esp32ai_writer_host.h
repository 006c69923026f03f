// Writes a PleModel as an esp32-ai file (header v0 when the model is v0, else v1) or as GGUF
// (format/esp32ai.h: the "esp32ai-ple" architecture). Weights are copied as they are: both
// directions are lossless.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/esp32ai.h"
#include "format/gguf_writer_host.h"

namespace mcullm {

Status esp32ai_write_bytes(const PleModel& model, std::vector<uint8_t>* out);
Status export_ple_gguf(const PleModel& model, const std::string& source, GgufWriter* w);

}  // namespace mcullm
