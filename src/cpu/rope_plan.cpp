// Builds the fused CPU kernel's per-call RoPE plan (cos/sin tables from the scaled frequencies,
// rope_window limits) and splits a tile's pairs for rope_window; the per-key work that runs on it
// is cpu/rope_apply.hpp, compiled per instruction-set level.
#include "cpu/rope_plan.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attnfuse/error.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::cpu {
namespace {

// Coarse table for [p0, p0 + count): entry c holds af * cos/sin((p0 + c * kRopeFine) θ_r).
PositionTable coarse_table(const std::vector<double>& inv_freq, double af, int64_t p0, int64_t count) {
  PositionTable t;
  t.p0 = p0;
  const int half = static_cast<int>(inv_freq.size());
  const int64_t rows = std::max<int64_t>(count, 0) / kRopeFine + 1;
  t.cos.resize(static_cast<size_t>(rows * half));
  t.sin.resize(static_cast<size_t>(rows * half));
  // Long contexts need a few hundred thousand sin/cos in float64: worth the threads.
#pragma omp parallel for schedule(static) if (rows * half > 16384)
  for (int64_t c = 0; c < rows; ++c) {
    const double pos = static_cast<double>(p0 + c * kRopeFine);
    for (int r = 0; r < half; ++r) {
      const double angle = pos * inv_freq[static_cast<size_t>(r)];
      t.cos[static_cast<size_t>(c * half + r)] = static_cast<float>(af * std::cos(angle));
      t.sin[static_cast<size_t>(c * half + r)] = static_cast<float>(af * std::sin(angle));
    }
  }
  return t;
}

}  // namespace

RopePlan make_rope_plan(const RopeParams& params, int64_t D, int64_t seq_len, bool windowed,
                        int64_t Nk, int64_t q_offset, int64_t Nq) {
  RopePlan plan;
  plan.style = params.style;
  if (D <= 0) return plan;
  const rope::RopeFrequencies freqs = rope::rope_frequencies(params, static_cast<int>(D), seq_len);
  plan.rotary_dim = rope::rotary_dim_of(params, static_cast<int>(D));
  plan.half = plan.rotary_dim / 2;
  const int half = plan.half;
  plan.fine_cos.resize(static_cast<size_t>(kRopeFine * half));
  plan.fine_sin.resize(static_cast<size_t>(kRopeFine * half));
  for (int f = 0; f < kRopeFine; ++f)
    for (int r = 0; r < half; ++r) {
      const double angle = double(f) * freqs.inv_freq[static_cast<size_t>(r)];
      plan.fine_cos[static_cast<size_t>(f * half + r)] = static_cast<float>(std::cos(angle));
      plan.fine_sin[static_cast<size_t>(f * half + r)] = static_cast<float>(std::sin(angle));
    }
  plan.keys = coarse_table(freqs.inv_freq, freqs.attention_factor, 0, Nk);
  plan.queries = coarse_table(freqs.inv_freq, freqs.attention_factor, q_offset, Nq);
  if (windowed) plan.limits = rope::window_limits(freqs, params.window_k);
  return plan;
}

void RopePlan::angles(const PositionTable& t, int64_t p, float* c, float* s) const {
  if (user_cos) {
    std::copy_n(user_cos + p * half, half, c);
    std::copy_n(user_sin + p * half, half, s);
    return;
  }
  const int64_t rel = p - t.p0;
  const float* cc = t.cos.data() + (rel / kRopeFine) * half;
  const float* cs = t.sin.data() + (rel / kRopeFine) * half;
  const float* fc = fine_cos.data() + (rel % kRopeFine) * half;
  const float* fs = fine_sin.data() + (rel % kRopeFine) * half;
  // cos(x + y) and sin(x + y) from the two parts.
  for (int r = 0; r < half; ++r) {
    c[r] = cc[r] * fc[r] - cs[r] * fs[r];
    s[r] = cs[r] * fc[r] + cc[r] * fs[r];
  }
}

void RopePlan::use_tables(const RopeTablesView& t, int64_t first_query, int64_t queries) {
  if (queries > 0 && first_query < 0)
    throw Error(ErrorCode::Shape, fmt::format("the call rotates query positions from {}, but RoPE tables "
                                              "start at position 0", first_query));
  user_cos = t.cos;
  user_sin = t.sin;
}

void RopePlan::rotate(const float* c, const float* s, float* x, int64_t stride) const {
  // neox pairs (r, r + half), gptj (2r, 2r + 1); both rotate (a, b) by +angle.
  const int64_t da = style == RopeStyle::Neox ? 1 : 2;
  const int64_t off_b = style == RopeStyle::Neox ? half : 1;
  for (int r = 0; r < half; ++r) {
    float* pa = x + r * da * stride;
    float* pb = pa + off_b * stride;
    const float a = *pa, b = *pb;
    *pa = a * c[r] - b * s[r];
    *pb = b * c[r] + a * s[r];
  }
}

void split_window(const RopePlan& plan, int64_t D, int64_t delta_lo, int64_t delta_hi,
                  WindowSplit& out) {
  out.ranges.clear();
  out.boundary.clear();
  out.all = true;
  out.first_pair = plan.half;
  out.keep.assign(static_cast<size_t>(D), 1);
  const int64_t abs_lo = delta_lo < 0 ? -delta_lo : delta_lo, abs_hi = delta_hi < 0 ? -delta_hi : delta_hi;
  const int64_t max_abs = std::max(abs_lo, abs_hi);
  const int64_t min_abs = delta_lo <= 0 && delta_hi >= 0 ? 0 : std::min(abs_lo, abs_hi);
  for (int r = 0; r < plan.half; ++r) {
    const int64_t w = plan.limits[static_cast<size_t>(r)];
    if (min_abs <= w) out.first_pair = std::min(out.first_pair, r);
    if (max_abs <= w) continue;  // in window for every cell
    out.all = false;
    if (min_abs <= w) out.boundary.push_back(r);
    const rope::PairDims pd = rope::pair_dims(plan.style, plan.rotary_dim, r);
    out.keep[static_cast<size_t>(pd.a)] = 0;
    out.keep[static_cast<size_t>(pd.b)] = 0;
  }
  if (out.all) return;
  // Maximal runs of kept dims.
  for (int x = 0; x < D;) {
    if (!out.keep[static_cast<size_t>(x)]) {
      ++x;
      continue;
    }
    int e = x;
    while (e < D && out.keep[static_cast<size_t>(e)]) ++e;
    out.ranges.emplace_back(x, e);
    x = e;
  }
}

}  // namespace attnfuse::cpu
