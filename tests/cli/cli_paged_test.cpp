// `attnfuse run` with a paged KV cache: page tensors and page table from .npy files (NHD and HND,
// int32 and int64 tables) checked against the in-process float64 reference, random --shape
// inputs stored in shuffled pages with --page-size, and the errors exiting 2 before anything is
// written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cli_harness.hpp"

namespace attnfuse::clitest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProgram = "softmax(alibi(causal(rope(Q, K)))) @ V";

// Q [3, 4, 2, 16] and a cache of 6 pages of 4 rows, 2 KV heads: sequence 0 holds pages 3, 0
// (7 keys), sequence 1 page 5 (4 keys), sequence 2 nothing (its rows give O = 0, LSE = -inf).
std::vector<std::string> setup(const TempDir& dir, const std::string& layout, io::NpyDType dtype) {
  std::mt19937_64 rng(11);
  write_f32(dir / "q.npy", {3, 4, 2, 16}, random_normal(3 * 4 * 2 * 16, rng));
  const std::vector<int64_t> pages = layout == "nhd" ? std::vector<int64_t>{6, 4, 2, 16}
                                                     : std::vector<int64_t>{6, 2, 4, 16};
  write_f32(dir / "kp.npy", pages, random_normal(6 * 4 * 2 * 16, rng));
  write_f32(dir / "vp.npy", pages, random_normal(6 * 4 * 2 * 16, rng));
  write_ints(dir / "pi.npy", {3, 0, 5}, dtype);
  write_ints(dir / "pp.npy", {0, 2, 3, 3}, dtype);
  write_ints(dir / "pl.npy", {3, 4, 1}, dtype);
  return {"run", kProgram, "--q", (dir / "q.npy").string(), "--k-pages", (dir / "kp.npy").string(),
          "--v-pages", (dir / "vp.npy").string(), "--page-indices", (dir / "pi.npy").string(),
          "--page-indptr", (dir / "pp.npy").string(), "--last-page-len", (dir / "pl.npy").string(),
          "--kv-layout", layout, "--out", (dir / "o.npy").string(), "--check", "--device", "cpu"};
}

TEST(CliPaged, PageFilesMatchTheReference) {
  for (const std::string layout : {"nhd", "hnd"})
    for (io::NpyDType dtype : {io::NpyDType::I32, io::NpyDType::I64}) {
      SCOPED_TRACE(layout + " " + io::npy_dtype_name(dtype));
      TempDir dir;
      const CliResult r = run_cli(setup(dir, layout, dtype), dir);
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("paged KV (6 pages of 4"), std::string::npos) << r.out;
      const io::NpyArray o = read(dir / "o.npy");
      EXPECT_EQ(o.shape, (std::vector<int64_t>{3, 4, 2, 16}));
      EXPECT_EQ(o.f32()[2 * 4 * 2 * 16], 0.0f);  // sequence 2 has no keys
    }
}

TEST(CliPaged, RandomShapeWithPageSize) {
  TempDir dir;
  for (const char* dtype : {"fp32", "bf16"}) {
    const CliResult r = run_cli({"run", kProgram, "--shape", "2,4,2,3,150,32", "--page-size", "16", "--seed", "3",
                                 "--check", "--dtype", dtype, "--device", "cpu"},
                                dir);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("of 16, NHD"), std::string::npos) << r.out;
  }
  // --paged-table-settled: the same bits on the CPU (it only moves when a CUDA call reads the table).
  const CliResult plain = run_cli({"run", kProgram, "--shape", "2,4,2,3,150,32", "--page-size", "16", "--seed", "3",
                                   "--device", "cpu", "--out", (dir / "plain.npy").string()},
                                  dir);
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  const CliResult settled = run_cli({"run", kProgram, "--shape", "2,4,2,3,150,32", "--page-size", "16", "--seed", "3",
                                     "--device", "cpu", "--paged-table-settled", "--check", "--out", (dir / "settled.npy").string()},
                                    dir);
  ASSERT_EQ(settled.exit_code, 0) << settled.out << settled.err;
  EXPECT_NE(settled.out.find("PASS"), std::string::npos) << settled.out;
  const io::NpyArray a = read(dir / "plain.npy"), b = read(dir / "settled.npy");
  EXPECT_TRUE(std::ranges::equal(a.f32(), b.f32()));
  const CliResult help = run_cli({"run", "--help"}, dir);
  EXPECT_NE(help.out.find("--page-size"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--paged-table-settled"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--k-pages"), std::string::npos) << help.out;
}

// Exit 2 with one "attnfuse: error:" line holding `needle`, and no output file.
void expect_user_error(const TempDir& dir, const std::vector<std::string>& args, const std::string& needle) {
  const CliResult r = run_cli(args, dir);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("attnfuse: error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(needle), std::string::npos) << "want '" << needle << "' in: " << lines[0];
  EXPECT_FALSE(fs::exists(dir / "o.npy"));
}

TEST(CliPaged, ErrorsBeforeWriting) {
  TempDir dir;
  const std::vector<std::string> args = setup(dir, "nhd", io::NpyDType::I32);
  write_ints(dir / "pi.npy", {3, 0, 6}, io::NpyDType::I32);
  expect_user_error(dir, args, "page_indices[2] = 6 is out of range");
  write_ints(dir / "pi.npy", {3, 0, 5}, io::NpyDType::I32);
  write_ints(dir / "pp.npy", {0, 2, 1, 3}, io::NpyDType::I32);
  expect_user_error(dir, args, "page_indptr decreases at entry 2");
  // The extremes of int32: the CLI sizes its outputs before validate() sees the table, and once
  // formed 5 - INT32_MIN in 32 bits there (undefined behaviour; `make sanitize` fails on it).
  write_ints(dir / "pp.npy", {0, -2147483648, 3, 3}, io::NpyDType::I32);
  expect_user_error(dir, args, "page_indptr decreases at entry 1");
  write_ints(dir / "pp.npy", {0, 2147483647, 3, 3}, io::NpyDType::I32);
  expect_user_error(dir, args, "page_indptr");
  write_ints(dir / "pp.npy", {0, 2, 3, 3}, io::NpyDType::I32);
  write_ints(dir / "pl.npy", {3, -2147483648, 1}, io::NpyDType::I32);
  expect_user_error(dir, args, "last_page_len[1] = -2147483648 must be in [1, page_size = 4]");
  write_ints(dir / "pl.npy", {3, 5, 1}, io::NpyDType::I32);
  expect_user_error(dir, args, "last_page_len[1] = 5 must be in [1, page_size = 4]");
  write_ints(dir / "pl.npy", {3, 4, 1}, io::NpyDType::I32);
  std::vector<std::string> missing = args;
  const auto at = std::find(missing.begin(), missing.end(), "--page-indptr");
  missing.erase(at, at + 2);
  expect_user_error(dir, missing, "--page-indptr is missing");
  std::vector<std::string> layout = args;
  *(std::find(layout.begin(), layout.end(), "nhd")) = "bshd";
  expect_user_error(dir, layout, "--kv-layout must be nhd or hnd");
  std::vector<std::string> bias = args;
  bias[1] = "softmax(additive_bias(causal(scaled_dot_product(Q, K)))) @ V";
  expect_user_error(dir, bias, "additive_bias needs one key axis shared by the batch");
  expect_user_error(dir, {"run", kProgram, "--shape", "1,2,2,3,40,16", "--paged-table-settled", "--device", "cpu"},
                    "--paged-table-settled needs a paged cache");
}

}  // namespace
}  // namespace attnfuse::clitest
