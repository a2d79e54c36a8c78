// Decode on the CPU: few query rows (1..16, speculative decoding) against long caches, KV lengths
// from 1 to ~100k (odd ones), every combinator, checked against the float64 reference (DESIGN §3).
// The long cases are where fp32 accumulation over many keys and far-from-diagonal positions
// (ALiBi, RoPE angles at position 10^5) would show.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

struct DecodeVariant {
  const char* name;
  KernelSpec spec;
};

std::vector<DecodeVariant> variants() {
  ScalarArgs window;
  window.window = 4000;
  ScalarArgs cap;
  cap.softcap = 20;
  ScalarArgs rope;
  rope.rope.base = 500000;
  ScalarArgs rope_window = rope;
  rope_window.rope.window_k = 1.0;
  std::vector<DecodeVariant> v = {
      {"causal", make_spec({MK::Causal}, {})},
      {"sliding window 4000", make_spec({MK::Causal, MK::SlidingWindow}, {}, NormKind::Softmax, window)},
      {"alibi", make_spec({MK::Causal}, {MD::Alibi})},
      {"softcap", make_spec({MK::Causal}, {MD::Softcap}, NormKind::Softmax, cap)},
      {"relu", make_spec({MK::Causal}, {}, NormKind::ReluAttention)},
      {"rope", make_spec({MK::Causal}, {}, NormKind::Softmax, rope)},
      {"rope_window k=1", make_spec({MK::Causal}, {}, NormKind::Softmax, rope_window)},
  };
  v[5].spec.score = ScoreKind::Rope;
  v[6].spec.score = ScoreKind::RopeWindow;
  return v;
}

// One decode call: B1, 8 query heads over 2 KV heads (GQA 4), D 64, the queries at the end of
// the cache (bottom-right default).
void check(const DecodeVariant& v, int64_t nq, int64_t nk, DType dtype, uint64_t seed) {
  SCOPED_TRACE(fmt::format("{} Nq {} Nk {} {} seed {}", v.name, nq, nk, dtype_name(dtype), seed));
  CaseOptions opt;
  opt.dtype = dtype;
  AttentionCase c({1, 8, 2, nq, nk, 64}, opt, seed);
  run_cpu(v.spec, c.args());
  expect_matches_reference(v.spec, c.args());
}

TEST(CpuDecode, ShortAndOddCaches) {
  const uint64_t seed = fresh_seed();
  for (const DecodeVariant& v : variants())
    for (int64_t nk : {1, 2, 17, 127, 129, 1023, 4097})
      for (int64_t nq : {1, 3, 16}) check(v, std::min(nq, nk), nk, nk % 2 ? DType::BF16 : DType::F32, seed + nk);
}

TEST(CpuDecode, HundredThousandKeys) {
  // Every combinator once at ~100k keys (odd), one and sixteen query rows in turn.
  const uint64_t seed = fresh_seed();
  int i = 0;
  for (const DecodeVariant& v : variants()) {
    check(v, i % 2 ? 16 : 1, 99991, i % 3 == 2 ? DType::F16 : DType::F32, seed + static_cast<uint64_t>(i));
    ++i;
  }
}

}  // namespace
}  // namespace attnfuse::test
