#include "tokenizer/bpe_tokenizer_host.h"

#include <string.h>
#include <stdlib.h>

#include <utf8proc.h>

#include <algorithm>
#include <queue>

namespace mcullm {

namespace {

// GPT-2's bytes_to_unicode: the code point standing for byte b.
uint32_t byte_char(uint8_t b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
  // The others, in byte order, take U+0100, U+0101, ...
  uint32_t n = 0;
  if (b <= 0x20) n = b;                          // 0x00-0x20: 33 bytes
  else if (b <= 0xA0) n = 33 + (b - 0x7F);       // 0x7F-0xA0: 34 bytes
  else n = 33 + 34;                              // 0xAD
  return 0x100 + n;
}


struct CharToByte {
  int16_t byte[0x144];  // code points below U+0144 -> byte, or -1
  CharToByte() {
    for (int16_t& b : byte) b = -1;
    for (int b = 0; b < 256; ++b) byte[byte_char(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
  }
};
const CharToByte kCharToByte;

bool is_added_type(TokenType t) { return t == TokenType::kControl || t == TokenType::kUserDefined; }

}  // namespace

void byte_level_append(uint8_t b, std::string* out) { append_utf8(byte_char(b), out); }

bool byte_level_decode(std::string_view text, std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < text.size()) {
    size_t len;
    const uint32_t cp = utf8_decode(reinterpret_cast<const uint8_t*>(text.data()) + i, text.size() - i, &len);
    if (cp >= 0x144 || kCharToByte.byte[cp] < 0) return false;
    out->push_back(static_cast<char>(kCharToByte.byte[cp]));
    i += len;
  }
  return true;
}

Status BpeTokenizer::load(BpeVocab v) {
  tokens_.clear();
  bytes_.clear();
  types_.clear();
  index_.clear();
  merges_.clear();
  added_.clear();
  for (auto& l : added_by_byte_) l.clear();
  const size_t n = v.tokens.size();
  if (n == 0) return Status::Error(Code::kCorrupt, "the vocabulary is empty");
  if (n > 0x7fffffff) return Status::Error(Code::kCorrupt, "vocabulary of %zu tokens is too large", n);
  if (!v.types.empty() && v.types.size() != n)
    return Status::Error(Code::kCorrupt, "%zu token types for %zu tokens", v.types.size(), n);
  if (v.types.empty()) v.types.assign(n, TokenType::kNormal);
  for (int* id : {&v.bos, &v.eos, &v.eot})
    if (*id >= static_cast<int>(n) || *id < -1)
      return Status::Error(Code::kCorrupt, "special token id %d is outside the vocabulary of %zu", *id, n);

  tokens_ = std::move(v.tokens);
  types_ = std::move(v.types);
  bytes_.resize(n);
  index_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    index_.emplace(tokens_[i], static_cast<int>(i));
    const TokenType t = types_[i];
    // Normal (and byte) tokens are byte-level text; added tokens are their own text.
    if (is_added_type(t) || !byte_level_decode(tokens_[i], &bytes_[i])) bytes_[i] = tokens_[i];
  }
  std::string key;
  all_bytes_ = true;
  for (int b = 0; b < 256; ++b) {
    key.clear();
    byte_level_append(static_cast<uint8_t>(b), &key);
    // Only a normal token: DeepSeek's vocabularies also have added tokens spelled "À", "õ"..., which
    // stand for that text (matched before pre-tokenization), not for the byte.
    const auto it = index_.find(key);
    byte_id_[b] = it == index_.end() || is_added_type(types_[static_cast<size_t>(it->second)]) ? -1 : it->second;
    all_bytes_ = all_bytes_ && byte_id_[b] >= 0;
  }
  merges_.reserve(v.merges.size());
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const auto& [a, b] = v.merges[r];
    const auto ia = index_.find(a), ib = index_.find(b);
    key = a;
    key += b;
    const auto iab = index_.find(key);
    if (ia == index_.end() || ib == index_.end() || iab == index_.end())
      return Status::Error(Code::kCorrupt, "merge %zu ('%.40s' '%.40s') names a token that is not in the vocabulary", r,
                           a.c_str(), b.c_str());
    const uint64_t pair = (static_cast<uint64_t>(ia->second) << 32) | static_cast<uint32_t>(ib->second);
    merges_.emplace(pair, (static_cast<uint64_t>(r) << 32) | static_cast<uint32_t>(iab->second));  // first rank wins
  }
  for (size_t i = 0; i < n; ++i) {
    if (!is_added_type(types_[i]) || tokens_[i].empty()) continue;
    added_.push_back(Added{tokens_[i], static_cast<int>(i), types_[i] == TokenType::kControl});
  }
  // Longest first, then lowest id: the leftmost-longest match wins.
  std::sort(added_.begin(), added_.end(), [](const Added& x, const Added& y) {
    return x.text.size() != y.text.size() ? x.text.size() > y.text.size() : x.id < y.id;
  });
  for (size_t k = 0; k < added_.size(); ++k)
    added_by_byte_[static_cast<uint8_t>(added_[k].text[0])].push_back(static_cast<int>(k));
  pre_ = v.pre;
  ignore_merges_ = v.ignore_merges;
  nfc_ = v.nfc;
  bos_ = v.bos;
  eos_ = v.eos;
  eot_ = v.eot;
  add_bos_ = v.add_bos;
  return Status::Ok();
}

std::string BpeTokenizer::describe() const {
  return "byte-level BPE, " + std::to_string(tokens_.size()) + " tokens, " + std::to_string(merges_.size()) +
         " merges, pre-tokenizer " + pretokenizer_name(pre_) + (nfc_ ? ", NFC" : "");
}

bool BpeTokenizer::is_control(int id) const {
  return id >= 0 && id < vocab_size() && types_[static_cast<size_t>(id)] == TokenType::kControl;
}

std::string BpeTokenizer::token_text(int id) const {
  return id >= 0 && id < vocab_size() ? tokens_[static_cast<size_t>(id)] : std::string();
}

std::vector<BpeTokenizer::MergeEntry> BpeTokenizer::merge_entries() const {
  std::vector<MergeEntry> out;
  out.reserve(merges_.size());
  for (const auto& [pair, rank_id] : merges_)
    out.push_back(MergeEntry{static_cast<uint32_t>(pair >> 32), static_cast<uint32_t>(pair), static_cast<uint32_t>(rank_id >> 32),
                             static_cast<uint32_t>(rank_id)});
  return out;
}

size_t BpeTokenizer::memory_bytes() const {
  size_t total = sizeof(*this);
  for (size_t i = 0; i < tokens_.size(); ++i)
    total += 2 * sizeof(std::string) + tokens_[i].capacity() + bytes_[i].capacity() + 1;
  // unordered_map nodes: key + value + next pointer + cached hash, plus the bucket array.
  total += index_.size() * (sizeof(std::string) + sizeof(int) + 2 * sizeof(void*)) + index_.bucket_count() * sizeof(void*);
  total += merges_.size() * (2 * sizeof(uint64_t) + 2 * sizeof(void*)) + merges_.bucket_count() * sizeof(void*);
  for (const Added& a : added_) total += sizeof(Added) + a.text.capacity();
  return total;
}

struct BpeTokenizer::Scratch {
  std::vector<int> sym;        // symbol ids of the piece being merged
  std::vector<uint64_t> rank;  // rank of (sym[k], sym[k+1]) (merge_of)
  std::string text;            // byte-level text of a piece
  std::string normalized;      // NFC of a segment
  std::vector<int> next, prev;
  std::vector<uint32_t> version;
};

void BpeTokenizer::encode_piece(const uint8_t* p, size_t n, Scratch* s, std::vector<int>* ids) const {
  if (ignore_merges_ && n > 1) {
    s->text.clear();
    for (size_t k = 0; k < n; ++k) byte_level_append(p[k], &s->text);
    const auto it = index_.find(s->text);
    if (it != index_.end() && !is_added_type(types_[static_cast<size_t>(it->second)])) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<int>& sym = s->sym;
  sym.resize(n);
  for (size_t k = 0; k < n; ++k) sym[k] = byte_id_[p[k]];
  if (n <= heap_threshold_) {
    // Linear scan: the rank of every adjacent pair, kept up to date around each merge.
    std::vector<uint64_t>& rank = s->rank;
    size_t m = n;
    rank.resize(m);
    for (size_t k = 0; k + 1 < m; ++k) rank[k] = merge_of(sym[k], sym[k + 1]);
    while (m > 1) {
      size_t best = 0;
      for (size_t k = 1; k + 1 < m; ++k)
        if (rank[k] < rank[best]) best = k;  // strict: the leftmost of equal ranks
      if (rank[best] == UINT64_MAX) break;
      sym[best] = static_cast<int>(rank[best] & 0xffffffffu);
      std::copy(sym.begin() + best + 2, sym.begin() + m, sym.begin() + best + 1);
      std::copy(rank.begin() + best + 2, rank.begin() + m, rank.begin() + best + 1);
      --m;
      if (best > 0) rank[best - 1] = merge_of(sym[best - 1], sym[best]);
      if (best + 1 < m) rank[best] = merge_of(sym[best], sym[best + 1]);
    }
    ids->insert(ids->end(), sym.begin(), sym.begin() + m);
    return;
  }
  // Heap: pairs by (rank, position of the left symbol); symbols form a linked list over their
  // original positions; an entry is stale once either symbol changed (version stamps).
  const int count = static_cast<int>(n);
  std::vector<int>& next = s->next;
  std::vector<int>& prev = s->prev;
  std::vector<uint32_t>& version = s->version;
  next.resize(n);
  prev.resize(n);
  version.assign(n, 0);
  for (int k = 0; k < count; ++k) {
    next[k] = k + 1 < count ? k + 1 : -1;
    prev[k] = k - 1;
  }
  struct Pair {
    uint64_t rank_id;
    int left, right;
    uint32_t lv, rv;
  };
  struct Worse {
    bool operator()(const Pair& a, const Pair& b) const {
      if ((a.rank_id >> 32) != (b.rank_id >> 32)) return (a.rank_id >> 32) > (b.rank_id >> 32);
      return a.left > b.left;
    }
  };
  std::priority_queue<Pair, std::vector<Pair>, Worse> heap;
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const uint64_t m = merge_of(sym[l], sym[r]);
    if (m != UINT64_MAX) heap.push(Pair{m, l, r, version[l], version[r]});
  };
  for (int k = 0; k + 1 < count; ++k) consider(k, k + 1);
  while (!heap.empty()) {
    const Pair q = heap.top();
    heap.pop();
    if (version[q.left] != q.lv || version[q.right] != q.rv || next[q.left] != q.right) continue;
    sym[q.left] = static_cast<int>(q.rank_id & 0xffffffffu);
    ++version[q.left];
    ++version[q.right];
    next[q.left] = next[q.right];
    if (next[q.left] >= 0) prev[next[q.left]] = q.left;
    consider(prev[q.left], q.left);
    consider(q.left, next[q.left]);
  }
  for (int k = 0; k >= 0; k = next[k]) ids->push_back(sym[k]);
}

namespace {

// NFC of each well-formed UTF-8 run (utf8proc); bytes that are not UTF-8 are kept as they are.
void nfc_append(const char* text, size_t n, std::string* out) {
  const uint8_t* u = reinterpret_cast<const uint8_t*>(text);
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n) {
      size_t len = 1;
      if (u[j] >= 0x80 && utf8_decode(u + j, n - j, &len) >= kInvalidCodePoint) break;
      j += len;
    }
    if (j > i) {
      utf8proc_uint8_t* dst = nullptr;
      const utf8proc_ssize_t m = utf8proc_map(u + i, static_cast<utf8proc_ssize_t>(j - i), &dst,
                                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
      if (m >= 0 && dst) out->append(reinterpret_cast<const char*>(dst), static_cast<size_t>(m));
      else out->append(text + i, j - i);  // cannot happen for valid UTF-8; keep the bytes anyway
      free(dst);
    }
    if (j < n) out->push_back(text[j++]);  // an invalid byte
    i = j;
  }
}

}  // namespace

Status BpeTokenizer::encode_segment(const char* text, size_t n, Scratch* s, std::vector<int>* ids) const {
  if (nfc_) {
    bool ascii = true;
    for (size_t i = 0; i < n && ascii; ++i) ascii = static_cast<uint8_t>(text[i]) < 0x80;
    if (!ascii) {
      s->normalized.clear();
      nfc_append(text, n, &s->normalized);
      text = s->normalized.data();
      n = s->normalized.size();
    }
  }
  if (!all_bytes_) {  // only an error when the text needs a byte the vocabulary lacks
    for (size_t i = 0; i < n; ++i)
      if (byte_id_[static_cast<uint8_t>(text[i])] < 0)
        return Status::Error(Code::kUnsupported, "the vocabulary has no token for byte 0x%02X",
                             static_cast<uint8_t>(text[i]));
  }
  struct Ctx {
    const BpeTokenizer* self;
    const char* text;
    Scratch* s;
    std::vector<int>* ids;
  } ctx{this, text, s, ids};
  pretokenize(
      pre_, text, n,
      [](void* user, size_t off, size_t len) {
        Ctx* c = static_cast<Ctx*>(user);
        c->self->encode_piece(reinterpret_cast<const uint8_t*>(c->text) + off, len, c->s, c->ids);
      },
      &ctx);
  return Status::Ok();
}

Status BpeTokenizer::encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const {
  ids->clear();
  if (tokens_.empty()) return Status::Error(Code::kInvalidArgument, "encode: tokenizer not loaded");
  if (options.add_bos) {
    if (bos_ < 0) return Status::Error(Code::kUnsupported, "the vocabulary has no BOS token");
    ids->push_back(bos_);
  }
  Scratch s;
  size_t seg = 0, i = 0;
  while (i < text.size()) {
    const auto& cands = added_by_byte_[static_cast<uint8_t>(text[i])];
    const Added* hit = nullptr;
    for (const int k : cands) {
      const Added& a = added_[static_cast<size_t>(k)];
      if (a.control && !options.parse_special) continue;
      if (a.text.size() <= text.size() - i && memcmp(a.text.data(), text.data() + i, a.text.size()) == 0) {
        hit = &a;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    if (seg < i) MC_TRY(encode_segment(text.data() + seg, i - seg, &s, ids));
    ids->push_back(hit->id);
    i += hit->text.size();
    seg = i;
  }
  if (seg < text.size()) MC_TRY(encode_segment(text.data() + seg, text.size() - seg, &s, ids));
  if (options.add_eos) {
    if (eos_ < 0) return Status::Error(Code::kUnsupported, "the vocabulary has no EOS token");
    ids->push_back(eos_);
  }
  return Status::Ok();
}

std::string BpeTokenizer::decode_step(int /*prev*/, int id) const {
  return id >= 0 && id < vocab_size() ? bytes_[static_cast<size_t>(id)] : std::string();
}

std::string BpeTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  for (const int id : ids)
    if (id >= 0 && id < vocab_size()) out += bytes_[static_cast<size_t>(id)];
  return out;
}

}  // namespace mcullm
