#include "cluster/transport.h"

namespace mcullm::cluster {

const char* link_failure_name(LinkFailure f) {
  switch (f) {
    case LinkFailure::kNone: return "none";
    case LinkFailure::kTimeout: return "timeout";
    case LinkFailure::kClosed: return "closed";
    case LinkFailure::kCorrupt: return "corrupt";
    case LinkFailure::kInvalid: return "invalid";
    case LinkFailure::kIo: return "i/o";
  }
  return "unknown";
}

}  // namespace mcullm::cluster
