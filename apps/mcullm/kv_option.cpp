// --kv f32|int8: the KV cache's element type, shared by run, eval, bench and plan.
#include "cli.h"

namespace mcullm::cli {

void add_kv_option(CLI::App* cmd, KvType* kv) {
  cmd->add_option_function<std::string>(
         "--kv",
         [kv](const std::string& name) { parse_kv_type(name.c_str(), kv); },
         "KV cache: f32 (default) or int8 (one scale per head per position; about 4x fewer bytes)")
      ->check(CLI::IsMember({"f32", "int8"}));
}

}  // namespace mcullm::cli
