// Writes head groups (format/vocab_head_gguf.h) into a GGUF: a copy of a model file with them added.
#pragma once
#include "format/gguf.h"
#include "format/gguf_writer_host.h"
#include "model/vocab_head.h"
#include "mcullm/status.h"

namespace mcullm {

// Every key and tensor of `in`, in order, except any head groups it already stores.
Status copy_gguf(const GgufFile& in, GgufWriter* w);
// The tensors and arrays of format/vocab_head_gguf.h for `h`; with mode other than full, the default
// head (mode and top groups, top 0: none) too.
Status add_vocab_head(const VocabHead& h, GgufWriter* w, HeadMode mode = HeadMode::kFull, int top = 0);

}  // namespace mcullm
