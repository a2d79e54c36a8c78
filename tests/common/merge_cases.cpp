// merge_states test problems (merge_cases.hpp).
#include "common/merge_cases.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>

#include "common/dtype.hpp"

namespace attnfuse::test {
namespace {

constexpr float kNinf = -std::numeric_limits<float>::infinity();
constexpr float kPoisonOut = 1234.f;
constexpr uint16_t kPoisonOut16 = 0x1234;

MergeStorage make_storage(const MergeCase& c, DType dtype) {
  MergeStorage s{dtype, c.D + c.pad, c.nhl, {}, {}, {}};
  const auto elems = static_cast<size_t>(c.B * c.H * c.N * s.pitch);
  if (dtype == DType::F32) s.full.assign(elems, std::numeric_limits<float>::quiet_NaN());
  else s.half.assign(elems, dtype == DType::BF16 ? 0x7fc0 : 0x7e00);  // NaN
  s.lse.assign(static_cast<size_t>(c.B * c.H * c.N), kNinf);
  return s;
}

float& lse_at(const AttentionState& s, int64_t b, int64_t h, int64_t i) {
  return s.lse.data[b * s.lse.strides[0] + h * s.lse.strides[1] + i * s.lse.strides[2]];
}

}  // namespace

std::string merge_case_name(const MergeCase& c) {
  std::string types;
  for (DType t : c.dtypes) types += std::string(types.empty() ? "" : ",") + dtype_name(t);
  return fmt::format("B{} H{} N{} D{} pitch {} lse {} states [{}] -> {}{}", c.B, c.H, c.N, c.D, c.D + c.pad,
                     c.nhl ? "[B,N,H]" : "[B,H,N]", types, dtype_name(c.out_dtype),
                     c.in_place >= 0 ? fmt::format(" in place of state {}", c.in_place) : "");
}

AttentionState MergeStorage::view(const MergeCase& c, void* o, float* l) const {
  AttentionState s;
  s.o = TensorView::contiguous(o, dtype, {c.B, c.H, c.N, c.D});
  s.o.strides = {c.H * c.N * pitch, c.N * pitch, pitch, 1};
  s.lse.data = l;
  s.lse.shape = {c.B, c.H, c.N};
  s.lse.strides = nhl ? std::array<int64_t, 3>{c.N * c.H, 1, c.H} : std::array<int64_t, 3>{c.H * c.N, c.N, 1};
  return s;
}

MergeProblem make_merge_problem(const MergeCase& c, std::mt19937& rng) {
  MergeProblem p{c, {}, make_storage(c, c.out_dtype), {}};
  std::uniform_real_distribution<float> val(-2.f, 2.f), lse(-30.f, 30.f), coin(0.f, 1.f);
  const int64_t rows = c.B * c.H * c.N;
  const auto n = static_cast<int>(c.dtypes.size());
  for (int k = 0; k < n; ++k) {
    p.states.push_back(make_storage(c, c.dtypes[static_cast<size_t>(k)]));
    const AttentionState v = p.states.back().view(c);
    // Row 0 is empty in every state, row 1 has a NaN LSE in the last state, and any other row is
    // empty in a state with probability 0.3.
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % c.N, h = (r / c.N) % c.H, b = r / (c.N * c.H);
      if (r == 0 || (r > 1 && coin(rng) < 0.3f)) continue;
      lse_at(v, b, h, i) = r == 1 && k == n - 1 ? std::numeric_limits<float>::quiet_NaN() : lse(rng);
      for (int64_t d = 0; d < c.D; ++d) store_elem(v.o.data, v.o.dtype, v.o.offset(b, h, i, d), val(rng));
    }
  }
  if (c.out_dtype == DType::F32) p.out.full.assign(p.out.full.size(), kPoisonOut);
  else p.out.half.assign(p.out.half.size(), kPoisonOut16);
  p.out.lse.assign(p.out.lse.size(), kPoisonOut);
  std::vector<MergeStorage> copies = p.states;
  p.expected = c.in_place >= 0 ? copies[static_cast<size_t>(c.in_place)] : p.out;
  std::vector<AttentionState> views;
  for (auto& s : copies) views.push_back(s.view(c));
  merge_states(views, p.expected.view(c));
  return p;
}

::testing::AssertionResult merge_matches(MergeProblem& p, int roundings, double slack) {
  const MergeCase& c = p.c;
  const AttentionState want = p.expected.view(c), got = p.target().view(c);
  const int mantissa = c.out_dtype == DType::BF16 ? 7 : c.out_dtype == DType::F16 ? 10 : 20;
  const float lse_tol = 1e-6f * static_cast<float>(roundings);  // relative
  for (int64_t r = 0; r < c.B * c.H * c.N; ++r) {
    const int64_t i = r % c.N, h = (r / c.N) % c.H, b = r / (c.N * c.H);
    const float wl = lse_at(want, b, h, i), gl = lse_at(got, b, h, i);
    const bool lse_ok = std::isnan(wl) ? std::isnan(gl)
                        : std::isinf(wl) ? gl == wl
                                         : std::fabs(gl - wl) <= lse_tol * std::max(1.f, std::fabs(wl));
    if (!lse_ok) return ::testing::AssertionFailure() << "row " << r << ": LSE " << gl << ", want " << wl;
    for (int64_t d = 0; d < c.D + c.pad; ++d) {
      if (d >= c.D) {  // padding: untouched
        if (c.in_place >= 0) break;
        const int64_t at = got.o.offset(b, h, i, 0) + d;
        const bool kept = c.out_dtype == DType::F32 ? p.out.full[static_cast<size_t>(at)] == kPoisonOut
                                                    : p.out.half[static_cast<size_t>(at)] == kPoisonOut16;
        if (!kept) return ::testing::AssertionFailure() << "row " << r << ": padding at dim " << d << " written";
        continue;
      }
      const float w = load_elem(want.o.data, c.out_dtype, want.o.offset(b, h, i, d));
      const float g = load_elem(got.o.data, c.out_dtype, got.o.offset(b, h, i, d));
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(w), 1e-3f)) - mantissa);
      if (std::isnan(w) ? !std::isnan(g) : !(std::fabs(g - w) <= roundings * ulp + slack))
        return ::testing::AssertionFailure() << "row " << r << " dim " << d << ": " << g << ", want " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace attnfuse::test
