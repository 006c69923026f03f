// The board runner: the freestanding core on a board (or a host), fed through files.
//   image=PATH   board image (mcullm convert --image)     prompt=PATH  token ids, e.g. "1 403 407"
//   n=16 temp=0.8 seed=42 top_k=40 top_p=0.95 min_p=0.05  (`mcullm run`'s defaults, but n)
//   kernels=auto|ref|avx2|neon  work=sram|psram (where KV cache and activations go; default sram)
//   kv=f32|int8  the KV cache (int8: one scale per head per position, `mcullm run --kv int8`'s bits)
//   cores=1|2    2: every pool task split with the target's second core (board::DualCorePool); the
//                same bits. Where the target counts instructions per core, each step also prints
//                core 0's and core 1's work and the critical path.
//   role=single|master|node  the cluster roles (board/master.h, board/node.h, started as the firmware
//                starts them) over an SPI link made of two streams: link_in=PATH (from the previous
//                board) and link_out=PATH (to the next one), e.g. named pipes (tools/run_chain.sh).
//                A node needs only image= (a per-node image, or a whole one); the master image= (a
//                master image with the nodes' plan, or a whole image with nodes=N), prompt= and the
//                sampler. The master prints what the single board prints; a node, when its input
//                closes, its layers and the mean counter (instructions, per core) per hidden state.
//   streams=1    role=node: stream slots (a KV cache each) the node keeps, 1..8 (board/node.h): a
//                master with several streams in flight (`mcullm cluster --topology ring --streams K`)
//                needs K; the caches of all of them come from the work tier
//   batch=8      batched prefill: up to N prompt tokens a call, each weight matrix read once for them
//                (Decoder::prefill; the same bits as one at a time), buffers from the work tier,
//                at most the prompt's length - 1; 0 or 1: one token at a time. 8: a row block of
//                weights (16 KiB, kernels/matmat_rows.h) and 8 columns' activations stay within the
//                ESP32-S3's 32 KiB data cache while the columns pass over it, and PSRAM / flash weight
//                reads per prompt token drop 8x (docs/firmware.md, "Batched prefill on the board").
//   sparse=P     a ReLU model's FFN gate first (model/sparse_ffn.h, the same bits as dense) where at most
//                P per mille of a token's neurons are live (250: `mcullm run`'s default; 1000: always):
//                the quantized down matrices' column copies are built in PSRAM at start
//                (board_model_build_sparse_ffn); the live and skipped neurons are counted. 0 (the
//                default): dense, no copies. On the emulated S3 the column kernels are the scalar
//                reference while the dense rows run PIE: the ternary ReLU Qwen2 of docs/single-board.md
//                took 1,641k instructions a token gate first against 1,287k dense.
//   down=cols|rows  with sparse=P: the down product over the column copies (cols, the default) or
//                over the image's rows, whole (rows: no copies; only the up rows of dead neurons are
//                skipped, which the PIE table turns into fewer instructions).
//   logits=all|sampled  sampled: only the sampled steps' logits go into the fingerprint, so the batched
//                prompt skips the output head as the firmware does (its tokens hash is unchanged)
// It reads the image into the "flash" buffer, validates it, copies the SRAM / PSRAM sections into
// those tiers' arenas, builds the model and generates. It prints one line per step with the target's
// counter, the tokens, memory per tier and the run's fingerprint in `mcullm run --fingerprint`'s form.
// Exit codes: 0 ok, 1 bad arguments, 2 image refused, 3 does not fit, 4 generation failed.
// Only C headers: the Xtensa toolchain has no C++ library.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "board/dual_core_pool.h"
#include "board/master.h"
#include "board/node.h"
#include "core/arena.h"
#include "core/fingerprint.h"
#include "core/thread_pool.h"
#include "format/board_image.h"
#include "format/board_image_model.h"
#include "kernels/kernels.h"
#include "model/generate.h"
#include "model/sampler.h"
#include "profile.h"
#include "platform.h"
#include "runner_hal.h"

using namespace mcullm;

namespace {

constexpr int kMaxPrompt = 1024;

enum class Role { kSingle, kMaster, kNode };

struct Args {
  Role role = Role::kSingle;
  const char* link_in = nullptr;
  const char* link_out = nullptr;
  int nodes = 0;  // the master's ring length with a whole image (a master image's plan says it)
  const char* image = nullptr;
  const char* prompt = nullptr;
  const char* kernels = "auto";
  bool work_psram = false;
  KvType kv = KvType::kF32;
  int n = 16;
  int cores = 1;
  int sparse = 0;  // max live neurons per mille for the gate-first FFN; 0: dense
  bool down_cols = true;  // the gate-first FFN's down product over column copies (else the rows)
  int streams = 1;  // role=node: stream slots
  int batch = 8;
  bool prompt_logits = true;
  SamplerConfig sampler;
};

int fail(int code, const Status& st) {
  printf("board: error: %s\n", st.message());
  fflush(stdout);
  return code;
}

// A decimal such as 0.95: digits / 10^k, both exact in float, so one correctly rounded division
// gives the float nearest the decimal (what strtof gives) on every target.
bool parse_decimal(const char* s, float* out) {
  uint32_t num = 0, den = 1;
  bool dot = false, any = false;
  for (; *s; ++s) {
    if (*s == '.' && !dot) { dot = true; continue; }
    if (*s < '0' || *s > '9' || num > 1000000 || den > 1000000) return false;
    num = num * 10 + static_cast<uint32_t>(*s - '0');
    if (dot) den *= 10;
    any = true;
  }
  if (!any) return false;
  *out = static_cast<float>(num) / static_cast<float>(den);
  return true;
}

bool parse_uint(const char* s, uint64_t max, uint64_t* out) {
  uint64_t v = 0;
  if (!*s) return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + static_cast<uint64_t>(*s - '0');
    if (v > max) return false;
  }
  *out = v;
  return true;
}

Status parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const char* eq = strchr(arg, '=');
    if (!eq) return Status::Error(Code::kInvalidArgument, "argument '%s' is not key=value", arg);
    const size_t klen = static_cast<size_t>(eq - arg);
    const char* v = eq + 1;
    auto is = [&](const char* key) { return strlen(key) == klen && strncmp(arg, key, klen) == 0; };
    uint64_t u = 0;
    bool ok = true;
    if (is("role")) {
      a->role = strcmp(v, "master") == 0 ? Role::kMaster : strcmp(v, "node") == 0 ? Role::kNode : Role::kSingle;
      ok = a->role != Role::kSingle || strcmp(v, "single") == 0;
    }
    else if (is("link_in")) a->link_in = v;
    else if (is("link_out")) a->link_out = v;
    else if (is("nodes")) { ok = parse_uint(v, board::Master::kMaxNodes, &u) && u >= 1; a->nodes = static_cast<int>(u); }
    else if (is("image")) a->image = v;
    else if (is("prompt")) a->prompt = v;
    else if (is("kernels")) a->kernels = v;
    else if (is("work")) { a->work_psram = strcmp(v, "psram") == 0; ok = a->work_psram || strcmp(v, "sram") == 0; }
    else if (is("kv")) { ok = parse_kv_type(v, &a->kv); }
    else if (is("n")) { ok = parse_uint(v, 1u << 20, &u); a->n = static_cast<int>(u); }
    else if (is("sparse")) { ok = parse_uint(v, 1000, &u); a->sparse = static_cast<int>(u); }
    else if (is("down")) { a->down_cols = strcmp(v, "cols") == 0; ok = a->down_cols || strcmp(v, "rows") == 0; }
    else if (is("streams")) { ok = parse_uint(v, board::kMaxStreamSlots, &u) && u >= 1; a->streams = static_cast<int>(u); }
    else if (is("cores")) { ok = parse_uint(v, 2, &u) && u >= 1; a->cores = static_cast<int>(u); }
    else if (is("batch")) { ok = parse_uint(v, 4096, &u); a->batch = static_cast<int>(u); }
    else if (is("logits")) { a->prompt_logits = strcmp(v, "all") == 0; ok = a->prompt_logits || strcmp(v, "sampled") == 0; }
    else if (is("seed")) { ok = parse_uint(v, UINT64_MAX / 10, &u) && u != 0; a->sampler.seed = u; }
    else if (is("top_k")) { ok = parse_uint(v, 1u << 24, &u); a->sampler.top_k = static_cast<int>(u); }
    else if (is("temp")) ok = parse_decimal(v, &a->sampler.temperature);
    else if (is("top_p")) ok = parse_decimal(v, &a->sampler.top_p);
    else if (is("min_p")) ok = parse_decimal(v, &a->sampler.min_p);
    else return Status::Error(Code::kInvalidArgument, "unknown argument '%s'", arg);
    if (!ok) return Status::Error(Code::kInvalidArgument, "bad value in '%s'", arg);
  }
  if (!a->image || (!a->prompt && a->role != Role::kNode))
    return Status::Error(Code::kInvalidArgument, "usage: image=PATH prompt=PATH [n=16 temp=0.8 seed=42 ...] (mcullm run's sampler defaults)");
  if ((a->role != Role::kSingle) != (a->link_in && a->link_out))
    return Status::Error(Code::kInvalidArgument, "role=master and role=node take link_in=PATH and link_out=PATH, and only they do");
  if (a->nodes && a->role != Role::kMaster) return Status::Error(Code::kInvalidArgument, "nodes=N is the master's");
  if (!a->down_cols && a->sparse == 0) return Status::Error(Code::kInvalidArgument, "down=rows is the gate-first FFN's (sparse=P)");
  return Status::Ok();
}

// Reads a whole host file into a 64-byte aligned buffer of at most `cap` bytes.
Status read_file(const char* path, size_t cap, const char* what, uint8_t** out, size_t* size) {
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return Status::Error(Code::kIo, "cannot open %s %s", what, path);
  const long end = lseek(fd, 0, SEEK_END);
  if (end < 0 || lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return Status::Error(Code::kIo, "cannot size %s %s", what, path);
  }
  const size_t n = static_cast<size_t>(end);
  if (n > cap) {
    close(fd);
    return Status::Error(Code::kOutOfMemory, "%s %s has %zu bytes: it does not fit the board's %zu bytes", what, path, n, cap);
  }
  uint8_t* raw = static_cast<uint8_t*>(malloc(n + 64));
  if (!raw) {
    close(fd);
    return Status::Error(Code::kOutOfMemory, "no memory for %s (%zu bytes)", what, n);
  }
  uint8_t* buf = raw + (64 - reinterpret_cast<uintptr_t>(raw) % 64) % 64;
  size_t got = 0;
  while (got < n) {  // large chunks: picolibc's fread copies byte by byte
    const size_t chunk = n - got < 65536 ? n - got : 65536;
    const long r = read(fd, buf + got, chunk);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fd);
  if (got != n) return Status::Error(Code::kIo, "short read of %s %s (%zu of %zu bytes)", what, path, got, n);
  *out = buf;
  *size = n;
  return Status::Ok();
}

Status parse_prompt(const uint8_t* text, size_t n, int vocab, int* ids, int* count) {
  *count = 0;
  size_t i = 0;
  while (i < n) {
    if (text[i] < '0' || text[i] > '9') { ++i; continue; }
    uint32_t v = 0;
    while (i < n && text[i] >= '0' && text[i] <= '9' && v <= static_cast<uint32_t>(vocab)) v = v * 10 + (text[i++] - '0');
    if (v >= static_cast<uint32_t>(vocab)) return Status::Error(Code::kInvalidArgument, "prompt id %u is not below the vocabulary of %d", v, vocab);
    if (*count == kMaxPrompt) return Status::Error(Code::kOutOfRange, "prompt longer than %d ids", kMaxPrompt);
    ids[(*count)++] = static_cast<int>(v);
  }
  if (*count == 0) return Status::Error(Code::kInvalidArgument, "the prompt file holds no token ids");
  return Status::Ok();
}

void print_hex64(const char* label, uint64_t v) {
  printf("%s %08lx%08lx", label, static_cast<unsigned long>(v >> 32), static_cast<unsigned long>(v & 0xffffffffu));
}

void print_tier(const char* what, const Arena& a) {
  const ArenaStats& s = a.stats();
  printf("memory %s: capacity %lu used %lu mapped %lu (", what, static_cast<unsigned long>(s.capacity),
         static_cast<unsigned long>(s.peak), static_cast<unsigned long>(s.mapped_total()));
  bool first = true;
  for (int c = 0; c < kClassCount; ++c) {
    const size_t b = s.by_class[c] + s.mapped_by_class[c];
    if (!b) continue;
    printf("%s%s %lu", first ? "" : ", ", tensor_class_name(static_cast<TensorClass>(c)), static_cast<unsigned long>(b));
    first = false;
  }
  printf(")\n");
}

// The target's per-core instruction counts (platform.h), as deltas between steps.
struct CoreCounts {
  uint64_t v[3] = {};
  static CoreCounts now() {
    CoreCounts c;
    for (int i = 0; i < 3; ++i) c.v[i] = board_core_instructions(i);
    return c;
  }
  bool counted() const { return v[0] != 0; }
};

struct StepLog {
  uint64_t last = 0;
  uint64_t sampled_total = 0;
  CoreCounts cores_last, cores_sampled, cores_all;  // sums over the sampled steps / over every step
  uint64_t fingerprint_work = 0;  // core 0's instructions hashing logits since the last step (test only)
  uint64_t fingerprint_sampled = 0;
  uint64_t prompt_total = 0;  // the counter over the prompt's steps (fed, not sampled)
  CoreCounts cores_prompt;
  int steps = 0;
  Fingerprint fp;
  int sampled = 0;
  int tokens[kMaxPrompt + (1 << 12)];
  int n_tokens = 0;
};

// "X k instructions on the critical path (core 0 Y k, core 1 Z k": per-core sums over n units, as
// means (the caller closes the parenthesis).
void print_core_means(const CoreCounts& c, uint64_t n) {
  printf("%lu k instructions on the critical path (core 0 %lu k, core 1 %lu k", static_cast<unsigned long>(c.v[2] / n / 1000),
         static_cast<unsigned long>(c.v[0] / n / 1000), static_cast<unsigned long>(c.v[1] / n / 1000));
}

// The run's fingerprint, as generate() would take it (its token and logit hashes are separate, so
// hashing here gives the same value), but outside the per-core counts: a board would not hash every logit.
void on_logits(void* user, int, const float* logits, int n_vocab) {
  auto* log = static_cast<StepLog*>(user);
  const uint64_t before = board_core_instructions(0);
  log->fp.add_logits(logits, static_cast<size_t>(n_vocab));
  log->fingerprint_work += board_core_instructions(0) - before;
}

bool on_step(void* user, const GenerateStep& s) {
  auto* log = static_cast<StepLog*>(user);
  if (s.sampled) log->fp.add_token(s.next);
  const uint64_t now = board_counter();
  const uint64_t d = now - log->last;
  log->last = now;
  const CoreCounts c = CoreCounts::now();
  uint64_t dc[3];
  for (int i = 0; i < 3; ++i) dc[i] = c.v[i] - log->cores_last.v[i];
  log->cores_last = c;
  const uint64_t fpw = log->fingerprint_work;
  log->fingerprint_work = 0;
  dc[0] -= fpw;  // core 0 hashed the logits: not the engine's work
  dc[2] -= fpw;
  for (int i = 0; i < 3; ++i) log->cores_all.v[i] += dc[i];
  ++log->steps;
  if (s.sampled) {
    log->sampled_total += d;
    for (int i = 0; i < 3; ++i) log->cores_sampled.v[i] += dc[i];
    log->fingerprint_sampled += fpw;
    ++log->sampled;
  } else {  // a batch's first step carries the whole batch, the others about nothing
    log->prompt_total += d;
    for (int i = 0; i < 3; ++i) log->cores_prompt.v[i] += dc[i];
  }
  printf("step pos %d token %d next %d %s %lu", s.pos, s.token, s.next, board_counter_name(), static_cast<unsigned long>(d));
  if (c.counted())
    printf(" instructions core0 %lu core1 %lu path %lu fingerprint %lu", static_cast<unsigned long>(dc[0]),
           static_cast<unsigned long>(dc[1]), static_cast<unsigned long>(dc[2]), static_cast<unsigned long>(fpw));
  printf("\n");
  if (log->n_tokens < static_cast<int>(sizeof log->tokens / sizeof log->tokens[0])) log->tokens[log->n_tokens++] = s.next;
  return true;
}

BoardImage g_image;
BoardModel g_model;
BoardDecoder g_decoder;
Sampler g_sampler;
StepLog g_log;
int g_prompt[kMaxPrompt];

// The target's second core as the board HAL's Worker, for DualCorePool.
class SecondCore final : public board::Worker {
 public:
  void start(Job job, void* arg) override { board_second_core_start(job, arg); }
  void wait() override { board_second_core_wait(); }
};
SecondCore g_second_core;
board::DualCorePool g_dual_pool(g_second_core);

// Generates from the prompt with `dec` and prints the steps, the tokens, the means, the tiers and the
// fingerprint (the single board and the master alike).
int generate_and_report(const Args& a, Decoder& dec, const BoardImageConfig& c, const int* prompt, int n_prompt, Arena& work,
                        Arena* const tiers[3]) {
  if (Status st = g_sampler.init(a.sampler, c.vocab_size, work); !st.ok()) return fail(3, st);
  int* history = nullptr;
  if (Status st = work.alloc_array(static_cast<size_t>(n_prompt + a.n + 1), TensorClass::kScratch, &history); !st.ok())
    return fail(3, st);
  GenerateOptions go;
  go.n_predict = a.n;
  go.stop_a = c.bos_id;  // as `mcullm run`: llama2.c models end a story with BOS
  go.stop_b = c.eos_id;
  Fingerprint& fp = g_log.fp;
  for (int i = 0; i < n_prompt; ++i) fp.add_token(prompt[i]);
  GenerateHooks hooks{&g_log, on_logits, on_step, a.prompt_logits};
  GenerateResult result;
  g_log.last = board_counter();
  g_log.cores_last = CoreCounts::now();
  if (Status st = generate(dec, g_sampler, prompt, n_prompt, go, history, nullptr, hooks, &result); !st.ok())
    return fail(4, st);

  printf("tokens");
  printf(" %d", prompt[0]);  // then the token that followed each step: the prompt, then the samples
  for (int i = 0; i < g_log.n_tokens; ++i) printf(" %d", g_log.tokens[i]);
  printf("\n");
  if (n_prompt > 1) {
    const uint64_t n = static_cast<uint64_t>(n_prompt - 1);
    const uint64_t mean = g_log.prompt_total / n;
    printf("per prompt token: %s %lu (mean of %lu)", board_counter_name(), static_cast<unsigned long>(mean),
           static_cast<unsigned long>(n));
    if (board_instructions_per_count())
      printf(", %lu k instructions under qemu -icount shift=0", static_cast<unsigned long>(mean * board_instructions_per_count() / 1000));
    if (g_log.cores_prompt.counted()) {
      printf("; ");
      print_core_means(g_log.cores_prompt, n);
      printf(" of work, the fingerprint not counted)");
    }
    printf("\n");
  }
  if (g_log.sampled > 0) {
    const uint64_t mean = g_log.sampled_total / static_cast<uint64_t>(g_log.sampled);
    printf("per sampled token: %s %lu (mean of %d)", board_counter_name(), static_cast<unsigned long>(mean), g_log.sampled);
    if (board_instructions_per_count())
      printf(", %lu k instructions under qemu -icount shift=0",
             static_cast<unsigned long>(mean * board_instructions_per_count() / 1000));
    printf("\n");
    if (g_log.cores_sampled.counted()) {
      const uint64_t n = static_cast<uint64_t>(g_log.sampled);
      printf("per sampled token: ");
      print_core_means(g_log.cores_sampled, n);
      printf(" of work; the fingerprint's %lu k on core 0 not counted)\n",
             static_cast<unsigned long>(g_log.fingerprint_sampled / n / 1000));
      printf("per step over positions 0..%d: ", g_log.steps - 1);
      print_core_means(g_log.cores_all, static_cast<uint64_t>(g_log.steps));
      printf(")\n");
    }
  }
  FfnCounts ffn;
  if (dec.ffn_counts(&ffn) && ffn.neurons)
    printf("ffn: %lu neurons, %lu live, %lu skipped (gate first)\n", static_cast<unsigned long>(ffn.neurons),
           static_cast<unsigned long>(ffn.live), static_cast<unsigned long>(ffn.skipped));
  print_tier("sram", *tiers[0]);
  print_tier("psram", *tiers[1]);
  print_tier("flash", *tiers[2]);
  print_hex64("fingerprint", fp.combined());
  print_hex64(" tokens", fp.tokens());
  print_hex64(" logits", fp.logits());
  printf("\n");
  fflush(stdout);
  return 0;
}

Status read_prompt(const Args& a, int vocab, int* n_prompt) {
  uint8_t* prompt_text = nullptr;
  size_t prompt_size = 0;
  MC_TRY(read_file(a.prompt, 1u << 16, "prompt", &prompt_text, &prompt_size));
  return parse_prompt(prompt_text, prompt_size, vocab, g_prompt, n_prompt);
}

int context_for(const Args& a, int n_prompt, int seq_len, int* ctx_len) {
  *ctx_len = n_prompt + a.n < seq_len ? n_prompt + a.n : seq_len;
  if (n_prompt > *ctx_len)
    return fail(1, Status::Error(Code::kOutOfRange, "the prompt has %d ids, the context holds %d", n_prompt, *ctx_len));
  return 0;
}

// ---- The cluster roles: the firmware's start-up (board::start_node / start_master) over RunnerHal ----

runner::FdSpiLink g_spi;  // static: its stream decoder holds a whole frame (32 KB)
board::MappedModel g_mapped;
board::FrameLink g_link;
board::Node g_node;
board::Master g_master;

// The ring's streams. The node opens its input first and the master its output first, so that the
// opens of named pipes (each waits for the other end) go round the ring without waiting in a circle.
Status open_links(const Args& a, runner::FdSpiLink& link) {
  int in = -1, out = -1;
  if (a.role == Role::kNode) {
    in = open(a.link_in, O_RDONLY);
    out = in < 0 ? -1 : open(a.link_out, O_WRONLY);
  } else {
    out = open(a.link_out, O_WRONLY);
    in = out < 0 ? -1 : open(a.link_in, O_RDONLY);
  }
  if (in < 0) return Status::Error(Code::kIo, "cannot open link_in %s", a.link_in);
  if (out < 0) return Status::Error(Code::kIo, "cannot open link_out %s", a.link_out);
  link.attach(in, out);
  return Status::Ok();
}

// Serves hidden states until the previous board closes the link; then prints the node's figures.
int run_node(runner::RunnerHal& hal, ThreadPool* pool, const KernelSet* kernels, bool work_psram, int streams) {
  const Tier work = work_psram ? Tier::kPsram : Tier::kSram;
  if (Status st = board::start_node(hal, "model", work, 0, streams, pool, kernels, &g_mapped, &g_link, &g_node); !st.ok())
    return fail(st.code() == Code::kOutOfMemory ? 3 : 2, st);
  printf("node: ready, holds layers %d:%d, %d stream slot%s\n", g_node.range().first, g_node.range().end, streams, streams == 1 ? "" : "s");
  fflush(stdout);
  uint64_t counter = 0;
  CoreCounts work_done;
  for (;;) {
    const uint32_t served = g_node.hidden_served();
    const uint64_t t0 = board_counter();
    const CoreCounts c0 = CoreCounts::now();
    const Status st = g_node.poll(-1);
    if (!st.ok()) {
      if (hal.link().closed()) break;  // the ring is taken down: the master closed its output
      return fail(4, st);
    }
    if (g_node.hidden_served() == served) continue;  // a hello, reset or frame passed on
    counter += board_counter() - t0;
    const CoreCounts c1 = CoreCounts::now();
    for (int i = 0; i < 3; ++i) work_done.v[i] += c1.v[i] - c0.v[i];
  }
  const uint32_t n = g_node.hidden_served();
  printf("node: layers %d:%d, %u hidden states, %u error frames sent", g_node.range().first, g_node.range().end, n,
         g_node.errors_sent());
  if (n > 0 && board_instructions_per_count()) {  // a count of the work alone (a host's clock also runs while the node waits)
    printf("; per hidden state: %s %lu (%lu k instructions under qemu -icount shift=0)", board_counter_name(),
           static_cast<unsigned long>(counter / n), static_cast<unsigned long>(counter / n * board_instructions_per_count() / 1000));
  }
  if (n > 0 && work_done.counted()) {
    printf(", ");
    print_core_means(work_done, n);
    printf(")");
  }
  printf("\n");
  print_tier("sram", g_mapped.arena(Tier::kSram));
  print_tier("psram", g_mapped.arena(Tier::kPsram));
  print_tier("flash", g_mapped.arena(Tier::kFlash));
  fflush(stdout);
  return 0;
}

// Connects the ring (hellos, slice hashes, reset), generates, then closes its output: every node in
// turn sees its input close and ends.
int run_master(const Args& a, runner::RunnerHal& hal, ThreadPool* pool, const KernelSet* kernels) {
  if (Status st = g_mapped.init(hal, "model"); !st.ok()) return fail(st.code() == Code::kOutOfMemory ? 3 : 2, st);
  const BoardImageConfig& c = g_mapped.image().config();
  int n_prompt = 0, ctx_len = 0;
  if (Status st = read_prompt(a, c.vocab_size, &n_prompt); !st.ok()) return fail(1, st);
  if (int rc = context_for(a, n_prompt, g_mapped.model().cfg().seq_len, &ctx_len)) return rc;
  Arena& work = g_mapped.arena(a.work_psram ? Tier::kPsram : Tier::kSram);
  board::MasterOptions mo;
  mo.ctx_len = ctx_len;
  if (a.nodes) mo.nodes = a.nodes;
  if (Status st = board::start_master(g_mapped, hal.spi(), work, mo, pool, kernels, &g_link, &g_master); !st.ok())
    return fail(4, st);
  printf("master: the ring answered: %d nodes\n", g_master.nodes());
  Arena* const tiers[3] = {&g_mapped.arena(Tier::kSram), &g_mapped.arena(Tier::kPsram), &g_mapped.arena(Tier::kFlash)};
  const int rc = generate_and_report(a, g_master, c, g_prompt, n_prompt, work, tiers);
  if (g_master.resends()) printf("master: %u hidden state(s) sent again\n", g_master.resends());
  fflush(stdout);
  return rc;  // exiting closes the output
}

int run(int argc, char** argv) {
  Args a;
  if (Status st = parse_args(argc, argv, &a); !st.ok()) return fail(1, st);
  const KernelSet* kernels = kernels_by_name(a.kernels);
  if (!kernels) return fail(1, Status::Error(Code::kInvalidArgument, "kernels=%s is unknown or not supported here", a.kernels));
  if (a.cores == 2 && !board_second_core_available())
    return fail(1, Status::Error(Code::kInvalidArgument, "cores=2: this target has no second core (QEMU: -smp 2)"));
  printf("board: target %s, sram %lu, psram %lu, flash %lu bytes, kernels %s, kv %s, cores %d\n", board_target_name(),
         static_cast<unsigned long>(BOARD_SRAM_BYTES), static_cast<unsigned long>(BOARD_PSRAM_BYTES),
         static_cast<unsigned long>(BOARD_FLASH_BYTES), kernels->name, kv_type_name(a.kv), a.cores);

  // The tiers: SRAM and PSRAM arenas, and the flash stand-in that holds the image as read.
  void* sram_mem = malloc(BOARD_SRAM_BYTES);
  void* psram_mem = malloc(BOARD_PSRAM_BYTES);
  if (!sram_mem || !psram_mem) return fail(3, Status::Error(Code::kOutOfMemory, "this build's board profile does not fit the machine"));

  // A board of the ring joins it first: one that then fails (its image, its memory) closes its links
  // on exit, and its neighbours see the ring end instead of waiting for it.
  if (a.role != Role::kSingle) {
    if (Status st = open_links(a, g_spi); !st.ok()) return fail(1, st);
    if (a.kv != KvType::kF32) return fail(1, Status::Error(Code::kInvalidArgument, "the cluster roles keep an f32 KV cache"));
  }
  uint8_t* image = nullptr;
  size_t image_size = 0;
  if (Status st = read_file(a.image, BOARD_FLASH_BYTES, "board image", &image, &image_size); !st.ok())
    return fail(st.code() == Code::kOutOfMemory ? 3 : 2, st);
  SerialPool serial_pool;
  ThreadPool* pool = a.cores == 2 ? static_cast<ThreadPool*>(&g_dual_pool) : &serial_pool;
  if (a.role != Role::kSingle) {
    runner::RunnerHal hal(image, image_size, sram_mem, BOARD_SRAM_BYTES, psram_mem, BOARD_PSRAM_BYTES, g_spi, g_second_core);
    return a.role == Role::kNode ? run_node(hal, pool, kernels, a.work_psram, a.streams) : run_master(a, hal, pool, kernels);
  }

  Arena sram(Tier::kSram, sram_mem, BOARD_SRAM_BYTES);
  Arena psram(Tier::kPsram, psram_mem, BOARD_PSRAM_BYTES);
  Arena flash(Tier::kFlash, image, image_size);
  if (Status st = g_image.open(image, image_size); !st.ok()) return fail(2, st);
  const BoardImageConfig& c = g_image.config();
  printf("image: %s, %u tensors, %lu bytes, dim %d, layers %d, vocab %d\n", board_arch_name(g_image.arch()),
         g_image.n_tensors(), static_cast<unsigned long>(image_size), c.dim, c.n_layers, c.vocab_size);
  int n_prompt = 0;
  if (Status st = read_prompt(a, c.vocab_size, &n_prompt); !st.ok()) return fail(1, st);

  Arena* const ram[kTierCount] = {&sram, &psram, nullptr, nullptr};
  if (Status st = g_image.place(ram, flash); !st.ok()) return fail(3, st);
  if (Status st = board_model_from_image(g_image, sram, &g_model); !st.ok()) return fail(2, st);
  if (a.sparse > 0 && a.down_cols) {
    size_t cols = 0;
    if (Status st = board_model_build_sparse_ffn(&g_model, psram, &cols); !st.ok()) return fail(3, st);
    if (cols) printf("sparse FFN: the down matrices' columns, %lu bytes in psram\n", static_cast<unsigned long>(cols));
  }
  int ctx_len = 0;
  if (int rc = context_for(a, n_prompt, g_model.cfg().seq_len, &ctx_len)) return rc;
  Arena& work = a.work_psram ? psram : sram;
  if (Status st = g_decoder.init(g_model, ctx_len, work, pool, kernels, a.kv); !st.ok()) return fail(3, st);
  g_decoder.set_sparse_ffn(a.sparse > 0, a.sparse);
  const int batch = a.batch < n_prompt - 1 ? a.batch : n_prompt - 1;  // the prompt but its last token
  if (Status st = g_decoder.enable_batch(batch, work); !st.ok()) return fail(3, st);
  printf("prefill: %d prompt tokens in batches of up to %d\n", n_prompt - 1, g_decoder.decoder().max_batch());
  Arena* const tiers[3] = {&sram, &psram, &flash};
  return generate_and_report(a, g_decoder.decoder(), c, g_prompt, n_prompt, work, tiers);
}

}  // namespace

// Targets with one core and no per-core counters keep these (weak) defaults.
extern "C" {
__attribute__((weak)) int board_second_core_available(void) { return 0; }
__attribute__((weak)) void board_second_core_start(void (*job)(void*), void* arg) { job(arg); }
__attribute__((weak)) void board_second_core_wait(void) {}
__attribute__((weak)) uint64_t board_core_instructions(int) { return 0; }
}

int main(int argc, char** argv) { return run(argc, argv); }
