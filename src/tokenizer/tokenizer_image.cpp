#include "tokenizer/tokenizer_image.h"

#include <inttypes.h>
#include <string.h>

namespace mcullm {

namespace {

// run.c's merge floor: a piece scoring at or below it (or NaN) is never produced by a merge.
constexpr float kMergeFloor = -1e10f;
constexpr uint32_t kMaxTokens = 1u << 26;
constexpr uint32_t kKnownFlags = kTokImageIgnoreMerges | kTokImageNfc | kTokImageAddBos;
constexpr uint8_t kTypeControl = 3, kTypeUserDefined = 4, kMaxType = 6;

bool is_added(uint8_t t) { return t == kTypeControl || t == kTypeUserDefined; }

// Three-way comparison of byte strings (memcmp order, a prefix first).
int compare(const uint8_t* a, size_t na, const uint8_t* b, size_t nb) {
  const int c = memcmp(a, b, na < nb ? na : nb);
  if (c != 0) return c;
  return na < nb ? -1 : na > nb ? 1 : 0;
}

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

struct ByteTable {
  char b[256];
};
constexpr ByteTable make_bytes() {
  ByteTable t{};
  for (int i = 0; i < 256; ++i) t.b[i] = static_cast<char>(i);
  return t;
}
constexpr ByteTable kBytes = make_bytes();

}  // namespace

Status TokenizerImage::open(const void* data, size_t size) {
  *this = TokenizerImage();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (!p || reinterpret_cast<uintptr_t>(p) % 8 != 0)
    return Status::Error(Code::kInvalidArgument, "tokenizer image: the bytes must be 8-byte aligned");
  if (size < sizeof(TokImageHeader))
    return Status::Error(Code::kCorrupt, "tokenizer image: %zu bytes, shorter than its header", size);
  const TokImageHeader* h = reinterpret_cast<const TokImageHeader*>(p);
  if (h->magic != kTokImageMagic) return Status::Error(Code::kCorrupt, "tokenizer image: bad magic");
  if (h->version != kTokImageVersion)
    return Status::Error(Code::kUnsupported, "tokenizer image version %" PRIu32 " (this build reads %" PRIu32 ")", h->version, kTokImageVersion);
  if (h->header_bytes != sizeof(TokImageHeader) || h->total_bytes > size || h->total_bytes < h->header_bytes)
    return Status::Error(Code::kCorrupt, "tokenizer image: header says %" PRIu32 " bytes (header %" PRIu32 "), the data has %zu",
                         h->total_bytes, h->header_bytes, size);
  const bool spm = h->kind == static_cast<uint32_t>(TokImageKind::kSpm);
  if (!spm && h->kind != static_cast<uint32_t>(TokImageKind::kBpe))
    return Status::Error(Code::kUnsupported, "tokenizer image: unknown kind %" PRIu32, h->kind);
  if (!spm && h->pre > static_cast<uint32_t>(PreTokenizer::kDeepseekCoder))
    return Status::Error(Code::kUnsupported, "tokenizer image: unknown pre-tokenizer %" PRIu32, h->pre);
  if (h->flags & ~kKnownFlags) return Status::Error(Code::kUnsupported, "tokenizer image: unknown flags 0x%" PRIx32, h->flags);
  const uint32_t n = h->n_tokens;
  if (n == 0 || n > kMaxTokens) return Status::Error(Code::kCorrupt, "tokenizer image: %" PRIu32 " tokens", n);
  if (spm && (h->n_merges != 0 || h->n_added != 0 || h->off_merges != 0 || h->off_added != 0))
    return Status::Error(Code::kCorrupt, "tokenizer image: a SentencePiece image has no merge or added-token table");
  if (!spm && h->off_scores != 0) return Status::Error(Code::kCorrupt, "tokenizer image: a BPE image has no scores");
  const int32_t specials[] = {h->bos, h->eos, h->eot};
  for (const int32_t id : specials)
    if (id < -1 || id >= static_cast<int32_t>(n))
      return Status::Error(Code::kCorrupt, "tokenizer image: special id %" PRId32 " outside the vocabulary of %" PRIu32, id, n);

  // Every section inside the image, aligned, not overlapping the header.
  struct Section {
    uint32_t off;
    uint64_t bytes;
    const char* name;
  };
  const Section sections[] = {
      {h->off_str, (uint64_t{n} + 1) * 4, "string offsets"},
      {h->off_strings, h->strings_bytes, "strings"},
      {h->off_sorted, uint64_t{n} * 4, "sorted index"},
      {h->off_scores, spm ? uint64_t{n} * 4 : 0, "scores"},
      {h->off_types, n, "types"},
      {h->off_merges, uint64_t{h->n_merges} * sizeof(TokImageMerge), "merges"},
      {h->off_byte_ids, 256 * 4, "byte table"},
      {h->off_added, uint64_t{h->n_added} * 4, "added tokens"},
  };
  for (const Section& s : sections) {
    if (s.bytes == 0 && s.off == 0) continue;
    if (s.off % 8 != 0 || s.off < h->header_bytes || s.off + s.bytes > h->total_bytes)
      return Status::Error(Code::kCorrupt, "tokenizer image: %s at %" PRIu32 " (+%llu bytes) is outside the image of %" PRIu32 " bytes or misaligned",
                           s.name, s.off, static_cast<unsigned long long>(s.bytes), h->total_bytes);
  }
  const uint32_t* str_off = reinterpret_cast<const uint32_t*>(p + h->off_str);
  if (str_off[0] != 0 || str_off[n] != h->strings_bytes)
    return Status::Error(Code::kCorrupt, "tokenizer image: string offsets do not span the strings");
  for (uint32_t i = 0; i < n; ++i)
    if (str_off[i + 1] < str_off[i]) return Status::Error(Code::kCorrupt, "tokenizer image: string offset %" PRIu32 " goes back", i + 1);
  const uint8_t* types = p + h->off_types;
  for (uint32_t i = 0; i < n; ++i)
    if (types[i] > kMaxType) return Status::Error(Code::kCorrupt, "tokenizer image: token %" PRIu32 " has type %u", i, types[i]);
  const int32_t* byte_ids = reinterpret_cast<const int32_t*>(p + h->off_byte_ids);
  for (int b = 0; b < 256; ++b)
    if (byte_ids[b] < -1 || byte_ids[b] >= static_cast<int32_t>(n))
      return Status::Error(Code::kCorrupt, "tokenizer image: byte 0x%02X maps to id %" PRId32, b, byte_ids[b]);

  base_ = p;
  h_ = h;
  str_off_ = str_off;
  strings_ = p + h->off_strings;
  types_ = types;
  byte_ids_ = byte_ids;
  sorted_ = reinterpret_cast<const uint32_t*>(p + h->off_sorted);
  scores_ = spm ? reinterpret_cast<const float*>(p + h->off_scores) : nullptr;
  merges_ = h->n_merges ? reinterpret_cast<const TokImageMerge*>(p + h->off_merges) : nullptr;
  added_ = h->n_added ? reinterpret_cast<const uint32_t*>(p + h->off_added) : nullptr;

  Status bad;
  // The sorted index: ids in range, strictly increasing by (bytes, id), hence a permutation.
  for (uint32_t i = 0; i < n && bad.ok(); ++i) {
    if (sorted_[i] >= n) {
      bad = Status::Error(Code::kCorrupt, "tokenizer image: sorted index entry %" PRIu32 " is id %" PRIu32, i, sorted_[i]);
    } else if (i > 0) {
      uint32_t la, lb;
      const char* a = str(sorted_[i - 1], &la);
      const char* b = str(sorted_[i], &lb);
      const int c = compare(reinterpret_cast<const uint8_t*>(a), la, reinterpret_cast<const uint8_t*>(b), lb);
      if (c > 0 || (c == 0 && sorted_[i - 1] >= sorted_[i]))
        bad = Status::Error(Code::kCorrupt, "tokenizer image: sorted index out of order at %" PRIu32, i);
    }
  }
  for (uint32_t i = 0; i < h->n_merges && bad.ok(); ++i) {
    const TokImageMerge& m = merges_[i];
    if (m.left >= n || m.right >= n || m.result >= n)
      bad = Status::Error(Code::kCorrupt, "tokenizer image: merge %" PRIu32 " names an id outside the vocabulary", i);
    else if (i > 0 && (merges_[i - 1].left > m.left || (merges_[i - 1].left == m.left && merges_[i - 1].right >= m.right)))
      bad = Status::Error(Code::kCorrupt, "tokenizer image: merges out of order at %" PRIu32, i);
  }
  for (uint32_t i = 0; i < h->n_added && bad.ok(); ++i) {
    uint32_t len = 0, prev_len = 0;
    if (added_[i] >= n || (str(added_[i], &len), len == 0) || !is_added(types_[added_[i]]))
      bad = Status::Error(Code::kCorrupt, "tokenizer image: added token entry %" PRIu32 " is not an added token", i);
    else if (i > 0 && ((str(added_[i - 1], &prev_len), prev_len) < len || (prev_len == len && added_[i - 1] >= added_[i])))
      bad = Status::Error(Code::kCorrupt, "tokenizer image: added tokens out of order at %" PRIu32, i);
  }
  if (!bad.ok()) {
    *this = TokenizerImage();
    return bad;
  }
  space_id_ = spm ? lookup(" ", 1) : -1;
  return Status::Ok();
}

const char* TokenizerImage::str(uint32_t id, uint32_t* len) const {
  *len = str_off_[id + 1] - str_off_[id];
  return reinterpret_cast<const char*>(strings_ + str_off_[id]);
}

const char* TokenizerImage::token_bytes(int id, size_t* len) const {
  *len = 0;
  if (!h_ || id < 0 || id >= vocab_size()) return "";
  uint32_t l;
  const char* s = str(static_cast<uint32_t>(id), &l);
  *len = l;
  return s;
}

int TokenizerImage::lookup(const char* s, size_t n) const {
  // Lower bound over (bytes, id): the first entry whose bytes are not less than s.
  size_t lo = 0, hi = h_->n_tokens;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    uint32_t l;
    const char* t = str(sorted_[mid], &l);
    if (compare(reinterpret_cast<const uint8_t*>(t), l, reinterpret_cast<const uint8_t*>(s), n) < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo == h_->n_tokens) return -1;
  uint32_t l;
  const char* t = str(sorted_[lo], &l);
  return l == n && memcmp(t, s, n) == 0 ? static_cast<int>(sorted_[lo]) : -1;
}

// Lookup of the concatenation of tokens a and b, without building it.
int TokenizerImage::lookup_concat(int a, int b) const {
  uint32_t la, lb;
  const uint8_t* sa = reinterpret_cast<const uint8_t*>(str(static_cast<uint32_t>(a), &la));
  const uint8_t* sb = reinterpret_cast<const uint8_t*>(str(static_cast<uint32_t>(b), &lb));
  // compare(t, a+b): t's first la bytes against a, then the rest against b.
  auto cmp = [&](uint32_t id) {
    uint32_t lt;
    const uint8_t* t = reinterpret_cast<const uint8_t*>(str(id, &lt));
    const uint32_t k = lt < la ? lt : la;
    int c = memcmp(t, sa, k);
    if (c != 0) return c;
    if (lt < la) return -1;
    return compare(t + la, lt - la, sb, lb);
  };
  size_t lo = 0, hi = h_->n_tokens;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (cmp(sorted_[mid]) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < h_->n_tokens && cmp(sorted_[lo]) == 0 ? static_cast<int>(sorted_[lo]) : -1;
}

uint64_t TokenizerImage::merge_of(int32_t left, int32_t right) const {
  size_t lo = 0, hi = h_->n_merges;
  const uint32_t l = static_cast<uint32_t>(left), r = static_cast<uint32_t>(right);
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const TokImageMerge& m = merges_[mid];
    if (m.left < l || (m.left == l && m.right < r)) lo = mid + 1;
    else hi = mid;
  }
  if (lo < h_->n_merges && merges_[lo].left == l && merges_[lo].right == r)
    return (uint64_t{merges_[lo].rank} << 32) | merges_[lo].result;
  return UINT64_MAX;
}

Status TokenizerImage::encode(const char* text, size_t n, bool add_bos, bool add_eos, bool parse_special, int32_t* ids,
                              int32_t* work, size_t capacity, size_t* n_ids) const {
  *n_ids = 0;
  if (!h_) return Status::Error(Code::kInvalidArgument, "encode: tokenizer image not open");
  size_t count = 0;
  auto full = [&] { return Status::Error(Code::kOutOfRange, "encode: %zu bytes of text need more than %zu ids", n, capacity); };
  if (add_bos) {
    if (h_->bos < 0) return Status::Error(Code::kUnsupported, "the vocabulary has no BOS token");
    if (count >= capacity) return full();
    ids[count++] = h_->bos;
  }
  if (kind() == TokImageKind::kSpm) {
    MC_TRY(encode_spm(text, n, ids, work, capacity, &count));
  } else {
    // Added tokens split the text; the segments between them are pre-tokenized and merged.
    size_t seg = 0, i = 0;
    while (i < n) {
      int hit = -1;
      uint32_t hit_len = 0;
      for (uint32_t k = 0; k < h_->n_added && hit < 0; ++k) {
        uint32_t len;
        const char* s = str(added_[k], &len);
        if (static_cast<uint8_t>(s[0]) != static_cast<uint8_t>(text[i]) || len > n - i) continue;
        if (types_[added_[k]] == kTypeControl && !parse_special) continue;
        if (memcmp(s, text + i, len) == 0) {
          hit = static_cast<int>(added_[k]);
          hit_len = len;
        }
      }
      if (hit < 0) {
        ++i;
        continue;
      }
      if (seg < i) MC_TRY(encode_bpe_segment(text + seg, i - seg, ids, work, capacity, &count));
      if (count >= capacity) return full();
      ids[count++] = hit;
      i += hit_len;
      seg = i;
    }
    if (seg < n) MC_TRY(encode_bpe_segment(text + seg, n - seg, ids, work, capacity, &count));
  }
  if (add_eos) {
    if (h_->eos < 0) return Status::Error(Code::kUnsupported, "the vocabulary has no EOS token");
    if (count >= capacity) return full();
    ids[count++] = h_->eos;
  }
  *n_ids = count;
  return Status::Ok();
}

// llama2.c run.c's procedure (as Llama2cTokenizer::encode): the dummy-prefix " ", code points
// looked up (byte fallback otherwise), then the best-scoring adjacent merge, leftmost on ties,
// until none is left. work[k] caches the id the pair (k, k+1) merges into (-1: none).
Status TokenizerImage::encode_spm(const char* text, size_t n, int32_t* ids, int32_t* work, size_t capacity,
                                  size_t* count) const {
  size_t m = *count;
  if (n > 0) {
    if (space_id_ < 0) return Status::Error(Code::kUnsupported, "vocabulary has no \" \" piece for the dummy prefix");
    if (m >= capacity) return Status::Error(Code::kOutOfRange, "encode: the id buffer of %zu is too small", capacity);
    ids[m++] = space_id_;
  }
  for (size_t i = 0; i < n;) {
    size_t len = 1;
    while (len < 4 && i + len < n && (static_cast<uint8_t>(text[i + len]) & 0xC0) == 0x80) ++len;
    const int id = lookup(text + i, len);
    if (id >= 0) {
      if (m >= capacity) return Status::Error(Code::kOutOfRange, "encode: the id buffer of %zu is too small", capacity);
      ids[m++] = id;
    } else {
      for (size_t k = 0; k < len; ++k) {
        const uint8_t byte = static_cast<uint8_t>(text[i + k]);
        if (byte_ids_[byte] < 0)
          return Status::Error(Code::kOutOfRange, "byte fallback for 0x%02X: the vocabulary has no such token", byte);
        if (m >= capacity) return Status::Error(Code::kOutOfRange, "encode: the id buffer of %zu is too small", capacity);
        ids[m++] = byte_ids_[byte];
      }
    }
    i += len;
  }
  auto pair = [&](size_t k) {
    const int id = lookup_concat(ids[k], ids[k + 1]);
    return id >= 0 && scores_[id] > kMergeFloor ? id : -1;
  };
  for (size_t k = 0; k + 1 < m; ++k) work[k] = pair(k);
  while (m > 1) {
    size_t best = m;
    for (size_t k = 0; k + 1 < m; ++k)
      if (work[k] >= 0 && (best == m || scores_[work[k]] > scores_[work[best]])) best = k;
    if (best == m) break;
    ids[best] = work[best];
    memmove(ids + best + 1, ids + best + 2, (m - best - 2) * sizeof(int32_t));
    if (best + 2 < m) memmove(work + best + 1, work + best + 2, (m - best - 2) * sizeof(int32_t));
    --m;
    if (best > 0) work[best - 1] = pair(best - 1);
    if (best + 1 < m) work[best] = pair(best);
  }
  *count = m;
  return Status::Ok();
}

// One pre-tokenizer piece of byte-level BPE: its byte tokens merged by rank (lowest first,
// leftmost on ties). work[k] caches the merge of (k, k+1) as an index into the merge table.
bool TokenizerImage::encode_bpe_piece(const uint8_t* p, size_t n, int32_t* ids, int32_t* work, size_t capacity,
                                      size_t* count) const {
  if ((h_->flags & kTokImageIgnoreMerges) && n > 1) {
    const int id = lookup(reinterpret_cast<const char*>(p), n);
    if (id >= 0 && !is_added(types_[id])) {
      if (*count >= capacity) return false;
      ids[(*count)++] = id;
      return true;
    }
  }
  if (*count + n > capacity) return false;
  int32_t* sym = ids + *count;
  int32_t* rank = work + *count;
  for (size_t k = 0; k < n; ++k) sym[k] = byte_ids_[p[k]];
  auto pair = [&](size_t k) {
    const uint64_t r = merge_of(sym[k], sym[k + 1]);
    return r;
  };
  // Ranks fit in 32 bits; the cache keeps the rank and recomputes the result on use.
  size_t m = n;
  for (size_t k = 0; k + 1 < m; ++k) {
    const uint64_t r = pair(k);
    rank[k] = r == UINT64_MAX ? -1 : static_cast<int32_t>(r >> 32);
  }
  while (m > 1) {
    size_t best = m;
    for (size_t k = 0; k + 1 < m; ++k)
      if (rank[k] >= 0 && (best == m || rank[k] < rank[best])) best = k;
    if (best == m) break;
    sym[best] = static_cast<int32_t>(pair(best) & 0xffffffffu);
    memmove(sym + best + 1, sym + best + 2, (m - best - 2) * sizeof(int32_t));
    if (best + 2 < m) memmove(rank + best + 1, rank + best + 2, (m - best - 2) * sizeof(int32_t));
    --m;
    if (best > 0) {
      const uint64_t r = pair(best - 1);
      rank[best - 1] = r == UINT64_MAX ? -1 : static_cast<int32_t>(r >> 32);
    }
    if (best + 1 < m) {
      const uint64_t r = pair(best);
      rank[best] = r == UINT64_MAX ? -1 : static_cast<int32_t>(r >> 32);
    }
  }
  *count += m;
  return true;
}

Status TokenizerImage::encode_bpe_segment(const char* text, size_t n, int32_t* ids, int32_t* work, size_t capacity,
                                          size_t* count) const {
  for (size_t i = 0; i < n; ++i)
    if (byte_ids_[static_cast<uint8_t>(text[i])] < 0)
      return Status::Error(Code::kUnsupported, "the vocabulary has no token for byte 0x%02X", static_cast<uint8_t>(text[i]));
  struct Ctx {
    const TokenizerImage* self;
    const char* text;
    int32_t* ids;
    int32_t* work;
    size_t capacity;
    size_t* count;
    bool ok;
  } ctx{this, text, ids, work, capacity, count, true};
  pretokenize(
      pretokenizer(), text, n,
      [](void* user, size_t off, size_t len) {
        Ctx* c = static_cast<Ctx*>(user);
        if (c->ok)
          c->ok = c->self->encode_bpe_piece(reinterpret_cast<const uint8_t*>(c->text) + off, len, c->ids, c->work,
                                            c->capacity, c->count);
      },
      &ctx);
  if (!ctx.ok) return Status::Error(Code::kOutOfRange, "encode: the id buffer of %zu is too small", capacity);
  return Status::Ok();
}

const char* TokenizerImage::decode_step(int prev, int id, size_t* len) const {
  const char* s = token_bytes(id, len);
  if (!h_ || *len == 0 || kind() != TokImageKind::kSpm) return s;
  // SentencePiece drops the leading space of the first piece after BOS.
  if (prev == h_->bos && prev >= 0 && s[0] == ' ') {
    ++s;
    --*len;
  }
  const uint8_t* u = reinterpret_cast<const uint8_t*>(s);
  if (*len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hex_value(u[3]) >= 0 && hex_value(u[4]) >= 0) {
    *len = 1;
    return &kBytes.b[hex_value(u[3]) * 16 + hex_value(u[4])];
  }
  return s;
}

}  // namespace mcullm
