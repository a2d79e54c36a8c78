// rope_mode = auto: the cost model of rope_placement.hpp.
#include "passes/rope_placement.hpp"

#include <algorithm>
#include <cmath>

namespace attnfuse::passes {
namespace {

// The fused decode tile's rotation, fitted to an H100 (bench/results/2026-12-05-h100-session40/
// call3/, fused - plain decode at 32k keys, D = 128): Llama-3-8B B1 0.068 - 0.057 = 11 us for
// 16.8M pair rotations (1.5e12/s), 70B B1 0.0725 - 0.0585 = 14 us for 16.8M (1.2e12/s), 8B B8
// 0.3825 - 0.349 = 34 us for 134M (3.9e12/s: eight times the blocks hide more of it). The
// model takes B1's rate, so it is near the one-sequence calls and an upper bound at B8 (90 us
// predicted). Prerotate's pass there: 52, 65 and 376 us measured, 48, 48 and 361 by
// bytes / BW + L. Per key and KV head that is 171 ps against the fused rotation's 43 ps.
constexpr double kDecodeRotationRate = 1.5e12;

}  // namespace

RopeCostModel rope_cost_model_h200(bool wgmma_prerotate) {
  if (wgmma_prerotate) {
    // Fitted to bench/results/2026-12-01-h200-decoupled/before/rope_placement.json (bf16,
    // causal, the wgmma prerotated kernel against the mma.sync fused one):
    //  - rho: fused / prerotate time is 3.02 (Llama-3-8B B1, N = 16k) and 2.99 (B4) -> 2.0
    //    (GPT-2 B4 at 8k: 2.39).
    //  - flops: the prerotated kernel's ~480 TFLOP/s at N >= 8k (Llama-3-8B).
    //  - launch: 0. Prerotate is ahead at every length measured, down to N = 256 (Llama-3-8B
    //    B1: 0.035 vs 0.038 ms; B4: 0.055 vs 0.058 ms; GPT-2 B4 at 512: 0.052 vs 0.059 ms):
    //    the fused kernel's own fixed costs (tables, rotating Q) weigh as much as the extra
    //    launch. The model's crossovers: N* = 200 (Llama-3-8B), 320 (GPT-2).
    return RopeCostModel{2.0, 480e12, 3.0e12, 0.0, kDecodeRotationRate};
  }
  // Fitted to bench/results/2026-11-30-h200-rope/rope_placement.json (bf16, causal):
  //  - rho: fused / prerotate time at N = 16k, where both extras are small next to the
  //    attention itself: Llama-3-8B 12.76 / 7.84 ms (B1), 50.5 / 31.1 ms (B4) -> 0.6.
  //    (The rotation of each K tile runs between two barriers with one block of 8 warps per
  //    SM, so little of it hides behind the tensor cores.)
  //  - flops: the prerotated kernel's 250-280 TFLOP/s at N >= 8k.
  //  - bandwidth, launch: the rotation kernel moves 4 bytes per element of Q and K, at about
  //    3 TB/s, plus one more launch (~3 us). Measured crossovers: Llama-3-8B B1 within 4% at
  //    N = 256-512 (launch-bound), prerotate ahead from 1024; B4 fused ahead at 256, prerotate
  //    from 512; GPT-2 B4 fused ahead at 512, prerotate from 1024. The model puts them at
  //    N* = 600, 435 and 810 (rope_crossover_length).
  return RopeCostModel{0.6, 250e12, 3.0e12, 3e-6, kDecodeRotationRate};
}

double visited_cells(const RopeCallShape& s) {
  double cells = 0;
  const double nq = static_cast<double>(s.len_q), nk = static_cast<double>(s.len_k);
  if (!s.causal && s.window <= 0) return nq * nk;
  // Row i keeps keys j in [lo_i, hi_i): causal hi = i + q_offset + 1, window |Δ| < w.
  // Sum in closed form over rows by splitting where the clamps change would be exact; a sum
  // over 64 row groups is within a fraction of a percent and keeps this readable.
  const int64_t groups = std::min<int64_t>(s.len_q, 64);
  for (int64_t gi = 0; gi < groups; ++gi) {
    const int64_t i0 = s.len_q * gi / groups, i1 = s.len_q * (gi + 1) / groups;
    const double i = 0.5 * static_cast<double>(i0 + i1 - 1) + static_cast<double>(s.q_offset);
    double hi = s.causal ? i + 1 : nk;
    double lo = 0;
    if (s.window > 0) {
      lo = i - static_cast<double>(s.window) + 1;
      if (!s.causal) hi = std::min(hi, i + static_cast<double>(s.window));
    }
    hi = std::clamp(hi, 0.0, nk);
    lo = std::clamp(lo, 0.0, nk);
    cells += static_cast<double>(i1 - i0) * std::max(0.0, hi - lo);
  }
  return cells;
}

RopeExtraCosts rope_extra_costs(const RopeCallShape& s, const RopeCostModel& m) {
  RopeExtraCosts c;
  if (s.decode) {
    // Each visited key is rotated once per KV head: the rows' key ranges overlap but for the
    // causal offsets between them.
    const double rows = static_cast<double>(std::max<int64_t>(s.len_q, 1));
    const double keys = std::min(static_cast<double>(s.len_k), visited_cells(s) / rows + rows - 1);
    c.fused_s = static_cast<double>(s.batch * s.heads_kv) * keys * (0.5 * static_cast<double>(s.head_dim)) /
                m.decode_rotation_rate;
  } else {
    const double work = 4.0 * static_cast<double>(s.head_dim) * static_cast<double>(s.batch * s.heads_q) *
                        visited_cells(s);
    c.fused_s = m.rho * work / m.flops;
  }
  const double bytes = 4.0 * static_cast<double>(s.head_dim) *
                       static_cast<double>(s.batch * (s.heads_q * s.len_q + s.heads_kv * s.len_k));
  c.prerotate_s = bytes / m.bandwidth + m.launch_s;
  return c;
}

RopeMode choose_rope_mode(const RopeCallShape& s, const RopeCostModel& m) {
  const RopeExtraCosts c = rope_extra_costs(s, m);
  return c.fused_s > c.prerotate_s ? RopeMode::Prerotate : RopeMode::Fused;
}

double rope_crossover_length(int64_t heads_q, int64_t heads_kv, int64_t head_dim, int64_t batch,
                             const RopeCostModel& m) {
  const double d = static_cast<double>(head_dim), b = static_cast<double>(batch);
  const double qa = 2.0 * m.rho * b * static_cast<double>(heads_q) * d / m.flops;
  const double qb = 4.0 * b * static_cast<double>(heads_q + heads_kv) * d / m.bandwidth;
  return (qb + std::sqrt(qb * qb + 4.0 * qa * m.launch_s)) / (2.0 * qa);
}

}  // namespace attnfuse::passes
