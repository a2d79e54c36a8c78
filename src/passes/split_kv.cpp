// Split-KV choice (split_kv.hpp): the fewest parts within 5% of the best modelled time.
#include "passes/split_kv.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

namespace attnfuse::passes {

namespace {

int choose_uniform(const SplitShape& s) {
  const int64_t capacity = int64_t{std::max(s.sms, 1)} * std::max(s.blocks_per_sm, 1);
  if (s.blocks <= 0 || s.key_tiles < 2 * kMinTilesPerSplit) return 1;
  // A grid that already fills 80% of one wave of resident blocks gains little from more blocks.
  if (s.blocks * 5 >= capacity * 4) return 1;
  const int64_t max_splits = std::min<int64_t>(kMaxSplits, s.key_tiles / kMinTilesPerSplit);
  // Time of S parts, in key tiles one resident block streams: each part visits ceil(tiles / S)
  // of them, and the S x blocks parts run in ceil(S x blocks / capacity) waves. Take the smallest
  // S within 5% of the best (fewer parts: less combine traffic, longer pipelines per part).
  auto cost = [&](int64_t n) {
    return ((s.key_tiles + n - 1) / n) * ((s.blocks * n + capacity - 1) / capacity);
  };
  // Evaluated once per S (this runs on every decode launch).
  std::array<int64_t, kMaxSplits + 1> costs{};
  int64_t best = INT64_MAX;
  for (int64_t n = 1; n <= max_splits; ++n) best = std::min(best, costs[size_t(n)] = cost(n));
  for (int64_t n = 1; n <= max_splits; ++n)
    if (costs[size_t(n)] * 100 <= best * 105) return static_cast<int>(n);
  return 1;
}

// Ragged grids: the uniform model's choice, or more parts until the grid holds kRaggedWaves waves
// (split_kv.hpp), bounded by kMinTilesPerRaggedPart tiles of the mean length per part and by
// kMaxRaggedSplits parts.
int choose(const SplitShape& s) {
  const int uniform = choose_uniform(s);
  if (!s.ragged || s.blocks <= 0) return uniform;
  const int64_t capacity = int64_t{std::max(s.sms, 1)} * std::max(s.blocks_per_sm, 1);
  const int64_t waves = (kRaggedWaves * capacity + s.blocks - 1) / s.blocks;
  const int64_t most = std::min<int64_t>(kMaxRaggedSplits, s.key_tiles / kMinTilesPerRaggedPart);
  return static_cast<int>(std::max<int64_t>(uniform, std::min(waves, most)));
}

bool same(const SplitShape& a, const SplitShape& b) {
  return a.blocks == b.blocks && a.key_tiles == b.key_tiles && a.sms == b.sms && a.blocks_per_sm == b.blocks_per_sm &&
         a.ragged == b.ragged;
}

}  // namespace

// The search costs ~0.7 us at 512 key tiles (two 64-bit divisions for each of 128 counts) and
// runs on every decode launch, twice for a split call (runtime: the two-stage tile, then the
// split call's three-stage one). A decode loop repeats a few shapes (every layer, every token
// until the cache grows by a tile), so each thread remembers the last four answers.
int choose_num_splits(const SplitShape& s) {
  struct Entry {
    SplitShape shape{-1, -1, -1, -1, false};
    int splits = 1;
  };
  thread_local std::array<Entry, 4> memo;
  thread_local unsigned next = 0;
  for (const Entry& e : memo)
    if (same(e.shape, s)) return e.splits;
  Entry& e = memo[next++ % memo.size()];
  e.shape = s;
  e.splits = choose(s);
  return e.splits;
}

}  // namespace attnfuse::passes
