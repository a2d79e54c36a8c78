// The tile pass's model for rope_mode = auto on CUDA: rotate Q and K inside the attention kernel
// (fused) or in a separate kernel first (prerotate), chosen per call from the shapes.
//
// Costs beyond the rope-free attention kernel:
//  - fused: every visited K tile is rotated once per query tile and query head, a fixed share
//    rho of that tile's MMA work, so the extra time is rho * W / F (W = 4 * D * visited cells,
//    F = the kernel's throughput). It grows like N^2 for self-attention.
//  - prerotate: Q and K are read and written once (bytes = 4 * D * (B*Hq*Nq + B*Hkv*Nk) for
//    16-bit elements) plus a launch: bytes / BW + L. It grows like N.
// Prerotate wins iff rho * W / F > bytes / BW + L. For causal self-attention (W ~ 2 B Hq D N^2)
// this is a N^2 - b N - L > 0 with a = 2 rho B Hq D / F, b = 4 B (Hq + Hkv) D / BW, so the
// crossover is N* = (b + sqrt(b^2 + 4 a L)) / (2 a). The square root comes only from the launch
// term; without it N* = b / a = 2 F (Hq + Hkv) / (rho Hq BW), independent of B and D. (The
// paper's Rotation Calculus takes a square root of a linear-over-quadratic ratio, which has no
// such term; README "RoPE placement" compares the two with the H200 measurements.)
//
// Decode calls (the GQA-packed decode tile) are priced apart: their fused rotation is not a
// share of MMA work, which one query row makes tiny, but D/2 pair rotations per visited key and
// KV head whatever the rows: B * Hkv * keys * D/2 / decode_rotation_rate. Prerotate's pass is
// the same bytes / BW + L as above, 4x the fused rotation per key at the measured rates, so
// decode stays fused at every length.
#pragma once

#include <cstdint>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::passes {

// Measured constants of the model for one GPU class (bench/results/*rope-placement*).
struct RopeCostModel {
  double rho;         // fused rotation work / MMA work of the same tiles
  double flops;       // attention kernel throughput, FLOP/s
  double bandwidth;   // rotation kernel's bytes/s
  double launch_s;    // extra launch and dependency cost of the rotation kernel, seconds
  // Decode calls: the fused rotation's pair rotations per second beyond the plain decode tile.
  double decode_rotation_rate;
};

// The H200 constants (used for every sm_80+ device; the decode terms were measured on an H100,
// where the H200 has not been lent since the placements were first timed in decode). Both
// placements on mma.sync kernels, or (`wgmma_prerotate`) the Hopper pairing: the prerotated
// call runs the plain kernel's wgmma form while the fused rotation stays on mma.sync, so rho
// also carries the gap between the two forms.
RopeCostModel rope_cost_model_h200(bool wgmma_prerotate = false);

// One call's shapes.
struct RopeCallShape {
  int64_t batch, heads_q, heads_kv, len_q, len_k, head_dim;
  int64_t q_offset;  // resolved (bottom-right default applied)
  bool causal;
  int64_t window;    // sliding window w (keep |Δ| < w), 0 for none
  bool decode = false;  // the call runs the GQA-packed decode tile (runtime: few queries per sequence)
};

// Cells of the score matrix the kernel visits (masked-out regions skipped), per (b, h).
double visited_cells(const RopeCallShape& s);

// Each placement's time beyond the rope-free kernel, seconds, under `model`.
struct RopeExtraCosts {
  double fused_s = 0;
  double prerotate_s = 0;
};
RopeExtraCosts rope_extra_costs(const RopeCallShape& s, const RopeCostModel& model);

// Fused or Prerotate for this call under `model` (the cheaper extra; fused on a tie).
RopeMode choose_rope_mode(const RopeCallShape& s, const RopeCostModel& model);

// Causal self-attention crossover N* of the model (the closed form above), for documentation
// and tests.
double rope_crossover_length(int64_t heads_q, int64_t heads_kv, int64_t head_dim, int64_t batch,
                             const RopeCostModel& model);

}  // namespace attnfuse::passes
