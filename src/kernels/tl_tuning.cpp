#include "kernels/tl_tuning.h"

#include <stdio.h>
#include <string.h>

namespace mcullm {

namespace {

const TlTuningTable* g_pretuned = nullptr;

constexpr size_t kMaxLine = 255;
constexpr char kHeader[] = "mcullm-tl-tuning 1";

// Splits a line into at most 8 space-separated fields (pointers into `line`, which is modified).
int split(char* line, char** fields) {
  int n = 0;
  for (char* p = line; *p;) {
    while (*p == ' ' || *p == '\t') *p++ = '\0';
    if (!*p) break;
    if (n == 8) return 9;
    fields[n++] = p;
    while (*p && *p != ' ' && *p != '\t') ++p;
  }
  return n;
}

// A decimal in [1, 1 << 24]; false for anything else (signs, overflow, other characters).
bool parse_int(const char* s, int* out) {
  long v = 0;
  if (!*s) return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + (*s - '0');
    if (v > (1L << 24)) return false;
  }
  if (v < 1) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

bool tl_tuning_put(TlTuningTable* table, TlType type, int M, int K, const TlTiling& t) {
  if (!tl_tiling_valid(type, M, K, t)) return false;
  for (int i = 0; i < table->count; ++i) {
    TlTuningEntry& e = table->entries[i];
    if (e.type == type && e.M == M && e.K == K) {
      e.tiling = t;
      return true;
    }
  }
  if (table->count >= kTlTuningMax) return false;
  TlTuningEntry& e = table->entries[table->count++];
  e.type = type;
  e.M = M;
  e.K = K;
  e.tiling = t;
  return true;
}

const TlTuningEntry* tl_tuning_find(const TlTuningTable& table, TlType type, int M, int K) {
  for (int i = 0; i < table.count; ++i) {
    const TlTuningEntry& e = table.entries[i];
    if (e.type == type && e.M == M && e.K == K) return &e;
  }
  return nullptr;
}

Status tl_tuning_parse(const char* text, size_t len, TlTuningTable* out) {
  out->count = 0;
  TlTuningTable table;
  bool header = false;
  size_t pos = 0;
  for (int line_no = 1; pos < len; ++line_no) {
    size_t end = pos;
    while (end < len && text[end] != '\n') ++end;
    size_t n = end - pos;
    if (n > 0 && text[pos + n - 1] == '\r') --n;
    if (n > kMaxLine) return Status::Error(Code::kCorrupt, "tuning line %d is longer than %zu bytes", line_no, kMaxLine);
    char line[kMaxLine + 1];
    for (size_t i = 0; i < n; ++i) {
      const unsigned char c = static_cast<unsigned char>(text[pos + i]);
      if ((c < 0x20 && c != '\t') || c > 0x7E)
        return Status::Error(Code::kCorrupt, "tuning line %d has a non-printable byte 0x%02x", line_no, c);
      line[i] = static_cast<char>(c);
    }
    line[n] = '\0';
    pos = end + 1;
    char* fields[9];
    const int nf = split(line, fields);
    if (nf == 0 || fields[0][0] == '#') continue;
    if (!header) {
      if (nf != 2 || strcmp(fields[0], "mcullm-tl-tuning") != 0 || strcmp(fields[1], "1") != 0)
        return Status::Error(Code::kCorrupt, "tuning line %d: expected the header '%s'", line_no, kHeader);
      header = true;
      continue;
    }
    TlType type;
    int v[5];
    if (nf != 6 || !tl_type_by_name(fields[0], &type))
      return Status::Error(Code::kCorrupt, "tuning line %d: expected 'tl1|tl2 M K BM BK bm'", line_no);
    for (int i = 0; i < 5; ++i)
      if (!parse_int(fields[1 + i], &v[i]))
        return Status::Error(Code::kCorrupt, "tuning line %d: field %d is not a number in [1, 16777216]", line_no, i + 2);
    TlTiling t;
    t.BM = v[2];
    t.BK = v[3];
    t.bm = v[4];
    if (!tl_tiling_valid(type, v[0], v[1], t))
      return Status::Error(Code::kCorrupt, "tuning line %d: BM %d BK %d bm %d does not fit %s %dx%d", line_no, t.BM, t.BK,
                           t.bm, tl_type_name(type), v[0], v[1]);
    if (tl_tuning_find(table, type, v[0], v[1]))
      return Status::Error(Code::kCorrupt, "tuning line %d: %s %dx%d appears twice", line_no, tl_type_name(type), v[0], v[1]);
    if (!tl_tuning_put(&table, type, v[0], v[1], t))
      return Status::Error(Code::kCorrupt, "tuning line %d: more than %d records", line_no, kTlTuningMax);
  }
  if (!header) return Status::Error(Code::kCorrupt, "tuning text has no '%s' header (empty or truncated)", kHeader);
  *out = table;
  return Status::Ok();
}

bool tl_tuning_format(const TlTuningTable& table, char* buf, size_t cap) {
  size_t at = 0;
  auto put = [&](int n) { at = n < 0 || at + static_cast<size_t>(n) >= cap ? cap : at + static_cast<size_t>(n); };
  if (cap == 0) return false;
  put(snprintf(buf, cap, "# mcullm tune: type M K BM BK bm\n%s\n", kHeader));
  for (int i = 0; i < table.count && at < cap; ++i) {
    const TlTuningEntry& e = table.entries[i];
    put(snprintf(buf + at, cap - at, "%s %d %d %d %d %d\n", tl_type_name(e.type), e.M, e.K, e.tiling.BM, e.tiling.BK,
                 e.tiling.bm));
  }
  return at < cap;
}

void tl_set_pretuned(const TlTuningTable* table) { g_pretuned = table; }

TlTiling tl_tiling_for(TlType type, int M, int K) {
  if (g_pretuned)
    if (const TlTuningEntry* e = tl_tuning_find(*g_pretuned, type, M, K)) return e->tiling;
  return tl_default_tiling(type, M, K);
}

}  // namespace mcullm
