// The CPU kernel's instruction-set levels (cpu/isa.hpp): the choice between them, the
// ATTNFUSE_CPU_ISA request, and every level this machine runs against the float64 reference and
// against each other. (ctest also runs the whole of test_cpu once per lower level:
// tests/CMakeLists.txt.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"
#include "cpu/isa.hpp"

namespace attnfuse::test {
namespace {

using cpu::CpuIsa;
using MK = MaskKind;
using MD = ModifierKind;

const std::vector<CpuIsa> kAll = {CpuIsa::Avx512, CpuIsa::Avx2, CpuIsa::Baseline};
const std::vector<CpuIsa> kBaselineOnly = {CpuIsa::Baseline};

bool up_to_avx2(CpuIsa l) { return l != CpuIsa::Avx512; }
bool everything(CpuIsa) { return true; }
bool nothing(CpuIsa) { return false; }

// The message of the Error(Unsupported) that choose_isa throws, or "" when it does not throw.
std::string refusal(const char* request, const std::vector<CpuIsa>& compiled, bool (*supported)(CpuIsa)) {
  try {
    cpu::choose_isa(request, compiled, supported);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    return e.what();
  }
  return "";
}

TEST(CpuIsa, NamesRoundTrip) {
  for (CpuIsa l : kAll) EXPECT_EQ(cpu::parse_isa(cpu::isa_name(l)), l);
  EXPECT_EQ(cpu::parse_isa("sse2"), std::nullopt);
  EXPECT_EQ(cpu::parse_isa("AVX2"), std::nullopt);  // names are exact
  EXPECT_EQ(cpu::parse_isa(""), std::nullopt);
}

TEST(CpuIsa, TheBestSupportedLevelIsChosen) {
  EXPECT_EQ(cpu::choose_isa(nullptr, kAll, &everything), CpuIsa::Avx512);
  EXPECT_EQ(cpu::choose_isa(nullptr, kAll, &up_to_avx2), CpuIsa::Avx2);
  EXPECT_EQ(cpu::choose_isa("", kAll, &up_to_avx2), CpuIsa::Avx2);  // set but empty: no request
  EXPECT_EQ(cpu::choose_isa(nullptr, kAll, &nothing), CpuIsa::Baseline);
  EXPECT_EQ(cpu::choose_isa(nullptr, kBaselineOnly, &everything), CpuIsa::Baseline);
}

TEST(CpuIsa, ARequestIsHonouredOrRefusedWithItsReason) {
  EXPECT_EQ(cpu::choose_isa("baseline", kAll, &everything), CpuIsa::Baseline);
  EXPECT_EQ(cpu::choose_isa("avx2", kAll, &up_to_avx2), CpuIsa::Avx2);
  EXPECT_NE(refusal("avx512", kAll, &up_to_avx2).find("avx512 is not supported by this CPU"), std::string::npos);
  EXPECT_NE(refusal("avx2", kBaselineOnly, &everything).find("for baseline only"), std::string::npos);
  const std::string unknown = refusal("fastest", kAll, &everything);
  EXPECT_NE(unknown.find("ATTNFUSE_CPU_ISA='fastest'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("avx512, avx2, baseline"), std::string::npos) << unknown;
}

TEST(CpuIsa, ThisBuildHasEveryLevelOfItsArchitecture) {
  std::vector<CpuIsa> built;
  for (const cpu::IsaKernels* k : cpu::compiled_isas()) built.push_back(k->isa);
#if defined(__x86_64__)
  EXPECT_EQ(built, kAll);
#else
  EXPECT_EQ(built, std::vector<CpuIsa>{CpuIsa::Baseline});
#endif
  EXPECT_TRUE(cpu::cpu_supports(CpuIsa::Baseline));
}

TEST(CpuIsa, TheProcessRunsTheRequestedOrBestLevel) {
  const char* env = std::getenv("ATTNFUSE_CPU_ISA");
  std::string want;
  if (env && *env) {
    want = env;
  } else {
    for (const cpu::IsaKernels* k : cpu::compiled_isas())
      if (cpu::cpu_supports(k->isa)) {
        want = cpu::isa_name(k->isa);
        break;
      }
  }
  EXPECT_EQ(std::string(cpu_kernel_isa()), want);
}

// One call's inputs and spec; each level writes its own output.
struct LevelCase {
  KernelSpec spec;
  Shape shape;
  CaseOptions options;
  int block_q = 0;  // block-sparse blocks
};

std::vector<LevelCase> level_cases() {
  std::vector<LevelCase> cases;
  ScalarArgs s;
  s.window = 37;
  s.softcap = 4.0;
  auto add = [&](KernelSpec spec, Shape shape, DType t, std::optional<int64_t> q_offset = std::nullopt) {
    CaseOptions o;
    o.dtype = t;
    o.bias = spec.needs_bias();
    o.q_offset = q_offset;
    cases.push_back({spec, shape, o, spec.needs_block_mask() ? 32 : 0});
  };
  // Odd lengths and dims that leave every micro-kernel block partial: one query row past a
  // multiple of 16, Dv not a multiple of the widest block.
  add(make_spec({MK::Causal}, {MD::Alibi, MD::Softcap}, NormKind::Softmax, s), {2, 4, 2, 97, 131, 80, 48},
      DType::F32);
  add(make_spec({MK::SlidingWindow}, {MD::AdditiveBias}, NormKind::Softmax, s), {1, 6, 3, 65, 200, 128}, DType::BF16);
  add(make_spec({MK::BlockSparse, MK::Causal}, {}), {1, 2, 1, 130, 130, 64}, DType::F16);
  add(make_spec({}, {MD::Softcap}, NormKind::ReluAttention, s), {1, 3, 1, 33, 257, 40}, DType::F32);
  add(make_spec({MK::Causal}, {}), {1, 8, 2, 1, 1000, 128}, DType::BF16, 999);  // decode, Nq = 1
  KernelSpec rope = make_spec({MK::Causal}, {});
  rope.score = ScoreKind::Rope;
  rope.scalars.rope.base = 10000.0;
  add(rope, {1, 4, 1, 70, 70, 64}, DType::F32);
  KernelSpec window = rope;
  window.score = ScoreKind::RopeWindow;
  window.scalars.rope.base = 100.0;
  window.scalars.rope.window_k = 1.0;
  add(window, {1, 2, 2, 150, 150, 96}, DType::F32);
  return cases;
}

// Every level this CPU runs, on every case: each against the float64 reference (DESIGN §3), and
// each level's output within a few fp32 rounding steps of the best level's (they differ only by
// where a multiply-add is fused and in the order of nothing else).
TEST(CpuIsa, EveryLevelThisCpuRunsMatchesTheReference) {
  const CpuIsa active = cpu::active_kernels().isa;
  std::vector<CpuIsa> levels;
  for (const cpu::IsaKernels* k : cpu::compiled_isas())
    if (cpu::cpu_supports(k->isa)) levels.push_back(k->isa);
  ASSERT_FALSE(levels.empty());
  std::printf("levels run here:");
  for (CpuIsa l : levels) std::printf(" %s", cpu::isa_name(l));
  std::printf("\n");

  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const LevelCase& lc : level_cases()) {
    SCOPED_TRACE(describe(lc.spec));
    AttentionCase c(lc.shape, lc.options, seed);
    if (lc.block_q) c.set_block_mask(random_block_mask(lc.shape, lc.block_q, 48, seed));
    std::vector<float> first;
    for (CpuIsa l : levels) {
      SCOPED_TRACE(cpu::isa_name(l));
      cpu::use_isa(l);
      c.poison_outputs();
      run_cpu(lc.spec, c.args());
      expect_matches_reference(lc.spec, c.args());
      std::vector<float> out;
      const Shape& sh = c.shape;
      const int64_t dv = sh.Dv < 0 ? sh.D : sh.Dv;
      for (int64_t b = 0; b < sh.B; ++b)
        for (int64_t h = 0; h < sh.Hq; ++h)
          for (int64_t i = 0; i < sh.Nq; ++i)
            for (int64_t x = 0; x < dv; ++x) out.push_back(c.out.get(b, h, i, x));
      if (first.empty()) {
        first = out;
        continue;
      }
      double worst = 0.0, largest = 1.0;
      for (size_t e = 0; e < out.size(); ++e) {
        worst = std::max(worst, std::abs(double(out[e]) - first[e]));
        largest = std::max(largest, std::abs(double(first[e])));
      }
      // fp32 differences stay near 1e-6 of the output's scale; a 16-bit output differs by at
      // most one rounding step of its type (bf16: 2^-8 relative).
      const double bound = (lc.options.dtype == DType::F32 ? 1e-5 : 1.0 / 128) * largest;
      EXPECT_LE(worst, bound);
    }
  }
  cpu::use_isa(active);
}

}  // namespace
}  // namespace attnfuse::test
