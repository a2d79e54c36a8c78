// `attnfuse run` with document masks: cu_seqlens from .npy files (int32 and int64) checked
// against the in-process float64 reference, random document splits with --shape, and the
// errors (missing offsets, bad offsets) exiting 2 before anything is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "cli_harness.hpp"

namespace attnfuse::clitest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDocCausal = "softmax(alibi(document(causal(scaled_dot_product(Q, K))))) @ V";

// Inputs [1, 4, Nq | Nk, 16] with GQA 2 and the documents' offsets, written into `dir`; returns
// the run arguments (o.npy, l.npy as outputs).
std::vector<std::string> setup(const TempDir& dir, Inputs& in, io::NpyDType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t Nq = in.cu_seqlens_q.back(), Nk = in.cu_seqlens_k.back();
  in.q_shape = {1, 4, Nq, 16};
  in.k_shape = in.v_shape = {1, 2, Nk, 16};
  in.q = random_normal(static_cast<size_t>(4 * Nq * 16), rng);
  in.k = random_normal(static_cast<size_t>(2 * Nk * 16), rng);
  in.v = random_normal(static_cast<size_t>(2 * Nk * 16), rng);
  write_f32(dir / "q.npy", {1, 4, Nq, 16}, in.q);
  write_f32(dir / "k.npy", {1, 2, Nk, 16}, in.k);
  write_f32(dir / "v.npy", {1, 2, Nk, 16}, in.v);
  write_ints(dir / "cq.npy", in.cu_seqlens_q, dtype);
  write_ints(dir / "ck.npy", in.cu_seqlens_k, dtype);
  return {"run", kDocCausal, "--q", (dir / "q.npy").string(), "--k", (dir / "k.npy").string(),
          "--v", (dir / "v.npy").string(), "--cu-seqlens-q", (dir / "cq.npy").string(),
          "--cu-seqlens-k", (dir / "ck.npy").string(), "--out", (dir / "o.npy").string(),
          "--lse", (dir / "l.npy").string(), "--device", "cpu"};
}

TEST(CliDocument, OffsetFilesMatchTheReference) {
  for (io::NpyDType dtype : {io::NpyDType::I32, io::NpyDType::I64}) {
    SCOPED_TRACE(io::npy_dtype_name(dtype));
    TempDir dir;
    Inputs in;
    in.cu_seqlens_q = {0, 1, 40, 40, 71};  // Nq != Nk per document, an empty query document
    in.cu_seqlens_k = {0, 30, 35, 50, 90};
    const CliResult r = run_cli(setup(dir, in, dtype, 21), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("4 documents (bottom-right each)"), std::string::npos) << r.out;
    const io::NpyArray o = read(dir / "o.npy"), l = read(dir / "l.npy");
    const Expected want = expected(kDocCausal, in, DType::F32);
    EXPECT_EQ(tolerance_violation({o.f32().begin(), o.f32().end()}, want.out, want.naive_out), "");
    EXPECT_EQ(tolerance_violation({l.f32().begin(), l.f32().end()}, want.lse, want.naive_lse), "");
  }
}

TEST(CliDocument, RandomShapeDrawsDocumentsFromTheSeed) {
  TempDir dir;
  const std::vector<std::string> args = {"run", kDocCausal, "--shape", "2,4,2,150,150,32", "--seed", "5",
                                         "--check", "--device", "cpu"};
  const CliResult r = run_cli(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("documents (bottom-right each)"), std::string::npos) << r.out;
  // The same seed draws the same documents; Nq != Nk draws a split of each.
  EXPECT_EQ(run_cli(args, dir).out.substr(0, 200), r.out.substr(0, 200));
  const CliResult cross = run_cli({"run", kDocCausal, "--shape", "1,2,1,70,133,32", "--seed", "9", "--check",
                                   "--dtype", "bf16", "--device", "cpu"},
                                  dir);
  EXPECT_EQ(cross.exit_code, 0) << cross.out << cross.err;
}

TEST(CliDocument, HelpDescribesTheOffsets) {
  TempDir dir;
  const CliResult r = run_cli({"run", "--help"}, dir);
  EXPECT_NE(r.out.find("--cu-seqlens-q"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("random documents from --seed"), std::string::npos) << r.out;
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
  EXPECT_FALSE(fs::exists(dir / "l.npy"));
}

TEST(CliDocument, ErrorsBeforeWriting) {
  TempDir dir;
  Inputs in;
  in.cu_seqlens_q = in.cu_seqlens_k = {0, 10, 24};
  const std::vector<std::string> args = setup(dir, in, io::NpyDType::I64, 3);
  // Missing --cu-seqlens-k: drop the flag and its file.
  std::vector<std::string> missing = args;
  const auto at = std::find(missing.begin(), missing.end(), "--cu-seqlens-k");
  missing.erase(at, at + 2);
  expect_user_error(dir, missing, "no --cu-seqlens-k was given");
  write_ints(dir / "ck.npy", {0, 12, 10, 24}, io::NpyDType::I64);
  write_ints(dir / "cq.npy", {0, 3, 5, 24}, io::NpyDType::I64);
  expect_user_error(dir, args, "cu_seqlens_k must be non-decreasing");
  write_ints(dir / "ck.npy", {0, 3, 5, 23}, io::NpyDType::I64);
  expect_user_error(dir, args, "cu_seqlens_k must end at Nk = 24 but its last entry is 23");
  write_f32(dir / "ck.npy", {3}, {0, 5, 24});
  expect_user_error(dir, args, "--cu-seqlens-k must be int32 or int64, got float32");
}

}  // namespace
}  // namespace attnfuse::clitest
