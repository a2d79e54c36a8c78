// rope_window's per-tile pair plan (rope.cuh, pair_plan: one warp classifies every pair of a
// (query tile, key tile) as live, boundary or dead with ballots) run on the host by a warp of 32
// std::threads (codegen/kernel_host.hpp), against the float64 rule cell by cell: a pair is live
// when every cell of the tile keeps it (|Δ| <= k · λ_r), dead when none does, boundary otherwise.
// The plan decides which K dims the mma.sync kernels load and multiply, so a wrong bit drops a
// term or keeps one that ATFlash prunes.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "attnfuse/kernel_spec.hpp"
#include "rope/frequencies.hpp"
#include "runtime/rope_args.hpp"
// Last: it defines the CUDA keywords as macros.
#include "codegen/kernel_host.hpp"

namespace attnfuse {
namespace {

using attnfuse_kernels::PairPlan;
using attnfuse_kernels::RopeTables;

template <int kD, bool kNeox>
void check_plans(const RopeParams& params, int tiles, std::mt19937& rng) {
  ASSERT_EQ(params.style == RopeStyle::Neox, kNeox);
  const int rotary = rope::rotary_dim_of(params, kD), half = rotary / 2;
  constexpr int64_t kSeq = 200000;
  const auto& args = runtime::rope_args(params, true, kD, kSeq);
  const RopeTables r{args.turn, args.limit, args.factor, args.half, nullptr, nullptr, 0};
  const rope::RopeFrequencies f = rope::rope_frequencies(params, kD, kSeq);
  std::uniform_int_distribution<int> pos(0, kSeq - 200), len(1, 64), near(-300, 300), coin(0, 2);
  for (int t = 0; t < tiles; ++t) {
    // Query and key ranges: on the diagonal, near it, or anywhere.
    const int q_lo = pos(rng), q_hi = q_lo + len(rng) - 1;
    const int shape = coin(rng);
    int k_lo = shape == 0 ? q_lo : (shape == 1 ? std::max(0, q_lo + near(rng)) : pos(rng));
    const int k_hi = k_lo + len(rng) - 1;
    std::vector<PairPlan<kD>> plans(32);
    attnfuse_host_cuda::launch_on_host(1, 32, [&] {
      plans[threadIdx.x] = attnfuse_kernels::pair_plan<kD, kNeox>(r, q_lo, q_hi, k_lo, k_hi);
    });
    SCOPED_TRACE(::testing::Message() << "queries " << q_lo << ".." << q_hi << ", keys " << k_lo << ".." << k_hi);
    const PairPlan<kD>& p = plans[0];
    for (int lane = 1; lane < 32; ++lane) {  // the plan is uniform over the warp
      ASSERT_EQ(plans[lane].need8, p.need8);
      ASSERT_EQ(plans[lane].level, p.level);
      for (int w = 0; w < 4; ++w) ASSERT_EQ(plans[lane].live[w], p.live[w]);
    }
    std::vector<int> state(kD / 2, -1);  // per pair: 2 live, 1 boundary, 0 dead
    for (int pr = 0; pr < half; ++pr) {
      const double lambda = rope::wavelength(f.inv_freq[static_cast<size_t>(pr)]);
      int kept = 0;
      for (int q = q_lo; q <= q_hi; ++q)
        for (int k = k_lo; k <= k_hi; ++k) kept += rope::pair_in_window(params.window_k, lambda, q - k);
      const int cells = (q_hi - q_lo + 1) * (k_hi - k_lo + 1);
      state[pr] = kept == cells ? 2 : (kept > 0 ? 1 : 0);
      const bool live = (p.live[pr >> 5] >> (pr & 31)) & 1u, bnd = (p.boundary[pr >> 5] >> (pr & 31)) & 1u;
      ASSERT_EQ(live, state[pr] == 2) << "pair " << pr << " (lambda " << lambda << "): " << kept << " of " << cells;
      ASSERT_EQ(bnd, state[pr] == 1) << "pair " << pr << " (lambda " << lambda << "): " << kept << " of " << cells;
    }
    for (int pr = half; pr < 128; ++pr) {  // no pair past the rotary span
      ASSERT_FALSE((p.live[pr >> 5] >> (pr & 31)) & 1u) << pr;
      ASSERT_FALSE((p.boundary[pr >> 5] >> (pr & 31)) & 1u) << pr;
    }
    // Dims: the MMA multiplies unrotated dims and live pairs' dims; a 16-byte chunk loads where
    // any of its dims is multiplied or a boundary pair's.
    uint32_t need8 = 0;
    for (int d = 0; d < kD; ++d) {
      int pr = -1;
      if (d < rotary) pr = kNeox ? (d < half ? d : d - half) : d / 2;  // rope::pair_dims inverted
      const bool multiplied = pr < 0 || state[pr] == 2;
      ASSERT_EQ((p.live_dims[d / 32] >> (d % 32)) & 1u, multiplied ? 1u : 0u) << "dim " << d;
      if (multiplied || (pr >= 0 && state[pr] == 1)) need8 |= 1u << (d / 8);
    }
    ASSERT_EQ(p.need8, need8);
    // Leading dead pairs, in whole groups of 16, where the rotation spans the head.
    int dead = 0;
    while (dead < half && state[dead] == 0) ++dead;
    ASSERT_EQ(p.level, rotary == kD ? dead / 16 : 0);
  }
}

TEST(PairPlanOnHost, ClassifiesEveryPairAsTheCellsDo) {
  std::mt19937 rng(11);
  RopeParams llama32;  // the Llama-3.2-3B RoPE
  llama32.base = 500000;
  llama32.rope_type = RopeScaling::Llama3;
  llama32.factor = 32;
  llama32.original_max_position_embeddings = 8192;
  for (double k : {0.25, 1.0, 2.0, 8.0}) {
    llama32.window_k = k;
    check_plans<128, true>(llama32, 12, rng);
  }
  RopeParams gptj;  // interleaved pairs over part of the head
  gptj.style = RopeStyle::Gptj;
  gptj.rotary_dim = 32;
  gptj.window_k = 1;
  check_plans<64, false>(gptj, 12, rng);
  RopeParams qwen;  // Qwen2.5's base
  qwen.base = 1e7;
  qwen.window_k = 0.5;
  check_plans<64, true>(qwen, 12, rng);
}

}  // namespace
}  // namespace attnfuse
