/* Greedy driver for esp32-ai's C core, compiled by bench/compare_esp32ai.sh against the peer's own
 * llm.h (from a checkout outside this repository; nothing of it is copied here). Feeds START at
 * position 0, then its own greedy choices; prints the shared ref format (PROMPT / TOK pos token next)
 * on stdout and the forward passes' ms/token on stderr.
 * Usage: esp32ai_driver MODEL START STEPS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "llm.h"

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: %s MODEL START STEPS\n", argv[0]); return 2; }
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 1; }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *bytes = malloc((size_t)n);
  if (!bytes || fread(bytes, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "short read\n"); return 1; }
  fclose(f);
  Model m;
  if (llm_load(bytes, &m)) { fprintf(stderr, "not an esp32-ai v0 model\n"); return 1; }
  int D = m.c.dim, L = m.c.n_layers, P = m.c.ple_dim, F = m.c.ffn, V = m.c.vocab, S = m.c.seq_len;
  int wide = F > D ? F : D, gate = P > F ? P : F;
  Scratch s;
  s.x = malloc(D * 4); s.h = malloc(wide * 4); s.qkv = malloc(3 * D * 4); s.att = malloc(D * 4);
  s.g1 = malloc(F * 4); s.g2 = malloc(gate * 4); s.ple = malloc(L * P * 4); s.tmpP = malloc(L * P * 4);
  s.trow = malloc(L * P * 4); s.logits = malloc(V * 4); s.scores = malloc(S * 4);
  s.kcache = malloc((size_t)L * S * D * 4); s.vcache = malloc((size_t)L * S * D * 4);
  int token = atoi(argv[2]), steps = atoi(argv[3]);
  if (steps > S) steps = S;
  printf("PROMPT %d\n", token);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int pos = 0; pos < steps; pos++) {
    llm_forward(&m, token, pos, &s);
    int best = 0;
    for (int v = 1; v < V; v++) if (s.logits[v] > s.logits[best]) best = v;
    printf("TOK %d %d %d\n", pos, token, best);
    token = best;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  fprintf(stderr, "%.4f ms/token\n", ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / steps);
  return 0;
}
