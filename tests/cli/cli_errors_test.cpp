// The CLI's exit-2 paths: every user error exits 2 with one clear "attnfuse: error: " line on
// stderr (program text errors may add the caret excerpt after it), and --out / --lse are never
// created, not even as temp files.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_harness.hpp"

namespace attnfuse::clitest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCausal = "softmax(causal(scaled_dot_product(Q, K))) @ V";
constexpr const char* kPrefix = "attnfuse: error: ";

// Inputs of shape Q [1,Hq,N,D], K/V [1,Hkv,N,D] in `dir`, and run arguments for them writing
// o.npy and l.npy.
class CliErrors : public ::testing::Test {
 protected:
  void write_qkv(int64_t Hq, int64_t Hkv, int64_t N, int64_t D, int64_t Dk = -1) {
    std::mt19937_64 rng(7);
    if (Dk < 0) Dk = D;
    write_f32(dir_ / "q.npy", {1, Hq, N, D}, random_normal(static_cast<size_t>(Hq * N * D), rng));
    write_f32(dir_ / "k.npy", {1, Hkv, N, Dk}, random_normal(static_cast<size_t>(Hkv * N * Dk), rng));
    write_f32(dir_ / "v.npy", {1, Hkv, N, D}, random_normal(static_cast<size_t>(Hkv * N * D), rng));
  }
  std::vector<std::string> run_args(const std::string& program) const {
    return {"run", program, "--q", (dir_ / "q.npy").string(), "--k", (dir_ / "k.npy").string(),
            "--v", (dir_ / "v.npy").string(), "--out", (dir_ / "o.npy").string(),
            "--lse", (dir_ / "l.npy").string()};
  }
  // Exit 2, first stderr line is the prefixed error containing `needle`, exactly one line
  // unless `caret` (then the following lines are the source excerpt with a '^'), nothing on
  // stdout, and no output file or temp file left behind.
  void expect_user_error(const std::vector<std::string>& args, const std::string& needle,
                         bool caret = false) {
    const auto before = dir_.listing();
    const CliResult r = run_cli(args, dir_);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    const auto lines = r.err_lines();
    ASSERT_FALSE(lines.empty()) << "nothing on stderr";
    EXPECT_EQ(lines[0].rfind(kPrefix, 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(needle), std::string::npos) << "want '" << needle << "' in: " << lines[0];
    if (caret) {
      ASSERT_GE(lines.size(), 3u) << r.err;
      EXPECT_NE(lines[2].find('^'), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(lines.size(), 1u) << r.err;
    }
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(dir_ / "o.npy"));
    EXPECT_FALSE(fs::exists(dir_ / "l.npy"));
    EXPECT_EQ(dir_.listing(), before) << "files were left behind";
  }
  TempDir dir_;
};

TEST_F(CliErrors, BadProgramTextPointsAtTheColumn) {
  write_qkv(2, 2, 8, 4);
  expect_user_error(run_args("softmax(causl(scaled_dot_product(Q, K))) @ V"), "line 1, column 9", true);
  expect_user_error({"compile", "softmax(scaled_dot_product(Q, K) @ V", "--emit", "ir"}, "parse error", true);
}

TEST_F(CliErrors, IllFormedProgram) {
  write_qkv(2, 2, 8, 4);
  // A mask after the normalization changes the normalization, not the selection.
  expect_user_error(run_args("causal(softmax(scaled_dot_product(Q, K))) @ V"), "invalid program", true);
}

TEST_F(CliErrors, BadShapes) {
  std::mt19937_64 rng(1);
  write_qkv(2, 2, 8, 4);
  write_f32(dir_ / "q.npy", {2, 8, 4}, random_normal(64, rng));
  expect_user_error(run_args(kCausal), "must have 4 dimensions");
  write_qkv(2, 2, 8, 4, /*Dk=*/6);
  expect_user_error(run_args(kCausal), "shape error");
  expect_user_error({"run", kCausal, "--shape", "1,2,3", "--check"}, "B,Hq,Hkv,Nq,Nk,D");
  expect_user_error({"run", kCausal, "--shape", "1,2,x,4,4,8", "--check"}, "not an integer");
}

TEST_F(CliErrors, GqaNotDivisible) {
  write_qkv(3, 2, 8, 4);
  expect_user_error(run_args(kCausal), "divisible");
  expect_user_error({"run", kCausal, "--shape", "1,3,2,8,8,4", "--check"}, "not divisible");
}

TEST_F(CliErrors, MissingAndUnreadableFiles) {
  write_qkv(2, 2, 8, 4);
  auto args = run_args(kCausal);
  args[3] = (dir_ / "missing.npy").string();
  expect_user_error(args, "missing.npy: no such file");
  expect_user_error(run_args(std::string("@").append((dir_ / "nope.attn").string())), "cannot read program file");
}

TEST_F(CliErrors, CorruptNpy) {
  write_qkv(2, 2, 8, 4);
  {
    std::ofstream f(dir_ / "k.npy", std::ios::binary | std::ios::trunc);
    f << "this is not a numpy file at all";
  }
  expect_user_error(run_args(kCausal), "not a .npy file");
  write_qkv(2, 2, 8, 4);
  fs::resize_file(dir_ / "v.npy", fs::file_size(dir_ / "v.npy") - 10);
  expect_user_error(run_args(kCausal), "truncated");
  // float64 data: refused with what to do instead.
  write_qkv(2, 2, 8, 4);
  {
    std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 8, 4), }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    std::ofstream f(dir_ / "q.npy", std::ios::binary | std::ios::trunc);
    f << std::string("\x93NUMPY\x01\x00", 8) << static_cast<char>(header.size()) << '\0' << header
      << std::string(8 * 64, '\0');
  }
  expect_user_error(run_args(kCausal), "float32");
}

TEST_F(CliErrors, MissingRunTimeTensors) {
  write_qkv(2, 2, 8, 4);
  expect_user_error(run_args("softmax(additive_bias(scaled_dot_product(Q, K))) @ V"), "--bias");
  expect_user_error(run_args("softmax(block_sparse(scaled_dot_product(Q, K))) @ V"), "--block-mask");
  // A bias for a program that has no additive_bias is a mistake too.
  std::mt19937_64 rng(3);
  write_f32(dir_ / "b.npy", {1, 2, 8, 8}, random_normal(128, rng));
  auto args = run_args(kCausal);
  args.insert(args.end(), {"--bias", (dir_ / "b.npy").string()});
  expect_user_error(args, "no additive_bias");
}

TEST_F(CliErrors, BlockMaskOfTheWrongSize) {
  write_qkv(2, 2, 40, 4);
  io::NpyArray grid;
  grid.dtype = io::NpyDType::U8;
  grid.shape = {2, 2};  // 40 rows / 16 = 3 query blocks are needed
  grid.data.assign(4, std::byte{1});
  io::write_npy(dir_ / "m.npy", grid);
  auto args = run_args("softmax(block_sparse(scaled_dot_product(Q, K))) @ V");
  args.insert(args.end(), {"--block-mask", (dir_ / "m.npy").string(), "--block-size", "16,32"});
  expect_user_error(args, "need 3x2");
}

TEST_F(CliErrors, BadOptionValues) {
  write_qkv(2, 2, 8, 4);
  auto args = run_args(kCausal);
  args.insert(args.end(), {"--dtype", "fp8"});
  expect_user_error(args, "unknown --dtype 'fp8'");
  expect_user_error({"run", kCausal, "--shape", "1,2,2,8,8,4", "--block-size", "0,4", "--check"}, "--block-size");
  expect_user_error({"run", kCausal, "--shape", "1,2,2,8,8,4", "--no-such-flag"}, "no-such-flag");
  expect_user_error({"compile", kCausal, "--emit", "assembly"}, "--emit");
  expect_user_error({}, "subcommand");
  expect_user_error({"run", kCausal, "--shape", "1,2,2,8,8,4", "--q", (dir_ / "q.npy").string()}, "--shape");
  args = run_args(kCausal);
  args.resize(8);  // no --out, no --check
  expect_user_error(args, "--out");
}

TEST_F(CliErrors, CudaWithoutCuda) {
  write_qkv(2, 2, 8, 4);
  auto args = run_args(kCausal);
  args.insert(args.end(), {"--device", "cuda"});
  expect_user_error(args, "CUDA backend not available");
  const CliResult r = run_cli(args, dir_);
  EXPECT_NE(r.err.find("--device cpu"), std::string::npos) << r.err;
  expect_user_error({"bench", kCausal, "--shape", "1,2,2,8,8,4", "--device", "cuda"}, "CUDA backend not available");
}

TEST_F(CliErrors, OutputDirectoryMissing) {
  write_qkv(2, 2, 8, 4);
  auto args = run_args(kCausal);
  args[9] = (dir_ / "no-such-dir" / "o.npy").string();
  expect_user_error(args, "does not exist");
}

}  // namespace
}  // namespace attnfuse::clitest
