// The subcommands of `attnfuse`: their options and entry points (each returns the exit
// code; user errors are thrown and turned into exit 2 by main).
#pragma once

#include <cstdint>
#include <string>

#include "setup.hpp"

namespace CLI {
class App;
}

namespace attnfuse::cli {

// attnfuse compile PROGRAM --emit ir|passes|spec [--device cpu|cuda] [--dtype] [--head-dim D]
//                 [--rope-config config.json]
struct CompileCommand {
  std::string program;
  std::string emit;
  std::string device = "cpu";
  std::string dtype = "fp32";
  int head_dim = 0;
  std::string rope_config;  // applied to the KernelSpec (--emit spec only)
  std::string arch = "sm_90";      // --emit ptx: the target architecture
  std::string rope_mode = "auto";
};
void add_compile_command(CLI::App& app, CompileCommand& c);
int run_compile(const CompileCommand& c);

// attnfuse run PROGRAM (--q --k --v --out [--lse] ... | --shape ... [--seed]) [--check]
struct RunCommand {
  ProblemOptions problem;
  std::string out, lse;  // .npy outputs (empty: not written)
  bool check = false;
};
void add_run_command(CLI::App& app, RunCommand& c);
int run_run(const RunCommand& c);

// attnfuse bench PROGRAM (--shape ... | --q --k --v ...) [--ablate] [--json FILE] [--reps N]
struct BenchCommand {
  ProblemOptions problem;
  bool ablate = false;
  std::string json;  // write the results here too
  int reps = 0;      // 0: as many as fit in about a second (at least 5)
  bool no_check = false;  // the caller validated the output itself (e.g. against torch)
  std::string command_line;  // recorded in the JSON
};
void add_bench_command(CLI::App& app, BenchCommand& c);
int run_bench(const BenchCommand& c);

// attnfuse window-table --config config.json --k K [--seq-len N]: the ATFlash window table of a
// model's RoPE (rope/window_table.hpp) for rope_window's k and a causal length N.
struct WindowTableCommand {
  std::string config;
  double k = 0.0;
  int64_t seq_len = 0;  // 0: not given (the config's max_position_embeddings)
  bool seq_len_given = false;
};
void add_window_table_command(CLI::App& app, WindowTableCommand& c);
int run_window_table(const WindowTableCommand& c);

}  // namespace attnfuse::cli
