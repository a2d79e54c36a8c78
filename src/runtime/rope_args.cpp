// RoPE kernel arguments (rope_args.hpp).
#include "runtime/rope_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <utility>

#include "attnfuse/error.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::runtime {

uint64_t turn_fraction(double inv_freq) {
  // θ / 2π in long double (64-bit mantissa on x86-64) is off by ~2^-66 turns, so even at
  // position 2^31 the fraction p * turn mod 1 is off by ~2^-33 turns: below the 2^-32 the kernel
  // keeps. (In double it would be 2^-24 turns at 2^31, 4e-7 rad.) frac() keeps what matters
  // modulo a turn; the fixed point truncates below 2^-64.
  const long double two_pi = 6.283185307179586476925286766559L;
  long double turns = static_cast<long double>(inv_freq) / two_pi;
  turns -= std::floor(turns);
  const long double scaled = std::ldexp(turns, 64);
  return scaled >= 0x1p64L ? 0 : static_cast<uint64_t>(scaled);
}

const attnfuse_kernels::RopeArgs& rope_args(const RopeParams& params, bool windowed, int head_dim,
                                            int64_t seq_len) {
  struct Entry {
    bool valid = false;
    RopeParams params;
    bool windowed = false;
    int head_dim = 0;
    int64_t seq_len = 0;
    attnfuse_kernels::RopeArgs args{};
  };
  thread_local Entry last;
  // Only dynamic and longrope read the sequence length; keying the others on it would
  // recompute the frequencies whenever a decode step grows the cache by one.
  const bool len_matters = params.rope_type == RopeScaling::Dynamic || params.rope_type == RopeScaling::Longrope;
  const int64_t key_len = len_matters ? seq_len : 0;
  if (last.valid && last.windowed == windowed && last.head_dim == head_dim && last.seq_len == key_len &&
      last.params == params)
    return last.args;

  const int rotary = rope::rotary_dim_of(params, head_dim);
  if (rotary % 4 != 0)
    throw Error(ErrorCode::Unsupported,
                fmt::format("rotary_dim={} on CUDA: the kernels rotate two pairs per 32-bit load, so "
                            "rotary_dim must be a multiple of 4 (run it on the CPU backend)",
                            rotary));
  const rope::RopeFrequencies f = rope::rope_frequencies(params, head_dim, seq_len);
  attnfuse_kernels::RopeArgs a{};
  a.half = rotary / 2;
  a.factor = static_cast<float>(f.attention_factor);
  for (int r = 0; r < a.half; ++r) a.turn[r] = turn_fraction(f.inv_freq[static_cast<size_t>(r)]);
  if (windowed) {
    const auto limits = rope::window_limits(f, params.window_k);
    for (int r = 0; r < a.half; ++r)
      a.limit[r] = static_cast<int>(std::clamp<int64_t>(limits[static_cast<size_t>(r)], -1, INT_MAX));
  }
  last = Entry{true, params, windowed, head_dim, key_len, a};
  return last.args;
}

const DeviceLengthRope& device_length_rope_args(const RopeParams& params, bool windowed, int head_dim) {
  struct Entry {
    bool valid = false;
    RopeParams params;
    bool windowed = false;
    int head_dim = 0;
    DeviceLengthRope rope;
  };
  thread_local Entry last;
  if (last.valid && last.windowed == windowed && last.head_dim == head_dim && last.params == params) return last.rope;

  // Length 0 is "not known": dynamic's default frequencies, longrope's short factors, which are
  // the ones of every length up to the original context.
  DeviceLengthRope d{rope_args(params, windowed, head_dim, 0), {}, {}};
  const int64_t orig = params.original_max_position_embeddings;
  if (params.rope_type == RopeScaling::Dynamic && orig > 0) {
    d.rule.rule = attnfuse_kernels::kRopeLenDynamic;
    d.rule.dyn_base = params.base;
    d.rule.dyn_factor = params.factor;
  } else if (params.rope_type == RopeScaling::Longrope && orig > 0) {
    d.rule.rule = attnfuse_kernels::kRopeLenLongrope;
    const attnfuse_kernels::RopeArgs& longer = rope_args(params, windowed, head_dim, orig + 1);
    const int half = longer.half;
    d.long_set.assign(static_cast<size_t>(half + (half + 1) / 2), 0);
    std::copy(longer.turn, longer.turn + half, d.long_set.begin());
    std::memcpy(d.long_set.data() + half, longer.limit, sizeof(int) * static_cast<size_t>(half));
  }
  d.rule.orig = orig;
  d.rule.window_k = windowed ? params.window_k : 0.0;
  last = Entry{true, params, windowed, head_dim, std::move(d)};
  return last.rope;
}

}  // namespace attnfuse::runtime
