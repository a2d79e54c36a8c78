// The quality dial of ATFlash's rope_window, computed: for one RoPE configuration and a sweep of
// k, how far each windowed causal softmax row moves from plain rope's (top-1 agreement and
// KL(P_rope || P_window)), in float64 on synthetic Q/K of several kinds. Shared by the
// rope_window_quality program (bench/rope_window_quality.cpp) and its test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "attnfuse/kernel_spec.hpp"
#include "rope/frequencies.hpp"
#include "rope/window_table.hpp"

namespace attnfuse::quality {

// ---- The problem ---------------------------------------------------------------------------

// One attention head of self-attention: Nq = Nk = seq_len, query i at position i (q_offset 0),
// key j at position j, so Δ = i - j; causal mask; scale 1/sqrt(head_dim). The RoPE parameters'
// window_k is not read: the sweep passes its ks explicitly.
struct Problem {
  RopeParams rope;
  int head_dim = 128;
  int64_t seq_len = 4096;
};

// ---- Inputs --------------------------------------------------------------------------------

// The kinds of synthetic Q/K (each head draws its own from the seed):
//  - Random: every element of q and k i.i.d. normal(0, 1). Scores have std about 1: flat rows.
//  - LowRank: q_i = U a_i / 2, k_j = U b_j / 2 with one D×4 normal U per head shared by q and
//    k, a_i, b_j normal: content matching in a 4-dim subspace (element std 1, peaked rows).
//  - Positional: q_i = 2 (q̄ + 0.1 n_i), k_j = 2 (k̄ + 0.1 m_j), q̄ and k̄ normal per head, n, m
//    normal per position: q and k nearly constant, so a score is mostly a function of Δ (RoPE's
//    relative-position signal). The case where dropping high-frequency terms matters most.
//  - Sinks: Random plus "attention sinks": a ±1 direction s on the dims of the (up to) 8
//    longest-wavelength pairs is added, times 2.5, to every query and to keys 0..3. Those keys
//    win rows through pairs that barely rotate, as the sinks of trained models do.
enum class InputKind { Random, LowRank, Positional, Sinks };
inline constexpr InputKind kAllInputKinds[] = {InputKind::Random, InputKind::LowRank,
                                               InputKind::Positional, InputKind::Sinks};

inline const char* input_kind_name(InputKind kind) {
  switch (kind) {
    case InputKind::Random: return "random";
    case InputKind::LowRank: return "low_rank";
    case InputKind::Positional: return "positional";
    case InputKind::Sinks: return "sinks";
  }
  return "?";
}

inline std::optional<InputKind> parse_input_kind(std::string_view name) {
  for (InputKind kind : kAllInputKinds)
    if (name == input_kind_name(kind)) return kind;
  return std::nullopt;
}

// Q and K of one head before rotation, row-major [seq_len, head_dim].
struct HeadInputs {
  std::vector<double> q;
  std::vector<double> k;
};

// splitmix64: turns (seed, kind, head) into independent generator seeds.
inline uint64_t mix_seed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The rotated pairs ordered by wavelength, longest first (smallest θ_r first; ties keep pair
// order). Under rope_window the pairs kept at a distance Δ are always a prefix of this order:
// the integer limit floor(k · λ_r) never decreases as λ_r grows.
inline std::vector<int> pairs_by_wavelength(const rope::RopeFrequencies& freqs) {
  std::vector<int> order(freqs.inv_freq.size());
  for (size_t o = 0; o < order.size(); ++o) order[o] = static_cast<int>(o);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return freqs.inv_freq[static_cast<size_t>(a)] < freqs.inv_freq[static_cast<size_t>(b)];
  });
  return order;
}

// The inputs of head `head` for `kind` (deterministic in seed, kind and head).
inline HeadInputs make_inputs(InputKind kind, const Problem& pb, uint64_t seed, int head) {
  const int64_t n = pb.seq_len;
  const int d = pb.head_dim;
  std::mt19937_64 rng(mix_seed(mix_seed(seed) ^ (static_cast<uint64_t>(kind) << 32 | static_cast<uint64_t>(head))));
  std::normal_distribution<double> normal(0.0, 1.0);
  HeadInputs in;
  in.q.resize(static_cast<size_t>(n * d));
  in.k.resize(static_cast<size_t>(n * d));
  auto fill_normal = [&](std::vector<double>& v) {
    for (double& x : v) x = normal(rng);
  };
  switch (kind) {
    case InputKind::Random:
      fill_normal(in.q);
      fill_normal(in.k);
      break;
    case InputKind::LowRank: {
      constexpr int kRank = 4;
      std::vector<double> u(static_cast<size_t>(d * kRank));
      fill_normal(u);
      auto project = [&](std::vector<double>& v) {
        for (int64_t i = 0; i < n; ++i) {
          double a[kRank];
          for (double& x : a) x = normal(rng);
          for (int x = 0; x < d; ++x) {
            double s = 0.0;
            for (int m = 0; m < kRank; ++m) s += u[static_cast<size_t>(x * kRank + m)] * a[m];
            v[static_cast<size_t>(i * d + x)] = s / std::sqrt(double(kRank));
          }
        }
      };
      project(in.q);
      project(in.k);
      break;
    }
    case InputKind::Positional: {
      constexpr double kGain = 2.0, kNoise = 0.1;
      std::vector<double> q_mean(static_cast<size_t>(d)), k_mean(static_cast<size_t>(d));
      fill_normal(q_mean);
      fill_normal(k_mean);
      for (int64_t i = 0; i < n; ++i)
        for (int x = 0; x < d; ++x) {
          in.q[static_cast<size_t>(i * d + x)] = kGain * (q_mean[size_t(x)] + kNoise * normal(rng));
          in.k[static_cast<size_t>(i * d + x)] = kGain * (k_mean[size_t(x)] + kNoise * normal(rng));
        }
      break;
    }
    case InputKind::Sinks: {
      constexpr double kStrength = 2.5;
      constexpr int64_t kSinkKeys = 4;
      constexpr size_t kSinkPairs = 8;
      fill_normal(in.q);
      fill_normal(in.k);
      const rope::RopeFrequencies freqs = rope::rope_frequencies(pb.rope, d, n);
      const int rotary_dim = static_cast<int>(2 * freqs.inv_freq.size());
      const std::vector<int> order = pairs_by_wavelength(freqs);
      std::vector<double> s(static_cast<size_t>(d), 0.0);
      std::bernoulli_distribution coin(0.5);
      for (size_t o = 0; o < std::min(kSinkPairs, order.size()); ++o) {
        const rope::PairDims pd = rope::pair_dims(pb.rope.style, rotary_dim, order[o]);
        s[size_t(pd.a)] = coin(rng) ? kStrength : -kStrength;
        s[size_t(pd.b)] = coin(rng) ? kStrength : -kStrength;
      }
      for (int64_t i = 0; i < n; ++i)
        for (int x = 0; x < d; ++x) {
          in.q[static_cast<size_t>(i * d + x)] += s[size_t(x)];
          if (i < kSinkKeys) in.k[static_cast<size_t>(i * d + x)] += s[size_t(x)];
        }
      break;
    }
  }
  return in;
}

// ---- Which rows ----------------------------------------------------------------------------

// Query rows to evaluate, ascending, each with the number of rows it stands for (weights sum
// to seq_len, so weighted means estimate the mean over all rows).
struct RowSample {
  std::vector<int64_t> rows;
  std::vector<double> weights;
  bool all = false;  // every row, weight 1
};

// Every row when seq_len <= all_rows_up_to or seq_len <= max_rows. Otherwise max_rows rows: the
// last max_rows/8 (at least 1) rows, weight 1 each (they see the most keys, the hardest case for
// the window), and one row drawn uniformly (from `seed`) from each of the remaining
// max_rows - tail equal strata of [0, seq_len - tail), weighted by the stratum's size.
inline RowSample sample_rows(int64_t seq_len, int64_t max_rows, int64_t all_rows_up_to, uint64_t seed) {
  if (seq_len < 1) throw std::invalid_argument(fmt::format("sample_rows: seq_len {} must be >= 1", seq_len));
  if (max_rows < 2) throw std::invalid_argument(fmt::format("sample_rows: max_rows {} must be >= 2", max_rows));
  RowSample out;
  if (seq_len <= all_rows_up_to || seq_len <= max_rows) {
    out.all = true;
    for (int64_t i = 0; i < seq_len; ++i) out.rows.push_back(i), out.weights.push_back(1.0);
    return out;
  }
  const int64_t tail = std::max<int64_t>(1, max_rows / 8);
  const int64_t strata = max_rows - tail, body = seq_len - tail;  // body > strata: strata are non-empty
  std::mt19937_64 rng(mix_seed(seed ^ 0x5eedu));
  for (int64_t s = 0; s < strata; ++s) {
    const int64_t lo = s * body / strata, hi = (s + 1) * body / strata;
    out.rows.push_back(std::uniform_int_distribution<int64_t>(lo, hi - 1)(rng));
    out.weights.push_back(static_cast<double>(hi - lo));
  }
  for (int64_t i = body; i < seq_len; ++i) out.rows.push_back(i), out.weights.push_back(1.0);
  return out;
}

// ---- Per-row measures ----------------------------------------------------------------------

// log Σ_j exp(s_j) over s[0 .. n), and the first index of the maximum in `argmax`.
inline double log_sum_exp(const double* s, int64_t n, int64_t& argmax) {
  double m = s[0];
  argmax = 0;
  for (int64_t j = 1; j < n; ++j)
    if (s[j] > m) m = s[j], argmax = j;
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - m);
  return m + std::log(sum);
}

// One key's term of KL(P || W) from log p and log w, written as p log(p/w) - p + w: the extra
// -p + w sums to zero over a row (both rows are normalized), and the form is >= 0 term by term,
// so rounding can never make the row's KL negative. p·(d - 1 + e^-d) with d = log(p/w), by
// its Taylor series where d is tiny (where d + expm1(-d) would cancel).
inline double kl_term(double log_p, double log_w) {
  const double d = log_p - log_w;
  const double p = std::exp(log_p);
  if (std::abs(d) < 1e-3) return p * d * d * (0.5 - d * (1.0 / 6 - d * (1.0 / 24 - d / 120)));
  if (d > -30.0) return p * (d + std::expm1(-d));
  return std::exp(log_w) + p * (d - 1.0);  // w dominates: no cancellation left
}

// ---- The dial ------------------------------------------------------------------------------

// Accumulated measures of one k over evaluated (head, row) pairs.
struct DialPoint {
  double k = 0.0;
  int64_t rows = 0;        // (head, row) pairs evaluated
  double weight = 0.0;     // their total weight (RowSample::weights)
  double agree = 0.0;      // Σ weight · [argmax of the windowed row == argmax of the rope row]
  double kl_sum = 0.0;     // Σ weight · KL(P_rope || P_window), nats
  double max_kl = 0.0;     // over the evaluated rows
  int64_t kept_terms = 0;  // rotated-pair QK terms kept over the evaluated cells
  int64_t all_terms = 0;   // rotated-pair QK terms over the evaluated cells
  // Share of rotated-pair QK terms kept over the whole causal N×N square, closed form (the
  // complement of window_table's pruned_share; also defined for k = 0).
  double retained_share = 1.0;

  double top1() const { return weight > 0 ? agree / weight : 1.0; }
  double mean_kl() const { return weight > 0 ? kl_sum / weight : 0.0; }
  double retained_evaluated() const {
    return all_terms > 0 ? static_cast<double>(kept_terms) / static_cast<double>(all_terms) : 1.0;
  }
};

// Share of the P · N(N+1)/2 rotated-pair terms of a causal N×N square that the integer limits
// keep: 1 - Σ_r pruned_causal_cells(limit_r, N) / (P · N(N+1)/2).
inline double retained_causal_share(const std::vector<int64_t>& limits, int64_t seq_len) {
  if (limits.empty()) return 1.0;
  const double cells = 0.5 * static_cast<double>(seq_len) * static_cast<double>(seq_len + 1);
  double pruned = 0.0;
  for (int64_t limit : limits) pruned += static_cast<double>(rope::pruned_causal_cells(limit, seq_len));
  return 1.0 - pruned / (cells * static_cast<double>(limits.size()));
}

// Empty DialPoints for `ks` (k and the closed-form retained share set).
inline std::vector<DialPoint> make_points(const Problem& pb, const std::vector<double>& ks) {
  const rope::RopeFrequencies freqs = rope::rope_frequencies(pb.rope, pb.head_dim, pb.seq_len);
  std::vector<DialPoint> points;
  for (double k : ks) {
    DialPoint p;
    p.k = k;
    p.retained_share = retained_causal_share(rope::window_limits(freqs, k), pb.seq_len);
    points.push_back(p);
  }
  return points;
}

// Adds one head's `rows` into `points` (one per k, as make_points(pb, ks) made them).
//
// Per row i (keys j <= i, Δ = i - j), in float64: the rope score s_j = scale · <R(i) q_i, R(j) k_j>
// with the rotation of rope::rotate (frequencies at seq_len, HF attention factor included), and
// the windowed score w_j, the same sum over the unrotated dims and only those pairs r with
// Δ <= rope::window_limits(freqs, k)[r]. Both sums run over the same terms in the same order
// (unrotated dims, then pairs by wavelength, longest first), so a k that keeps every term gives
// w == s bit for bit (KL exactly 0, argmax equal). Then P = softmax(s), W = softmax(w):
// top-1 agreement [argmax W == argmax P] (first index on ties), KL(P || W) = Σ_j p_j log(p_j/w_j).
// Rows run in parallel (OpenMP); the sums are taken in row order, so results do not depend on
// the thread count.
inline void measure_head(const Problem& pb, const HeadInputs& in, const RowSample& rows,
                         std::vector<DialPoint>& points) {
  const int64_t n = pb.seq_len;
  const int d = pb.head_dim;
  if (in.q.size() != static_cast<size_t>(n * d) || in.k.size() != static_cast<size_t>(n * d))
    throw std::invalid_argument(fmt::format("measure_head: Q/K hold {}/{} values, want seq_len·head_dim = {}",
                                            in.q.size(), in.k.size(), n * d));
  const rope::RopeFrequencies freqs = rope::rope_frequencies(pb.rope, d, n);
  const int pairs = static_cast<int>(freqs.inv_freq.size()), rotary_dim = 2 * pairs;
  const std::vector<int> order = pairs_by_wavelength(freqs);
  const size_t nk = points.size();

  // kept[kk][Δ]: how many pairs (a prefix of `order`) k keeps at distance Δ; kept_cum[kk][i]:
  // Σ_{Δ <= i} kept[kk][Δ], the kept terms of row i.
  std::vector<std::vector<int>> kept(nk, std::vector<int>(static_cast<size_t>(n)));
  std::vector<std::vector<int64_t>> kept_cum(nk, std::vector<int64_t>(static_cast<size_t>(n)));
  for (size_t kk = 0; kk < nk; ++kk) {
    const std::vector<int64_t> limits = rope::window_limits(freqs, points[kk].k);
    for (int o = 1; o < pairs; ++o)
      if (limits[size_t(order[size_t(o)])] > limits[size_t(order[size_t(o - 1)])])
        throw std::logic_error("measure_head: window limits not monotone in the wavelength");
    int c = pairs;
    int64_t cum = 0;
    for (int64_t delta = 0; delta < n; ++delta) {
      while (c > 0 && limits[size_t(order[size_t(c - 1)])] < delta) --c;
      kept[kk][size_t(delta)] = c;
      kept_cum[kk][size_t(delta)] = cum += c;
    }
  }

  // Rotated Q and K, repacked: pair order[o] at (2o, 2o+1), the unrotated dims after them, so
  // the score loop reads both contiguously.
  std::vector<double> qr(static_cast<size_t>(n * d)), kr(static_cast<size_t>(n * d));
  auto pack = [&](const std::vector<double>& src, std::vector<double>& dst) {
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < n; ++p) {
      std::vector<double> v(src.begin() + p * d, src.begin() + (p + 1) * d);
      rope::rotate(pb.rope, freqs, p, v.data(), d);
      double* out = dst.data() + p * d;
      for (int o = 0; o < pairs; ++o) {
        const rope::PairDims pd = rope::pair_dims(pb.rope.style, rotary_dim, order[size_t(o)]);
        out[2 * o] = v[size_t(pd.a)];
        out[2 * o + 1] = v[size_t(pd.b)];
      }
      for (int x = rotary_dim; x < d; ++x) out[x] = v[size_t(x)];
    }
  };
  pack(in.q, qr);
  pack(in.k, kr);

  // Per sampled row and k: agreement, KL, kept terms (reduced in row order below).
  const int64_t nrows = static_cast<int64_t>(rows.rows.size());
  std::vector<char> agree(static_cast<size_t>(nrows) * nk);
  std::vector<double> kl(static_cast<size_t>(nrows) * nk);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));

#pragma omp parallel
  {
    std::vector<double> s(static_cast<size_t>(n)), logp(static_cast<size_t>(n));
    std::vector<double> w(static_cast<size_t>(n) * nk), prefix(static_cast<size_t>(pairs + 1));
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t i = rows.rows[size_t(r)], len = i + 1;
      const double* q = qr.data() + i * d;
      // Which ks drop something in this row (the row's largest Δ is i): the others equal P.
      std::vector<size_t> windowed;
      for (size_t kk = 0; kk < nk; ++kk) {
        if (kept[kk][size_t(i)] < pairs) windowed.push_back(kk);
        else agree[size_t(r) * nk + kk] = 1, kl[size_t(r) * nk + kk] = 0.0;
      }
      for (int64_t j = 0; j < len; ++j) {
        const double* k = kr.data() + j * d;
        double acc = 0.0;
        for (int x = rotary_dim; x < d; ++x) acc += q[x] * k[x];
        prefix[0] = acc;
        for (int o = 0; o < pairs; ++o) {
          acc += q[2 * o] * k[2 * o] + q[2 * o + 1] * k[2 * o + 1];
          prefix[size_t(o + 1)] = acc;
        }
        s[size_t(j)] = scale * acc;
        const size_t delta = static_cast<size_t>(i - j);
        for (size_t kk : windowed) w[kk * size_t(n) + size_t(j)] = scale * prefix[size_t(kept[kk][delta])];
      }
      if (windowed.empty()) continue;
      int64_t argmax_p = 0;
      const double lse_p = log_sum_exp(s.data(), len, argmax_p);
      for (int64_t j = 0; j < len; ++j) logp[size_t(j)] = s[size_t(j)] - lse_p;
      for (size_t kk : windowed) {
        const double* wk = w.data() + kk * size_t(n);
        int64_t argmax_w = 0;
        const double lse_w = log_sum_exp(wk, len, argmax_w);
        double sum = 0.0;
        for (int64_t j = 0; j < len; ++j) sum += kl_term(logp[size_t(j)], wk[j] - lse_w);
        agree[size_t(r) * nk + kk] = argmax_w == argmax_p;
        kl[size_t(r) * nk + kk] = sum;
      }
    }
  }

  for (int64_t r = 0; r < nrows; ++r) {
    const int64_t i = rows.rows[size_t(r)];
    const double wt = rows.weights[size_t(r)];
    for (size_t kk = 0; kk < nk; ++kk) {
      DialPoint& p = points[kk];
      const double row_kl = kl[size_t(r) * nk + kk];
      p.rows += 1;
      p.weight += wt;
      p.agree += agree[size_t(r) * nk + kk] ? wt : 0.0;
      p.kl_sum += wt * row_kl;
      p.max_kl = std::max(p.max_kl, row_kl);
      p.kept_terms += kept_cum[kk][size_t(i)];
      p.all_terms += static_cast<int64_t>(pairs) * (i + 1);
    }
  }
}

// The dial for one input kind: `heads` heads of make_inputs(kind, pb, seed, h), each measured on
// `rows`, one DialPoint per k (heads weigh equally).
inline std::vector<DialPoint> measure(InputKind kind, const Problem& pb, const std::vector<double>& ks,
                                      int heads, const RowSample& rows, uint64_t seed) {
  std::vector<DialPoint> points = make_points(pb, ks);
  for (int h = 0; h < heads; ++h) measure_head(pb, make_inputs(kind, pb, seed, h), rows, points);
  return points;
}

}  // namespace attnfuse::quality
