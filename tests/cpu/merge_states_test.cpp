// merge_states: attention over disjoint key ranges, merged, equals attention over all the keys
// (against the float64 reference, DESIGN §3); empty states are the identity; bad input is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/merge_states.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A partial result: O in its own buffer (any layout) and a contiguous LSE.
struct Part {
  HostTensor o;
  HostLse lse;
  AttentionState state() const { return {o.view(), lse.view()}; }
};

// Narrow `axis` of a view to [k0, k1).
TensorView slice(TensorView t, int axis, int64_t k0, int64_t k1) {
  t.data = static_cast<char*>(t.data) + k0 * t.strides[static_cast<size_t>(axis)] * dtype_size(t.dtype);
  t.shape[static_cast<size_t>(axis)] = k1 - k0;
  return t;
}

// Attention of c's queries over keys [k0, k1) only. q_offset moves by k0 so every key keeps its
// global position: causal, sliding window and alibi see the same Δ as in the whole problem.
Part run_on_keys(const KernelSpec& spec, const AttentionCase& c, int64_t k0, int64_t k1,
                 Layout layout = Layout::Bhsd) {
  AttentionArgs a = c.args();
  a.q_offset = a.resolved_q_offset() - k0;
  a.k = slice(a.k, 2, k0, k1);
  a.v = slice(a.v, 2, k0, k1);
  if (a.bias) a.bias = slice(*a.bias, 3, k0, k1);
  Part p{HostTensor(c.options.dtype, c.out.shape(), layout),
         HostLse({c.shape.B, c.shape.Hq, c.shape.Nq})};
  p.o.poison();
  p.lse.poison();
  a.out = p.o.view();
  a.lse = p.lse.view();
  run_cpu(spec, a);
  return p;
}

// Cut [0, nk) into `parts` consecutive ranges at random points (repeats give empty ranges).
std::vector<int64_t> random_cuts(int64_t nk, int parts, std::mt19937_64& rng) {
  std::vector<int64_t> cuts{0, nk};
  for (int i = 1; i < parts; ++i) cuts.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(nk + 1)));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

std::vector<Part> run_parts(const KernelSpec& spec, const AttentionCase& c, const std::vector<int64_t>& cuts,
                            Layout layout = Layout::Bhsd) {
  std::vector<Part> parts;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) parts.push_back(run_on_keys(spec, c, cuts[i], cuts[i + 1], layout));
  return parts;
}

AttentionState whole(const AttentionCase& c) { return {c.out.view(), c.lse->view()}; }

// What storing partial results in a 16-bit dtype adds to a merge's error: each stored value is
// rounded once (by at most the type's unit roundoff times the largest partial output), and a
// merge is a convex combination of its partials, so `stores` roundings along the way add at most
// that many. With a small naive error the whole-problem bound alone can be tighter than one
// rounding of a 16-bit partial (seed 8223254914070739819 failed it at fp16: 0.00162 against
// 0.00129, fp16's unit roundoff at 2.3 being 0.0011). fp32 partials add nothing.
double partials_rounding(const std::vector<Part>& parts, DType t, int stores) {
  if (t == DType::F32) return 0.0;
  double largest = 0.0;
  for (const Part& p : parts) {
    const auto& s = p.o.shape();
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t h = 0; h < s[1]; ++h)
        for (int64_t i = 0; i < s[2]; ++i)
          for (int64_t d = 0; d < s[3]; ++d)
            if (const double v = std::abs(double(p.o.get(b, h, i, d))); std::isfinite(v)) largest = std::max(largest, v);
  }
  return stores * (t == DType::F16 ? 0x1p-11 : 0x1p-8) * largest;
}

std::vector<KernelSpec> specs() {
  ScalarArgs s;
  s.window = 50;
  s.softcap = 4.0;
  return {make_spec({}, {}), make_spec({MK::Causal}, {MD::Alibi}),
          make_spec({MK::SlidingWindow}, {MD::AdditiveBias, MD::Softcap}, NormKind::Softmax, s)};
}

TEST(MergeStates, TwoDisjointKeyRangesMatchTheWholeProblem) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (const KernelSpec& spec : specs())
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (const Shape& shape : {Shape{2, 4, 2, 77, 300, 64}, Shape{1, 2, 1, 129, 17, 32}, Shape{1, 8, 1, 1, 1023, 128}}) {
        SCOPED_TRACE(describe(spec) + " " + dtype_name(t) + " Nq=" + std::to_string(shape.Nq) +
                     " Nk=" + std::to_string(shape.Nk));
        CaseOptions opt;
        opt.dtype = t;
        opt.bias = spec.needs_bias();
        AttentionCase c(shape, opt, rng());
        const std::vector<Part> p = run_parts(spec, c, random_cuts(shape.Nk, 2, rng));
        merge_states(p[0].state(), p[1].state(), whole(c));
        const LseView lse = c.lse->view();
        EXPECT_TRUE(matches_reference(spec, c.args(), c.out.view(), &lse, partials_rounding(p, t, 1)));
      }
}

TEST(MergeStates, FiveRangesNWayAndOneAtATime) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (const KernelSpec& spec : specs())
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(describe(spec) + " " + dtype_name(t));
      CaseOptions opt;
      opt.dtype = t;
      opt.bias = spec.needs_bias();
      AttentionCase c({2, 4, 1, 113, 1023, 64}, opt, rng());
      std::vector<Part> p = run_parts(spec, c, random_cuts(c.shape.Nk, 5, rng));
      std::vector<AttentionState> states;
      for (const Part& part : p) states.push_back(part.state());
      merge_states(states, whole(c));
      const LseView lse = c.lse->view();
      EXPECT_TRUE(matches_reference(spec, c.args(), c.out.view(), &lse, partials_rounding(p, t, 1)));

      // The split-KV combine written as a running accumulation into the first partial (each
      // step stores into it once more).
      const double slack = partials_rounding(p, t, static_cast<int>(p.size()));
      for (size_t k = 1; k < p.size(); ++k) merge_state_in_place(p[0].state(), p[k].state());
      EXPECT_TRUE(matches_reference(spec, c.args(), p[0].o.view(), &p[0].lse.view(), slack));
    }
}

// Empty ranges (no keys at all) and ranges that hold none of a row's kept keys (causal rows before
// the range, sliding-window rows that see no key anywhere) produce -inf states; merged, they change
// nothing, and rows that are empty in every part come out O = 0, LSE = -inf, never NaN.
TEST(MergeStates, EmptyPartsAndFullyMaskedRows) {
  ScalarArgs w;
  w.window = 8;
  const KernelSpec spec = make_spec({MK::SlidingWindow}, {MD::Alibi}, NormKind::Softmax, w);
  for (DType t : {DType::F32, DType::BF16}) {
    CaseOptions opt;
    opt.dtype = t;
    opt.q_offset = -40;  // rows 0..32 keep no key at all
    AttentionCase c({1, 2, 2, 100, 70, 32}, opt, 5);
    const std::vector<Part> p = run_parts(spec, c, {0, 0, 20, 20, 45, 70, 70});
    std::vector<AttentionState> states;
    for (const Part& part : p) states.push_back(part.state());
    merge_states(states, whole(c));
    expect_matches_reference(spec, c.args());
    for (int64_t i = 0; i <= 32; ++i) {
      ASSERT_EQ(c.lse->get(0, 1, i), -kInf) << "row " << i;
      for (int64_t d = 0; d < 32; ++d) ASSERT_EQ(c.out.get(0, 1, i, d), 0.0f) << "row " << i;
    }
  }
}

TEST(MergeStates, EmptyStateIsTheIdentityAndIsNeverRead) {
  CaseOptions opt;
  AttentionCase c({1, 2, 1, 40, 90, 16}, opt, 7);
  const KernelSpec spec = make_spec({MK::Causal}, {});
  const Part a = run_on_keys(spec, c, 0, 90);
  Part empty{HostTensor(DType::F32, c.out.shape()), HostLse({1, 2, 40})};
  empty.o.poison();  // NaN everywhere: reading it would show
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 40; ++i) empty.lse.view().data[h * 40 + i] = -kInf;
  merge_states(empty.state(), a.state(), whole(c));
  EXPECT_EQ(c.out.storage(), a.o.storage()) << "merging with an empty state is exactly the identity";
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(c.lse->get(0, h, i), a.lse.get(0, h, i));

  // Two empty states: O = 0, LSE = -inf.
  merge_states(empty.state(), empty.state(), whole(c));
  for (int64_t i = 0; i < 40; ++i) {
    EXPECT_EQ(c.lse->get(0, 1, i), -kInf);
    EXPECT_EQ(c.out.get(0, 1, i, 3), 0.0f);
  }
}

// Hand-made states with LSEs far beyond exp's range: the max is subtracted, so nothing overflows.
TEST(MergeStates, LargeLseIsStableAndNaNPropagates) {
  std::vector<float> oa(4, 1.0f), ob(4, 3.0f), o(4, kNaN);
  std::vector<float> la{1000.0f, -1000.0f}, lb{1000.0f + std::log(3.0f), kNaN}, l(2);
  auto state = [](std::vector<float>& ov, std::vector<float>& lv) {
    return AttentionState{TensorView::contiguous(ov.data(), DType::F32, {1, 1, 2, 2}),
                          LseView::contiguous(lv.data(), {1, 1, 2})};
  };
  merge_states(state(oa, la), state(ob, lb), state(o, l));
  // Row 0: weights about 1/4 and 3/4; exactly, from the LSE difference as fp32 holds it (exact:
  // the two are within a factor 2).
  const double diff = double(lb[0]) - double(la[0]), wb = std::exp(diff) / (1.0 + std::exp(diff));
  EXPECT_NEAR(o[0], 1.0 * (1.0 - wb) + 3.0 * wb, 1e-6);
  EXPECT_NEAR(o[1], 2.5, 1e-4);
  EXPECT_FLOAT_EQ(l[0], static_cast<float>(double(la[0]) + std::log1p(std::exp(diff))));
  // Row 1: a NaN LSE (a NaN input reached that part) makes the row NaN, as one big softmax would.
  EXPECT_TRUE(std::isnan(o[2]) && std::isnan(o[3]) && std::isnan(l[1]));
}

// Parts in BSHD and padded layouts, merged into a BSHD output with a strided LSE ([B, N, H] memory);
// fp32 partials merged straight into a bf16 output (the split-KV case).
TEST(MergeStates, StridedViewsAndMixedDtypes) {
  const KernelSpec spec = make_spec({MK::Causal}, {MD::Alibi});
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    CaseOptions opt;
    opt.dtype = t;
    opt.layout = Layout::Bshd;
    AttentionCase c({2, 4, 2, 97, 131, 80}, opt, 11);
    const Part a = run_on_keys(spec, c, 0, 50, Layout::Padded);
    const Part b = run_on_keys(spec, c, 50, 131, Layout::Bshd);
    std::vector<float> lse_bnh(2 * 97 * 4, std::bit_cast<float>(kPoisonF32));
    LseView lse;
    lse.data = lse_bnh.data();
    lse.shape = {2, 4, 97};
    lse.strides = {97 * 4, 1, 4};
    merge_states(a.state(), b.state(), {c.out.view(), lse});
    EXPECT_TRUE(matches_reference(spec, c.args(), c.out.view(), &lse));
  }
  // fp32 partials of the same (bf16-representable) inputs merged into a bf16 output.
  CaseOptions opt;
  opt.dtype = DType::BF16;
  AttentionCase c16({1, 2, 1, 33, 70, 32}, opt, 12);
  AttentionCase c32({1, 2, 1, 33, 70, 32}, {}, 12);
  for (auto [from, to] : {std::pair{&c16.q, &c32.q}, std::pair{&c16.k, &c32.k}, std::pair{&c16.v, &c32.v}})
    for (int64_t h = 0; h < from->shape()[1]; ++h)
      for (int64_t i = 0; i < from->shape()[2]; ++i)
        for (int64_t d = 0; d < from->shape()[3]; ++d) to->set(0, h, i, d, from->get(0, h, i, d));
  const Part a = run_on_keys(spec, c32, 0, 30), b = run_on_keys(spec, c32, 30, 70);
  merge_states(a.state(), b.state(), whole(c16));
  expect_matches_reference(spec, c16.args());
}

TEST(MergeStates, BadInputRaisesBeforeWriting) {
  std::vector<float> buf(2 * 3 * 5 * 8, 1.0f), lbuf(2 * 3 * 5, 0.0f), obuf(buf.size(), 7.0f), olbuf(lbuf.size(), 7.0f);
  const AttentionState s{TensorView::contiguous(buf.data(), DType::F32, {2, 3, 5, 8}),
                         LseView::contiguous(lbuf.data(), {2, 3, 5})};
  const AttentionState out{TensorView::contiguous(obuf.data(), DType::F32, {2, 3, 5, 8}),
                           LseView::contiguous(olbuf.data(), {2, 3, 5})};
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  AttentionState other_d = s;
  other_d.o.shape = {2, 3, 5, 4};
  other_d.lse.shape = {2, 3, 5};
  EXPECT_EQ(code_of([&] { merge_states(s, other_d, out); }), ErrorCode::Shape);
  AttentionState other_n = s;
  other_n.o.shape = {2, 3, 4, 8};
  other_n.lse.shape = {2, 3, 4};
  EXPECT_EQ(code_of([&] { merge_states(s, other_n, out); }), ErrorCode::Shape);
  AttentionState bad_lse = s;
  bad_lse.lse.shape = {2, 3, 4};
  EXPECT_EQ(code_of([&] { merge_states(s, bad_lse, out); }), ErrorCode::Shape);
  AttentionState no_lse = s;
  no_lse.lse.data = nullptr;
  EXPECT_EQ(code_of([&] { merge_states(s, no_lse, out); }), ErrorCode::MissingTensor);
  AttentionState strided = s;
  strided.o.strides[3] = 2;
  EXPECT_EQ(code_of([&] { merge_states(s, strided, out); }), ErrorCode::Shape);
  AttentionState bad_dtype = s;
  bad_dtype.o.dtype = static_cast<DType>(17);
  EXPECT_EQ(code_of([&] { merge_states(s, bad_dtype, out); }), ErrorCode::DType);
  AttentionState half_alias = out;  // out's buffer seen as bf16: a different view of the same data
  half_alias.o.dtype = DType::BF16;
  EXPECT_EQ(code_of([&] { merge_states(half_alias, s, out); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { merge_states(std::span<const AttentionState>{}, out); }), ErrorCode::Shape);
  try {
    merge_states(s, other_d, out);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match out.o [2, 3, 5, 8]"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::all_of(obuf.begin(), obuf.end(), [](float x) { return x == 7.0f; }));
  EXPECT_TRUE(std::all_of(olbuf.begin(), olbuf.end(), [](float x) { return x == 7.0f; }));

  // Zero-sized problems are no work, not an error.
  const AttentionState z{TensorView::contiguous(nullptr, DType::BF16, {0, 3, 5, 8}), LseView::contiguous(nullptr, {0, 3, 5})};
  EXPECT_NO_THROW(merge_states(z, z, z));
}

}  // namespace
}  // namespace attnfuse::test
