#include "tokenizer/llama2c_tokenizer_host.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace mcullm {

namespace {

// run.c starts its best score at -1e10 and only takes strictly better pairs: a piece scoring at or
// below that (or NaN) is never produced by a merge.
constexpr float kMergeFloor = -1e10f;

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  memcpy(&v, p, 4);  // tokenizer.bin is little-endian, as is every host we build for
  return v;
}

float read_f32(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xXX>" -> the byte, else -1. run.c uses sscanf("<0x%02hhX>"), which is looser (it would also take
// "<0xA" or "<0x4Fzz"); real vocabularies only have the exact six-character form, which is what we accept.
int byte_piece_value(std::string_view piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  const int hi = hex_value(piece[3]), lo = hex_value(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

}  // namespace

Status Llama2cTokenizer::load_file(const std::string& path, int vocab_size) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) {
    const int err = errno;
    return Status::Error(err == ENOENT ? Code::kNotFound : Code::kIo, "cannot open tokenizer %s: %s",
                         path.c_str(), strerror(err));
  }
  std::vector<uint8_t> bytes;
  uint8_t buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  const bool failed = ferror(f) != 0;
  fclose(f);
  if (failed) return Status::Error(Code::kIo, "error reading tokenizer %s", path.c_str());
  Status s = load_bytes(bytes.data(), bytes.size(), vocab_size);
  if (!s.ok()) s.prefix("%s: ", path.c_str());
  return s;
}

Status Llama2cTokenizer::load_bytes(const uint8_t* data, size_t size, int vocab_size) {
  pieces_.clear();
  scores_.clear();
  index_.clear();
  space_id_ = -1;
  if (vocab_size < 0) return Status::Error(Code::kInvalidArgument, "negative vocab_size %d", vocab_size);
  if (size < 4 || data == nullptr)
    return Status::Error(Code::kCorrupt, "tokenizer truncated: %zu bytes, no max_token_length", size);
  const int32_t max_len = read_i32(data);
  if (max_len <= 0) return Status::Error(Code::kCorrupt, "tokenizer max_token_length %d is not positive", max_len);

  std::vector<std::string> pieces;
  std::vector<float> scores;
  // Every token takes at least 8 bytes: a lying vocab_size cannot reserve more than the data holds.
  const size_t expected = vocab_size > 0 ? std::min(static_cast<size_t>(vocab_size), (size - 4) / 8) : (size - 4) / 8;
  pieces.reserve(expected);
  scores.reserve(expected);
  size_t off = 4;
  while (vocab_size == 0 ? off < size : static_cast<int>(pieces.size()) < vocab_size) {
    const size_t i = pieces.size();
    if (size - off < 8)
      return Status::Error(Code::kCorrupt, "tokenizer truncated in the header of token %zu (offset %zu of %zu)", i,
                           off, size);
    const float score = read_f32(data + off);
    const int32_t len = read_i32(data + off + 4);
    off += 8;
    if (len < 0) return Status::Error(Code::kCorrupt, "token %zu has negative length %d", i, len);
    if (static_cast<size_t>(len) > size - off)
      return Status::Error(Code::kCorrupt, "token %zu claims %d bytes but only %zu remain (truncated?)", i, len,
                           size - off);
    // run.c sizes its merge buffer from max_token_length: a longer piece means the header lies.
    if (len > max_len)
      return Status::Error(Code::kCorrupt, "token %zu is %d bytes, longer than max_token_length %d", i, len, max_len);
    pieces.emplace_back(reinterpret_cast<const char*>(data + off), static_cast<size_t>(len));
    scores.push_back(score);
    off += static_cast<size_t>(len);
  }
  if (off != size)
    return Status::Error(Code::kCorrupt, "tokenizer has %zu bytes after its %d tokens (vocab_size mismatch?)",
                         size - off, vocab_size);
  return load_vocab(std::move(pieces), std::move(scores));
}

Status Llama2cTokenizer::load_vocab(std::vector<std::string> pieces, std::vector<float> scores) {
  pieces_.clear();
  scores_.clear();
  index_.clear();
  space_id_ = -1;
  if (pieces.size() != scores.size())
    return Status::Error(Code::kInvalidArgument, "%zu pieces but %zu scores", pieces.size(), scores.size());
  if (pieces.size() < 3)
    return Status::Error(Code::kCorrupt, "vocabulary of %zu pieces: need at least <unk>, BOS and EOS",
                         pieces.size());
  if (pieces.size() > 0x7fffffff) return Status::Error(Code::kCorrupt, "vocabulary too large");
  pieces_ = std::move(pieces);
  scores_ = std::move(scores);
  size_t slots = 16;
  while (slots < 2 * pieces_.size()) slots *= 2;
  index_.assign(slots, 0);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    size_t at = std::hash<std::string_view>{}(pieces_[i]) & (slots - 1);
    while (index_[at] != 0 && pieces_[static_cast<size_t>(index_[at] - 1)] != pieces_[i]) at = (at + 1) & (slots - 1);
    if (index_[at] == 0) index_[at] = static_cast<int32_t>(i + 1);  // keeps the first of duplicates
  }
  space_id_ = lookup(" ");
  return Status::Ok();
}

const std::string& Llama2cTokenizer::piece(int id) const {
  static const std::string kEmpty;
  return id >= 0 && id < vocab_size() ? pieces_[static_cast<size_t>(id)] : kEmpty;
}

float Llama2cTokenizer::score(int id) const {
  return id >= 0 && id < vocab_size() ? scores_[static_cast<size_t>(id)] : 0.0f;
}

int Llama2cTokenizer::lookup(std::string_view text) const {
  if (index_.empty()) return -1;
  const size_t mask = index_.size() - 1;
  for (size_t at = std::hash<std::string_view>{}(text) & mask;; at = (at + 1) & mask) {
    const int32_t slot = index_[at];
    if (slot == 0) return -1;
    if (pieces_[static_cast<size_t>(slot - 1)] == text) return slot - 1;
  }
}

Status Llama2cTokenizer::encode(std::string_view text, bool bos, bool eos, std::vector<int>* ids) const {
  ids->clear();
  if (pieces_.empty()) return Status::Error(Code::kInvalidArgument, "encode: tokenizer not loaded");
  std::vector<int> tok;
  tok.reserve(text.size() + 3);
  if (bos) tok.push_back(bos_id());
  if (!text.empty()) {
    if (space_id_ < 0)
      return Status::Error(Code::kUnsupported, "vocabulary has no \" \" piece for the dummy prefix");
    tok.push_back(space_id_);
  }
  // Codepoints as run.c groups them: any byte starts a group, which takes up to three following
  // continuation bytes (10xxxxxx). A group not in the vocabulary falls back to one token per byte.
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    while (len < 4 && i + len < text.size() && (static_cast<uint8_t>(text[i + len]) & 0xC0) == 0x80) ++len;
    const int id = lookup(text.substr(i, len));
    if (id >= 0) {
      tok.push_back(id);
    } else {
      for (size_t k = 0; k < len; ++k) {
        const int byte_id = static_cast<uint8_t>(text[i + k]) + 3;
        if (byte_id >= vocab_size())
          return Status::Error(Code::kOutOfRange, "byte fallback for 0x%02X needs id %d; the vocabulary has %d",
                               byte_id - 3, byte_id, vocab_size());
        tok.push_back(byte_id);
      }
    }
    i += len;
  }

  // run.c rescans every adjacent pair after each merge (O(n^2)); this is the same procedure with a
  // heap: pairs ordered by score (higher first) then by position of the left token (lower first).
  // Tokens form a linked list; a node keeps its original index, so index order is position order.
  // A heap entry is stale once either node changed (version stamps) or they stopped being adjacent.
  const int n = static_cast<int>(tok.size());
  std::vector<int> next(n), prev(n);
  std::vector<uint32_t> version(n, 0);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  struct Pair {
    float score;
    int left, right, id;
    uint32_t left_version, right_version;
  };
  struct Worse {
    bool operator()(const Pair& a, const Pair& b) const {
      if (a.score != b.score) return a.score < b.score;
      return a.left > b.left;
    }
  };
  std::priority_queue<Pair, std::vector<Pair>, Worse> heap;
  std::string joined;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    joined.assign(pieces_[static_cast<size_t>(tok[left])]);
    joined.append(pieces_[static_cast<size_t>(tok[right])]);
    const int id = lookup(joined);
    if (id < 0 || !(scores_[static_cast<size_t>(id)] > kMergeFloor)) return;
    heap.push(Pair{scores_[static_cast<size_t>(id)], left, right, id, version[left], version[right]});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!heap.empty()) {
    const Pair p = heap.top();
    heap.pop();
    if (version[p.left] != p.left_version || version[p.right] != p.right_version || next[p.left] != p.right)
      continue;
    tok[p.left] = p.id;
    ++version[p.left];
    ++version[p.right];  // p.right leaves the list
    next[p.left] = next[p.right];
    if (next[p.left] >= 0) prev[next[p.left]] = p.left;
    consider(prev[p.left], p.left);
    consider(p.left, next[p.left]);
  }
  for (int i = n > 0 ? 0 : -1; i >= 0; i = next[i]) ids->push_back(tok[i]);
  if (eos) ids->push_back(eos_id());
  return Status::Ok();
}

std::string Llama2cTokenizer::decode_step(int prev, int id) const {
  if (id < 0 || id >= vocab_size()) return std::string();  // out of range: skipped
  std::string_view p = pieces_[static_cast<size_t>(id)];
  // SentencePiece drops the leading space of the first piece after BOS.
  if (prev == bos_id() && !p.empty() && p[0] == ' ') p.remove_prefix(1);
  const int byte = byte_piece_value(p);
  if (byte >= 0) return std::string(1, static_cast<char>(byte));
  return std::string(p);
}

std::string Llama2cTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  int prev = -1;
  for (const int id : ids) {
    out += decode_step(prev, id);
    prev = id;
  }
  return out;
}

// --- Utf8StreamDecoder -------------------------------------------------------------------------------

namespace {

// Length of the well-formed sequence a lead byte starts (0 = cannot start one), and the range its
// second byte must be in (Unicode table 3-7: no overlongs, no surrogates, nothing past U+10FFFF).
int utf8_sequence(uint8_t lead, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (lead == 0xE0) *lo = 0xA0;
    if (lead == 0xED) *hi = 0x9F;
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (lead == 0xF0) *lo = 0x90;
    if (lead == 0xF4) *hi = 0x8F;
    return 4;
  }
  return 0;
}

}  // namespace

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  std::string buf = std::move(pending_);
  pending_.clear();
  buf.append(bytes);
  std::string out;
  out.reserve(buf.size());
  size_t i = 0;
  while (i < buf.size()) {
    const uint8_t lead = static_cast<uint8_t>(buf[i]);
    uint8_t lo, hi;
    const int need = utf8_sequence(lead, &lo, &hi);
    if (need <= 1) {  // ASCII, or a byte that cannot start a sequence: out as it is
      out.push_back(buf[i++]);
      continue;
    }
    int have = 1;
    while (have < need && i + have < buf.size()) {
      const uint8_t c = static_cast<uint8_t>(buf[i + have]);
      if (c < (have == 1 ? lo : 0x80) || c > (have == 1 ? hi : 0xBF)) break;
      ++have;
    }
    if (have == need) {
      out.append(buf, i, static_cast<size_t>(need));
      i += static_cast<size_t>(need);
    } else if (i + have == buf.size()) {  // a valid start, cut by the end of the data: wait for more
      pending_.assign(buf, i, std::string::npos);
      break;
    } else {  // broken sequence: its lead byte goes out raw, the rest is rescanned
      out.push_back(buf[i++]);
    }
  }
  return out;
}

std::string Utf8StreamDecoder::finish() {
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

}  // namespace mcullm
