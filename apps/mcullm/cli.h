// The mcullm command line: each subcommand registers itself on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "mcullm/status.h"
#include "model/transformer.h"

namespace mcullm {
struct KernelSet;
}

namespace mcullm::cli {

// The top-level description, and the app main() parses: the version flag, the footer, defaults shown
// in --help, and the subcommands: only the one `first_arg` (argv[1], may be null) names, else all of
// them. A command's parse, help and errors do not depend on which others are registered.
extern const char* const kAppDescription;
void build_app(CLI::App& app, int* exit_code, const char* first_arg);

// Each add_* registers a subcommand whose callback stores its exit code in *exit_code.
void add_run_command(CLI::App& app, int* exit_code);
void add_dummy_command(CLI::App& app, int* exit_code);
void add_convert_command(CLI::App& app, int* exit_code);
void add_eval_command(CLI::App& app, int* exit_code);
void add_tokenize_commands(CLI::App& app, int* exit_code);  // tokenize and detokenize
void add_serve_command(CLI::App& app, int* exit_code);
void add_bench_command(CLI::App& app, int* exit_code);
void add_tune_command(CLI::App& app, int* exit_code);
void add_plan_command(CLI::App& app, int* exit_code);  // board placement and the cost model

// --use-pretuned / --tuning FILE: the LUT-kernel tilings `mcullm tune` stored; dummy / convert pack
// tl1 / tl2 with them, run / bench note the TL matrices a file packed otherwise (load/model_loader_host.h).
struct PretunedOptions {
  bool use = false;
  std::string file;
};
void add_pretuned_options(CLI::App* cmd, PretunedOptions* o);
// Installs the stored tilings process-wide when asked (kernels/tl_tuning.h tl_tiling_for), else the
// built-in defaults; an error for a missing or malformed file.
Status apply_pretuned(const PretunedOptions& o);

void add_head_command(CLI::App& app, int* exit_code);   // two-stage / pruned vocabulary heads
void add_node_command(CLI::App& app, int* exit_code);     // a cluster node (cmd_node.cpp)
void add_cluster_command(CLI::App& app, int* exit_code);  // the cluster master (cmd_cluster.cpp)

// Exit codes of every command (docs/cli.md lists them).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,    // the work failed (a corrupt model, a lost cluster node, an internal error)
  kExitUsage = 2,      // bad flags or arguments (CLI11's parse errors, an invalid value)
  kExitDoesNotFit = 3, // the model does not fit the board's memory (plan, run --board)
  kExitIo = 4,         // a file or stdout could not be read or written (missing file, full disk)
};

// Prints "mcullm: error: <message>" to stderr and returns the exit code for a failed status.
int report(const Status& st);

// The conventions every command shares (conventions.cpp), after llama.cpp where it has one.
// -s,--seed: -1 (the default) draws a random seed; resolve_seed gives the seed to use (>= 1 for -1).
void add_seed_option(CLI::App* cmd, int64_t* seed, const std::string& what = "Sampling seed");
int64_t resolve_seed(int64_t seed);
// --kernels: the registered kernel tables of this build (kernels/kernels.h kernel_tables) and "auto";
// a table this CPU cannot run is refused when the command resolves it (kernels_by_name).
void add_kernels_option(CLI::App* cmd, std::string* kernels);
Status find_kernels(const std::string& name, const KernelSet** kernels);
// -t,--threads: defaults to the physical cores; a warning when more than the logical cores.
void add_threads_option(CLI::App* cmd, int* threads, const std::string& what = "Threads");
int physical_cores();
int logical_cores();
void warn_threads(int threads);
// --prompt-ids (run, cluster): ids below `vocab` separated by commas or spaces; an empty list is an error.
Status parse_prompt_ids(const std::string& text, int vocab, std::vector<int>* ids);
// "HOST:PORT" (HOST may be [v6]) -> host, port; an error naming the text otherwise.
Status split_host_port(const std::string& text, std::string* host, uint16_t* port);
// Where the version comes from: CMake's project VERSION and `git describe` at configure time.
const char* version_string();

// A file written as we go (--dump-tokens, --dump-logits): the first failed write is kept and
// reported by close(), which also catches a failed flush (a full disk shows up there).
class OutputFile {
 public:
  OutputFile() = default;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();
  Status open(const std::string& path, const char* flag);
  bool is_open() const { return f_ != nullptr; }
  bool failed() const { return err_ != 0; }
  void write(const void* data, size_t n);
  void printf(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  Status close();

 private:
  std::FILE* f_ = nullptr;
  std::string path_, flag_;
  int err_ = 0;
};

// Writes and flushes text on stdout (streamed tokens); false once a write failed, whose errno
// stdout_status() then reports.
bool write_stdout(std::string_view text);
// Standard output written so far: an Io error (with errno's text) when a write or the final flush
// failed. main() checks it after every command; long writers may check it to stop early.
Status stdout_status();

}  // namespace mcullm::cli
