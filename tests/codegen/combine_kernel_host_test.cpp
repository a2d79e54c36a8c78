// The split-KV combine kernel of combine.cuh (CombineKernel over SplitMerge) run as a whole grid
// on the host (codegen/kernel_host.hpp: fibers for a block's threads, warp shuffles at a
// barrier of 32), against the log-sum-exp merge in float64: CI has no GPU, and this is the step
// that makes a split decode call's rows from its parts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "codegen/cuda/emit.hpp"
// Last: it defines the CUDA keywords as macros.
#include "codegen/kernel_host.hpp"

namespace attnfuse {
namespace {

using attnfuse_kernels::bf16_t;
using attnfuse_kernels::CombineKernel;
using attnfuse_kernels::CombineParams;
using attnfuse_kernels::ElementTraits;
using attnfuse_kernels::f16_t;

// B x Hq x Nq rows of Dv from `splits` parts; `empty` in [0, 1): the share of (split, row) parts
// with no kept key (LSE -inf, O zero), and row 0 empty in every split.
template <class E, int kDv>
void check_combine(int B, int Hq, int Nq, int splits, double empty, std::mt19937& rng) {
  const int64_t rows = int64_t{B} * Hq * Nq;
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<float> part_o(static_cast<size_t>(splits * rows * kDv)), part_lse(static_cast<size_t>(splits * rows));
  std::uniform_real_distribution<float> val(-3.f, 3.f), lse(-20.f, 20.f), coin(0.f, 1.f);
  for (int s = 0; s < splits; ++s)
    for (int64_t r = 0; r < rows; ++r) {
      const bool none = r == 0 || coin(rng) < empty;
      part_lse[s * rows + r] = none ? -std::numeric_limits<float>::infinity() : lse(rng);
      for (int d = 0; d < kDv; ++d) part_o[(s * rows + r) * kDv + d] = none ? 0.f : val(rng);
    }
  // O strided as a caller's tensor may be: rows of Dv + 8, heads and batches packed after them.
  const int64_t pitch = kDv + 8;
  std::vector<E> o(static_cast<size_t>(rows * pitch), E{0x7fff});  // poisoned
  std::vector<float> out_lse(static_cast<size_t>(rows), 12345.f);
  CombineParams p{};
  p.part_o = part_o.data();
  p.part_lse = part_lse.data();
  p.o = o.data();
  p.lse = out_lse.data();
  p.o_stride[0] = int64_t{Hq} * Nq * pitch, p.o_stride[1] = Nq * pitch, p.o_stride[2] = pitch;
  p.lse_stride[0] = int64_t{Hq} * Nq, p.lse_stride[1] = Nq;
  p.heads_q = Hq, p.len_q = Nq, p.rows = rows, p.num_splits = splits;
  constexpr int kWarps = CombineKernel<E, kDv>::kWarps;
  ASSERT_EQ(codegen::cuda::kCombineThreads, 32 * kWarps);
  attnfuse_host_cuda::launch_on_host(static_cast<unsigned>((rows + kWarps - 1) / kWarps), codegen::cuda::kCombineThreads,
                                     [&] { CombineKernel<E, kDv>::run(p); });
  constexpr int kMantissa = std::is_same_v<E, bf16_t> ? 7 : 10;
  for (int64_t r = 0; r < rows; ++r) {
    double m = ninf;
    for (int s = 0; s < splits; ++s) m = std::max(m, double{part_lse[s * rows + r]});
    double sum = 0;
    std::vector<double> acc(kDv, 0.0);
    for (int s = 0; s < splits; ++s) {
      const double l = part_lse[s * rows + r];
      if (l == ninf) continue;
      const double w = std::exp(l - m);
      sum += w;
      for (int d = 0; d < kDv; ++d) acc[d] += w * part_o[(s * rows + r) * kDv + d];
    }
    const double want_lse = sum > 0 ? m + std::log(sum) : ninf;
    if (sum > 0) ASSERT_NEAR(out_lse[r], want_lse, 1e-5 * std::max(1.0, std::fabs(want_lse))) << "row " << r;
    else ASSERT_EQ(out_lse[r], -std::numeric_limits<float>::infinity()) << "row " << r << " has no kept key";
    for (int d = 0; d < kDv; ++d) {
      const double want = sum > 0 ? acc[d] / sum : 0.0;
      const float got = ElementTraits<E>::to_float(o[r * pitch + d].bits);
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(want), 1e-3)) - kMantissa);
      ASSERT_NEAR(got, want, ulp + 1e-5) << "row " << r << " dim " << d << " of " << splits << " splits";
    }
    for (int d = kDv; d < pitch; ++d) ASSERT_EQ(o[r * pitch + d].bits, 0x7fff) << "padding of row " << r << " written";
  }
}

TEST(CombineKernelOnHost, MergesSplitPartsByLogSumExp) {
  std::mt19937 rng(2026);
  check_combine<bf16_t, 128>(2, 8, 3, 5, 0.2, rng);     // Llama-3 heads, a few parts
  check_combine<bf16_t, 128>(1, 4, 1, 40, 0.5, rng);    // more parts than one unrolled batch and a lane
  check_combine<f16_t, 64>(1, 12, 2, 3, 0.0, rng);      // GPT-2 heads
  check_combine<bf16_t, 256>(1, 2, 5, 128, 0.3, rng);   // two chunks per lane, the most splits
}

}  // namespace
}  // namespace attnfuse
