// ATFlash window tables and their closed-form pruned share (see window_table.hpp).
#include "rope/window_table.hpp"

#include <cmath>

#include <fmt/format.h>

#include "attnfuse/error.hpp"

namespace attnfuse::rope {

namespace {

constexpr int64_t kMaxSeqLen = int64_t{1} << 31;

void check_table_args(int head_dim, int rotary_dim, double k, int64_t seq_len) {
  if (!(k > 0.0))
    throw Error(ErrorCode::Verify, fmt::format("window table: k = {} must be > 0 (rope_window keeps "
                                               "pair r where |delta| <= k * lambda_r)", k));
  if (seq_len < 1 || seq_len > kMaxSeqLen)
    throw Error(ErrorCode::Verify, fmt::format("window table: seq_len = {} must be in [1, 2^31] (the "
                                               "causal length N)", seq_len));
  if (rotary_dim < 2 || rotary_dim > head_dim)
    throw Error(ErrorCode::Verify, fmt::format("window table: rotary_dim = {} must be in [2, head_dim = "
                                               "{}]", rotary_dim, head_dim));
}

}  // namespace

int64_t pruned_causal_cells(int64_t limit, int64_t seq_len) {
  if (seq_len <= 0) return 0;
  // m = the number of distances d in (limit, N - 1], each occurring N - d times: m, m-1, ..., 1.
  const int64_t m = limit < 0 ? seq_len : (limit >= seq_len - 1 ? 0 : seq_len - 1 - limit);
  return m % 2 == 0 ? (m / 2) * (m + 1) : m * ((m + 1) / 2);  // no intermediate overflow
}

WindowTable window_table(const RopeFrequencies& freqs, int head_dim, double k, int64_t seq_len) {
  WindowTable t;
  t.k = k;
  t.seq_len = seq_len;
  t.head_dim = head_dim;
  t.rotary_dim = static_cast<int>(2 * freqs.inv_freq.size());
  t.attention_factor = freqs.attention_factor;
  check_table_args(head_dim, t.rotary_dim, k, seq_len);

  const int64_t cells = pruned_causal_cells(-1, seq_len);  // N(N+1)/2
  unsigned __int128 pruned_total = 0;  // up to 2^29 pairs times ~2^61 cells
  t.rows.reserve(freqs.inv_freq.size());
  for (size_t r = 0; r < freqs.inv_freq.size(); ++r) {
    WindowRow row;
    row.pair = static_cast<int>(r);
    row.theta = freqs.inv_freq[r];
    row.lambda = wavelength(row.theta);
    row.window = k * row.lambda;
    row.limit = window_limit(k, row.lambda);
    row.pruned_cells = pruned_causal_cells(row.limit, seq_len);
    row.pruned_share = static_cast<double>(row.pruned_cells) / static_cast<double>(cells);
    pruned_total += static_cast<unsigned __int128>(row.pruned_cells);
    t.rows.push_back(row);
  }
  const long double all_terms = static_cast<long double>(cells) * static_cast<long double>(t.rows.size());
  t.pruned_share = static_cast<double>(static_cast<long double>(pruned_total) / all_terms);
  t.retained_share = 1.0 - static_cast<double>(t.rotary_dim) / head_dim * t.pruned_share;
  t.ceiling_speedup = 2.0 / (1.0 + t.retained_share);
  return t;
}

WindowTable window_table(const RopeParams& p, int head_dim, double k, int64_t seq_len) {
  if (seq_len < 1 || seq_len > kMaxSeqLen) check_table_args(head_dim, 2, k, seq_len);
  return window_table(rope_frequencies(p, head_dim, seq_len), head_dim, k, seq_len);
}

std::string format_window_table(const WindowTable& t) {
  std::string out = fmt::format(
      "# rope window table: k={} seq_len={} head_dim={} rotary_dim={} attention_factor={}\n", t.k,
      t.seq_len, t.head_dim, t.rotary_dim, t.attention_factor);
  out += fmt::format("{:>5} {:>14} {:>14} {:>14} {:>12}\n", "pair", "theta", "lambda", "window",
                     "pruned_share");
  for (const WindowRow& r : t.rows)
    out += fmt::format("{:>5} {:>14.6e} {:>14.6e} {:>14.6e} {:>12.6f}\n", r.pair, r.theta, r.lambda,
                       r.window, r.pruned_share);
  out += fmt::format("retained_share={:.6f}\n", t.retained_share);
  out += fmt::format("ceiling_speedup={:.6f}\n", t.ceiling_speedup);
  out += fmt::format("pruned_share={:.6f}\n", t.pruned_share);
  return out;
}

}  // namespace attnfuse::rope
