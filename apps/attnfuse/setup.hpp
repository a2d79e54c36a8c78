// What `run` and `bench` share: their problem options (program, inputs or --shape, dtype,
// device, threads) and turning those into a compiled program plus a Problem to run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/program.hpp"
#include "backend.hpp"
#include "options.hpp"
#include "problem.hpp"
#include "rope/hf_config.hpp"

namespace CLI {
class App;
}

namespace attnfuse::cli {

struct ProblemOptions {
  std::string program;  // the text itself or @file
  std::string shape;    // --shape B,Hq,Hkv,Nq,Nk,D (random inputs); empty: inputs from files
  FileInputs files;     // --q --k --v --bias --block-mask (and the parsed block size / q offset)
  std::string block_size;  // --block-size BQ,BK as typed
  uint64_t seed = 0;
  int64_t page_size = 0;  // --page-size: random K/V in a paged cache (0: contiguous)
  bool paged_table_settled = false;  // --paged-table-settled: PagedKV::table_settled
  std::string dtype = "fp32";
  std::string device = "auto";
  int threads = 0;  // 0: OpenMP's default
  std::string rope_config;  // --rope-config config.json (empty: the program's RoPE as written)
  std::string rope_mode = "auto";  // --rope-mode: where CUDA rotates Q and K
};

// Registers PROGRAM and the options above on a subcommand.
void add_problem_options(CLI::App& app, ProblemOptions& o);

// Registers --rope-config on a subcommand (shared by compile, run and bench), with the help text
// that states the precedence rule.
void add_rope_config_option(CLI::App& app, std::string& path);
// Registers --rope-mode (compile, run and bench).
void add_rope_mode_option(CLI::App& app, std::string& mode);

// Loads --rope-config (nullopt for an empty path). Error(Io) / Error(Verify) / Error(Unsupported)
// from the loader, each naming the file.
std::optional<rope::HfRopeConfig> load_rope_config(const std::string& path);

// Program::compile, then the RoPE config applied to the spec (rope::apply_hf_rope: the program's
// explicit parameters win). Error(Verify) when a config is given but the program has no rope.
KernelSpec compile_with_rope(const Program& program, const CompileOptions& options,
                             const std::optional<rope::HfRopeConfig>& config,
                             const std::string& config_path);

struct Prepared {
  std::string text;
  std::optional<Program> program;  // always set (Program has no default constructor)
  KernelSpec spec;
  Target target = Target::Cpu;
  DType dtype = DType::F32;
  bool random = false;
  uint64_t seed = 0;  // of the random inputs
  int threads = 1;  // what OpenMP will use
  std::string rope_config;  // the --rope-config path applied to spec (empty: none)
  Problem problem;
};

// Parses and compiles the program, resolves the device (Error(Device) for cuda without CUDA),
// sets the thread count, and builds the problem (random for --shape, else from files). Throws
// UsageError for --shape mixed with input files or missing --q/--k/--v.
Prepared prepare(const ProblemOptions& o, bool want_lse);

// Program text on one line (statements joined with " / ") for headers of printouts.
std::string one_line(const std::string& text);

// "B=1 Hq=8 ... dtype fp32, device cpu (avx512), threads 2, q_offset 0[, seed 7]"
std::string describe_problem(const Prepared& p);

}  // namespace attnfuse::cli
