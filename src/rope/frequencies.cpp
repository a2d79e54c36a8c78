// RoPE frequencies after Hugging Face scaling, the float64 rotation and the rope_window rule
// (see frequencies.hpp). Each scaling follows transformers' modeling_rope_utils.py
// (_compute_*_parameters, v5.x) line by line; only the arithmetic is float64 instead of float32.
#include "rope/frequencies.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include <fmt/format.h>

#include "attnfuse/error.hpp"

namespace attnfuse::rope {

namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

[[noreturn]] void bad(const std::string& msg) {
  throw Error(ErrorCode::Verify, "RoPE parameters: " + msg);
}

bool finite_positive(double v) { return std::isfinite(v) && v > 0.0; }

void need_positive(double v, const char* name, const char* why) {
  if (!finite_positive(v)) bad(fmt::format("{} = {} must be a finite number > 0 ({})", name, v, why));
}

void need_original(const RopeParams& p, const char* type, const char* why) {
  if (p.original_max_position_embeddings < 1)
    bad(fmt::format("rope_type={} needs original_max_position_embeddings >= 1 ({}); got {}", type,
                    why, p.original_max_position_embeddings));
}

// HF's `base ** (torch.arange(0, dim, 2) / dim)` for pair r: the unscaled 1/θ_r.
double pos_freq(double base, int r, int dim) {
  return std::pow(base, static_cast<double>(2 * r) / static_cast<double>(dim));
}

std::vector<double> default_inv_freq(double base, int dim) {
  std::vector<double> inv(static_cast<size_t>(dim / 2));
  for (int r = 0; r < dim / 2; ++r) inv[static_cast<size_t>(r)] = 1.0 / pos_freq(base, r, dim);
  return inv;
}

// yarn's get_mscale: the attention temperature for a context extension `scale`.
double yarn_mscale(double scale, double mscale = 1.0) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

RopeFrequencies yarn(const RopeParams& p, int dim) {
  const double factor = p.factor;
  const double orig = static_cast<double>(p.original_max_position_embeddings);
  RopeFrequencies f;
  if (p.attention_factor)
    f.attention_factor = *p.attention_factor;
  else if (p.mscale != 0.0 && p.mscale_all_dim != 0.0)  // HF: `if mscale and mscale_all_dim`
    f.attention_factor = yarn_mscale(factor, p.mscale) / yarn_mscale(factor, p.mscale_all_dim);
  else
    f.attention_factor = yarn_mscale(factor);

  // The pair index at which a pair completes `rotations` turns over the original context.
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(orig / (rotations * kTwoPi))) / (2.0 * std::log(p.base));
  };
  // HF truncates (floor/ceil) by default and clamps to [0, dim - 1] (dim, not dim/2: HF's bound).
  double low = std::max(std::floor(correction_dim(p.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(p.beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF: prevent a zero-width ramp

  f.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int r = 0; r < dim / 2; ++r) {
    const double pf = pos_freq(p.base, r, dim);
    const double extrapolation = 1.0 / pf;
    const double interpolation = 1.0 / (factor * pf);
    const double ramp = std::clamp((r - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = 1.0 - ramp;
    f.inv_freq[static_cast<size_t>(r)] =
        interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return f;
}

RopeFrequencies llama3(const RopeParams& p, int dim) {
  const double orig = static_cast<double>(p.original_max_position_embeddings);
  const double low_freq_wavelen = orig / p.low_freq_factor;
  const double high_freq_wavelen = orig / p.high_freq_factor;
  RopeFrequencies f;
  f.inv_freq = default_inv_freq(p.base, dim);
  for (double& inv : f.inv_freq) {
    const double wavelen = kTwoPi / inv;
    // Long wavelengths are interpolated by `factor`, short ones kept, the band between blended.
    const double scaled = wavelen > low_freq_wavelen ? inv / p.factor : inv;
    const double smooth =
        (orig / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    inv = medium ? (1.0 - smooth) * scaled / p.factor + smooth * scaled : scaled;
  }
  return f;
}

RopeFrequencies dynamic(const RopeParams& p, int dim, int64_t seq_len) {
  const double max_pos = static_cast<double>(p.original_max_position_embeddings);
  // HF: seq_len = max(seq_len, max_position_embeddings); None means max_position_embeddings.
  const double seq = seq_len > 0 ? std::max(static_cast<double>(seq_len), max_pos) : max_pos;
  const double base =
      p.base * std::pow(p.factor * seq / max_pos - (p.factor - 1.0),
                        static_cast<double>(dim) / static_cast<double>(dim - 2));
  return {default_inv_freq(base, dim), 1.0};
}

RopeFrequencies longrope(const RopeParams& p, int dim, int64_t seq_len) {
  const int64_t orig = p.original_max_position_embeddings;
  RopeFrequencies f;
  if (p.attention_factor)
    f.attention_factor = *p.attention_factor;
  else if (p.factor <= 1.0)
    f.attention_factor = 1.0;
  else
    f.attention_factor =
        std::sqrt(1.0 + std::log(p.factor) / std::log(static_cast<double>(orig)));
  // Without a known original context the short (in-context) factors are the only meaningful ones.
  const bool use_long = orig > 0 && seq_len > orig;
  const std::vector<double>& ext = use_long ? p.long_factor : p.short_factor;
  f.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int r = 0; r < dim / 2; ++r)
    f.inv_freq[static_cast<size_t>(r)] = 1.0 / (ext[static_cast<size_t>(r)] * pos_freq(p.base, r, dim));
  return f;
}

}  // namespace

int rotary_dim_of(const RopeParams& p, int head_dim) {
  if (head_dim < 2) bad(fmt::format("head_dim = {} must be at least 2 to rotate a pair", head_dim));
  const int rd = p.rotary_dim == 0 ? head_dim : p.rotary_dim;
  if (rd <= 0 || rd % 2 != 0 || rd > head_dim)
    bad(fmt::format("rotary_dim = {} must be even, positive and at most head_dim = {} (RoPE "
                    "rotates the first rotary_dim dimensions in pairs)", rd, head_dim));
  return rd;
}

void validate_rope_params(const RopeParams& p, int head_dim) {
  const int dim = rotary_dim_of(p, head_dim);
  if (!(std::isfinite(p.base) && p.base > 1.0))
    bad(fmt::format("base = {} must be a finite number > 1 (theta_r = base^(-2r/rotary_dim) must "
                    "shrink as r grows)", p.base));
  if (p.attention_factor) need_positive(*p.attention_factor, "attention_factor", "it multiplies cos and sin");
  const char* type = rope_scaling_name(p.rope_type);
  switch (p.rope_type) {
    case RopeScaling::None:
      return;
    case RopeScaling::Linear:
      need_positive(p.factor, "factor", "linear divides every theta_r by it");
      return;
    case RopeScaling::Dynamic:
      need_positive(p.factor, "factor", "dynamic NTK grows the base with it");
      need_original(p, type, "HF's max_position_embeddings, where the base starts growing");
      if (dim <= 2)
        bad(fmt::format("rope_type=dynamic needs rotary_dim > 2 (its base exponent is "
                        "dim/(dim-2)); got rotary_dim = {}", dim));
      return;
    case RopeScaling::Yarn:
      need_positive(p.factor, "factor", "yarn interpolates long wavelengths by it");
      need_original(p, type, "the ramp between extrapolated and interpolated pairs depends on it");
      need_positive(p.beta_fast, "beta_fast", "yarn's ramp bound in rotations");
      need_positive(p.beta_slow, "beta_slow", "yarn's ramp bound in rotations");
      if (!(p.mscale >= 0.0 && std::isfinite(p.mscale)) ||
          !(p.mscale_all_dim >= 0.0 && std::isfinite(p.mscale_all_dim)))
        bad(fmt::format("mscale = {} and mscale_all_dim = {} must be finite and >= 0 (0 = unused)",
                        p.mscale, p.mscale_all_dim));
      return;
    case RopeScaling::Llama3:
      need_positive(p.factor, "factor", "llama3 divides long-wavelength theta_r by it");
      need_positive(p.low_freq_factor, "low_freq_factor", "the long-wavelength bound is original/low_freq_factor");
      need_positive(p.high_freq_factor, "high_freq_factor", "the short-wavelength bound is original/high_freq_factor");
      if (!(p.high_freq_factor > p.low_freq_factor))
        bad(fmt::format("high_freq_factor ({}) must be greater than low_freq_factor ({}): llama3 "
                        "interpolates between the two wavelength bounds", p.high_freq_factor,
                        p.low_freq_factor));
      need_original(p, type, "the wavelength bounds are fractions of it");
      return;
    case RopeScaling::Longrope: {
      const size_t pairs = static_cast<size_t>(dim / 2);
      if (p.long_factor.size() != pairs || p.short_factor.size() != pairs)
        bad(fmt::format("rope_type=longrope needs one long_factor and one short_factor per rotated "
                        "pair: rotary_dim = {} rotates {} pairs, got {} long and {} short", dim,
                        pairs, p.long_factor.size(), p.short_factor.size()));
      for (size_t i = 0; i < pairs; ++i)
        for (const auto& [name, list] : {std::pair{"long_factor", &p.long_factor},
                                         std::pair{"short_factor", &p.short_factor}})
          if (!finite_positive((*list)[i]))  // formatted only on failure: this runs per call
            need_positive((*list)[i], fmt::format("{}[{}]", name, i).c_str(), "theta_r is divided by it");
      need_positive(p.factor, "factor", "the context extension, max_position/original");
      if (p.original_max_position_embeddings < 0)
        bad(fmt::format("original_max_position_embeddings = {} must be >= 1 (or 0: unknown)",
                        p.original_max_position_embeddings));
      if (!p.attention_factor && p.factor > 1.0 && p.original_max_position_embeddings < 2)
        bad(fmt::format("rope_type=longrope with factor = {} > 1 needs original_max_position_embeddings "
                        ">= 2 (its attention factor is sqrt(1 + ln(factor)/ln(original))) or an "
                        "explicit attention_factor", p.factor));
      return;
    }
  }
}

RopeFrequencies rope_frequencies(const RopeParams& p, int head_dim, int64_t seq_len) {
  validate_rope_params(p, head_dim);
  const int dim = rotary_dim_of(p, head_dim);
  switch (p.rope_type) {
    case RopeScaling::None:
      return {default_inv_freq(p.base, dim), 1.0};
    case RopeScaling::Linear: {
      RopeFrequencies f{default_inv_freq(p.base, dim), 1.0};
      for (double& inv : f.inv_freq) inv /= p.factor;
      return f;
    }
    case RopeScaling::Dynamic: return dynamic(p, dim, seq_len);
    case RopeScaling::Yarn: return yarn(p, dim);
    case RopeScaling::Llama3: return llama3(p, dim);
    case RopeScaling::Longrope: return longrope(p, dim, seq_len);
  }
  throw Error(ErrorCode::Internal, "rope_frequencies: unknown rope_type");
}

void rotate(const RopeParams& p, const RopeFrequencies& freqs, int64_t position, double* vec,
            int head_dim) {
  const int dim = rotary_dim_of(p, head_dim);
  if (freqs.inv_freq.size() != static_cast<size_t>(dim / 2))
    throw Error(ErrorCode::Internal,
                fmt::format("rope::rotate: {} frequencies for rotary_dim {} (compute them with "
                            "rope_frequencies for the same parameters)", freqs.inv_freq.size(), dim));
  const double pos = static_cast<double>(position);
  for (int r = 0; r < dim / 2; ++r) {
    const double angle = pos * freqs.inv_freq[static_cast<size_t>(r)];
    const double c = std::cos(angle) * freqs.attention_factor;
    const double s = std::sin(angle) * freqs.attention_factor;
    const PairDims d = pair_dims(p.style, dim, r);
    const double a = vec[d.a], b = vec[d.b];
    vec[d.a] = a * c - b * s;
    vec[d.b] = b * c + a * s;
  }
}

double wavelength(double inv_freq) { return kTwoPi / inv_freq; }

int64_t window_limit(double k, double lambda_r) {
  const double w = k * lambda_r;
  if (!(w >= 0.0)) return -1;                        // negative or NaN: no |Δ| qualifies
  if (w >= 0x1p63) return std::numeric_limits<int64_t>::max();  // beyond any position
  return static_cast<int64_t>(std::floor(w));
}

std::vector<int64_t> window_limits(const RopeFrequencies& freqs, double k) {
  std::vector<int64_t> out;
  out.reserve(freqs.inv_freq.size());
  for (double inv : freqs.inv_freq) out.push_back(window_limit(k, wavelength(inv)));
  return out;
}

bool pair_in_window(double k, double lambda_r, int64_t delta) {
  const int64_t w = window_limit(k, lambda_r);
  // Written as a two-sided compare so that |INT64_MIN| never has to be formed.
  return w >= 0 && delta <= w && delta >= -w;
}

int64_t min_abs_delta_in_tile(int64_t q_pos_lo, int64_t q_pos_hi, int64_t k_pos_lo,
                              int64_t k_pos_hi) {
  const int64_t lo = q_pos_lo - k_pos_hi;  // smallest Δ in the tile
  const int64_t hi = q_pos_hi - k_pos_lo;  // largest Δ in the tile
  if (lo > 0) return lo;                   // every key strictly before every query
  if (hi < 0) return -hi;                  // every key strictly after every query
  return 0;                                // the tile straddles the diagonal
}

bool pair_live_in_tile(double k, double lambda_r, int64_t q_pos_lo, int64_t q_pos_hi,
                       int64_t k_pos_lo, int64_t k_pos_hi) {
  if (q_pos_lo > q_pos_hi || k_pos_lo > k_pos_hi) return false;
  return min_abs_delta_in_tile(q_pos_lo, q_pos_hi, k_pos_lo, k_pos_hi) <= window_limit(k, lambda_r);
}

}  // namespace attnfuse::rope
