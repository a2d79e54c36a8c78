// The sparsity tests' mask comparison: two BlockMasks equal block for block and bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "attnfuse/block_mask.hpp"

namespace attnfuse {

// Same rows, same full flags, same bitmap words: the two masks are interchangeable for a kernel.
inline void expect_same_mask(const BlockMask& a, const BlockMask& b) {
  ASSERT_EQ(a.batch(), b.batch());
  ASSERT_EQ(a.heads(), b.heads());
  ASSERT_EQ(a.num_q_blocks(), b.num_q_blocks());
  ASSERT_EQ(a.num_kv_blocks(), b.num_kv_blocks());
  const size_t words = static_cast<size_t>((int64_t{a.block_q()} * a.block_k() + 63) / 64);
  for (int64_t bb = 0; bb < a.batch(); ++bb)
    for (int64_t h = 0; h < a.heads(); ++h)
      for (int64_t qb = 0; qb < a.num_q_blocks(); ++qb) {
        SCOPED_TRACE(::testing::Message() << "b=" << bb << " h=" << h << " qb=" << qb);
        const auto ca = a.kv_blocks(bb, h, qb), cb = b.kv_blocks(bb, h, qb);
        const auto fa = a.full_flags(bb, h, qb), fb = b.full_flags(bb, h, qb);
        ASSERT_EQ(std::vector<int32_t>(ca.begin(), ca.end()), std::vector<int32_t>(cb.begin(), cb.end()));
        ASSERT_EQ(std::vector<uint8_t>(fa.begin(), fa.end()), std::vector<uint8_t>(fb.begin(), fb.end()));
        for (size_t e = 0; e < ca.size(); ++e) {
          ASSERT_EQ(a.cell_bits(bb, h, qb, e) == nullptr, fa[e] != 0);
          if (!fa[e]) {
            ASSERT_EQ(std::memcmp(a.cell_bits(bb, h, qb, e), b.cell_bits(bb, h, qb, e), words * 8), 0);
          }
        }
      }
  EXPECT_DOUBLE_EQ(a.density(), b.density());
}

}  // namespace attnfuse
