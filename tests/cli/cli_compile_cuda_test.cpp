// `attnfuse compile --emit cuda|ptx` works without a GPU: the generated translation unit follows
// the program and --rope-mode, and PTX comes out of NVRTC (where NVRTC is installed).
#include <gtest/gtest.h>

#include "cli_harness.hpp"
#include "runtime/nvrtc.hpp"

namespace attnfuse::clitest {
namespace {

constexpr const char* kRope = "softmax(causal(rope(Q, K, base=500000))) @ V";

TEST(CliCompileCuda, EmitsTheGeneratedSourceForEachRopePlacement) {
  TempDir dir;
  const CliResult fused = run_cli({"compile", kRope, "--emit", "cuda", "--head-dim", "128", "--rope-mode", "fused"}, dir);
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  EXPECT_NE(fused.out.find("kRotate = true"), std::string::npos) << fused.out;
  EXPECT_NE(fused.out.find("using Element = bf16_t"), std::string::npos) << "--emit cuda defaults to bf16";
  EXPECT_EQ(fused.out.find("attnfuse_rope_rotate"), std::string::npos);

  const CliResult pre = run_cli({"compile", kRope, "--emit", "cuda", "--head-dim", "128", "--dtype", "fp16",
                                 "--rope-mode", "prerotate"}, dir);
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  EXPECT_NE(pre.out.find("kRotate = false"), std::string::npos);
  EXPECT_NE(pre.out.find("attnfuse_rope_rotate"), std::string::npos) << "the rotation kernel shares the module";
  EXPECT_NE(pre.out.find("using Element = f16_t"), std::string::npos);

  const CliResult spec = run_cli({"compile", kRope, "--emit", "spec", "--device", "cuda", "--dtype", "bf16",
                                  "--head-dim", "128", "--rope-mode", "prerotate"}, dir);
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_NE(spec.out.find("rope_mode  prerotate"), std::string::npos) << spec.out;
}

TEST(CliCompileCuda, EmitsPtxForAnArchitecture) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  TempDir dir;
  const CliResult r = run_cli({"compile", "softmax(causal(rope_window(Q, K, k=1))) @ V", "--emit", "ptx", "--arch",
                               "sm_80", "--head-dim", "64"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(".target sm_80"), std::string::npos);
  EXPECT_NE(r.out.find("mma.sync.aligned.m16n8k16"), std::string::npos);
  EXPECT_NE(r.out.find("sin.approx"), std::string::npos) << "the fused rotation computes its angles";
}

TEST(CliCompileCuda, UserErrorsExitTwo) {
  TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"compile", kRope, "--emit", "cuda"},  // no head dim
        {"compile", kRope, "--emit", "cuda", "--head-dim", "128", "--rope-mode", "sideways"},
        {"compile", kRope, "--emit", "ptx", "--head-dim", "128", "--arch", "sm_70"}}) {
    const CliResult r = run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_EQ(r.err_lines()[0].rfind("attnfuse: error: ", 0), 0u) << r.err;
  }
}

}  // namespace
}  // namespace attnfuse::clitest
