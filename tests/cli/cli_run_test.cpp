// End-to-end tests of `attnfuse run` / `compile` / `bench`: .npy files written here, the built
// binary run on them, its outputs read back and compared with the in-process float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnfuse/program.hpp"
#include "cli_harness.hpp"
#include "common/dtype.hpp"

namespace attnfuse::clitest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCausal = "softmax(causal(scaled_dot_product(Q, K))) @ V";
constexpr const char* kDense = "softmax(scaled_dot_product(Q, K)) @ V";
constexpr const char* kBias = "softmax(additive_bias(scaled_dot_product(Q, K))) @ V";
constexpr const char* kBlock = "softmax(block_sparse(scaled_dot_product(Q, K))) @ V";

std::vector<uint64_t> seeds() { return {1234, fresh_seed()}; }

Inputs make_inputs(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t D, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in;
  in.q_shape = {B, Hq, Nq, D};
  in.k_shape = {B, Hkv, Nk, D};
  in.v_shape = {B, Hkv, Nk, D};
  in.q = random_normal(static_cast<size_t>(B * Hq * Nq * D), rng);
  in.k = random_normal(static_cast<size_t>(B * Hkv * Nk * D), rng);
  in.v = random_normal(static_cast<size_t>(B * Hkv * Nk * D), rng);
  return in;
}

std::vector<int64_t> vec(const std::array<int64_t, 4>& a) { return {a[0], a[1], a[2], a[3]}; }

// Writes q/k/v.npy into `dir` and returns the run arguments naming them and --out o.npy.
std::vector<std::string> write_inputs(const TempDir& dir, const Inputs& in, const std::string& program) {
  write_f32(dir / "q.npy", vec(in.q_shape), in.q);
  write_f32(dir / "k.npy", vec(in.k_shape), in.k);
  write_f32(dir / "v.npy", vec(in.v_shape), in.v);
  return {"run", program, "--q", (dir / "q.npy").string(), "--k", (dir / "k.npy").string(),
          "--v", (dir / "v.npy").string(), "--out", (dir / "o.npy").string()};
}

std::vector<float> read_f32(const fs::path& p, const std::vector<int64_t>& shape) {
  const io::NpyArray a = read(p);
  EXPECT_EQ(a.dtype, io::NpyDType::F32);
  EXPECT_EQ(a.shape, shape);
  return {a.f32().begin(), a.f32().end()};
}

void write_grid(const fs::path& p, const std::vector<int64_t>& shape, const std::vector<uint8_t>& g,
                io::NpyDType dtype) {
  io::NpyArray a;
  a.dtype = dtype;
  a.shape = shape;
  a.data.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) a.data[i] = static_cast<std::byte>(g[i]);
  io::write_npy(p, a);
}

TEST(CliRun, OutputMatchesReference) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    TempDir dir;
    const Inputs in = make_inputs(2, 4, 2, 33, 47, 16, seed);
    const CliResult r = run_cli(write_inputs(dir, in, kCausal), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote"), std::string::npos) << r.out;
    const auto got = read_f32(dir / "o.npy", {2, 4, 33, 16});
    const Expected want = expected(kCausal, in, DType::F32);
    EXPECT_EQ(tolerance_violation(got, want.out, want.naive_out), "");
  }
}

TEST(CliRun, WritesLseWithMinusInfForFullyMaskedRows) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    TempDir dir;
    Inputs in = make_inputs(1, 2, 1, 12, 20, 8, seed);
    in.q_offset = -3;  // queries 0..2 sit before every key: causal keeps nothing for them
    auto args = write_inputs(dir, in, kCausal);
    args.insert(args.end(), {"--lse", (dir / "l.npy").string(), "--q-offset", "-3"});
    const CliResult r = run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto out = read_f32(dir / "o.npy", {1, 2, 12, 8});
    const auto lse = read_f32(dir / "l.npy", {1, 2, 12});
    const Expected want = expected(kCausal, in, DType::F32);
    EXPECT_EQ(tolerance_violation(out, want.out, want.naive_out), "");
    EXPECT_EQ(tolerance_violation(lse, want.lse, want.naive_lse), "");
    EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0) << lse[0];
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_TRUE(std::isfinite(lse[3])) << lse[3];
  }
}

TEST(CliRun, QOffsetMovesTheCausalDiagonal) {
  TempDir dir;
  Inputs in = make_inputs(1, 2, 2, 16, 16, 8, fresh_seed());
  auto args = write_inputs(dir, in, kCausal);
  ASSERT_EQ(run_cli(args, dir).exit_code, 0);
  const auto aligned = read_f32(dir / "o.npy", {1, 2, 16, 8});
  args.insert(args.end(), {"--q-offset", "5"});
  const CliResult r = run_cli(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto shifted = read_f32(dir / "o.npy", {1, 2, 16, 8});
  in.q_offset = 5;
  const Expected want = expected(kCausal, in, DType::F32);
  EXPECT_EQ(tolerance_violation(shifted, want.out, want.naive_out), "");
  EXPECT_NE(aligned, shifted) << "--q-offset was ignored";
}

TEST(CliRun, RopeTablesFromNpyAreCheckedAgainstTheReference) {
  // Arbitrary (non-rotation) tables: --check passes only if the kernel reads exactly them, as the
  // reference does; a wrong pair count and a lone table are refused with exit 2.
  TempDir dir;
  std::mt19937_64 rng(fresh_seed());
  const auto cos_t = random_normal(40 * 8, rng), sin_t = random_normal(40 * 8, rng);
  write_f32(dir / "cos.npy", {40, 8}, cos_t);
  write_f32(dir / "sin.npy", {40, 8}, sin_t);
  const std::string prog = "softmax(causal(rope(Q, K, style=gptj))) @ V";
  std::vector<std::string> args = {"run", prog, "--shape", "1,2,1,9,33,16", "--device", "cpu", "--check",
                                   "--rope-cos", (dir / "cos.npy").string(), "--rope-sin", (dir / "sin.npy").string()};
  CliResult r = run_cli(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  // The tables must change the result: the same run without them gives other outputs.
  args.push_back("--out");
  args.push_back((dir / "o_tables.npy").string());
  ASSERT_EQ(run_cli(args, dir).exit_code, 0);
  std::vector<std::string> plain(args.begin(), args.begin() + 7);
  plain.insert(plain.end(), {"--out", (dir / "o_plain.npy").string()});
  ASSERT_EQ(run_cli(plain, dir).exit_code, 0);
  EXPECT_NE(read_f32(dir / "o_tables.npy", {1, 2, 9, 16}), read_f32(dir / "o_plain.npy", {1, 2, 9, 16}));

  write_f32(dir / "cos4.npy", {40, 4}, std::vector<float>(160, 1.f));
  write_f32(dir / "sin4.npy", {40, 4}, std::vector<float>(160, 0.f));
  r = run_cli({"run", prog, "--shape", "1,2,1,9,33,16", "--device", "cpu", "--rope-cos",
               (dir / "cos4.npy").string(), "--rope-sin", (dir / "sin4.npy").string()}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pairs"), std::string::npos) << r.err;
  r = run_cli({"run", prog, "--shape", "1,2,1,9,33,16", "--device", "cpu", "--rope-cos", (dir / "cos.npy").string()},
              dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rope-sin"), std::string::npos) << r.err;
}

TEST(CliRun, AdditiveBiasBroadcasts) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    TempDir dir;
    Inputs in = make_inputs(2, 2, 2, 9, 14, 8, seed);
    std::mt19937_64 rng(seed + 1);
    in.bias_shape = std::array<int64_t, 4>{1, 2, 9, 14};  // broadcast over the batch
    in.bias = random_normal(2 * 9 * 14, rng);
    auto args = write_inputs(dir, in, kBias);
    write_f32(dir / "b.npy", {1, 2, 9, 14}, in.bias);
    args.insert(args.end(), {"--bias", (dir / "b.npy").string()});
    const CliResult r = run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Expected want = expected(kBias, in, DType::F32);
    EXPECT_EQ(tolerance_violation(read_f32(dir / "o.npy", {2, 2, 9, 8}), want.out, want.naive_out), "");
  }
}

TEST(CliRun, BlockMaskFromUint8AndBoolGrids) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    TempDir dir;
    Inputs in = make_inputs(2, 2, 1, 40, 70, 8, seed);
    in.block_q = 16;
    in.block_k = 32;  // grid 3 x 3
    in.grid_shape = std::array<int64_t, 4>{1, 1, 3, 3};
    in.grid = {1, 0, 0, 1, 1, 0, 0, 1, 1};
    auto args = write_inputs(dir, in, kBlock);
    write_grid(dir / "m.npy", {3, 3}, in.grid, io::NpyDType::U8);
    auto with_u8 = args;
    with_u8.insert(with_u8.end(), {"--block-mask", (dir / "m.npy").string(), "--block-size", "16,32"});
    CliResult r = run_cli(with_u8, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Expected want = expected(kBlock, in, DType::F32);
    EXPECT_EQ(tolerance_violation(read_f32(dir / "o.npy", {2, 2, 40, 8}), want.out, want.naive_out), "");

    // Per-batch bool grid [B, 1, nQ, nK].
    in.grid_shape = std::array<int64_t, 4>{2, 1, 3, 3};
    in.grid = {1, 0, 0, 1, 1, 0, 0, 1, 1, /* batch 1 */ 0, 0, 1, 1, 0, 1, 1, 1, 1};
    write_grid(dir / "m4.npy", {2, 1, 3, 3}, in.grid, io::NpyDType::Bool);
    args.insert(args.end(), {"--block-mask", (dir / "m4.npy").string(), "--block-size", "16,32"});
    r = run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    want = expected(kBlock, in, DType::F32);
    EXPECT_EQ(tolerance_violation(read_f32(dir / "o.npy", {2, 2, 40, 8}), want.out, want.naive_out), "");
  }
}

TEST(CliRun, Bf16RoundsInputsAndComputesInBf16) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    TempDir dir;
    const Inputs in = make_inputs(1, 4, 2, 21, 30, 32, seed);
    auto args = write_inputs(dir, in, kCausal);
    ASSERT_EQ(run_cli(args, dir).exit_code, 0);
    const auto fp32 = read_f32(dir / "o.npy", {1, 4, 21, 32});
    args.insert(args.end(), {"--dtype", "bf16"});
    const CliResult r = run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto bf16 = read_f32(dir / "o.npy", {1, 4, 21, 32});
    const Expected want = expected(kCausal, in, DType::BF16);
    EXPECT_EQ(tolerance_violation(bf16, want.out, want.naive_out), "");
    double diff = 0.0;
    for (size_t i = 0; i < bf16.size(); ++i) {
      ASSERT_EQ(round_to(DType::BF16, bf16[i]), bf16[i]) << "element " << i << " is not a bf16 value";
      diff = std::max(diff, std::abs(double(bf16[i]) - fp32[i]));
    }
    EXPECT_GT(diff, 1e-4) << "bf16 output identical to fp32: inputs were not rounded";
  }
}

TEST(CliRun, ProgramFromFileInStatementForm) {
  TempDir dir;
  const Inputs in = make_inputs(1, 2, 2, 10, 10, 8, fresh_seed());
  {
    std::ofstream f(dir / "prog.attn");
    f << "s = scaled_dot_product(Q, K)\ns = causal(s)\nreturn softmax(s) @ V\n";
  }
  auto args = write_inputs(dir, in, std::string("@").append((dir / "prog.attn").string()));
  const CliResult r = run_cli(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Expected want = expected(kCausal, in, DType::F32);
  EXPECT_EQ(tolerance_violation(read_f32(dir / "o.npy", {1, 2, 10, 8}), want.out, want.naive_out), "");
}

TEST(CliCompile, EmitsWhatTheLibraryPrints) {
  TempDir dir;
  const Program p = Program::parse(kCausal);
  auto with_newline = [](std::string s) { return s.empty() || s.back() == '\n' ? s : s + "\n"; };

  CliResult r = run_cli({"compile", kCausal, "--emit", "ir"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, with_newline(p.canonical()));

  r = run_cli({"compile", kCausal, "--emit", "passes"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string trace;
  p.compile(CompileOptions{}, &trace);
  EXPECT_EQ(r.out, with_newline(trace));
  EXPECT_FALSE(trace.empty());

  r = run_cli({"compile", kCausal, "--emit", "spec", "--dtype", "bf16"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, with_newline(to_string(p.compile(CompileOptions{Target::Cpu, DType::BF16, 0}))));

  // Compiling for CUDA needs no GPU: it prints the CUDA target's spec.
  r = run_cli({"compile", kCausal, "--emit", "spec", "--device", "cuda", "--head-dim", "64"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, with_newline(to_string(p.compile(CompileOptions{Target::Cuda, DType::F32, 64}))));
}

TEST(CliRun, ShapeCheckPasses) {
  TempDir dir;
  const std::string seed = std::to_string(fresh_seed() % 1000000);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kCausal, "fp32"}, {kBias, "fp32"}, {kBlock, "fp32"}, {kDense, "bf16"}, {kCausal, "fp16"}};
  for (const auto& [program, dtype] : cases) {
    SCOPED_TRACE(program + " " + dtype + " seed " + seed);
    const CliResult r = run_cli({"run", program, "--shape", "2,4,2,37,70,32", "--seed", seed, "--dtype",
                                 dtype, "--check", "--block-size", "16,32"}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("max abs err"), std::string::npos) << r.out;
  }
}

TEST(CliBench, ValidatesTimesAndWritesJson) {
  TempDir dir;
  const CliResult r = run_cli({"bench", kCausal, "--shape", "1,2,1,64,64,16", "--reps", "3", "--threads",
                               "1", "--json", (dir / "b.json").string()}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos) << r.out;
  std::ifstream f(dir / "b.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  // Causal, Nq = Nk = 64: row i keeps i + 1 keys, 64*65/2 of 64*64 cells.
  EXPECT_DOUBLE_EQ(j["density"].get<double>(), 2080.0 / 4096.0);
  EXPECT_DOUBLE_EQ(j["flops"].get<double>(), 2.0 * 2 * 32 * 2080);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_TRUE(j["check"]["fused"]["pass"].get<bool>());
  ASSERT_FALSE(j["variants"].empty());
  const auto& fused = j["variants"].back();
  EXPECT_EQ(fused["name"], "fused");
  EXPECT_EQ(fused["reps"], 3);
  EXPECT_GT(fused["median_ms"].get<double>(), 0.0);
  EXPECT_GT(fused["gflops"].get<double>(), 0.0);

  // --no-check: timed without validation, and the JSON says so.
  const CliResult nc = run_cli({"bench", kCausal, "--shape", "1,2,1,64,64,16", "--reps", "1", "--no-check",
                                "--json", (dir / "n.json").string()}, dir);
  ASSERT_EQ(nc.exit_code, 0) << nc.out << nc.err;
  std::ifstream fn(dir / "n.json");
  EXPECT_EQ(nlohmann::json::parse(fn)["check"], "skipped: --no-check");
}

TEST(CliBench, CountsKeptCellsOfComposedMasksExactly) {
  // Causal + sliding window + block mask on files, Nq != Nk (bottom-right aligned): the bench's
  // closed-form count must equal a brute-force count over every cell.
  TempDir dir;
  const char* program = "softmax(block_sparse(sliding_window(causal(scaled_dot_product(Q, K)), 9))) @ V";
  const int64_t Nq = 40, Nk = 70, bq = 16, bk = 32, w = 9, H = 2;
  Inputs in = make_inputs(1, H, 1, Nq, Nk, 8, fresh_seed());
  auto args = write_inputs(dir, in, program);
  args.resize(8);
  args[0] = "bench";
  const std::vector<uint8_t> grid = {1, 0, 1, 0, 1, 1, 1, 1, 0};  // 3 x 3 blocks
  write_grid(dir / "m.npy", {3, 3}, grid, io::NpyDType::U8);
  args.insert(args.end(), {"--block-mask", (dir / "m.npy").string(), "--block-size", "16,32", "--reps", "1",
                           "--json", (dir / "b.json").string()});
  const CliResult r = run_cli(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream f(dir / "b.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  int64_t kept = 0;
  for (int64_t i = 0; i < Nq; ++i)
    for (int64_t jj = 0; jj < Nk; ++jj) {
      const int64_t delta = i + (Nk - Nq) - jj;
      kept += delta >= 0 && std::abs(delta) < w && grid[static_cast<size_t>((i / bq) * 3 + jj / bk)];
    }
  ASSERT_GT(kept, 0);
  EXPECT_DOUBLE_EQ(j["density"].get<double>(), static_cast<double>(kept) / (Nq * Nk));
  EXPECT_DOUBLE_EQ(j["flops"].get<double>(), 4.0 * 8 * H * kept);
  EXPECT_TRUE(j["check"]["fused"]["pass"].get<bool>());
}

TEST(CliBench, AblateTimesTheDecompositionVariants) {
  TempDir dir;
  const CliResult r = run_cli({"bench", kCausal, "--shape", "1,2,2,48,48,16", "--reps", "2", "--ablate",
                               "--json", (dir / "b.json").string()}, dir);
#if __has_include("cpu/unfused.hpp")
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream f(dir / "b.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["variants"].size(), 3u);
  EXPECT_EQ(j["variants"][0]["name"], "unfused");
  EXPECT_EQ(j["variants"][1]["name"], "scores_softmax_fused");
  EXPECT_EQ(j["variants"][2]["name"], "fused");
  for (const char* v : {"unfused", "scores_softmax_fused", "fused"}) EXPECT_TRUE(j["check"][v]["pass"].get<bool>()) << v;
#else
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--ablate is not available"), std::string::npos) << r.err;
#endif
}

}  // namespace
}  // namespace attnfuse::clitest
