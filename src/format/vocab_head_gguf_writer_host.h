// Writes head groups (format/vocab_head_gguf.h) into a GGUF: a copy of a model file with them added.
#pragma once
#include "format/gguf.h"
#include "format/gguf_writer_host.h"
#include "model/vocab_head.h"
#include "mcullm/status.h"

namespace mcullm {

// Every key and tensor of `in`, in order, except any head groups it already stores.
Status copy_gguf(const GgufFile& in, GgufWriter* w);
// The tensors and arrays of format/vocab_head_gguf.h for `h`.
Status add_vocab_head(const VocabHead& h, GgufWriter* w);

}  // namespace mcullm
