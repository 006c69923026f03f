// `mcullm tokenize` and `mcullm detokenize`: text -> token ids (or pieces) and back, with any
// tokenizer we read (llama2.c tokenizer.bin, a GGUF vocabulary, a Hugging Face tokenizer.json) or a
// model whose tokenizer is found beside it.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "core/file_io_host.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/image_tokenizer_host.h"
#include "tokenizer/tokenizer_image_writer_host.h"
#include "load/tokenizer_loader_host.h"

namespace mcullm::cli {

namespace {

struct TokenizeOptions {
  std::string model, text, file;
  bool ids = false, no_parse_special = false, bos = false, eos = false, skip_special = false;
};

Status read_whole_file(const std::string& path, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int err = errno;
    return Status::Error(Code::kIo, "cannot open %s: %s", path.c_str(), std::strerror(err));  // exit code 4, as any unreadable file
  }
  out->clear();
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::Error(Code::kIo, "error reading %s", path.c_str());
  return Status::Ok();
}

Status input_of(const TokenizeOptions& o, std::string* text) {
  if (!o.file.empty()) return read_whole_file(o.file, text);
  *text = o.text;
  return Status::Ok();
}

// A piece for display: printable bytes as they are, the rest escaped (\n, \t, \xNN); a valid
// multi-byte character stays whole.
std::string escaped(const std::string& s) {
  std::string out;
  char hex[8];
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    size_t len = 1;
    if (c >= 0x80 && utf8_decode(reinterpret_cast<const uint8_t*>(s.data()) + i, s.size() - i, &len) < kInvalidCodePoint) {
      out.append(s, i, len);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7F) {
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else {
      out.push_back(static_cast<char>(c));
    }
    i += len;
  }
  return out;
}

void warn_invalid_utf8(const std::string& text) {
  const uint8_t* s = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t i = 0; i < text.size();) {
    size_t len;
    if (utf8_decode(s + i, text.size() - i, &len) >= kInvalidCodePoint) {
      std::fprintf(stderr,
                   "mcullm: warning: the input is not valid UTF-8 (byte 0x%02X at offset %zu); its bytes are encoded as "
                   "they are\n",
                   s[i], i);
      return;
    }
    i += len;
  }
}

int tokenize(const TokenizeOptions& o) {
  std::unique_ptr<Tokenizer> tok;
  std::string source;
  if (Status st = load_tokenizer_for(o.model, &tok, &source); !st.ok()) return report(st);
  std::string text;
  if (Status st = input_of(o, &text); !st.ok()) return report(st);
  warn_invalid_utf8(text);
  EncodeOptions eo;
  eo.add_bos = o.bos;
  eo.add_eos = o.eos;
  eo.parse_special = !o.no_parse_special;
  std::vector<int> ids;
  if (Status st = tok->encode(text, eo, &ids); !st.ok()) return report(st);
  if (o.ids) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line.push_back(' ');
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
  } else {
    int prev = -1;
    for (const int id : ids) {
      std::printf("%6d -> '%s'\n", id, escaped(tok->decode_step(prev, id)).c_str());
      prev = id;
    }
  }
  std::fprintf(stderr, "mcullm: %zu tokens from %zu bytes; tokenizer %s: %s\n", ids.size(), text.size(), source.c_str(),
               tok->describe().c_str());
  return 0;
}

// Ids separated by spaces, commas, tabs or newlines (a leading '[' and trailing ']' are allowed).
Status parse_ids(const std::string& text, int vocab, std::vector<int>* ids) {
  ids->clear();
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    size_t j = i;
    if (text[j] == '-') ++j;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
    const std::string item = text.substr(i, j - i);
    if (j == i || item == "-" || (j < text.size() && !std::strchr(" ,\t\n\r[]", text[j]))) {
      size_t k = j;
      while (k < text.size() && !std::strchr(" ,\t\n\r[]", text[k])) ++k;
      return Status::Error(Code::kInvalidArgument, "'%.40s' (item %zu) is not a token id", text.substr(i, k - i).c_str(),
                           ids->size() + 1);
    }
    if (item.size() > 10 || std::stoll(item) < 0 || std::stoll(item) >= vocab)
      return Status::Error(Code::kOutOfRange, "token id %.40s (item %zu) is outside the vocabulary of %d tokens",
                           item.c_str(), ids->size() + 1, vocab);
    ids->push_back(static_cast<int>(std::stoll(item)));
    i = j;
  }
  return Status::Ok();
}

int detokenize(const TokenizeOptions& o) {
  std::unique_ptr<Tokenizer> tok;
  std::string source;
  if (Status st = load_tokenizer_for(o.model, &tok, &source); !st.ok()) return report(st);
  std::string text;
  if (Status st = input_of(o, &text); !st.ok()) return report(st);
  std::vector<int> ids;
  if (Status st = parse_ids(text, tok->vocab_size(), &ids); !st.ok()) return report(st);
  std::string out;
  int prev = -1;
  for (const int id : ids) {
    if (!(o.skip_special && tok->is_control(id))) out += tok->decode_step(prev, id);
    prev = id;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int convert_tokenizer(const std::string& model, const std::string& output) {
  std::unique_ptr<Tokenizer> tok;
  std::string source;
  if (Status st = load_tokenizer_for(model, &tok, &source); !st.ok()) return report(st);
  std::vector<uint8_t> image;
  if (Status st = write_tokenizer_image(*tok, &image); !st.ok()) return report(st);
  if (Status st = write_file_atomic(output, image.data(), image.size()); !st.ok()) return report(st);
  ImageTokenizer check;
  if (Status st = check.load(image.data(), image.size()); !st.ok()) return report(st);
  std::fprintf(stderr, "mcullm: wrote %s from %s: %s\n", output.c_str(), source.c_str(), check.describe().c_str());
  if (check.image().flags() & kTokImageNfc)
    std::fprintf(stderr, "mcullm: note: this tokenizer NFC-normalizes its input; the board encoder does not (give it NFC text)\n");
  return 0;
}

void add_common(CLI::App* cmd, TokenizeOptions* o, const char* input_what) {
  cmd->add_option("-m,--model", o->model,
                  "A tokenizer (llama2.c tokenizer.bin, GGUF vocabulary, tokenizer.json) or a model file")
      ->required();
  auto* p = cmd->add_option("-p,--prompt", o->text, input_what);
  auto* f = cmd->add_option("-f,--file", o->file, std::string(input_what) + ", from a file");
  p->excludes(f);
  f->excludes(p);
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Text -> token ids (or pieces)");
  add_common(cmd, o.get(), "Text to tokenize");
  cmd->add_flag("--ids", o->ids, "Print the ids on one line, space separated (default: one 'id -> piece' per line)");
  cmd->add_flag("--no-parse-special", o->no_parse_special, "Encode control tokens written in the text (<|im_start|>) as plain text");
  cmd->add_flag("--bos", o->bos, "Add BOS in front");
  cmd->add_flag("--eos", o->eos, "Add EOS at the end");
  cmd->callback([o, exit_code, cmd] {
    if (cmd->count("-p") == 0 && cmd->count("-f") == 0) {
      *exit_code = report(Status::Error(Code::kInvalidArgument, "tokenize: give the text with -p TEXT or -f FILE"));
      return;
    }
    *exit_code = tokenize(*o);
  });

  auto c = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App* ccmd = app.add_subcommand("convert-tokenizer", "Write the board tokenizer image (flat, in-place, no allocation to encode)");
  ccmd->add_option("-m,--model", c->first, "A tokenizer (llama2.c tokenizer.bin, GGUF vocabulary, tokenizer.json) or a model file")
      ->required();
  ccmd->add_option("-o,--output", c->second, "Image file to write")->required();
  ccmd->callback([c, exit_code] { *exit_code = convert_tokenizer(c->first, c->second); });

  auto d = std::make_shared<TokenizeOptions>();
  CLI::App* dcmd = app.add_subcommand("detokenize", "Token ids -> text (the bytes, as they are)");
  add_common(dcmd, d.get(), "Token ids, separated by spaces or commas");
  dcmd->add_flag("--skip-special", d->skip_special, "Leave out control tokens (BOS, EOS, <|im_start|>...)");
  dcmd->callback([d, exit_code, dcmd] {
    if (dcmd->count("-p") == 0 && dcmd->count("-f") == 0) {
      *exit_code = report(Status::Error(Code::kInvalidArgument, "detokenize: give the ids with -p IDS or -f FILE"));
      return;
    }
    *exit_code = detokenize(*d);
  });
}

}  // namespace mcullm::cli
