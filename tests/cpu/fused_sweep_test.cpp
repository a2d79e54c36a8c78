// Random sweep of the fused CPU backend: random programs (mask sets, ordered modifier chains,
// norms, scalars) on random shapes, dtypes, layouts and offsets, checked against the float64
// reference. Fixed seeds, plus one fresh seed printed with every failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "attnfuse/attention.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

struct Drawn {
  KernelSpec spec;
  Shape shape;
  CaseOptions options;
  int block_q = 0, block_k = 0;
  std::string text;
};

Drawn draw(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % uint64_t(n)); };
  auto coin = [&] { return pick(2) == 1; };
  Drawn d;
  KernelSpec& s = d.spec;
  if (coin()) s.masks.add(MaskKind::Causal);
  if (pick(3) == 0) s.masks.add(MaskKind::SlidingWindow), s.scalars.window = 1 + pick(150);
  if (pick(4) == 0) s.masks.add(MaskKind::BlockSparse);
  ModifierKind kinds[] = {ModifierKind::Alibi, ModifierKind::AdditiveBias, ModifierKind::Softcap};
  std::shuffle(std::begin(kinds), std::end(kinds), rng);
  for (int i = 0, n = pick(4); i < n; ++i) s.modifiers.push(kinds[i]);
  s.scalars.softcap = 1.0 + pick(30);
  s.norm = pick(4) == 0 ? NormKind::ReluAttention : NormKind::Softmax;
  if (pick(5) == 0) s.scalars.scale = 0.05 * (1 + pick(10));
  if (pick(3) == 0) s.tile = {1 + pick(80), 1 + pick(300)};  // the kernel clamps to its limits

  const int64_t dims[] = {16, 32, 40, 64, 80, 96, 128, 256};
  const int64_t groups[] = {1, 2, 4, 8};
  Shape& sh = d.shape;
  sh.B = 1 + pick(2);
  sh.Hkv = 1 + pick(2);
  sh.Hq = sh.Hkv * groups[pick(4)];
  auto length = [&] { return pick(6) == 0 ? int64_t(1) : int64_t(1 + pick(pick(4) == 0 ? 700 : 200)); };
  sh.Nq = length();
  sh.Nk = pick(3) == 0 ? sh.Nq : length();
  sh.D = dims[pick(8)];
  sh.Dv = pick(4) == 0 ? dims[pick(8)] : sh.D;
  // Keep each case's O(B Hq Nq Nk D) reference cheap.
  while (sh.B * sh.Hq * sh.Nq * sh.Nk * (sh.D + sh.Dv) > 40'000'000) sh.Nq = (sh.Nq + 1) / 2;

  CaseOptions& o = d.options;
  o.dtype = static_cast<DType>(pick(3));
  o.layout = static_cast<Layout>(pick(3));
  o.lse = coin();
  o.bias = s.needs_bias();
  o.bias_dtype = coin() ? DType::F32 : o.dtype;
  o.bias_broadcast_batch = coin();
  o.bias_broadcast_heads = coin();
  if (pick(3) == 0) o.q_offset = int64_t(pick(400)) - 200;
  if (s.modifiers.has(ModifierKind::Softcap)) o.stddev = 1.5f;
  const int blocks[] = {1, 7, 16, 32, 50, 64, 100, 128, 200};
  d.block_q = blocks[pick(9)];
  d.block_k = blocks[pick(9)];

  d.text = describe(s) + " B=" + std::to_string(sh.B) + " Hq=" + std::to_string(sh.Hq) +
           " Hkv=" + std::to_string(sh.Hkv) + " Nq=" + std::to_string(sh.Nq) + " Nk=" +
           std::to_string(sh.Nk) + " D=" + std::to_string(sh.D) + " Dv=" + std::to_string(sh.Dv) +
           " " + dtype_name(o.dtype) + " " + layout_name(o.layout) +
           (o.q_offset ? " q_offset=" + std::to_string(*o.q_offset) : "") +
           " tile " + std::to_string(s.tile.block_q) + "x" + std::to_string(s.tile.block_k) +
           (s.needs_block_mask() ? " blocks " + std::to_string(d.block_q) + "x" + std::to_string(d.block_k) : "");
  return d;
}

void check_seed(uint64_t seed) {
  const Drawn d = draw(seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": " + d.text);
  if (std::getenv("ATTNFUSE_SWEEP_PRINT")) std::printf("%s\n", d.text.c_str());
  AttentionCase c(d.shape, d.options, seed);
  if (d.spec.needs_block_mask())
    c.set_block_mask(random_block_mask(c.shape, d.block_q, d.block_k, seed, (seed & 1) != 0));
  run_cpu(d.spec, c.args());
  expect_matches_reference(d.spec, c.args());
}

TEST(CpuSweep, FixedSeeds) {
  for (uint64_t seed = 1; seed <= 250; ++seed) check_seed(seed * 0x9e3779b97f4a7c15ull);
}

TEST(CpuSweep, FreshSeed) {
  for (int r = 0; r < 5; ++r) check_seed(fresh_seed());
}

}  // namespace
}  // namespace attnfuse::test
