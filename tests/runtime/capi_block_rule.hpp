// The C ABI BlockMask tests' shared problem: a seeded cell rule with partial blocks of every kind,
// its C fill callback and exact block kinds, and a block_sparse program run through the C ABI and
// through C++ on the same inputs (outputs compared bit for bit).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/attnfuse.h"
#include "attnfuse/block_mask.hpp"
#include "attnfuse/program.hpp"
#include "runtime/capi_views.hpp"

namespace capi_test {

// A per-head causal window with a seeded sprinkle of extra cells: partial blocks of every kind.
struct Rule {
  uint64_t salt;
  bool keep(int64_t h, int64_t q, int64_t kv) const {
    uint64_t x = salt ^ (uint64_t(h) << 44) ^ (uint64_t(q) << 22) ^ uint64_t(kv);
    x ^= x >> 31, x *= 0x9e3779b97f4a7c15ull, x ^= x >> 29;
    return (kv <= q && q - kv < 20 + 7 * h) || (x & 15) == 0;
  }
};

inline int fill_rule(void* user, int64_t, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1, uint8_t* keep) {
  const auto* rule = static_cast<const Rule*>(user);
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t kv = kv0; kv < kv1; ++kv) keep[(q - q0) * (kv1 - kv0) + (kv - kv0)] = rule->keep(h, q, kv) ? 1 : 0;
  return 0;
}

struct Problem {
  static constexpr int64_t Hq = 4, Hkv = 2, N = 150, D = 16;
  std::vector<float> q, k, v;
  explicit Problem(uint64_t seed) : q(Hq * N * D), k(Hkv * N * D), v(Hkv * N * D) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd;
    for (auto* t : {&q, &k, &v})
      for (float& x : *t) x = nd(rng);
  }
  // O of the block_sparse program through the C ABI with the C mask.
  std::vector<float> run_c(const attnfuse_block_mask* mask) {
    attnfuse_kernel* kernel = nullptr;
    EXPECT_EQ(attnfuse_compile(kProgram, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &kernel), ATTNFUSE_OK);
    std::vector<float> o(q.size(), 7.f);
    attnfuse_args a{};
    a.q = view(q.data(), 1, Hq, N, D), a.k = view(k.data(), 1, Hkv, N, D), a.v = view(v.data(), 1, Hkv, N, D);
    a.out = view(o.data(), 1, Hq, N, D);
    a.block_mask = mask;
    EXPECT_EQ(attnfuse_launch(kernel, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
    attnfuse_kernel_free(kernel);
    return o;
  }
  // The same program in C++ with a mask of the given cells.
  std::vector<float> run_cpp(const attnfuse::BlockMask& mask) {
    std::vector<float> o(q.size(), 7.f);
    attnfuse::AttentionArgs c;
    c.q = tv(q, 1, Hq, N, D), c.k = tv(k, 1, Hkv, N, D), c.v = tv(v, 1, Hkv, N, D), c.out = tv(o, 1, Hq, N, D);
    c.block_mask = &mask;
    attnfuse::run_cpu(attnfuse::Program::parse(kProgram).compile({attnfuse::Target::Cpu, attnfuse::DType::F32, 0}), c);
    return o;
  }
  static constexpr const char* kProgram = "softmax(block_sparse(scaled_dot_product(Q, K))) @ V";
};

// The exact kind of each block of the rule, [heads, nqb, nkb] (blocks cut by the lengths at the
// edges), and the number of partial ones.
inline std::vector<uint8_t> exact_kinds(const Rule& rule, int64_t heads, int64_t n, int bq, int bk, int* partial) {
  const int64_t nqb = (n + bq - 1) / bq, nkb = (n + bk - 1) / bk;
  std::vector<uint8_t> kinds(static_cast<size_t>(heads * nqb * nkb));
  *partial = 0;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t qb = 0; qb < nqb; ++qb)
      for (int64_t kb = 0; kb < nkb; ++kb) {
        int64_t kept = 0, total = 0;
        for (int64_t q = qb * bq; q < std::min<int64_t>(n, (qb + 1) * bq); ++q)
          for (int64_t kv = kb * bk; kv < std::min<int64_t>(n, (kb + 1) * bk); ++kv, ++total)
            kept += rule.keep(h, q, kv);
        const uint8_t kind = kept == 0 ? ATTNFUSE_BLOCK_INACTIVE : kept == total ? ATTNFUSE_BLOCK_FULL
                                                                                 : ATTNFUSE_BLOCK_PARTIAL;
        kinds[static_cast<size_t>((h * nqb + qb) * nkb + kb)] = kind;
        *partial += kind == ATTNFUSE_BLOCK_PARTIAL;
      }
  return kinds;
}

}  // namespace capi_test
