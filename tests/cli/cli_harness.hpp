// Helpers for the CLI end-to-end tests: a scratch directory, running the built `attnfuse`
// binary with captured stdout/stderr, random .npy inputs, and the in-process reference to compare
// the CLI's outputs with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"
#include "io/npy.hpp"

namespace attnfuse::clitest {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }
  // Names of the files in the directory (to assert that nothing, not even a temp file, was left).
  std::vector<std::string> listing() const;

 private:
  std::filesystem::path path_;
};

struct CliResult {
  int exit_code = -1;
  std::string out, err;
  std::vector<std::string> err_lines() const;
};

// Runs ATTNFUSE_CLI_PATH with `args` (each passed as one argument, no shell interpretation).
CliResult run_cli(const std::vector<std::string>& args, const TempDir& scratch);

// Seeds: a fixed one and one fresh per process, printed by the tests on failure.
uint64_t fresh_seed();

std::vector<float> random_normal(size_t n, std::mt19937_64& rng);

// Writes a float32 .npy with `shape` (through the npy writer under test).
void write_f32(const std::filesystem::path& file, const std::vector<int64_t>& shape,
               const std::vector<float>& values);
io::NpyArray read(const std::filesystem::path& file);

// Writes a 1-D int32 or int64 .npy (offsets, page tables).
void write_ints(const std::filesystem::path& file, const std::vector<int64_t>& values, io::NpyDType dtype);

// The in-process answer for the same inputs: float64 reference and naive same-precision
// decomposition, inputs rounded to `dtype` first.
struct Expected {
  std::vector<double> out, lse, naive_out, naive_lse;
};
struct Inputs {
  std::array<int64_t, 4> q_shape, k_shape, v_shape;
  std::vector<float> q, k, v;
  std::optional<std::array<int64_t, 4>> bias_shape;
  std::vector<float> bias;
  std::optional<std::array<int64_t, 4>> grid_shape;  // [b|1, h|1, nqb, nkb]
  std::vector<uint8_t> grid;
  int block_q = 64, block_k = 64;
  std::optional<int64_t> q_offset;
  std::vector<int64_t> cu_seqlens_q, cu_seqlens_k;  // document: one shared row each (empty: none)
};
Expected expected(const std::string& program, const Inputs& in, DType dtype);

// DESIGN §3: max |got - ref| <= 2 * max |naive - ref| + 1e-5, and no NaN where ref has none.
// Returns "" when it holds, else a description of the worst element.
std::string tolerance_violation(const std::vector<float>& got, const std::vector<double>& ref,
                                const std::vector<double>& naive);

}  // namespace attnfuse::clitest
