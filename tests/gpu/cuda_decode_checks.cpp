// The decode and paged GPU tests' shared checks (cuda_decode_checks.hpp).
#include "cuda_decode_checks.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/dtype.hpp"
#include "common/tensors.hpp"
#include "gpu_inputs.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/cuda_knobs.hpp"

namespace attnfuse::decode_test {

void expect_plan(const KernelSpec& spec, const AttentionArgs& dev, const Dims& d, const LaunchTuning& t) {
  const LaunchPlan plan = runtime::cuda_kernel(spec).plan(dev, spec.scalars, t);
  if (t.variant == Variant::Prefill) {
    EXPECT_FALSE(plan.decode) << "forced prefill variant";
  } else if (t.variant == Variant::Decode || d.Nq <= runtime::kDecodeMaxQueries) {
    EXPECT_TRUE(plan.decode) << "Nq " << d.Nq << " <= " << runtime::kDecodeMaxQueries << " should pick the decode variant";
  }
  EXPECT_GE(plan.num_splits, 1);
  if (t.num_splits > 0) {
    EXPECT_LE(plan.num_splits, t.num_splits);
    if (d.Nk >= 4097) {
      EXPECT_EQ(plan.num_splits, t.num_splits) << "forced split count not followed on a long cache";
    }
  }
  EXPECT_EQ(plan.kv_layout, dev.paged ? KvLayout::Paged : KvLayout::Contiguous);
}

void check(const KernelSpec& spec, const Dims& d, std::optional<int64_t> q_offset, std::mt19937_64& rng,
           const std::vector<LaunchTuning>& tunings) {
  SCOPED_TRACE(fmt::format("{} {}{}", dtype_name(spec.dtype), gpu_test::dims_name(d),
                           q_offset ? fmt::format(" q_offset {}", *q_offset) : std::string()));
  Inputs in = make_inputs(spec, d, rng);
  in.host.q_offset = in.device.q_offset = q_offset;
  const gpu_test::Expected e = expected(spec, in.host, d);
  for (const LaunchTuning& t : tunings) {
    SCOPED_TRACE(tuning_name(t));
    expect_plan(spec, in.device, d, t);
    const Outputs o = run_device(spec, in.device, d, t);
    EXPECT_TRUE(matches(e, spec.dtype, o));
  }
}

void check(const std::string& program, DType dtype, const Dims& d, std::optional<int64_t> q_offset,
           std::mt19937_64& rng, const std::vector<LaunchTuning>& tunings, RopeMode mode) {
  SCOPED_TRACE(program + " rope_mode=" + rope_mode_name(mode));
  check(cuda_spec(program, dtype, d.D, mode), d, q_offset, rng, tunings);
}

std::vector<Outputs> run_chain(const KernelSpec& spec, const AttentionArgs& device, const Dims& d,
                               const LaunchTuning& t, int calls) {
  const auto n_out = static_cast<size_t>(d.B * d.Hq * d.Nq * d.D), n_lse = static_cast<size_t>(d.B * d.Hq * d.Nq);
  std::vector<runtime::DeviceBuffer> outs, lses;
  for (int i = 0; i < calls; ++i) {
    outs.emplace_back(n_out * 2).poison();
    lses.emplace_back(n_lse * 4).poison();
  }
  for (int i = 0; i < calls; ++i) {
    AttentionArgs a = device;
    if (i > 0) a.q = TensorView::contiguous(outs[size_t(i - 1)].get(), spec.dtype, {d.B, d.Hq, d.Nq, d.D});
    a.out = TensorView::contiguous(outs[size_t(i)].get(), spec.dtype, {d.B, d.Hq, d.Nq, d.D});
    a.lse = LseView::contiguous(static_cast<float*>(lses[size_t(i)].get()), {d.B, d.Hq, d.Nq});
    runtime::run_cuda(spec, a, nullptr, /*sync=*/false, t);
  }
  runtime::check(runtime::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  std::vector<Outputs> chain;
  for (int i = 0; i < calls; ++i) {
    Outputs o;
    o.out.resize(n_out);
    o.lse.resize(n_lse);
    outs[size_t(i)].download(o.out.data());
    lses[size_t(i)].download(o.lse.data());
    chain.push_back(std::move(o));
  }
  return chain;
}

void check_chain(const KernelSpec& spec, const AttentionArgs& host, const Dims& d, std::vector<Outputs>& chain,
                 const std::vector<Outputs>& other, const char* differs) {
  ASSERT_EQ(chain.size(), other.size());
  for (size_t i = 0; i < chain.size(); ++i) {
    SCOPED_TRACE(fmt::format("call {}", i));
    AttentionArgs h = host;
    if (i > 0) h.q = TensorView::contiguous(chain[i - 1].out.data(), spec.dtype, {d.B, d.Hq, d.Nq, d.D});
    EXPECT_TRUE(matches(expected(spec, h, d), spec.dtype, chain[i]));
    EXPECT_TRUE(bitwise_equal(chain[i], other[i], d)) << differs;
  }
}

std::string paged_name(const PagedCase& c) {
  std::string lens;
  for (int64_t l : c.lengths) {
    if (!lens.empty()) lens += ',';
    lens += std::to_string(l);
  }
  return fmt::format("paged {} page {} lengths [{}]{} Hq{} Hkv{} Nq{}{}", gpu_test::layout_name(c.layout),
                     c.page_size, lens, c.share ? " shared pages" : "", c.Hq, c.Hkv, c.Nq,
                     c.q_offset ? fmt::format(" q_offset {}", *c.q_offset) : std::string());
}

::testing::AssertionResult rounding_close(const Outputs& a, const Outputs& b, DType dtype, double near_zero) {
  const float abs_tol = static_cast<float>(std::max(near_zero, 1e-3));
  if (a.out.size() != b.out.size() || a.lse.size() != b.lse.size()) return ::testing::AssertionFailure() << "sizes";
  const float ulp = dtype == DType::BF16 ? 0x1p-7f : 0x1p-10f;
  for (size_t i = 0; i < a.out.size(); ++i) {
    const float x = dtype == DType::BF16 ? bf16_to_f32(a.out[i]) : f16_to_f32(a.out[i]);
    const float y = dtype == DType::BF16 ? bf16_to_f32(b.out[i]) : f16_to_f32(b.out[i]);
    if (!(std::fabs(x - y) <= 2 * ulp * std::fmax(std::fabs(x), std::fabs(y)) + abs_tol))
      return ::testing::AssertionFailure() << "O[" << i << "] " << x << " vs " << y;
  }
  for (size_t i = 0; i < a.lse.size(); ++i)
    if (!(a.lse[i] == b.lse[i] || std::fabs(a.lse[i] - b.lse[i]) <= 1e-5f * std::fabs(a.lse[i])))
      return ::testing::AssertionFailure() << "LSE[" << i << "] " << a.lse[i] << " vs " << b.lse[i];
  return ::testing::AssertionSuccess();
}

void check_paged(const KernelSpec& spec, const PagedCase& c, std::mt19937_64& rng,
                 const std::vector<LaunchTuning>& tunings, std::optional<int> auto_stages) {
  SCOPED_TRACE(paged_name(c));
  const int64_t B = std::ssize(c.lengths);
  const int D = spec.head_dim;
  const Dims d{B, c.Hq, c.Hkv, c.Nq, *std::max_element(c.lengths.begin(), c.lengths.end()), D};
  Inputs in = make_inputs(spec, d, rng, /*with_kv=*/false);
  const PagedInputs p = make_paged(spec.dtype, c.layout, c.lengths, c.page_size, c.Hkv, D, c.share, rng);
  in.host.paged = p.host;
  in.device.paged = p.device;
  in.host.q_offset = in.device.q_offset = c.q_offset;
  const gpu_test::Expected e = expected(spec, in.host, d);

  // The contiguous calls of each sequence.
  struct One {
    int64_t b;
    Dims d;
    runtime::DeviceBuffer dk, dv;
    AttentionArgs args;
  };
  std::vector<One> ones;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = c.lengths[size_t(b)];
    if (n == 0) continue;
    One o{b, Dims{1, c.Hq, c.Hkv, c.Nq, n, D}, gpu_test::upload(p.gather_k(b, c.Hkv, D)),
          gpu_test::upload(p.gather_v(b, c.Hkv, D)), {}};
    o.args.q = TensorView::contiguous(static_cast<char*>(in.dq.get()) + b * c.Hq * c.Nq * D * 2, spec.dtype,
                                      {1, c.Hq, c.Nq, D});
    o.args.k = TensorView::contiguous(o.dk.get(), spec.dtype, {1, c.Hkv, n, D});
    o.args.v = TensorView::contiguous(o.dv.get(), spec.dtype, {1, c.Hkv, n, D});
    o.args.q_offset = c.q_offset;
    ones.push_back(std::move(o));
  }

  const RopeScaling scaling = spec.scalars.rope.rope_type;
  const bool length_dependent =
      spec.score != ScoreKind::ScaledDot && (scaling == RopeScaling::Dynamic || scaling == RopeScaling::Longrope);
  // Paged calls rotate in the kernel: the contiguous calls must too, to compare bits.
  KernelSpec contiguous_spec = spec;
  if (spec.score != ScoreKind::ScaledDot) contiguous_spec.rope_mode = RopeMode::Fused;

  for (const LaunchTuning& t : tunings) {
    SCOPED_TRACE(tuning_name(t));
    const LaunchPlan plan = runtime::cuda_kernel(spec).plan(in.device, spec.scalars, t);
    EXPECT_EQ(plan.kv_layout, KvLayout::Paged);
    if (t.variant == Variant::Auto) {
      EXPECT_EQ(plan.decode, c.Nq <= runtime::kDecodeMaxQueries);
    }
    if (auto_stages && t.num_splits == 0 && t.variant == Variant::Auto) {
      EXPECT_EQ(plan.module->spec.tile.stages, *auto_stages);
    }
    if (spec.score != ScoreKind::ScaledDot) {
      EXPECT_EQ(plan.rope_mode, RopeMode::Fused) << "paged calls rotate in the kernel";
    }
    const Outputs paged = run_device(spec, in.device, d, t);
    EXPECT_TRUE(matches(e, spec.dtype, paged));
    if (t.num_splits == 0) continue;  // the runtime's split choice may depend on the batch
    // Dynamic and longrope take the batch's longest sequence (reference::rope_seq_len), a
    // sequence's own call its own length: only the reference applies to them.
    if (length_dependent) continue;
    const auto rows = static_cast<size_t>(c.Hq * c.Nq);
    for (const One& o : ones) {
      SCOPED_TRACE("sequence " + std::to_string(o.b));
      const Outputs contiguous = run_device(contiguous_spec, o.args, o.d, t);
      Outputs slice;
      slice.out.assign(paged.out.begin() + static_cast<std::ptrdiff_t>(size_t(o.b) * rows * size_t(D)),
                       paged.out.begin() + static_cast<std::ptrdiff_t>(size_t(o.b + 1) * rows * size_t(D)));
      slice.lse.assign(paged.lse.begin() + static_cast<std::ptrdiff_t>(size_t(o.b) * rows),
                       paged.lse.begin() + static_cast<std::ptrdiff_t>(size_t(o.b + 1) * rows));
      // Same key tile, same arithmetic: the same bits. Hopper's D = 128 decode tile reads 128
      // keys per step from contiguous caches but from pages only in a split call's TMA module
      // with boxes of 64 rows or more (passes::cuda_decode_wide_keys); elsewhere paged calls keep
      // 64, sum in another order and agree to rounding.
      const int contiguous_bk =
          runtime::cuda_kernel(contiguous_spec).plan(o.args, spec.scalars, t).module->spec.tile.block_k;
      if (contiguous_bk == plan.module->spec.tile.block_k)
        EXPECT_TRUE(bitwise_equal(slice, contiguous, o.d)) << "paged differs from the contiguous call";
      else {
        // The two tiles' key warps split the keys differently, so P is rounded to 16 bits against
        // other running maxima (seed 9474841761440725388 moved one O element of a 37-key row by
        // 1.4e-3 that way): allow each call the reference rule's error over this sequence's rows.
        double naive = 0;
        for (size_t i = size_t(o.b) * rows * size_t(D); i < size_t(o.b + 1) * rows * size_t(D); ++i)
          if (std::isfinite(e.naive.out[i])) naive = std::max(naive, std::abs(e.naive.out[i] - e.ref.out[i]));
        EXPECT_TRUE(rounding_close(slice, contiguous, spec.dtype, 4 * naive)) << "paged differs from the contiguous call";
      }
    }
  }
}

}  // namespace attnfuse::decode_test
