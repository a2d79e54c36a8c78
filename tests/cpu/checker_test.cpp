// The tolerance checker of tests/common can fail: a corrupted, NaN, unwritten or slightly-off
// output element is caught (so a passing CPU test means something).
#include <gtest/gtest.h>

#include <limits>

#include "attnfuse/attention.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

class Checker : public ::testing::Test {
 protected:
  void SetUp() override { run_cpu(spec, c.args()); }
  KernelSpec spec = make_spec({MaskKind::Causal}, {});
  AttentionCase c{{1, 2, 1, 40, 40, 32}, {}, 99};
  ::testing::AssertionResult check() {
    return matches_reference(spec, c.args(), c.out.view(), &*c.lse ? &c.lse->view() : nullptr);
  }
};

TEST_F(Checker, PassesTheKernel) { EXPECT_TRUE(check()); }

TEST_F(Checker, CatchesAnErrorAboveTheFp32Bound) {
  c.out.set(0, 1, 20, 3, c.out.get(0, 1, 20, 3) + 3e-5f);
  const auto r = check();
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("O[0,1,20,3]"), std::string::npos) << r.message();
}

TEST_F(Checker, CatchesNaN) {
  c.out.set(0, 0, 5, 0, std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(check());
}

TEST_F(Checker, CatchesUnwrittenElements) {
  c.poison_outputs();
  const auto r = check();
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("never written"), std::string::npos) << r.message();
}

TEST_F(Checker, CatchesAWrongLse) {
  c.lse->poison();
  EXPECT_FALSE(check());
}

TEST_F(Checker, Bf16BoundFollowsTheNaiveError) {
  CaseOptions opt;
  opt.dtype = DType::BF16;
  AttentionCase b({1, 1, 1, 30, 30, 32}, opt, 5);
  run_cpu(spec, b.args());
  EXPECT_TRUE(matches_reference(spec, b.args(), b.out.view()));
  b.out.set(0, 0, 10, 10, b.out.get(0, 0, 10, 10) + 0.25f);  // far beyond bf16 rounding
  EXPECT_FALSE(matches_reference(spec, b.args(), b.out.view()));
}

}  // namespace
}  // namespace attnfuse::test
