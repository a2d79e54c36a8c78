// Tests of BlockMask's inlined cell evaluation (attnfuse/block_mask_cells.hpp): the bit packing,
// the placement of unaligned runs, whole blocks against a cell-by-cell loop, and the template
// factories against the same predicate through std::function.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/error.hpp"
#include "sparsity/same_mask.hpp"

namespace attnfuse {
namespace {

using block_mask_cells::evaluate;
using block_mask_cells::pack8;
using block_mask_cells::put_bits;

std::vector<uint64_t> seeds() { return {11, 12, std::random_device{}()}; }

TEST(BlockMaskCells, Pack8PutsByteIInBitI) {
  for (int pattern = 0; pattern < 256; ++pattern) {
    uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = (pattern >> i) & 1;
    EXPECT_EQ(pack8(bytes), static_cast<uint64_t>(pattern)) << "pattern " << pattern;
  }
}

TEST(BlockMaskCells, PutBitsAtEveryOffsetStraddlingWords) {
  std::mt19937_64 rng(seeds().back());
  for (int64_t bit = 0; bit < 130; ++bit)
    for (int len : {1, 5, 63, 64}) {
      const uint64_t w = rng() & (len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1);
      // The buffer ends right after the run's last bit, as a block's bitmap does.
      const int64_t words = (bit + len + 63) / 64;
      std::vector<uint64_t> got(static_cast<size_t>(words), 0), want(got);
      put_bits(got.data(), bit, w);
      for (int i = 0; i < len; ++i)
        if ((w >> i) & 1) want[static_cast<size_t>((bit + i) >> 6)] |= uint64_t{1} << ((bit + i) & 63);
      ASSERT_EQ(got, want) << "bit " << bit << " len " << len;
    }
}

// A hash-based predicate: about `share` of the cells kept, independent from cell to cell.
struct HashKeep {
  uint64_t seed;
  uint64_t threshold;
  bool operator()(int64_t b, int64_t h, int64_t q, int64_t kv) const {
    uint64_t x = seed ^ static_cast<uint64_t>(b) * 0xBF58476D1CE4E5B9ull ^
                 static_cast<uint64_t>(h) * 0x94D049BB133111EBull ^ static_cast<uint64_t>(q) * 0xD6E8FEB86659FD93ull ^
                 static_cast<uint64_t>(kv) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return x < threshold;
  }
};

TEST(BlockMaskCells, BlocksMatchACellByCellLoop) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(seed);
    for (double share : {0.0, 0.03, 0.5, 0.97, 1.0}) {
      const HashKeep keep{seed, share >= 1.0 ? ~uint64_t{0} : static_cast<uint64_t>(share * 0x1p64)};
      for (int64_t block_k : {1, 7, 37, 63, 64, 65, 100, 128, 200}) {
        const int64_t block_q = 3;
        // A whole block and one cut by the lengths, away from the origin.
        for (int64_t cut : {block_k, block_k / 2 + 1}) {
          const int64_t q0 = 9, k0 = 1000 + block_k;
          const int64_t words = (block_q * block_k + 63) / 64;
          std::vector<uint64_t> got(static_cast<size_t>(words), 0), want(got);
          int64_t want_kept = 0;
          for (int64_t q = q0; q < q0 + block_q; ++q)
            for (int64_t kv = k0; kv < k0 + cut; ++kv)
              if (keep(1, 2, q, kv)) {
                const int64_t bit = (q - q0) * block_k + (kv - k0);
                want[static_cast<size_t>(bit >> 6)] |= uint64_t{1} << (bit & 63);
                ++want_kept;
              }
          const int64_t kept = evaluate(keep, 1, 2, q0, q0 + block_q, k0, k0 + cut, block_k, got.data());
          ASSERT_EQ(kept, want_kept) << "share " << share << " block_k " << block_k << " cut " << cut;
          ASSERT_EQ(got, want) << "share " << share << " block_k " << block_k << " cut " << cut;
        }
      }
    }
  }
}

// The template factories give the CSR the std::function path gives, bit for bit, for arithmetic
// masks (which vectorize), table masks and random cells, at odd lengths and block sizes.
TEST(BlockMaskCells, InlinedPredicatesBuildTheMaskOfTheStdFunctionPath) {
  std::vector<int32_t> doc(1000);
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int32_t>((i * i) % 977 / 100);
  const auto window = [](int64_t, int64_t h, int64_t q, int64_t kv) { return kv <= q + 3 && q - kv < 40 + 9 * h; };
  const auto documents = [&doc](int64_t, int64_t, int64_t q, int64_t kv) {
    return doc[static_cast<size_t>(q)] == doc[static_cast<size_t>(kv)] && kv <= q;
  };
  const HashKeep random{seeds().back(), uint64_t{1} << 62};
  const auto check = [](const auto& keep, int64_t q_len, int64_t kv_len, int block_q, int block_k) {
    SCOPED_TRACE(testing::Message() << q_len << "x" << kv_len << " in " << block_q << "x" << block_k);
    const BlockMask::Predicate through_function = keep;
    expect_same_mask(BlockMask::from_predicate(keep, 2, 3, q_len, kv_len, block_q, block_k),
                     BlockMask::from_predicate(through_function, 2, 3, q_len, kv_len, block_q, block_k));
    const BlockMask::BlockClassifier partial = [](int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) {
      return BlockMask::BlockKind::Partial;
    };
    expect_same_mask(BlockMask::from_block_classifier(partial, keep, 2, 3, q_len, kv_len, block_q, block_k),
                     BlockMask::from_predicate(through_function, 2, 3, q_len, kv_len, block_q, block_k));
  };
  for (auto [block_q, block_k] : {std::pair{64, 64}, {16, 100}, {128, 128}, {5, 37}, {32, 200}}) {
    check(window, 997, 1000, block_q, block_k);
    check(documents, 1000, 1000, block_q, block_k);
    check(random, 301, 517, block_q, block_k);
  }
}

TEST(BlockMaskCells, EmptyPredicatesAreRefused) {
  bool (*null_fn)(int64_t, int64_t, int64_t, int64_t) = nullptr;
  EXPECT_THROW(BlockMask::from_predicate(null_fn, 1, 1, 8, 8, 4, 4), Error);
  EXPECT_THROW(BlockMask::from_predicate(BlockMask::Predicate{}, 1, 1, 8, 8, 4, 4), Error);
  const BlockMask::BlockClassifier partial = [](int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) {
    return BlockMask::BlockKind::Partial;
  };
  EXPECT_THROW(BlockMask::from_block_classifier(partial, null_fn, 1, 1, 8, 8, 4, 4), Error);
}

}  // namespace
}  // namespace attnfuse
