// RoPE mathematics shared by the references, the CPU and GPU kernels and the CLI: per-pair
// inverse frequencies after Hugging Face scaling, the pair/dimension convention, a float64
// rotation, wavelengths and the rope_window (ATFlash) rule per cell and per tile.
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::rope {

// The frequencies of one RoPE configuration at one sequence length.
struct RopeFrequencies {
  // θ_r for r < rotary_dim/2, radians per position, after the rope_type's scaling.
  std::vector<double> inv_freq;
  // Hugging Face's `attention_scaling`: it multiplies cos and sin, i.e. every rotated pair of
  // both q and k (so the rotated part of the score scales by its square). Unrotated dims are
  // not scaled. 1 for default, linear, dynamic and llama3.
  double attention_factor = 1.0;
};

// The rotary dim a RoPE configuration uses for head dim `head_dim` (RopeParams::rotary_dim,
// 0 meaning the head dim). Throws Error(Verify) unless it is even, positive and <= head_dim.
int rotary_dim_of(const RopeParams& p, int head_dim);

// Checks every value rope_frequencies reads (rotary dim, base, factors, longrope list sizes,
// llama3/yarn original context); throws Error(Verify) naming the parameter and the fix.
void validate_rope_params(const RopeParams& p, int head_dim);

// θ_r and the attention factor exactly as transformers' ROPE_INIT_FUNCTIONS compute them
// (modeling_rope_utils.py), but in float64 (HF evaluates in float32; values agree to ~1e-7
// relative). `seq_len` is the number of positions in play (largest position + 1, HF's
// `max(position_ids) + 1`); only `dynamic` and `longrope` read it, and seq_len <= 0 means
// "not known" (HF's seq_len=None: dynamic is then the default RoPE, longrope uses
// short_factor). Conventions of RopeParams for scalings (see hf_config.hpp for the mapping):
//  - dynamic: original_max_position_embeddings is HF's config.max_position_embeddings; for
//    seq_len <= it the frequencies are the default ones.
//  - yarn: factor as given; attention_factor unset gives mscale/mscale_all_dim (both > 0,
//    DeepSeek) or 0.1 ln(factor) + 1.
//  - longrope: factor is HF's max_position_embeddings / original_max_position_embeddings when
//    the config has no explicit factor; long_factor is used iff seq_len > original.
// Throws Error(Verify) as validate_rope_params.
RopeFrequencies rope_frequencies(const RopeParams& p, int head_dim, int64_t seq_len);

// The two dimensions of rotated pair r: neox (HF rotate_half) pairs (r, r + rotary_dim/2),
// gptj (interleaved, rotate_every_two) pairs (2r, 2r + 1). Both rotate (a, b) by +angle:
// a' = a cos - b sin, b' = b cos + a sin.
struct PairDims {
  int a;
  int b;
};
constexpr PairDims pair_dims(RopeStyle style, int rotary_dim, int r) {
  return style == RopeStyle::Neox ? PairDims{r, r + rotary_dim / 2} : PairDims{2 * r, 2 * r + 1};
}

// Rotates vec[0 .. head_dim) in place as position `position`, in float64: pair r by the angle
// position * θ_r, then times freqs.attention_factor (HF multiplies cos and sin by it). Dims
// >= rotary_dim are left alone. `freqs` must come from rope_frequencies(p, head_dim, ...).
void rotate(const RopeParams& p, const RopeFrequencies& freqs, int64_t position, double* vec,
            int head_dim);

// ---- Wavelengths and the rope_window rule --------------------------------------------------

// λ_r = 2π / θ_r: positions per full turn of pair r.
double wavelength(double inv_freq);

// The window of pair r as an integer: the largest |Δ| the pair keeps, floor(k · λ_r), or
// INT64_MAX when k · λ_r does not fit (k huge or infinite). Since Δ is an integer,
// |Δ| <= k·λ_r  <=>  |Δ| <= window_limit(k, λ_r); kernels should compare against these integers
// (computed here in float64) so every backend prunes exactly the same cells. A negative or NaN
// product gives -1 (nothing kept).
int64_t window_limit(double k, double lambda_r);

// The per-pair integer windows for all pairs of `freqs` (window_limit of each λ_r).
std::vector<int64_t> window_limits(const RopeFrequencies& freqs, double k);

// rope_window's rule for one cell: pair r's term is kept iff |Δ| <= k · λ_r.
bool pair_in_window(double k, double lambda_r, int64_t delta);

// The smallest |Δ| = |q - j| over the tile q in [q_pos_lo, q_pos_hi], j in [k_pos_lo, k_pos_hi]
// (inclusive ranges of positions). Δ takes every integer in [q_lo - k_hi, q_hi - k_lo], so the
// minimum is 0 when that range straddles 0, else the end nearest 0. Requires non-empty ranges.
int64_t min_abs_delta_in_tile(int64_t q_pos_lo, int64_t q_pos_hi, int64_t k_pos_lo,
                              int64_t k_pos_hi);

// False only when every cell of the tile (inclusive position ranges as above) is out of pair
// r's window, i.e. when a kernel may skip loading and multiplying the pair's dims for the
// whole tile. Empty ranges (lo > hi) have no cell and give false.
bool pair_live_in_tile(double k, double lambda_r, int64_t q_pos_lo, int64_t q_pos_hi,
                       int64_t k_pos_lo, int64_t k_pos_hi);

}  // namespace attnfuse::rope
