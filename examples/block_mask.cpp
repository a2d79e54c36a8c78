// BlockMask: a causal sliding window drawn at 1000 tokens, then built at 128k tokens twice: cell by
// cell (the lambda inlined into the cell loop, a few seconds) and by block classification
// (milliseconds). The README's BlockMask example; it runs as a test (exit 1 if the two differ).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "attnfuse/block_mask.hpp"

int main() {
  using attnfuse::BlockMask;
  using Clock = std::chrono::steady_clock;
  // Causal sliding window of 300 keys over 1000 tokens in 128-blocks.
  auto keep = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q && q - kv < 300; };
  const BlockMask m = BlockMask::from_predicate(keep, 1, 1, 1000, 1000, 128, 128);
  std::printf("%s", m.to_string().c_str());

  // 128k tokens, every cell evaluated: pass the lambda itself (not a std::function), so it is
  // compiled into the cell loop.
  const auto t0 = Clock::now();
  const BlockMask cells = BlockMask::from_predicate(keep, 1, 1, 131072, 131072);
  const auto t1 = Clock::now();
  // 128k tokens: classify whole blocks; only Partial blocks evaluate cells.
  using Kind = BlockMask::BlockKind;
  auto classify = [](int64_t, int64_t, int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
    const int64_t lo = q0 - (k1 - 1), hi = (q1 - 1) - k0;  // q - kv over the block
    if (lo >= 0 && hi < 300) return Kind::Full;
    if (hi < 0 || lo >= 300) return Kind::Inactive;
    return Kind::Partial;
  };
  const BlockMask big = BlockMask::from_block_classifier(classify, keep, 1, 1, 131072, 131072);
  const auto t2 = Clock::now();
  std::printf("%s", big.to_string(0, 0, 16).c_str());
  const auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("128k: cell by cell %.0f ms, classified %.1f ms\n", ms(t0, t1), ms(t1, t2));

  // The same mask both ways: the same blocks, full flags and cell bits.
  const BlockMask::Csr a = cells.csr(), b = big.csr();
  const auto same = [](auto x, auto y) { return std::equal(x.begin(), x.end(), y.begin(), y.end()); };
  if (!same(a.row_ptr, b.row_ptr) || !same(a.cols, b.cols) || !same(a.full, b.full) ||
      !same(a.bitmap_ptr, b.bitmap_ptr) || !same(a.bitmap, b.bitmap)) {
    std::printf("FAIL: the two 128k masks differ\n");
    return 1;
  }
  return 0;
}
