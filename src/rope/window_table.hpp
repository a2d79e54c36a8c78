// ATFlash window tables: per RoPE pair its frequency, wavelength and rope_window width, and for a
// causal length N the predicted pruned share of QK work and the resulting ceiling speedup
// (`attnfuse window-table` prints format_window_table).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnfuse/kernel_spec.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::rope {

struct WindowRow {
  int pair = 0;               // r
  double theta = 0.0;         // θ_r after scaling (radians per position)
  double lambda = 0.0;        // λ_r = 2π / θ_r (positions per turn)
  double window = 0.0;        // w_r = k · λ_r (positions)
  int64_t limit = 0;          // floor(w_r): the largest |Δ| the pair keeps (window_limit)
  int64_t pruned_cells = 0;   // causal cells (0 <= Δ < N) where the pair's term is dropped
  double pruned_share = 0.0;  // pruned_cells / (N (N + 1) / 2)
};

// Counting conventions (all over the causal N×N square: the N(N+1)/2 cells with Δ in [0, N),
// Δ = d occurring N - d times):
//  - pruned_share: rotated-pair QK terms dropped over all cells divided by all rotated-pair
//    terms, Σ_r pruned_cells_r / (P · N(N+1)/2), P = rotary_dim / 2 pairs.
//  - retained_share s: QK work counts D multiply-adds per cell (D = head_dim); rotated pair r
//    contributes its 2 only in cells where it is kept, the D - rotary_dim unrotated dims
//    always contribute. So s = 1 - (rotary_dim / D) · pruned_share.
//  - ceiling_speedup = 2 / (1 + s): attention is half QK^T and half PV in multiply-adds; the
//    window shrinks the QK half to s and leaves the PV half (and the softmax) alone.
struct WindowTable {
  double k = 0.0;
  int64_t seq_len = 0;  // N
  int head_dim = 0;
  int rotary_dim = 0;
  double attention_factor = 1.0;
  std::vector<WindowRow> rows;  // one per pair, r = 0 .. rotary_dim/2 - 1
  double pruned_share = 0.0;
  double retained_share = 1.0;
  double ceiling_speedup = 1.0;
};

// Cells of a causal N×N square with Δ > limit: Σ_{d = limit+1}^{N-1} (N - d) = m(m+1)/2 with
// m = N - 1 - limit clamped to [0, N] (limit < 0 prunes every cell). Exact in int64 for
// N <= 2^31.
int64_t pruned_causal_cells(int64_t limit, int64_t seq_len);

// The table for k and causal length N = seq_len (which is also the sequence length the
// frequencies are computed for: it matters to dynamic and longrope). Throws Error(Verify) for
// k not > 0 (or NaN), seq_len outside [1, 2^31], or bad RoPE parameters.
WindowTable window_table(const RopeParams& p, int head_dim, double k, int64_t seq_len);

// The same from frequencies already computed (rotary_dim = 2 · freqs.inv_freq.size()).
WindowTable window_table(const RopeFrequencies& freqs, int head_dim, double k, int64_t seq_len);

// A header line, one row per pair (r, θ_r, λ_r, w_r, pruned share of the pair), then
// `retained_share=<s>` and `ceiling_speedup=<2/(1+s)>`, and as the exact last line
// `pruned_share=<float>` (fixed, 6 decimals), each line ending in '\n'.
std::string format_window_table(const WindowTable& t);

}  // namespace attnfuse::rope
