// rope_window's per-tile pair plan (rope.cuh, pair_plan: one warp classifies every pair of a
// (query tile, key tile) as live, boundary or dead with ballots) run on the host by a warp of 32
// fibers (codegen/kernel_host.hpp), against the float64 rule cell by cell: a pair is live
// when every cell of the tile keeps it (|Δ| <= k · λ_r), dead when none does, boundary otherwise.
// The plan decides which K dims the mma.sync kernels load and multiply, so a wrong bit drops a
// term or keeps one that ATFlash prunes.
#include <gtest/gtest.h>

#include <algorithm>
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

// The wgmma form's cut (rope.cuh, window_cut: Q and K prerotated with interleaved pairs, so pair
// p is dims 2p, 2p + 1): it skips the leading k steps whose dims no cell of the warpgroup keeps,
// masks the lead step's dead pairs, and lists the pairs it multiplies that some cell of the warp's
// rows must have taken back out (corr). Exactness, cell by cell over the warp's rows and the
// tile's keys: a pair's term counts (multiplied, and not taken back out) iff the cell keeps it,
// and the skipped steps hold no pair any cell of the warpgroup keeps.
struct CutStats {
  int leads = 0, corrected = 0;  // cuts that skip k steps; cuts that correct a pair
};

template <int kD>
void check_cuts(const RopeParams& params, int tiles, std::mt19937& rng, CutStats& stats) {
  const int half = rope::rotary_dim_of(params, kD) / 2;
  constexpr int64_t kSeq = 300000;
  const auto& args = runtime::rope_args(params, true, kD, kSeq);
  const RopeTables r{args.turn, args.limit, args.factor, args.half, nullptr, nullptr, 0};
  const rope::RopeFrequencies f = rope::rope_frequencies(params, kD, kSeq);
  std::uniform_int_distribution<int> pos(0, kSeq - 400), near(-600, 200), warp_of(0, 3), coin(0, 1);
  for (int t = 0; t < tiles; ++t) {
    const int g_lo = pos(rng), g_hi = g_lo + 63;  // a warpgroup's 64 query rows
    const int w_lo = g_lo + 16 * warp_of(rng), w_hi = w_lo + 15;
    const int k_lo = std::max(0, g_lo + near(rng)), k_hi = k_lo + 127;
    const bool causal = coin(rng);  // causal ranges stop at the range's last query (fwd_wgmma.cuh, cut_of)
    const int gk_hi = causal ? std::max(k_lo, std::min(k_hi, g_hi)) : k_hi;
    const int wk_hi = causal ? std::max(k_lo, std::min(k_hi, w_hi)) : k_hi;
    std::vector<attnfuse_kernels::WindowCut<kD>> cuts(32);
    attnfuse_host_cuda::launch_on_host(1, 32, [&] {
      cuts[threadIdx.x] = attnfuse_kernels::window_cut<kD>(r, g_lo, g_hi, w_lo, w_hi, k_lo, gk_hi, wk_hi);
    });
    SCOPED_TRACE(::testing::Message() << "warpgroup " << g_lo << ".." << g_hi << ", warp " << w_lo << ".." << w_hi
                                      << ", keys " << k_lo << ".." << gk_hi << " / " << wk_hi);
    const auto& c = cuts[0];
    ASSERT_GE(c.lead, 0);
    ASSERT_LT(c.lead, kD / 16);
    stats.leads += c.lead > 0;
    for (uint32_t word : c.corr) stats.corrected += word != 0u;
    const auto bit = [](const uint32_t* words, int p) { return ((words[p >> 5] >> (p & 31)) & 1u) != 0; };
    const auto in = [&](int p, int q, int k) {
      return rope::pair_in_window(params.window_k, rope::wavelength(f.inv_freq[static_cast<size_t>(p)]), q - k);
    };
    for (int p = 0; p < half; ++p) {
      // Multiplied: pairs from the lead step on (8 pairs a step), less the lead step's unkept ones.
      const bool in_lead_step = p / 8 == c.lead;
      const bool multiplied = p / 8 >= c.lead && !(in_lead_step && !bit(c.kept, p));
      if (!multiplied) {  // skipped or masked: no cell of the warpgroup keeps it
        for (int q = g_lo; q <= g_hi; ++q)
          for (int k = k_lo; k <= gk_hi; ++k) ASSERT_FALSE(in(p, q, k)) << "pair " << p << " dropped at " << q << ", " << k;
      }
      for (int q = w_lo; q <= w_hi; ++q)
        for (int k = k_lo; k <= wk_hi; ++k) {
          if (causal && k > q) continue;  // masked whatever its score
          const bool counts = multiplied && (!bit(c.corr, p) || in(p, q, k));
          ASSERT_EQ(counts, in(p, q, k)) << "pair " << p << " at query " << q << ", key " << k;
        }
    }
  }
}

TEST(PairPlanOnHost, WgmmaWindowCutIsExactCellByCell) {
  std::mt19937 rng(5);
  RopeParams llama32;
  llama32.base = 500000;
  llama32.rope_type = RopeScaling::Llama3;
  llama32.factor = 32;
  llama32.original_max_position_embeddings = 8192;
  CutStats stats;
  for (double k : {0.25, 1.0, 4.0}) {
    llama32.window_k = k;
    check_cuts<128>(llama32, 10, rng, stats);
  }
  RopeParams qwen;
  qwen.base = 1e7;
  qwen.window_k = 1;
  check_cuts<64>(qwen, 10, rng, stats);
  // The sweep reaches both of the cut's mechanisms.
  EXPECT_GT(stats.leads, 0);
  EXPECT_GT(stats.corrected, 0);
}

}  // namespace
}  // namespace attnfuse
