// Implementation of the CLI test helpers (process spawning through /bin/sh with each argument
// single-quoted, so paths and program text reach the binary unchanged).
#include "cli_harness.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "attnfuse/attention.hpp"
#include "attnfuse/block_mask.hpp"
#include "attnfuse/program.hpp"
#include "common/dtype.hpp"
#include "reference/reference.hpp"

namespace attnfuse::clitest {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "attnfuse-cli-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<std::string> TempDir::listing() const {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> CliResult::err_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

CliResult run_cli(const std::vector<std::string>& args, const TempDir& scratch) {
  static int counter = 0;
  const fs::path io_dir = scratch.path() / fmt::format(".cli-io-{}", counter++);
  fs::create_directory(io_dir);
  std::string cmd = quote(ATTNFUSE_CLI_PATH);
  for (const auto& a : args) cmd.append(" ").append(quote(a));  // (" " + quote(a): a GCC 12 -Wrestrict false positive)
  // Two threads at most: the tests share a 2-core machine with the rest of the suite.
  cmd = "OMP_NUM_THREADS=2 " + cmd + " >" + quote((io_dir / "out").string()) + " 2>" +
        quote((io_dir / "err").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = slurp(io_dir / "out");
  r.err = slurp(io_dir / "err");
  fs::remove_all(io_dir);
  return r;
}

uint64_t fresh_seed() {
  static const uint64_t seed = std::random_device{}();
  return seed;
}

std::vector<float> random_normal(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

void write_f32(const fs::path& file, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  io::write_npy(file, io::make_f32(shape, values));
}

void write_ints(const fs::path& file, const std::vector<int64_t>& values, io::NpyDType dtype) {
  io::NpyArray a;
  a.dtype = dtype;
  a.shape = {static_cast<int64_t>(values.size())};
  const size_t w = dtype == io::NpyDType::I32 ? 4 : 8;
  a.data.resize(values.size() * w);
  for (size_t i = 0; i < values.size(); ++i) {
    const int32_t v32 = static_cast<int32_t>(values[i]);
    std::memcpy(a.data.data() + i * w, w == 4 ? static_cast<const void*>(&v32) : &values[i], w);
  }
  io::write_npy(file, a);
}

io::NpyArray read(const fs::path& file) { return io::read_npy(file); }

namespace {

// A tensor of `dtype` holding `values` rounded to it.
struct Buffer {
  std::vector<uint16_t> half;
  std::vector<float> full;
  TensorView view(DType dtype, std::array<int64_t, 4> shape) {
    return TensorView::contiguous(dtype == DType::F32 ? static_cast<void*>(full.data())
                                                      : static_cast<void*>(half.data()),
                                  dtype, shape);
  }
  Buffer(const std::vector<float>& values, DType dtype) {
    if (dtype == DType::F32) {
      full = values;
      return;
    }
    half.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      half[i] = dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
  }
};

}  // namespace

Expected expected(const std::string& program, const Inputs& in, DType dtype) {
  const KernelSpec spec = Program::parse(program).compile(CompileOptions{Target::Cpu, dtype, 0});
  Buffer q(in.q, dtype), k(in.k, dtype), v(in.v, dtype);
  AttentionArgs a;
  a.q = q.view(dtype, in.q_shape);
  a.k = k.view(dtype, in.k_shape);
  a.v = v.view(dtype, in.v_shape);
  a.q_offset = in.q_offset;
  std::optional<Buffer> bias;
  if (in.bias_shape) {
    bias.emplace(in.bias, dtype);
    a.bias = bias->view(dtype, *in.bias_shape);
  }
  std::optional<BlockMask> mask;
  if (in.grid_shape) {
    const auto& g = *in.grid_shape;
    mask = BlockMask::from_dense(in.grid.data(), g[0], g[1], in.q_shape[2], in.k_shape[2], in.block_q,
                                 in.block_k);
    a.block_mask = &*mask;
  }
  if (!in.cu_seqlens_q.empty()) {
    a.cu_seqlens_q = SeqOffsetsView::contiguous(in.cu_seqlens_q.data(), std::ssize(in.cu_seqlens_q));
    a.cu_seqlens_k = SeqOffsetsView::contiguous(in.cu_seqlens_k.data(), std::ssize(in.cu_seqlens_k));
  }
  const auto exact = reference::attention(spec, a, reference::Precision::F64);
  const auto naive = reference::attention(spec, a, reference::Precision::Naive);
  return Expected{exact.out, exact.lse, naive.out, naive.lse};
}

std::string tolerance_violation(const std::vector<float>& got, const std::vector<double>& ref,
                                const std::vector<double>& naive) {
  if (got.size() != ref.size()) return fmt::format("size {} != reference size {}", got.size(), ref.size());
  double naive_err = 0.0;
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::isfinite(ref[i])) naive_err = std::max(naive_err, std::abs(naive[i] - ref[i]));
  const double bound = 2.0 * naive_err + 1e-5;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    const bool same_nonfinite = (std::isnan(g) && std::isnan(r)) || (std::isinf(r) && g == r);
    if (same_nonfinite) continue;
    if (!std::isfinite(g) || !std::isfinite(r) || std::abs(g - r) > bound)
      return fmt::format("element {}: got {} want {} (bound {:.3g})", i, g, r, bound);
  }
  return "";
}

}  // namespace attnfuse::clitest
