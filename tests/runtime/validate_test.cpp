// attnfuse::validate: every bad call is one typed Error with one exact, actionable message, raised
// before any kernel runs (run_cpu leaves the outputs untouched).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

// Runs run_cpu on a mutated call and checks the error code, the exact message, and that neither
// out nor lse changed.
void expect_error(const KernelSpec& spec, AttentionCase& c, const std::function<void(AttentionArgs&)>& mutate,
                  ErrorCode code, const std::string& message) {
  AttentionArgs args = c.args();
  mutate(args);
  const auto out_before = c.out.storage();
  try {
    run_cpu(spec, args);
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << error_code_name(e.code()) << ": " << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  }
  EXPECT_EQ(c.out.storage(), out_before) << "the output was written";
  for (int64_t i = 0; i < c.shape.Nq; ++i) EXPECT_TRUE(c.lse->is_poison(0, 0, i));
  // validate() alone says the same.
  try {
    validate(spec, args);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

class Validate : public ::testing::Test {
 protected:
  KernelSpec plain = make_spec({MK::Causal}, {});
  AttentionCase c{{2, 4, 2, 16, 24, 32, 8}, {}, 1};  // Q [2,4,16,32], K [2,2,24,32], V [2,2,24,8]
};

TEST_F(Validate, AcceptsAGoodCall) { EXPECT_NO_THROW(validate(plain, c.args())); }

TEST_F(Validate, RopeIsAcceptedAndItsParametersChecked) {
  KernelSpec spec = plain;
  spec.score = ScoreKind::Rope;
  EXPECT_NO_THROW(validate(spec, c.args()));
  spec.scalars.rope.rotary_dim = 16;
  EXPECT_NO_THROW(validate(spec, c.args()));
  spec.scalars.rope.rotary_dim = 3;
  expect_error(spec, c, [](AttentionArgs&) {}, ErrorCode::Verify,
               "RoPE parameters: rotary_dim = 3 must be even, positive and at most head_dim = 32 "
               "(RoPE rotates the first rotary_dim dimensions in pairs)");
  spec.scalars.rope.rotary_dim = 64;
  expect_error(spec, c, [](AttentionArgs&) {}, ErrorCode::Verify,
               "RoPE parameters: rotary_dim = 64 must be even, positive and at most head_dim = 32 "
               "(RoPE rotates the first rotary_dim dimensions in pairs)");
  spec.scalars.rope.rotary_dim = 0;
  spec.score = ScoreKind::RopeWindow;
  expect_error(spec, c, [](AttentionArgs&) {}, ErrorCode::Verify,
               "rope_window's k must be positive (got 0): pair r keeps the cells with |delta| <= "
               "k * wavelength_r");
  spec.scalars.rope.window_k = 1.0;
  EXPECT_NO_THROW(validate(spec, c.args()));
}

TEST_F(Validate, NegativeDimension) {
  expect_error(plain, c, [](AttentionArgs& a) { a.k.shape[2] = -1; }, ErrorCode::Shape,
               "K has a negative dimension: [2, 2, -1, 32]");
}

TEST_F(Validate, LastDimensionMustBeContiguous) {
  expect_error(plain, c, [](AttentionArgs& a) { a.v.strides[3] = 2; }, ErrorCode::Shape,
               "V's last dimension must be contiguous (stride 1) but has stride 2; make it contiguous first");
}

TEST_F(Validate, NullData) {
  expect_error(plain, c, [](AttentionArgs& a) { a.q.data = nullptr; }, ErrorCode::MissingTensor,
               "Q [2, 4, 16, 32] has 4096 elements but no data pointer");
}

TEST_F(Validate, EmptyTensorsNeedNoData) {
  AttentionCase e({0, 4, 2, 16, 24, 32}, {}, 2);
  AttentionArgs a = e.args();
  a.q.data = a.k.data = a.v.data = a.out.data = nullptr;
  a.lse->data = nullptr;
  EXPECT_NO_THROW(run_cpu(plain, a));
}

TEST_F(Validate, MixedDtypes) {
  HostTensor k16(DType::BF16, {2, 2, 24, 32});
  expect_error(plain, c, [&](AttentionArgs& a) { a.k = k16.view(); }, ErrorCode::DType,
               "K is bf16 but Q is fp32: Q, K, V and out must share one dtype");
  HostTensor o16(DType::F16, {2, 4, 16, 8});
  expect_error(plain, c, [&](AttentionArgs& a) { a.out = o16.view(); }, ErrorCode::DType,
               "out is fp16 but Q is fp32: Q, K, V and out must share one dtype");
}

TEST_F(Validate, CudaSpecDtypeMustMatch) {
  KernelSpec spec = plain;
  spec.target = Target::Cuda;
  spec.dtype = DType::BF16;
  expect_error(spec, c, [](AttentionArgs&) {}, ErrorCode::DType,
               "the kernel was compiled for bf16 but the tensors are fp32; compile the program for fp32");
  spec.target = Target::Cpu;  // informational on the CPU
  EXPECT_NO_THROW(validate(spec, c.args()));
}

TEST_F(Validate, KeyShape) {
  HostTensor k(DType::F32, {2, 2, 24, 16});
  expect_error(plain, c, [&](AttentionArgs& a) { a.k = k.view(); }, ErrorCode::Shape,
               "K [2, 2, 24, 16] does not fit Q [2, 4, 16, 32]: K must be [B, Hkv, Nk, D] with Q's batch and head dim");
}

TEST_F(Validate, ValueShape) {
  HostTensor v(DType::F32, {2, 2, 23, 8});
  expect_error(plain, c, [&](AttentionArgs& a) { a.v = v.view(); }, ErrorCode::Shape,
               "V [2, 2, 23, 8] does not fit K [2, 2, 24, 32]: V must be [B, Hkv, Nk, Dv] with K's batch, heads and length");
}

TEST_F(Validate, GqaNotDivisible) {
  AttentionCase g({1, 4, 3, 8, 8, 16}, {}, 3);
  expect_error(plain, g, [](AttentionArgs&) {}, ErrorCode::Shape,
               "query heads (Hq=4) must be a multiple of key/value heads (Hkv=3)");
}

TEST_F(Validate, OutputShape) {
  HostTensor o(DType::F32, {2, 4, 16, 32});
  expect_error(plain, c, [&](AttentionArgs& a) { a.out = o.view(); }, ErrorCode::Shape,
               "out [2, 4, 16, 32] must be [B, Hq, Nq, Dv] = [2, 4, 16, 8]");
}

TEST_F(Validate, HeadDimOfTheSpec) {
  KernelSpec spec = plain;
  spec.head_dim = 64;
  expect_error(spec, c, [](AttentionArgs&) {}, ErrorCode::Shape,
               "the kernel was compiled for head dim 64 but Q has head dim 32");
}

TEST_F(Validate, LseShape) {
  HostLse l({2, 4, 15});
  expect_error(plain, c, [&](AttentionArgs& a) { a.lse = l.view(); }, ErrorCode::Shape,
               "lse [2, 4, 15] must be [B, Hq, Nq] = [2, 4, 16]");
  expect_error(plain, c, [&](AttentionArgs& a) { a.lse->data = nullptr; }, ErrorCode::MissingTensor,
               "lse was given without a data pointer");
}

TEST_F(Validate, BiasMissingOrUnused) {
  const KernelSpec biased = make_spec({}, {MD::AdditiveBias});
  expect_error(biased, c, [](AttentionArgs&) {}, ErrorCode::MissingTensor,
               "the program uses additive_bias but no bias tensor was given");
  HostTensor bias(DType::F32, {1, 1, 16, 24});
  expect_error(plain, c, [&](AttentionArgs& a) { a.bias = bias.view(); }, ErrorCode::Unsupported,
               "a bias tensor was given but the program has no additive_bias; add additive_bias to the "
               "program or drop the bias");
}

TEST_F(Validate, BiasShapeAndDtype) {
  const KernelSpec biased = make_spec({}, {MD::AdditiveBias});
  HostTensor wrong(DType::F32, {2, 2, 16, 24});
  expect_error(biased, c, [&](AttentionArgs& a) { a.bias = wrong.view(); }, ErrorCode::Shape,
               "bias [2, 2, 16, 24] must be [1|B, 1|Hq, Nq, Nk] = [1|2, 1|4, 16, 24]");
  HostTensor half(DType::F16, {1, 4, 16, 24});
  expect_error(biased, c, [&](AttentionArgs& a) { a.bias = half.view(); }, ErrorCode::DType,
               "bias is fp16 but must be fp32 or the inputs' dtype (fp32)");
  HostTensor ok(DType::F32, {2, 1, 16, 24});
  AttentionArgs a = c.args();
  a.bias = ok.view();
  EXPECT_NO_THROW(validate(biased, a));
}

// Both backends take a bias in fp32 or in the inputs' dtype (the CUDA kernel reads either,
// FwdParams::bias_16bit); the other 16-bit type is refused.
TEST_F(Validate, BiasIsFp32OrTheInputsDtypeOnBothBackends) {
  KernelSpec biased = make_spec({}, {MD::AdditiveBias});
  biased.dtype = DType::BF16;
  CaseOptions bf16;
  bf16.dtype = DType::BF16;
  AttentionCase c16{{2, 4, 2, 16, 24, 32, 8}, bf16, 1};
  HostTensor b16(DType::BF16, {1, 4, 16, 24}), b32(DType::F32, {1, 4, 16, 24}), h16(DType::F16, {1, 4, 16, 24});
  for (const Target target : {Target::Cuda, Target::Cpu}) {
    biased.target = target;
    AttentionArgs a = c16.args();
    a.bias = b32.view();
    EXPECT_NO_THROW(validate(biased, a));
    a.bias = b16.view();
    EXPECT_NO_THROW(validate(biased, a));
    expect_error(biased, c16, [&](AttentionArgs& x) { x.bias = h16.view(); }, ErrorCode::DType,
                 "bias is fp16 but must be fp32 or the inputs' dtype (bf16)");
  }
}

TEST_F(Validate, BlockMaskMissingUnusedOrMisfit) {
  const KernelSpec sparse = make_spec({MK::BlockSparse}, {});
  expect_error(sparse, c, [](AttentionArgs&) {}, ErrorCode::MissingTensor,
               "the program uses block_sparse but no BlockMask was given");
  const BlockMask fits = random_block_mask(c.shape, 8, 8, 1, true);
  expect_error(plain, c, [&](AttentionArgs& a) { a.block_mask = &fits; }, ErrorCode::Unsupported,
               "a BlockMask was given but the program has no block_sparse; add block_sparse to the "
               "program or drop the mask");
  Shape other = c.shape;
  other.Nk = 32;
  const BlockMask longer = random_block_mask(other, 8, 8, 1, true);
  expect_error(sparse, c, [&](AttentionArgs& a) { a.block_mask = &longer; }, ErrorCode::Shape,
               "the BlockMask was built for lengths (q 16, kv 32) but the call has (q 16, kv 24); "
               "rebuild it for these lengths");
  Shape heads = c.shape;
  heads.Hq = 2;
  const BlockMask two_heads = random_block_mask(heads, 8, 8, 1, false);
  expect_error(sparse, c, [&](AttentionArgs& a) { a.block_mask = &two_heads; }, ErrorCode::Shape,
               "the BlockMask has batch 2 and heads 2; each must be 1 or the call's (batch 2, query heads 4)");
  AttentionArgs a = c.args();
  a.block_mask = &fits;
  EXPECT_NO_THROW(validate(sparse, a));
}

TEST_F(Validate, AlibiSlopesAndSoftcap) {
  KernelSpec spec = make_spec({}, {MD::Alibi});
  spec.scalars.alibi = AlibiSlopes::Custom;
  spec.scalars.alibi_slopes = {0.5, 0.25, 0.125};
  expect_error(spec, c, [](AttentionArgs&) {}, ErrorCode::Shape,
               "alibi has 3 custom slopes but the call has 4 query heads");
  KernelSpec capped = make_spec({}, {MD::Softcap});
  expect_error(capped, c, [](AttentionArgs&) {}, ErrorCode::Verify, "softcap must be positive (got 0)");
}

TEST_F(Validate, AnyQueryOffsetWithinTwoToTheSixtyTwo) {
  AttentionArgs a = c.args();
  for (int64_t off : {int64_t{-1000000}, int64_t{0}, int64_t{1} << 40, int64_t{1} << 62, -(int64_t{1} << 62)}) {
    a.q_offset = off;
    EXPECT_NO_THROW(validate(plain, a));
  }
  // Beyond, positions plus lengths, windows and distances would overflow 64 bits (UBSan found the
  // reference and the CPU kernel doing so at INT64_MAX).
  for (int64_t off : {(int64_t{1} << 62) + 1, -(int64_t{1} << 62) - 1, std::numeric_limits<int64_t>::max(),
                      std::numeric_limits<int64_t>::min()})
    expect_error(plain, c, [&](AttentionArgs& x) { x.q_offset = off; }, ErrorCode::Shape,
                 fmt::format("q_offset {} is outside ±2^62: query positions and their distances to the keys "
                             "must stay exact 64-bit integers", off));
}

}  // namespace
}  // namespace attnfuse::test
