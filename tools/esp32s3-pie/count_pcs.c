/* Counts the guest instructions in a QEMU `-d exec,nochain` log taken with `-accel
 * tcg,one-insn-per-tb=on` (one "Trace" line per executed instruction), per (PC, call site, segment):
 *   count_pcs MARK_HEX HELPERS_FILE [CPU] < exec.log > counts.txt
 * CPU: count only that CPU's lines ("Trace CPU: ..."; QEMU -smp 2 interleaves both cores' lines).
 * Segments: the number starts at 0 and grows by one each time the PC equals MARK (a function's entry,
 * the board runner's on_step), so segment k is what ran between MARK's (k-1)-th and k-th call.
 * Call sites: HELPERS_FILE lists address ranges "start_hex end_hex" (end exclusive) of routines with
 * no stage of their own (soft-float and libc helpers, the PIE assembly, the window exception
 * vectors); an instruction inside one is also keyed by the last PC outside them (the call site),
 * so that profile_stages.py charges it to the calling function. Otherwise the call site is 0.
 * Output lines: "pc_hex site_hex segment count"; the last line "segments S".
 * Built at run time by profile_stages.sh (cc -O2); reading a FIFO it keeps up with QEMU's log. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSEG 1024
#define TABLE (1u << 18) /* open addressing on (pc, site): far more than the runner's instructions */
#define MAXHELP 4096

struct Slot {
  uint32_t pc, site;
  uint64_t* n; /* per segment */
};
static struct Slot table[TABLE];
static uint32_t help_lo[MAXHELP], help_hi[MAXHELP];
static int n_help;

static int is_helper(uint32_t pc) {
  for (int i = 0; i < n_help; ++i)
    if (pc >= help_lo[i] && pc < help_hi[i]) return 1;
  return 0;
}

static struct Slot* slot(uint32_t pc, uint32_t site) {
  uint32_t h = ((pc * 2654435761u) ^ (site * 40503u)) & (TABLE - 1);
  while (table[h].n && (table[h].pc != pc || table[h].site != site)) h = (h + 1) & (TABLE - 1);
  if (!table[h].n) {
    table[h].pc = pc;
    table[h].site = site;
    table[h].n = calloc(MAXSEG, sizeof(uint64_t));
    if (!table[h].n) { fprintf(stderr, "count_pcs: out of memory\n"); exit(1); }
  }
  return &table[h];
}

/* is_helper per PC, cached (the helper list is short but the log has ~10^8 lines) */
#define CACHE (1u << 20)
static uint32_t cache_pc[CACHE];
static int8_t cache_v[CACHE]; /* 0 unknown, 1 helper, -1 not */

static int helper_cached(uint32_t pc) {
  const uint32_t h = (pc ^ (pc >> 20)) & (CACHE - 1);
  if (cache_v[h] == 0 || cache_pc[h] != pc) {
    cache_pc[h] = pc;
    cache_v[h] = is_helper(pc) ? 1 : -1;
  }
  return cache_v[h] > 0;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) { fprintf(stderr, "usage: count_pcs MARK_HEX HELPERS_FILE [CPU] < exec.log\n"); return 1; }
  const long cpu = argc == 4 ? strtol(argv[3], NULL, 10) : -1;
  const uint32_t mark = (uint32_t)strtoul(argv[1], NULL, 16);
  FILE* hf = fopen(argv[2], "r");
  if (!hf) { perror(argv[2]); return 1; }
  unsigned lo, hi;
  while (n_help < MAXHELP && fscanf(hf, "%x %x", &lo, &hi) == 2) { help_lo[n_help] = lo; help_hi[n_help++] = hi; }
  fclose(hf);
  static char line[4096];
  unsigned seg = 0;
  uint32_t prev_pc = 0, site = 0;
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "Trace ", 6) != 0) continue;
    if (cpu >= 0 && strtol(line + 6, NULL, 10) != cpu) continue;
    const char* p = strchr(line, '[');
    if (!p || !(p = strchr(p, '/'))) continue;
    const uint32_t pc = (uint32_t)strtoull(p + 1, NULL, 16);
    if (pc == mark && seg + 1 < MAXSEG) ++seg;
    if (helper_cached(pc)) {
      if (!site) site = prev_pc ? prev_pc : 1;
    } else {
      site = 0;
      prev_pc = pc;
    }
    ++slot(pc, site)->n[seg];
  }
  for (uint32_t h = 0; h < TABLE; ++h)
    if (table[h].n)
      for (unsigned s = 0; s <= seg; ++s)
        if (table[h].n[s]) printf("%08x %08x %u %llu\n", table[h].pc, table[h].site, s, (unsigned long long)table[h].n[s]);
  printf("segments %u\n", seg + 1);
  return 0;
}
