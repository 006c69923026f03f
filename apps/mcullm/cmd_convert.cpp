// `mcullm convert`: any model we read -> GGUF (f32, f16, q8_0, q4_0 or our q4g64; BitNet and bitllama2.c
// ternary models -> i2_s, tl1 or tl2), or -> a board image (--image, the weights as loaded; format/board_image.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "format/bitllama2c_gguf_writer_host.h"
#include "format/esp32ai_writer_host.h"
#include "format/transformer_gguf_writer_host.h"
#include "format/ternary_gguf_host.h"
#include "load/board_image_export_host.h"
#include "load/hf_checkpoint_host.h"
#include "load/ternarize_host.h"
#include "cluster/slice_source_host.h"
#include "plan/cluster_plan_host.h"
#include "core/file_io_host.h"
#include "tokenizer/tokenizer_image_writer_host.h"
#include "session.h"

namespace mcullm::cli {

namespace {

struct ConvertOptions {
  ModelOptions m;  // the input, -z, --bit-order; --use-pretuned: the TL tilings to pack tl1 / tl2 with
  std::string output, type, embd_type;  // type "": f32, or i2_s for ternary models
  std::string image;  // board image to write instead of a GGUF
  uint64_t sram_budget = 64 * 1024, psram_budget = 2 * 1024 * 1024;
  std::string format = "gguf";  // or "esp32ai" (PLE models only)
  std::string layers;           // --image: "A:B" (a node's layers) or "master" (embedding, final norm, head)
  int nodes = 0;                // --image: the master's and N nodes' images, split by the planner
  std::string board = "esp32s3-psram80";
  bool no_tokenizer = false;    // --image: leave the tokenizer image out
};

// FILE.img -> FILE.<part>.img (the extension kept when there is one).
std::string part_path(const std::string& image, const std::string& part) {
  const size_t slash = image.find_last_of('/'), dot = image.find_last_of('.');
  const bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return ext ? image.substr(0, dot) + "." + part + image.substr(dot) : image + "." + part;
}

// One board image, built in memory: written only when every image of the command fits its board.
struct BuiltImage {
  std::string path;
  BoardImageOptions opt;
  std::vector<uint8_t> bytes;
  BoardImageReport rep;
};

// Bytes a q4g64 embedding (and untied head) would save over the model's: 0 when none or unknown.
uint64_t q4g64_embedding_saving(const LoadedModel& lm) {
  ClusterModel cm;
  if (!cluster_model_from_loaded(lm, 0, 4, 0, 0, &cm).ok() || !dtype_row_fits(DType::kQ4G64, cm.dim)) return 0;
  const MasterWork& ms = cm.master;
  const uint64_t now = ms.embedding_bytes + ms.head_bytes;
  const uint64_t q = dtype_tensor_bytes(DType::kQ4G64, cm.vocab, cm.dim) * (ms.head_bytes ? 2 : 1);
  return now > q ? now - q : 0;
}

// What shrinks an image: a smaller embedding (whole and master images), no tokenizer, fewer layers.
// layers: "" holds none, else how to hold fewer.
std::string shrink_hint(const LoadedModel& lm, bool embedding, uint64_t tokenizer_bytes, const std::string& layers) {
  std::vector<std::string> ways;
  if (const uint64_t saved = embedding ? q4g64_embedding_saving(lm) : 0)
    ways.push_back("a q4g64 embedding (" + std::to_string(saved) + " bytes less; " +
                   (lm.arch->ternary ? "convert keeps a ternary model's embedding: export the model with one"
                                     : "convert the model to GGUF with --embd-type q4g64 first") + ")");
  if (tokenizer_bytes) ways.push_back("--no-tokenizer (the tokenizer image is " + std::to_string(tokenizer_bytes) + " bytes)");
  if (!layers.empty()) ways.push_back(layers);
  if (ways.empty()) return "nothing convert can do: a board with a larger image partition (--board)";
  std::string s;
  for (size_t i = 0; i < ways.size(); ++i) s += (i ? ", " : "") + ways[i];
  return s;
}

// A board takes an image of at most its image_bytes_max (the partition it is flashed into): a bigger
// one is refused, naming what shrinks it, rather than written for a board that cannot use it.
int check_image_fits(const LoadedModel& lm, const BuiltImage& im, const BoardProfile& board, bool nodes_given) {
  if (im.bytes.size() <= board.image_bytes_max) return 0;
  const bool embedding = !im.opt.sliced || im.opt.slice.master;
  const bool layers = !im.opt.sliced || im.opt.slice.end > im.opt.slice.first;
  const std::string fewer = !layers ? "" : nodes_given ? "more --nodes" : im.opt.sliced ? "fewer --layers" : "split the layers over boards (--nodes N)";
  std::fprintf(stderr,
               "mcullm: error: %s would be %zu bytes, %llu more than board %s takes (an image of at most %llu bytes: its "
               "image partition); not written. To shrink it: %s\n",
               im.path.c_str(), im.bytes.size(), static_cast<unsigned long long>(im.bytes.size() - board.image_bytes_max),
               board.name.c_str(), static_cast<unsigned long long>(board.image_bytes_max),
               shrink_hint(lm, embedding, im.rep.tokenizer_bytes, fewer).c_str());
  return kExitDoesNotFit;
}

// The master's image (embedding, final norm, head) and one image per node, the layers split by the
// planner (plan/cluster_plan_host.h) for the board profile: FILE.master.img, FILE.node1.img, ...
template <class Build, class Write>
int convert_cluster_images(const ConvertOptions& o, const LoadedModel& lm, const BoardProfile& board, BoardImageOptions opt,
                           Build build, Write write) {
  if (!o.layers.empty()) return report(Status::Error(Code::kInvalidArgument, "--nodes splits the layers itself: leave out --layers"));
  ClusterModel cm;
  ClusterOptions co;
  ClusterPlan plan;
  // The master's image carries the tokenizer image too (a tensor padded to 4 bytes).
  const uint64_t tokenizer = (opt.tokenizer.size() + 3) & ~uint64_t{3};
  if (Status st = plan_board_split(lm, board, o.nodes, tokenizer, &cm, &co, &plan); !st.ok()) {
    if (st.code() != Code::kOutOfRange) return report(st.prefix("--nodes %d on %s: ", o.nodes, o.board.c_str()));
    const bool master_fits = plan_stage(cm, board, 0, 0, true, co).fits;  // else the nodes: more of them
    std::fprintf(stderr, "mcullm: error: --nodes %d on %s: %s. To shrink the %s: %s\n", o.nodes, o.board.c_str(), st.message(),
                 master_fits ? "nodes' images" : "master's image",
                 (master_fits ? shrink_hint(lm, false, 0, "more --nodes") : shrink_hint(lm, true, tokenizer, "")).c_str());
    return kExitDoesNotFit;
  }
  std::fputs(format_cluster_plan(cm, board, board, co, plan).c_str(), stdout);
  for (const StagePlan& st : plan.stages)
    if (!st.fits) {
      std::fprintf(stderr, "mcullm: error: %s does not fit %s: %s\n", st.name.c_str(), o.board.c_str(), st.overflow.c_str());
      return kExitDoesNotFit;
    }
  opt.sliced = true;
  opt.node_plan = plan_node_ranges(plan);
  std::vector<BuiltImage> images(plan.stages.size());
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const StagePlan& sp = plan.stages[i];
    const bool master = i == 0;
    opt.slice = SliceRange{sp.first, sp.end, master};
    opt.sram_budget = sp.weights_placed[0];  // the planner's tiers for this stage's weights (whole tensors here)
    opt.psram_budget = sp.weights_placed[1];
    if (int rc = build(part_path(o.image, sp.name), opt, &images[i]); rc != 0) return rc;
    opt.node_plan.clear();  // the master's image (the first) only
    opt.tokenizer.clear();
  }
  // The planner counts weights and the tokenizer, not the image's headers and padding: the images' sizes decide.
  for (const BuiltImage& im : images)
    if (int rc = check_image_fits(lm, im, board, true); rc != 0) return rc;
  for (const BuiltImage& im : images)
    if (int rc = write(im); rc != 0) return rc;
  return 0;
}

// The board image of the model as loaded; BOS / EOS of its tokenizer (if any) become the stop tokens.
int convert_image(const ConvertOptions& o, const LoadedModel& lm) {
  if (!o.type.empty() || !o.embd_type.empty())
    return report(Status::Error(Code::kInvalidArgument,
                                "--image keeps the weights as loaded: convert with --type / --embd-type to GGUF first"));
  BoardProfile board;
  if (Status st = load_board_profile(o.board, &board); !st.ok()) return report(st);
  BoardImageOptions opt;
  opt.sram_budget = o.sram_budget;
  opt.psram_budget = o.psram_budget;
  std::unique_ptr<Tokenizer> tok;
  std::string tok_source;
  if (Status st = load_tokenizer(lm, o.m.tokenizer, &tok, &tok_source); st.ok()) {
    opt.bos_id = tok->bos_id();
    opt.eos_id = tok->eos_id();
    // The board tokenizer image goes into the whole or master image (the board's `S` text requests).
    Status ti = o.no_tokenizer ? Status::Ok() : write_tokenizer_image(*tok, &opt.tokenizer);
    if (!ti.ok()) {
      opt.tokenizer.clear();
      std::fprintf(stderr, "mcullm: note: the image carries no tokenizer (%s)\n", ti.message());
    }
  } else if (!o.m.tokenizer.empty()) {
    return report(st);
  } else {
    std::fprintf(stderr, "mcullm: note: no tokenizer found (%s); the image has no stop tokens and no tokenizer\n", st.message());
  }
  auto build = [&](const std::string& path, const BoardImageOptions& io, BuiltImage* out) -> int {
    out->path = path;
    out->opt = io;
    if (Status st = export_board_image(lm, io, &out->bytes, &out->rep); !st.ok()) return report(st);
    return 0;
  };
  auto write = [&](const BuiltImage& im) -> int {
    const BoardImageOptions& io = im.opt;
    const BoardImageReport& rep = im.rep;
    if (Status st = write_file_atomic(im.path, im.bytes.data(), im.bytes.size()); !st.ok()) return report(st);
    std::string part;
    if (io.sliced) {
      char b[96];
      std::snprintf(b, sizeof b, "%slayers %d:%d of %d, slice hash %016llx, ", io.slice.master ? "master part, " : "", io.slice.first,
                    io.slice.end, lm.model.cfg.n_layers, static_cast<unsigned long long>(rep.slice_hash));
      part = b;
    }
    if (rep.tokenizer_bytes) part += "tokenizer image " + std::to_string(rep.tokenizer_bytes) + " bytes, ";
    std::fprintf(stderr, "mcullm: wrote %s: %s, %s%d tensors, %zu bytes; weights sram %llu, psram %llu, flash %llu bytes\n",
                 im.path.c_str(), lm.arch_name(), part.c_str(), rep.tensors, im.bytes.size(),
                 static_cast<unsigned long long>(rep.tier_bytes[static_cast<int>(Tier::kSram)]),
                 static_cast<unsigned long long>(rep.tier_bytes[static_cast<int>(Tier::kPsram)]),
                 static_cast<unsigned long long>(rep.tier_bytes[static_cast<int>(Tier::kFlash)]));
    return 0;
  };
  if (o.nodes > 0) return convert_cluster_images(o, lm, board, opt, build, write);
  if (!o.layers.empty()) {
    opt.sliced = true;
    if (o.layers == "master") opt.slice = SliceRange{0, 0, true};
    else if (Status st = parse_layer_range(o.layers, "--layers", &opt.slice); !st.ok()) return report(st);
    if (!opt.slice.master) opt.tokenizer.clear();  // a node's image never carries it
  }
  BuiltImage im;
  if (int rc = build(o.image, opt, &im); rc != 0) return rc;
  if (int rc = check_image_fits(lm, im, board, false); rc != 0) return rc;
  return write(im);
}

// PLE (esp32-ai) models keep their int4 weights as they are, to GGUF or back to an esp32-ai file.
int convert_ple(const ConvertOptions& o, const LoadedModel& lm) {
  if (!o.type.empty() || !o.embd_type.empty())
    return report(Status::Error(Code::kInvalidArgument, "--type / --embd-type: a PLE model keeps its esp32-ai int4 weights"));
  if (o.format == "esp32ai") {
    std::vector<uint8_t> bytes;
    if (Status st = esp32ai_write_bytes(lm.ple, &bytes); !st.ok()) return report(st);
    if (Status st = write_file_atomic(o.output, bytes.data(), bytes.size()); !st.ok()) return report(st);
    std::fprintf(stderr, "mcullm: wrote %s: esp32-ai v%d, %zu bytes\n", o.output.c_str(), lm.ple.cfg.version, bytes.size());
    return 0;
  }
  GgufWriter writer;
  if (Status st = export_ple_gguf(lm.ple, lm.format + " " + o.m.model, &writer); !st.ok()) return report(st);
  if (Status st = writer.write_file(o.output); !st.ok()) return report(st);
  std::fprintf(stderr, "mcullm: wrote %s: %zu tensors (q4e codes + f16 scales, f32 norms)\n", o.output.c_str(), writer.tensor_count());
  return 0;
}

// Ternary models between i2_s, tl1 and tl2 (format/ternary_gguf_host.h): a GGUF's keys and tensors
// copied with its ternary matrices repacked; a bitllama2.c .bin first exported to i2_s GGUF bytes.
int convert_ternary(const ConvertOptions& o, const LoadedModel& lm, const Llama2cTokenizer* tok) {
  if (!o.embd_type.empty())
    return report(Status::Error(Code::kInvalidArgument, "--embd-type: a ternary model keeps its embedding as it is"));
  const std::string type = o.type.empty() ? "i2_s" : o.type;
  if (!dtype_info_by_name(type.c_str()) || !is_ternary_matrix_type(dtype_info_by_name(type.c_str())->type))
    return report(Status::Error(Code::kInvalidArgument, "--type %s: a BitNet (ternary) model converts to i2_s, tl1 or tl2",
                                type.c_str()));
  if (Status st = apply_pretuned(o.m.pretuned); !st.ok()) return report(st);  // the TL tilings to pack with
  std::vector<uint8_t> exported;
  std::vector<uint8_t> table_mem(1 << 20);
  Arena arena(Tier::kHost, table_mem.data(), table_mem.size());
  GgufFile exported_file;
  const GgufFile* in = &lm.gguf;
  if (lm.format != "gguf") {  // bitllama2.c .bin: its i2_s GGUF first
    GgufWriter first;
    BitLlama2cExportReport rep;
    if (Status st = export_bitllama2c_gguf(lm.bitnet, tok, lm.format + " " + o.m.model, &first, &rep); !st.ok())
      return report(st);
    exported = first.to_bytes();
    if (Status st = exported_file.open(exported.data(), exported.size(), arena); !st.ok()) return report(st);
    in = &exported_file;
  }
  GgufWriter writer;
  TernaryRetypeReport rep;
  if (Status st = retype_ternary_gguf(*in, dtype_info_by_name(type.c_str())->type, &writer, &rep); !st.ok())
    return report(st);
  if (Status st = writer.write_file(o.output); !st.ok()) return report(st);
  for (const std::string& note : rep.notes) std::fprintf(stderr, "mcullm: note: %s\n", note.c_str());
  const std::string kept = rep.fell_back == 0 ? std::string()
                            : ", " + std::to_string(rep.fell_back) + " kept as i2_s" +
                                  (rep.notes.empty() ? std::string() : " (the notes above say why)");
  std::fprintf(stderr, "mcullm: wrote %s: %d ternary matrices as %s%s, %.2f MiB of ternary weights\n", o.output.c_str(),
               rep.repacked, type.c_str(), kept.c_str(), rep.ternary_bytes / 1048576.0);
  return 0;
}

// Ternarized layers (written as i2_s in `writer`) to o.output as --type says: i2_s as they are, tl1 / tl2
// repacked as convert_ternary does.
Status write_ternarized(const ConvertOptions& o, const GgufWriter& writer) {
  if (o.type != "tl1" && o.type != "tl2") return writer.write_file(o.output);
  MC_TRY(apply_pretuned(o.m.pretuned));
  const std::vector<uint8_t> bytes = writer.to_bytes();
  std::vector<uint8_t> table_mem(1 << 20);
  Arena arena(Tier::kHost, table_mem.data(), table_mem.size());
  GgufFile first;
  MC_TRY(first.open(bytes.data(), bytes.size(), arena));
  GgufWriter retyped;
  TernaryRetypeReport trep;
  MC_TRY(retype_ternary_gguf(first, dtype_info_by_name(o.type.c_str())->type, &retyped, &trep));
  MC_TRY(retyped.write_file(o.output));
  for (const std::string& note : trep.notes) std::fprintf(stderr, "mcullm: note: %s\n", note.c_str());
  return Status::Ok();
}

bool is_ternary_type(const std::string& type) {
  const DTypeInfo* info = dtype_info_by_name(type.c_str());
  return info && is_ternary_matrix_type(info->type);
}

// A Hugging Face folder (load/hf_checkpoint_host.h): its f32 weights written as --type (dense), or
// ternarized (absmean) for i2_s / tl1 / tl2, with tokenizer.json as the GGUF's "gpt2" vocabulary.
int convert_hf(const ConvertOptions& o) {
  if (!o.image.empty() || o.format != "gguf")
    return report(Status::Error(Code::kInvalidArgument, "a Hugging Face folder converts to GGUF (-o FILE.gguf) only"));
  if (!o.m.tokenizer.empty())
    return report(Status::Error(Code::kInvalidArgument, "a Hugging Face folder brings its tokenizer.json: leave out -z/--tokenizer"));
  auto ck = std::make_unique<HfCheckpoint>();
  if (Status st = load_hf_checkpoint(o.m.model, ck.get()); !st.ok()) return report(st);
  const bool ternary = is_ternary_type(o.type);
  if (ternary) {
    if (Status st = hf_ternarize(ck.get()); !st.ok()) return report(st);
  }
  GgufExportOptions opt;
  opt.gguf_arch = ck->arch->gguf_arch;
  opt.weight_type = ternary ? DType::kF32 : dtype_info_by_name(o.type.empty() ? "f32" : o.type.c_str())->type;
  if (!o.embd_type.empty()) {
    opt.has_embedding_type = true;
    opt.embedding_type = dtype_info_by_name(o.embd_type.c_str())->type;
  } else if (ternary) {  // as the ternary GGUFs we read: an f16 embedding
    opt.has_embedding_type = true;
    opt.embedding_type = DType::kF16;
  }
  opt.name = ck->hf_arch;
  opt.source = "huggingface " + o.m.model;
  GgufWriter writer;
  GgufExportReport rep;
  if (Status st = export_transformer_gguf(ck->model, nullptr, opt, &writer, &rep); !st.ok()) return report(st);
  if (ck->has_vocab) {
    if (Status st = add_bpe_vocab(&writer, ck->vocab, ck->model.cfg.vocab_size); !st.ok()) return report(st);
  } else {
    std::fprintf(stderr, "mcullm: note: %s has no tokenizer.json; the GGUF will have no vocabulary\n", o.m.model.c_str());
  }
  if (Status st = write_ternarized(o, writer); !st.ok()) return report(st);
  for (const std::string& note : rep.notes) std::fprintf(stderr, "mcullm: note: %s\n", note.c_str());
  std::fprintf(stderr, "mcullm: wrote %s: %s as %s, %d files of %s tensors, %d matrices as %s (%d kept f32), tokenizer %s\n",
               o.output.c_str(), ck->hf_arch.c_str(), ck->arch->gguf_arch, ck->files, ck->dtypes.c_str(), rep.matrices,
               o.type.empty() ? "f32" : o.type.c_str(), rep.kept_f32, ck->has_vocab ? "tokenizer.json" : "none");
  return 0;
}

// A dense model of an architecture whose files may hold ternary layers (qwen2): its layers ternarized by
// absmean (load/ternarize_host.h: what train/'s ternary QAT trains towards) and written as --type.
int convert_dense_to_ternary(const ConvertOptions& o, LoadedModel& lm, const Llama2cTokenizer* tok) {
  if (!is_ternary_type(o.type))
    return report(Status::Error(Code::kUnsupported, "convert: a %s model with dense linear layers converts to i2_s, tl1 or tl2 "
                                "(ternarized by absmean), not to %s", lm.arch_name(), o.type.empty() ? "f32" : o.type.c_str()));
  std::vector<std::vector<uint8_t>> packed;
  if (Status st = ternarize_layers(&lm.model, &packed); !st.ok()) return report(st.prefix("%s: ", o.m.model.c_str()));
  GgufExportOptions opt;
  opt.gguf_arch = lm.arch->gguf_arch;
  opt.weight_type = DType::kF32;  // the layers are i2_s now; the rest as the file holds it
  opt.has_embedding_type = true;
  opt.embedding_type = o.embd_type.empty() ? DType::kF16 : dtype_info_by_name(o.embd_type.c_str())->type;
  opt.source = lm.format + " " + o.m.model;
  GgufWriter writer;
  GgufExportReport rep;
  if (Status st = export_transformer_gguf(lm.model, tok, opt, &writer, &rep); !st.ok()) return report(st);
  if (Status st = write_ternarized(o, writer); !st.ok()) return report(st);
  std::fprintf(stderr, "mcullm: wrote %s: %s, %zu matrices ternarized (absmean) as %s, tokenizer %s\n", o.output.c_str(),
               lm.arch_name(), packed.size(), o.type.c_str(), tok ? "kept" : "none");
  return 0;
}

int convert(const ConvertOptions& o) {
  if (std::filesystem::is_directory(o.m.model)) return convert_hf(o);
  std::unique_ptr<LoadedModel> lm;
  if (Status st = load_model(o.m.model, o.m.load_options(), &lm); !st.ok()) return report(st);
  if (!o.image.empty()) return convert_image(o, *lm);
  if (!o.layers.empty() || o.nodes > 0)
    return report(Status::Error(Code::kInvalidArgument, "--layers / --nodes cut board images: give --image FILE"));
  if (lm->is(ArchFamily::kPle)) return convert_ple(o, *lm);
  if (o.format != "gguf")
    return report(Status::Error(Code::kInvalidArgument, "--format %s: only PLE (esp32-ai) models convert to esp32ai", o.format.c_str()));
  Llama2cTokenizer tok;
  std::string tok_source;
  Status tok_status = load_tokenizer(*lm, o.m.tokenizer, &tok, &tok_source);
  if (!tok_status.ok()) {
    if (!o.m.tokenizer.empty()) return report(tok_status);
    std::fprintf(stderr, "mcullm: note: no tokenizer found (%s); the GGUF will have no vocabulary\n", tok_status.message());
  }
  if (lm->arch->dense_or_ternary && !lm->model.spec.ternary) return convert_dense_to_ternary(o, *lm, tok_status.ok() ? &tok : nullptr);
  const bool ternary_model = lm->arch->ternary;
  if (ternary_model && (lm->format == "gguf" || o.type == "tl1" || o.type == "tl2"))
    return convert_ternary(o, *lm, tok_status.ok() ? &tok : nullptr);
  if (o.type == "tl1" || o.type == "tl2")
    return report(Status::Error(Code::kInvalidArgument, "--type %s holds BitNet (ternary) models; this is %s",
                                o.type.c_str(), lm->format.c_str()));
  if (lm->is(ArchFamily::kBitLlama2c)) {  // BitLinear layers: the ternary weights and scales as they are
    if (!o.type.empty() && o.type != "i2_s")
      return report(Status::Error(Code::kInvalidArgument, "--type %s: a bitllama2.c ternary model converts to i2_s, tl1 or tl2",
                                  o.type.c_str()));
    GgufWriter writer;
    BitLlama2cExportReport rep;
    if (Status st = export_bitllama2c_gguf(lm->bitnet, tok_status.ok() ? &tok : nullptr, lm->format + " " + o.m.model, &writer, &rep);
        !st.ok())
      return report(st);
    if (Status st = writer.write_file(o.output); !st.ok()) return report(st);
    std::fprintf(stderr, "mcullm: wrote %s: %d matrices as i2_s, %.2f MiB of ternary weights, tokenizer %s\n", o.output.c_str(),
                 rep.matrices, rep.weight_bytes / 1048576.0, tok_status.ok() ? tok_source.c_str() : "none");
    return 0;
  }
  if (o.type == "i2_s")
    return report(Status::Error(Code::kInvalidArgument, "--type i2_s holds BitLinear (ternary) models; this is %s",
                                lm->format.c_str()));
  GgufExportOptions opt;
  opt.weight_type = dtype_info_by_name(o.type.empty() ? "f32" : o.type.c_str())->type;
  if (!o.embd_type.empty()) {
    opt.has_embedding_type = true;
    opt.embedding_type = dtype_info_by_name(o.embd_type.c_str())->type;
  }
  opt.source = lm->format + " " + o.m.model;
  GgufWriter writer;
  GgufExportReport rep;
  if (Status st = export_transformer_gguf(lm->model, tok_status.ok() ? &tok : nullptr, opt, &writer, &rep); !st.ok()) return report(st);
  if (Status st = writer.write_file(o.output); !st.ok()) return report(st);
  for (const std::string& note : rep.notes) std::fprintf(stderr, "mcullm: note: %s\n", note.c_str());
  std::fprintf(stderr, "mcullm: wrote %s: %d matrices as %s (%d kept f32), %.2f MiB of weights, tokenizer %s\n",
               o.output.c_str(), rep.matrices, o.type.empty() ? "f32" : o.type.c_str(), rep.kept_f32, rep.weight_bytes / 1048576.0,
               tok_status.ok() ? tok_source.c_str() : "none");
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a model (llama2.c .bin, GGUF or a Hugging Face folder) to GGUF, optionally quantized");
  cmd->add_option("input", o->m.model, "Model to read (a file, or a Hugging Face folder: config.json, *.safetensors, tokenizer.json)")
      ->required()
      ->check(CLI::ExistingPath);
  CLI::Option* out = cmd->add_option("-o,--output", o->output, "File to write (GGUF unless --format esp32ai)");
  CLI::Option* image = cmd->add_option("--image", o->image, "Write a board image (format/board_image.h) instead of a GGUF");
  out->excludes(image);
  cmd->add_flag("--no-tokenizer", o->no_tokenizer, "--image: leave the board tokenizer image out of the (whole or master) image");
  cmd->add_option("--sram-budget", o->sram_budget, "--image: weight bytes placed in the SRAM section");
  cmd->add_option("--psram-budget", o->psram_budget, "--image: weight bytes placed in the PSRAM section");
  CLI::Option* layers = cmd->add_option("--layers", o->layers,
                  "--image: a per-node image holding only layers A:B, or 'master' (embedding, final norm and head) "
                  "for the cluster master (llama-family models)");
  cmd->add_option("--nodes", o->nodes, "--image FILE.img: FILE.master.img and FILE.node1.img .. FILE.nodeN.img, the layers "
                  "split by the cluster planner for --board")
      ->check(CLI::Range(1, 64))
      ->excludes(layers);
  cmd->add_option("--board", o->board, "--image: the board profile (preset or JSON file, default esp32s3-psram80) whose "
                  "image_bytes_max (its model partition) every image must fit; --nodes: also the one the planner splits for "
                  "and whose SRAM / PSRAM it fills (replacing --sram-budget / --psram-budget)");
  cmd->add_option("--type", o->type, "Weight type of the layers' matrices (default f32; ternary models: i2_s (default), tl1 or tl2; "
                  "a Hugging Face Qwen2 folder with i2_s / tl1 / tl2: ternarized by absmean)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4g64", "i2_s", "tl1", "tl2"}));
  add_model_options(cmd, &o->m, kTokenizerFlag | kBitOrderFlag | kPretunedFlag, {.model = nullptr});
  cmd->add_option("--embd-type", o->embd_type,
                  "Type of the token embedding and output head (default: --type, but q8_0 for the 4-bit types)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4g64"}));
  cmd->add_option("--format", o->format, "Output format: gguf, or esp32ai (an esp32-ai model file; PLE models only)")
      ->check(CLI::IsMember({"gguf", "esp32ai"}));
  cmd->callback([o, exit_code] {
    *exit_code = o->output.empty() && o->image.empty()
                     ? report(Status::Error(Code::kInvalidArgument, "convert: give -o/--output FILE.gguf or --image FILE"))
                     : convert(*o);
  });
}

}  // namespace mcullm::cli
