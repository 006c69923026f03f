// Reading and writing the LUT tuning file (kernels/tl_tuning.h) on the PC.
#pragma once
#include <string>

#include "kernels/tl_tuning.h"

namespace mcullm {

// $MCULLM_TUNING when set, else "mcullm-tuning.txt" in the current directory.
std::string tl_tuning_default_path();
// Reads and parses the file (at most 1 MiB); errors name the file.
Status tl_tuning_load_file(const std::string& path, TlTuningTable* out);
Status tl_tuning_save_file(const std::string& path, const TlTuningTable& table);

}  // namespace mcullm
