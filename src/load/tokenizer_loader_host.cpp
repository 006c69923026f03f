#include "load/tokenizer_loader_host.h"

#include <string.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "load/mapped_file_host.h"
#include "load/model_loader_host.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/image_tokenizer_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"
#include "tokenizer/wordpiece_tokenizer_host.h"

namespace mcullm {

namespace {

// The Hugging Face pre-tokenizer patterns we implement by hand (pretokenizer.h), as tokenizer.json
// spells them.
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

int find_token(const std::vector<std::string>& tokens, const std::vector<TokenType>& types,
               std::initializer_list<const char*> names) {
  for (const char* name : names)
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == name && (types.empty() || types[i] == TokenType::kControl || types[i] == TokenType::kUserDefined))
        return static_cast<int>(i);
  return -1;
}

void guess_special_ids(BpeVocab* v) {
  if (v->eot < 0) v->eot = find_token(v->tokens, v->types, {"<|im_end|>", "<|eot_id|>", "<|end_of_turn|>", "<end_of_turn>", "<|EOT|>"});
  if (v->eos < 0) v->eos = find_token(v->tokens, v->types, {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|end▁of▁sentence|>"});
  if (v->bos < 0) v->bos = find_token(v->tokens, v->types, {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<|begin▁of▁sentence|>"});
}

// A token id in tokenizer.json must be an integer that fits int64 (converting a float such as 2e80 is UB).
bool json_integer_id(const nlohmann::json& v) {
  return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
}

Status optional_id(const GgufFile& g, const char* key, int n, int* out) {
  uint32_t v;
  Status st = g.get_u32(key, &v);
  if (st.code() == Code::kNotFound) return Status::Ok();
  MC_TRY(st);
  if (v >= static_cast<uint32_t>(n))
    return Status::Error(Code::kCorrupt, "%s = %u is outside the vocabulary of %d tokens", key, v, n);
  *out = static_cast<int>(v);
  return Status::Ok();
}

// tokenizer.ggml.tokens and (optional) tokenizer.ggml.token_type: types outside 0..6 read as normal.
Status read_tokens_and_types(const GgufFile& g, Arena& scratch, std::vector<std::string>* tokens,
                             std::vector<TokenType>* types) {
  const Arena::Mark mark = scratch.mark();
  GgufStr* strs = nullptr;
  uint64_t count = 0;
  Status st = g.get_string_array("tokenizer.ggml.tokens", scratch, &strs, &count);
  if (st.ok() && count > 0x7fffffff) st = Status::Error(Code::kCorrupt, "tokenizer.ggml.tokens has %llu entries", static_cast<unsigned long long>(count));
  if (st.ok()) {
    tokens->reserve(count);
    for (uint64_t i = 0; i < count; ++i) tokens->emplace_back(strs[i].data, strs[i].size);
  }
  scratch.rollback(mark);
  MC_TRY(st);
  const uint8_t* type_bytes = nullptr;
  uint64_t type_count = 0;
  st = g.get_array("tokenizer.ggml.token_type", GgufType::kI32, &type_bytes, &type_count);
  if (st.code() == Code::kNotFound) return Status::Ok();
  MC_TRY(st);
  if (type_count != count)
    return Status::Error(Code::kCorrupt, "tokenizer.ggml.token_type has %llu entries for %llu tokens",
                         static_cast<unsigned long long>(type_count), static_cast<unsigned long long>(count));
  types->resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t t = gguf_load_u32(type_bytes + 4 * i);
    (*types)[i] = t <= 6 ? static_cast<TokenType>(t) : TokenType::kNormal;
  }
  return Status::Ok();
}

Status bpe_from_gguf(const GgufFile& g, Arena& scratch, std::unique_ptr<Tokenizer>* out) {
  BpeVocab v;
  GgufStr pre{"", 0};
  Status st = g.get_string("tokenizer.ggml.pre", &pre);
  if (st.ok()) {
    // llama.cpp's "default" has its own regex list; GGUFs converted without a known hash lack the key.
    if (!pretokenizer_from_name(pre.data, pre.size, &v.pre))
      return Status::Error(Code::kUnsupported, "tokenizer.ggml.pre '%.*s' is not a pre-tokenizer we implement",
                           static_cast<int>(pre.size < 64 ? pre.size : 64), pre.data);
  } else if (st.code() != Code::kNotFound) {
    return st;
  }  // missing: GPT-2's (what Hugging Face's ByteLevel pre-tokenizer does)
  v.ignore_merges = v.pre == PreTokenizer::kLlama3;

  MC_TRY(read_tokens_and_types(g, scratch, &v.tokens, &v.types));
  const int n = static_cast<int>(v.tokens.size());
  const Arena::Mark mark = scratch.mark();
  GgufStr* strs = nullptr;
  uint64_t count = 0;
  st = g.get_string_array("tokenizer.ggml.merges", scratch, &strs, &count);
  if (st.ok()) {
    v.merges.reserve(count);
    for (uint64_t i = 0; i < count && st.ok(); ++i) {
      const std::string_view m(strs[i].data, strs[i].size);
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
      if (sp == std::string_view::npos)
        st = Status::Error(Code::kCorrupt, "tokenizer.ggml.merges[%llu] '%.*s' is not 'left right'",
                           static_cast<unsigned long long>(i), static_cast<int>(m.size() < 40 ? m.size() : 40), m.data());
      else
        v.merges.emplace_back(std::string(m.substr(0, sp)), std::string(m.substr(sp + 1)));
    }
  }
  scratch.rollback(mark);
  MC_TRY(st);

  MC_TRY(optional_id(g, "tokenizer.ggml.bos_token_id", n, &v.bos));
  MC_TRY(optional_id(g, "tokenizer.ggml.eos_token_id", n, &v.eos));
  MC_TRY(optional_id(g, "tokenizer.ggml.eot_token_id", n, &v.eot));
  bool add_bos = false;
  st = g.get_bool("tokenizer.ggml.add_bos_token", &add_bos);
  if (!st.ok() && st.code() != Code::kNotFound) return st;
  v.add_bos = add_bos;
  bool nfc = false;  // written by add_bpe_vocab for a tokenizer.json with the NFC normalizer (no llama.cpp key)
  st = g.get_bool("mcullm.tokenizer.nfc", &nfc);
  if (!st.ok() && st.code() != Code::kNotFound) return st;
  v.nfc = nfc;
  guess_special_ids(&v);
  auto tok = std::make_unique<BpeTokenizer>();
  MC_TRY(tok->load(std::move(v)));
  *out = std::move(tok);
  return Status::Ok();
}

Status wordpiece_from_gguf(const GgufFile& g, Arena& scratch, std::unique_ptr<Tokenizer>* out) {
  WordPieceVocab v;
  MC_TRY(read_tokens_and_types(g, scratch, &v.tokens, &v.types));
  const int n = static_cast<int>(v.tokens.size());
  MC_TRY(optional_id(g, "tokenizer.ggml.unknown_token_id", n, &v.unk));
  MC_TRY(optional_id(g, "tokenizer.ggml.cls_token_id", n, &v.cls));
  MC_TRY(optional_id(g, "tokenizer.ggml.seperator_token_id", n, &v.sep));  // llama.cpp's spelling
  auto tok = std::make_unique<WordPieceTokenizer>();
  MC_TRY(tok->load(std::move(v)));
  *out = std::move(tok);
  return Status::Ok();
}

}  // namespace

Status tokenizer_from_gguf_any(const GgufFile& g, Arena& scratch, std::unique_ptr<Tokenizer>* out) {
  GgufStr kind;
  Status st = g.get_string("tokenizer.ggml.model", &kind);
  if (st.code() == Code::kNotFound) return Status::Error(Code::kNotFound, "the GGUF has no vocabulary (no tokenizer.ggml.model)");
  MC_TRY(st);
  if (kind.equals("llama")) {
    auto tok = std::make_unique<Llama2cTokenizer>();
    MC_TRY(tokenizer_from_gguf(g, scratch, tok.get()));
    *out = std::move(tok);
    return Status::Ok();
  }
  if (kind.equals("gpt2")) return bpe_from_gguf(g, scratch, out);
  if (kind.equals("bert")) return wordpiece_from_gguf(g, scratch, out);
  return Status::Error(Code::kUnsupported,
                       "tokenizer.ggml.model '%.*s' is not supported (we read 'llama' SentencePiece, 'gpt2' "
                       "byte-level BPE and 'bert' WordPiece vocabularies)",
                       static_cast<int>(kind.size < 32 ? kind.size : 32), kind.data);
}

Status tokenizer_from_hf_json(std::string_view text, std::unique_ptr<Tokenizer>* out) {
  BpeVocab v;
  MC_TRY(bpe_vocab_from_hf_json(text, &v));
  auto tok = std::make_unique<BpeTokenizer>();
  MC_TRY(tok->load(std::move(v)));
  *out = std::move(tok);
  return Status::Ok();
}

Status bpe_vocab_from_hf_json(std::string_view text, BpeVocab* out) {
  using nlohmann::json;
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Status::Error(Code::kCorrupt, "tokenizer.json is not valid JSON: %s", e.what());
  }
  try {
    if (!j.is_object()) return Status::Error(Code::kCorrupt, "tokenizer.json is not a JSON object");
    const json& model = j.at("model");
    const std::string type = model.value("type", std::string("BPE"));
    if (type != "BPE")
      return Status::Error(Code::kUnsupported, "tokenizer.json model type '%.40s' (we read BPE)", type.c_str());
    if (model.value("byte_fallback", false))
      return Status::Error(Code::kUnsupported, "tokenizer.json BPE with byte_fallback (SentencePiece-style) is not supported");
    if (model.contains("continuing_subword_prefix") && model["continuing_subword_prefix"].is_string() &&
        !model["continuing_subword_prefix"].get<std::string>().empty())
      return Status::Error(Code::kUnsupported, "tokenizer.json BPE with a continuing_subword_prefix is not supported");

    BpeVocab v;
    // Normalizer: none, or NFC.
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      const std::string nt = j["normalizer"].value("type", std::string());
      if (nt != "NFC")
        return Status::Error(Code::kUnsupported, "tokenizer.json normalizer '%.40s' is not supported", nt.c_str());
      v.nfc = true;
    }
    // Pre-tokenizer: ByteLevel with its GPT-2 regex, or Split(known pattern) + ByteLevel(use_regex false).
    const json& pt = j.at("pre_tokenizer");
    auto check_byte_level = [](const json& bl, bool want_regex) -> Status {
      if (bl.value("type", std::string()) != "ByteLevel")
        return Status::Error(Code::kUnsupported, "tokenizer.json: the pre-tokenizer is not byte-level");
      if (bl.value("add_prefix_space", false))
        return Status::Error(Code::kUnsupported, "tokenizer.json: ByteLevel add_prefix_space is not supported");
      if (bl.value("use_regex", true) != want_regex)
        return Status::Error(Code::kUnsupported, "tokenizer.json: ByteLevel use_regex %s is not supported here",
                             want_regex ? "false" : "true");
      return Status::Ok();
    };
    const std::string pt_type = pt.is_object() ? pt.value("type", std::string()) : std::string();
    if (pt_type == "ByteLevel") {
      MC_TRY(check_byte_level(pt, true));
      v.pre = PreTokenizer::kGpt2;
    } else if (pt_type == "Sequence" && pt.at("pretokenizers").size() == 2) {
      const json& split = pt["pretokenizers"][0];
      MC_TRY(check_byte_level(pt["pretokenizers"][1], false));
      if (split.value("type", std::string()) != "Split" || split.value("behavior", std::string()) != "Isolated" ||
          split.value("invert", false))
        return Status::Error(Code::kUnsupported, "tokenizer.json: the pre-tokenizer is not an isolating Split");
      const std::string pattern = split.at("pattern").value("Regex", std::string());
      if (pattern == kQwen2Pattern) v.pre = PreTokenizer::kQwen2;
      else if (pattern == kLlama3Pattern) v.pre = PreTokenizer::kLlama3;
      else if (pattern == kGpt2Pattern) v.pre = PreTokenizer::kGpt2;
      else
        return Status::Error(Code::kUnsupported, "tokenizer.json: pre-tokenizer pattern '%.120s' is not one we implement",
                             pattern.c_str());
    } else {
      return Status::Error(Code::kUnsupported, "tokenizer.json: pre-tokenizer '%.40s' is not supported", pt_type.c_str());
    }
    v.ignore_merges = model.value("ignore_merges", false);

    // Vocabulary: ids from the model's vocab and the added tokens; holes become unused tokens.
    const json& vocab = model.at("vocab");
    if (!vocab.is_object()) return Status::Error(Code::kCorrupt, "tokenizer.json: model.vocab is not an object");
    const json added = j.value("added_tokens", json::array());
    for (auto it = vocab.begin(); it != vocab.end(); ++it)
      if (!json_integer_id(it.value()))
        return Status::Error(Code::kCorrupt, "tokenizer.json: the id of '%.40s' is not an integer token id", it.key().c_str());
    for (const json& a : added)
      if (!a.is_object() || !a.contains("id") || !json_integer_id(a.at("id")))
        return Status::Error(Code::kCorrupt, "tokenizer.json: an added token has no integer 'id'");
    int64_t max_id = -1;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) max_id = std::max<int64_t>(max_id, it.value().get<int64_t>());
    for (const json& a : added) max_id = std::max<int64_t>(max_id, a.at("id").get<int64_t>());
    if (max_id < 0) return Status::Error(Code::kCorrupt, "tokenizer.json: the vocabulary is empty");
    // Holes become unused tokens; a few bytes must not make a vocabulary of millions (found by the fuzzer).
    const int64_t entries = static_cast<int64_t>(vocab.size() + added.size());
    if (max_id >= (int64_t{1} << 24) || max_id >= 2 * entries + 256)
      return Status::Error(Code::kCorrupt, "tokenizer.json: token id %lld is implausibly large for %lld tokens",
                           static_cast<long long>(max_id), static_cast<long long>(entries));
    v.tokens.assign(static_cast<size_t>(max_id + 1), std::string());
    v.types.assign(static_cast<size_t>(max_id + 1), TokenType::kUnused);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0) return Status::Error(Code::kCorrupt, "tokenizer.json: negative token id %lld", static_cast<long long>(id));
      if (v.types[id] != TokenType::kUnused)
        return Status::Error(Code::kCorrupt, "tokenizer.json: token id %lld appears twice", static_cast<long long>(id));
      v.tokens[id] = it.key();
      v.types[id] = TokenType::kNormal;
    }
    for (const json& a : added) {
      const int64_t id = a.at("id").get<int64_t>();
      if (id < 0) return Status::Error(Code::kCorrupt, "tokenizer.json: negative added token id");
      v.tokens[id] = a.at("content").get<std::string>();
      v.types[id] = a.value("special", false) ? TokenType::kControl : TokenType::kUserDefined;
    }
    const json& merges = model.at("merges");
    v.merges.reserve(merges.size());
    for (const json& m : merges) {
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
        if (sp == std::string::npos)
          return Status::Error(Code::kCorrupt, "tokenizer.json: merge '%.40s' is not 'left right'", s.c_str());
        v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (m.is_array() && m.size() == 2) {
        v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return Status::Error(Code::kCorrupt, "tokenizer.json: a merge is neither 'a b' nor [a, b]");
      }
    }
    guess_special_ids(&v);
    *out = std::move(v);
    return Status::Ok();
  } catch (const json::exception& e) {
    return Status::Error(Code::kCorrupt, "tokenizer.json: %s", e.what());
  }
}

Status load_tokenizer_bytes(const uint8_t* data, size_t size, std::unique_ptr<Tokenizer>* out, std::string* source) {
  if (size >= 4 && memcmp(data, "MCTK", 4) == 0) {
    auto tok = std::make_unique<ImageTokenizer>();
    MC_TRY(tok->load(data, size));
    *out = std::move(tok);
    if (source) *source = "board tokenizer image";
    return Status::Ok();
  }
  if (size >= 4 && memcmp(data, "GGUF", 4) == 0) {
    // Tables and string indexes (16 bytes per string, each of which takes at least 8 bytes of the
    // file) never need more than 2 * size; start small (a model's tensors take most of its file) and
    // grow while the arena is what runs out.
    const size_t most = 2 * size + (size_t{1} << 20);
    for (size_t bytes = std::min<size_t>(most, size_t{64} << 20);; bytes = std::min(most, 4 * bytes)) {
      std::vector<uint8_t> mem(bytes);
      Arena scratch(Tier::kHost, mem.data(), mem.size());
      GgufFile g;
      Status st = g.open(data, size, scratch);
      if (st.ok()) st = tokenizer_from_gguf_any(g, scratch, out);
      if (st.code() == Code::kOutOfMemory && bytes < most) continue;
      MC_TRY(st);
      if (source) *source = "GGUF vocabulary";
      return Status::Ok();
    }
  }
  size_t i = 0;
  while (i < size && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) ++i;
  if (i < size && data[i] == '{') {
    MC_TRY(tokenizer_from_hf_json(std::string_view(reinterpret_cast<const char*>(data), size), out));
    if (source) *source = "tokenizer.json";
    return Status::Ok();
  }
  auto tok = std::make_unique<Llama2cTokenizer>();
  MC_TRY(tok->load_bytes(data, size, 0));
  *out = std::move(tok);
  if (source) *source = "llama2.c tokenizer.bin";
  return Status::Ok();
}

Status load_tokenizer_file(const std::string& path, std::unique_ptr<Tokenizer>* out, std::string* source) {
  MappedFile f;
  MC_TRY(f.open(path));
  Status st = load_tokenizer_bytes(f.data(), f.size(), out, source);
  if (!st.ok()) st.prefix("%s: ", path.c_str());
  return st;
}

Status load_tokenizer_for(const std::string& path, std::unique_ptr<Tokenizer>* out, std::string* source) {
  MappedFile f;
  MC_TRY(f.open(path));
  const bool gguf = f.size() >= 4 && memcmp(f.data(), "GGUF", 4) == 0;
  const bool json = f.size() >= 1 && f.data()[0] == '{';
  const bool image = f.size() >= 4 && memcmp(f.data(), "MCTK", 4) == 0;
  if (gguf || json || image) {
    Status st = load_tokenizer_bytes(f.data(), f.size(), out, source);
    if (!st.ok()) st.prefix("%s: ", path.c_str());
    if (st.ok() && source) *source = path + " (" + *source + ")";
    return st;
  }
  // A llama2.c checkpoint with its tokenizer beside it, else a tokenizer.bin itself.
  std::unique_ptr<LoadedModel> model;
  const Status model_status = load_model(path, &model);
  if (model_status.ok()) {
    auto tok = std::make_unique<Llama2cTokenizer>();
    std::string where;
    MC_TRY(load_tokenizer(*model, "", tok.get(), &where));
    *out = std::move(tok);
    if (source) *source = where;
    return Status::Ok();
  }
  auto tok = std::make_unique<Llama2cTokenizer>();
  const Status tok_status = tok->load_bytes(f.data(), f.size(), 0);
  if (tok_status.ok()) {
    *out = std::move(tok);
    if (source) *source = path + " (llama2.c tokenizer.bin)";
    return Status::Ok();
  }
  return Status::Error(Code::kCorrupt, "%s is neither a tokenizer (tokenizer.bin: %s) nor a model (%s)", path.c_str(),
                       tok_status.message(), model_status.message());
}

}  // namespace mcullm
