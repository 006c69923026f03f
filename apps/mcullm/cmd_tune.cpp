// `mcullm tune`: measures the LUT kernels' tilings (BM rows per tile, BK columns per block, bm SIMD
// rows) for each weight shape on this machine and stores the fastest in the tuning file that
// `--use-pretuned` (run, bench) reads. Also the shared --use-pretuned / --tuning options.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "cli.h"
#include "progress.h"
#include "core/thread_pool_host.h"
#include "kernels/kernels.h"
#include "kernels/tl_tuning_host.h"

namespace mcullm::cli {

namespace {

struct TuneOptions {
  std::string output, shapes = "768x768,3072x768,768x3072,2560x2560,6912x2560", types = "tl1,tl2", kernels = "auto";
  int threads = 1, time_ms = 40, tokens = 1;
};

// The process-wide table --use-pretuned installs (kernels/tl_tuning.h keeps a pointer to it).
TlTuningTable g_pretuned_table;

Status parse_shapes(const std::string& text, std::vector<std::pair<int, int>>* out) {
  std::string s = text;
  std::replace(s.begin(), s.end(), ',', ' ');
  std::istringstream in(s);
  std::string item;
  while (in >> item) {
    int m = 0, k = 0;
    char x = 0, extra = 0;
    if (std::sscanf(item.c_str(), "%d%c%d%c", &m, &x, &k, &extra) != 3 || x != 'x' || m < 1 || k < 1 || m > (1 << 20) ||
        k > (1 << 20))
      return Status::Error(Code::kInvalidArgument, "--shapes: '%s' is not MxK (rows x columns)", item.c_str());
    out->emplace_back(m, k);
  }
  if (out->empty()) return Status::Error(Code::kInvalidArgument, "--shapes is empty");
  return Status::Ok();
}

// Every tiling worth trying for (type, M, K).
std::vector<TlTiling> candidates(TlType type, int M, int K) {
  static const int kBM[] = {32, 64, 96, 128, 160, 192, 256, 320, 384, 512};
  static const int kBK2[] = {24, 48, 96, 144, 192, 240};
  static const int kBK1[] = {16, 32, 64, 128, 256};
  std::vector<TlTiling> out;
  for (int bm_rows : kBM)
    for (int bm : {16, 32, 64})
      for (int bk : type == TlType::kTL2 ? std::vector<int>(std::begin(kBK2), std::end(kBK2))
                                         : std::vector<int>(std::begin(kBK1), std::end(kBK1))) {
        TlTiling t;
        t.BM = bm_rows;
        t.BK = bk;
        t.bm = bm;
        if (tl_tiling_valid(type, M, K, t)) out.push_back(t);
      }
  return out;
}

// Best nanoseconds per tl_mul_mat call with tiling t (random weights), over about time_ms.
double measure(const KernelSet& k, TlType type, int M, int K, const TlTiling& t, const TuneOptions& o,
               ThreadPool* pool) {
  std::mt19937 rng(static_cast<uint32_t>(M * 31 + K));
  std::uniform_int_distribution<int> d(-1, 1);
  std::vector<int8_t> w(static_cast<size_t>(M) * K);
  for (auto& v : w) v = static_cast<int8_t>(d(rng));
  std::vector<uint8_t> bytes(tl_tensor_bytes(type, M, K, t));
  tl_pack(type, t, w.data(), M, K, bytes.data());
  TlTensor tensor;
  tl_tensor_init(&tensor, type, bytes.data(), bytes.size(), M, K, t);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(K) * o.tokens), y(static_cast<size_t>(M) * o.tokens);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> work(tl_workspace_bytes(tensor, o.tokens));
  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  const auto stop = Clock::now() + std::chrono::milliseconds(o.time_ms);
  for (int i = 0; i < 3 || Clock::now() < stop; ++i) {
    const auto t0 = Clock::now();
    tl_mul_mat(k, tensor, x.data(), o.tokens, y.data(), work.data(), work.size(), pool);
    best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  return best;
}

int tune(const TuneOptions& o) {
  std::vector<std::pair<int, int>> shapes;
  if (Status st = parse_shapes(o.shapes, &shapes); !st.ok()) return report(st);
  std::vector<TlType> types;
  std::string ts = o.types;
  std::replace(ts.begin(), ts.end(), ',', ' ');
  std::istringstream tin(ts);
  for (std::string name; tin >> name;) {
    TlType t;
    if (!tl_type_by_name(name.c_str(), &t))
      return report(Status::Error(Code::kInvalidArgument, "--types: '%s' is not tl1 or tl2", name.c_str()));
    types.push_back(t);
  }
  if (types.empty()) return report(Status::Error(Code::kInvalidArgument, "--types is empty"));
  const KernelSet* k = nullptr;
  if (Status st = find_kernels(o.kernels, &k); !st.ok()) return report(st);
  const std::string path = o.output.empty() ? tl_tuning_default_path() : o.output;
  TlTuningTable table;
  warn_threads(o.threads);
  HostThreadPool pool(o.threads, kHostMinParallelWork);
  long long n_candidates = 0;  // each measured once, the default tiling once more per shape
  for (TlType type : types)
    for (const auto& [M, K] : shapes) n_candidates += static_cast<long long>(candidates(type, M, K).size()) + 1;
  Progress progress("tune", n_candidates, "tilings");
  std::printf("| type | shape (MxK) | best BM/BK/bm | us/call | default BM/BK/bm | us/call | default / best |\n");
  std::printf("|---|---|---|---:|---|---:|---:|\n");
  for (TlType type : types)
    for (const auto& [M, K] : shapes) {
      const std::vector<TlTiling> cands = candidates(type, M, K);
      if (cands.empty()) {
        std::printf("| %s | %dx%d | (no tiling fits) | | | | |\n", tl_type_name(type), M, K);
        continue;
      }
      TlTiling best = cands[0];
      double best_ns = 1e30;
      for (const TlTiling& t : cands) {
        const double ns = measure(*k, type, M, K, t, o, &pool);
        if (ns < best_ns) best_ns = ns, best = t;
        progress.step();
      }
      const TlTiling def = tl_default_tiling(type, M, K);
      const double def_ns = measure(*k, type, M, K, def, o, &pool);
      progress.step();
      progress.finish();  // the table row on a clean line
      tl_tuning_put(&table, type, M, K, best);
      std::printf("| %s | %dx%d | %d/%d/%d | %.1f | %d/%d/%d | %.1f | %.2f |\n", tl_type_name(type), M, K, best.BM, best.BK,
                  best.bm, best_ns / 1e3, def.BM, def.BK, def.bm, def_ns / 1e3, def_ns / best_ns);
      std::fflush(stdout);
    }
  if (Status st = tl_tuning_save_file(path, table); !st.ok()) return report(st);
  std::printf("\nkernels %s, %d thread%s, %d token%s per call; wrote %d tilings to %s\n", k->name, o.threads,
              o.threads == 1 ? "" : "s", o.tokens, o.tokens == 1 ? "" : "s", table.count, path.c_str());
  return 0;
}

}  // namespace

void add_pretuned_options(CLI::App* cmd, PretunedOptions* o) {
  cmd->add_flag("--use-pretuned", o->use, "Use the LUT-kernel tilings `mcullm tune` stored (default: built-in choices)");
  cmd->add_option("--tuning", o->file, "The tuning file --use-pretuned reads (default: $MCULLM_TUNING or mcullm-tuning.txt)");
}

Status apply_pretuned(const PretunedOptions& o) {
  if (!o.use) {
    if (!o.file.empty()) return Status::Error(Code::kInvalidArgument, "--tuning needs --use-pretuned");
    tl_set_pretuned(nullptr);
    return Status::Ok();
  }
  MC_TRY(tl_tuning_load_file(o.file.empty() ? tl_tuning_default_path() : o.file, &g_pretuned_table));
  tl_set_pretuned(&g_pretuned_table);
  return Status::Ok();
}

void add_tune_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand("tune", "Measure the LUT kernels' tilings (BM/BK/bm) per weight shape and store the fastest");
  cmd->add_option("-o,--output", o->output, "Tuning file to write (default: $MCULLM_TUNING or mcullm-tuning.txt)");
  cmd->add_option("--shapes", o->shapes, "Weight shapes MxK (rows x columns), comma separated");
  cmd->add_option("--types", o->types, "tl1, tl2 or both (comma separated)");
  add_threads_option(cmd, &o->threads);
  cmd->add_option("--tokens", o->tokens, "Tokens per call (1 = generation)")->check(CLI::Range(1, 512));
  cmd->add_option("--time-ms", o->time_ms, "Time spent on each candidate tiling")->check(CLI::Range(0, 60000));
  add_kernels_option(cmd, &o->kernels);
  cmd->callback([o, exit_code] { *exit_code = tune(*o); });
}

}  // namespace mcullm::cli
