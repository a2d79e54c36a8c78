// The CUDA rotation routines of rope.cuh run on the host (codegen/kernel_host.hpp: one emulated
// thread at a time), against the float64 RoPE library: CI has no GPU, and these routines decide
// which dims pair up, which angle each position gets (the 64-bit turn arithmetic) and how the
// result is rounded, for both placements. A tile's threads rotate disjoint items, so running
// them one after another is the kernel's result exactly (up to libm's sin/cos for MUFU's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "attnfuse/kernel_spec.hpp"
#include "codegen/cuda/emit.hpp"
#include "rope/frequencies.hpp"
#include "runtime/rope_args.hpp"
// Last: it defines the CUDA keywords as macros.
#include "codegen/kernel_host.hpp"

namespace attnfuse {
namespace {

using attnfuse_kernels::bf16_t;
using attnfuse_kernels::ElementTraits;
using attnfuse_kernels::f16_t;
using attnfuse_kernels::RopeTables;
using attnfuse_kernels::RotateKernel;
using attnfuse_kernels::RotateParams;

template <class E>
constexpr int kMantissaBits = std::is_same_v<E, bf16_t> ? 7 : 10;

template <class E>
float to_float(E e) {
  return ElementTraits<E>::to_float(e.bits);
}

// A tile of kRows rows of D elements, rows kStride apart, random values in [-2, 2).
template <class E, int kRows, int kStride>
std::vector<E> random_tile(std::mt19937& rng) {
  std::vector<E> t(kRows * kStride);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (size_t i = 0; i < t.size(); i += 2) {
    const uint32_t w = ElementTraits<E>::pack(u(rng), u(rng));
    t[i].bits = static_cast<uint16_t>(w & 0xffffu);
    t[i + 1].bits = static_cast<uint16_t>(w >> 16);
  }
  return t;
}

// Every row of `got` (the kernel's rotation of `before`) against the float64 rotation of the same
// row at position pos_of(row), rounded once to E: within one unit in the last place, and
// unrotated dims (>= rotary_dim) unchanged bit for bit. `cos_sin` (optional) gives the angles
// as the caller's tables hold them.
template <class E, int kRows, int kStride, class PosOf>
void expect_rotated(const std::vector<E>& before, const std::vector<E>& got, const RopeParams& params, int D,
                    PosOf&& pos_of, const std::vector<float>* cos_table = nullptr,
                    const std::vector<float>* sin_table = nullptr) {
  const int rotary = rope::rotary_dim_of(params, D);
  const rope::RopeFrequencies f = rope::rope_frequencies(params, D, 1 << 20);
  int checked = 0;
  for (int row = 0; row < kRows; ++row) {
    const int64_t pos = pos_of(row);
    std::vector<double> v(D);
    for (int d = 0; d < D; ++d) v[d] = to_float(before[row * kStride + d]);
    if (cos_table) {
      for (int r = 0; r < rotary / 2; ++r) {
        const rope::PairDims pd = rope::pair_dims(params.style, rotary, r);
        const double c = (*cos_table)[pos * (rotary / 2) + r], s = (*sin_table)[pos * (rotary / 2) + r];
        const double a = v[pd.a], b = v[pd.b];
        v[pd.a] = a * c - b * s;
        v[pd.b] = b * c + a * s;
      }
    } else {
      rope::rotate(params, f, pos, v.data(), D);
    }
    for (int d = 0; d < D; ++d) {
      const E g = got[row * kStride + d];
      if (d >= rotary) {
        ASSERT_EQ(g.bits, before[row * kStride + d].bits) << "unrotated dim " << d << " of row " << row;
        continue;
      }
      // One ulp of the exact value, and the fp32 rotation's own error (angles to ~1e-6).
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(v[d]), 1e-3)) - kMantissaBits<E>);
      ASSERT_NEAR(to_float(g), v[d], ulp + 4e-6) << "dim " << d << " of row " << row << " at position " << pos;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// Runs rotate_tile_at over a tile with kThreads emulated threads; kHalf > 0: the pair count
// known at compile time, as the fused kernels know it (the fixed-unit form where it fits).
template <class E, bool kNeox, int kRows, int kStride, int kThreads, int kHalf = 0, class PosOf>
void rotate_on_host(std::vector<E>& tile, PosOf&& pos_of, const RopeTables& r) {
  for (unsigned t = 0; t < kThreads; ++t) {
    threadIdx.x = t;
    attnfuse_kernels::rotate_tile_at<E, kNeox, kRows, kStride, kThreads, kHalf>(tile.data(), pos_of, r);
  }
}

template <class E, bool kNeox, int D, int kRows, int kThreads, int RotaryDim = 0>
void check_computed(const RopeParams& params, int64_t pos0, std::mt19937& rng) {
  ASSERT_EQ(rope::rotary_dim_of(params, D), RotaryDim > 0 ? RotaryDim : D);
  constexpr int kStride = D + 8;  // the kernels' padded rows
  ASSERT_EQ(params.style == RopeStyle::Neox, kNeox) << "the kernel's pairing is the params' style";
  const auto& args = runtime::rope_args(params, false, D, pos0 + 4 * kRows);
  const RopeTables r{args.turn, args.limit, args.factor, args.half, nullptr, nullptr, 0};
  const std::vector<E> before = random_tile<E, kRows, kStride>(rng);
  std::vector<E> tile = before;
  // Rows at scattered positions (a decode tile's query rows share positions; K rows ascend).
  const auto pos_of = [&](int row) { return static_cast<int>(pos0 + 3 * (row / 2)); };
  rotate_on_host<E, kNeox, kRows, kStride, kThreads>(tile, pos_of, r);
  expect_rotated<E, kRows, kStride>(before, tile, params, D, pos_of);
  // The fused kernels' form (compile-time pair count: one pair unit per thread where it fits)
  // gives the same bits as the generic loop.
  constexpr int kHalf = (RotaryDim > 0 ? RotaryDim : D) / 2;
  std::vector<E> fixed = before;
  rotate_on_host<E, kNeox, kRows, kStride, kThreads, kHalf>(fixed, pos_of, r);
  for (size_t i = 0; i < tile.size(); ++i) ASSERT_EQ(fixed[i].bits, tile[i].bits) << "element " << i;
}

TEST(RopeKernelOnHost, ComputedAnglesMatchTheFloat64Rotation) {
  std::mt19937 rng(1234);
  RopeParams llama3;  // Llama-3 (128k context): positions past 2^17 need the exact reduction
  llama3.base = 500000;
  llama3.rope_type = RopeScaling::Llama3;
  llama3.factor = 32;
  llama3.original_max_position_embeddings = 8192;
  check_computed<bf16_t, true, 128, 64, 128>(llama3, 131000, rng);  // a decode K tile
  check_computed<bf16_t, true, 128, 16, 128>(llama3, 7, rng);       // a decode Q tile
  check_computed<bf16_t, true, 128, 128, 256>(llama3, 2000, rng);   // a prefill Q tile
  check_computed<bf16_t, true, 128, 6, 128>(llama3, 50, rng);       // the last pass partial
  check_computed<bf16_t, true, 96, 64, 128>(llama3, 900, rng);      // 24 units: 120 of 128 threads
  check_computed<bf16_t, true, 96, 16, 128>(llama3, 33, rng);       // ... a decode Q tile
  check_computed<bf16_t, true, 96, 128, 256>(llama3, 5000, rng);    // ... 240 of 256 threads
  RopeParams gptj;  // GPT-J: interleaved pairs over a quarter of the head
  gptj.style = RopeStyle::Gptj;
  gptj.rotary_dim = 16;
  check_computed<f16_t, false, 64, 64, 128, 16>(gptj, 4097, rng);
  RopeParams yarn;  // an attention factor != 1, neox over half the head
  yarn.rope_type = RopeScaling::Yarn;
  yarn.factor = 4;
  yarn.original_max_position_embeddings = 4096;
  yarn.rotary_dim = 64;
  check_computed<f16_t, true, 128, 64, 128, 64>(yarn, 16000, rng);
  RopeParams yarn_gptj = yarn;
  yarn_gptj.style = RopeStyle::Gptj;
  check_computed<bf16_t, false, 256, 64, 128, 64>(yarn_gptj, 3, rng);
}

TEST(RopeKernelOnHost, CallerTablesAreUsedAsGiven) {
  std::mt19937 rng(99);
  RopeParams p;
  p.base = 10000;
  constexpr int D = 128, kRows = 64, kStride = D + 8, half = D / 2, positions = 300;
  // Tables that are not RoPE's (so a computed angle could not pass): a random rotation per entry,
  // scaled by 0.9.
  std::vector<float> cos_t(positions * half), sin_t(positions * half);
  std::uniform_real_distribution<double> ang(-3.1, 3.1);
  for (size_t i = 0; i < cos_t.size(); ++i) {
    const double a = ang(rng);
    cos_t[i] = static_cast<float>(0.9 * std::cos(a));
    sin_t[i] = static_cast<float>(0.9 * std::sin(a));
  }
  const auto& args = runtime::rope_args(p, false, D, positions);
  const RopeTables r{args.turn, args.limit, args.factor, args.half, cos_t.data(), sin_t.data(), positions};
  const std::vector<bf16_t> before = random_tile<bf16_t, kRows, kStride>(rng);
  std::vector<bf16_t> tile = before;
  const auto pos_of = [](int row) { return 200 + row; };
  rotate_on_host<bf16_t, true, kRows, kStride, 128>(tile, pos_of, r);
  expect_rotated<bf16_t, kRows, kStride>(before, tile, p, D, pos_of, &cos_t, &sin_t);
}

// The prerotation kernel (prerotate placement: RotateKernel, a whole grid on the host) over
// strided Q and K: every row bitwise equal to the fused placement's rotation of that row (both
// rotate with rope_rotate_pair and round once), on its 16-byte and 32-bit paths, and in the
// interleaved layout rope_window's wgmma form reads (pair r at dims 2r, 2r + 1).
template <class E, int D, bool kNeox, bool kInterleave = false>
void check_prerotation(const RopeParams& params, bool vec, std::mt19937& rng, bool caller_tables = false) {
  ASSERT_EQ(params.style == RopeStyle::Neox, kNeox);
  constexpr int B = 2, Hq = 4, Hkv = 2, Nq = 5, Nk = 37, kPitch = D + 8;  // rows padded: strided sources
  constexpr int64_t q_offset = 1000;
  const int lens[2] = {Nq, Nk}, heads[2] = {Hq, Hkv};
  std::vector<E> src[2], dst[2];
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  RotateParams r{};
  for (int t = 0; t < 2; ++t) {
    src[t].resize(static_cast<size_t>(B) * heads[t] * lens[t] * kPitch);
    for (E& e : src[t]) e.bits = static_cast<uint16_t>(ElementTraits<E>::pack(u(rng), 0.f) & 0xffffu);
    dst[t].assign(static_cast<size_t>(B) * heads[t] * lens[t] * D, E{0xffff});  // poisoned
    r.src[t] = src[t].data();
    r.dst[t] = dst[t].data();
    r.src_stride[t][0] = int64_t{heads[t]} * lens[t] * kPitch;
    r.src_stride[t][1] = int64_t{lens[t]} * kPitch;
    r.src_stride[t][2] = kPitch;
    r.heads[t] = heads[t];
    r.len[t] = lens[t];
    r.rows[t] = int64_t{B} * heads[t] * lens[t];
  }
  ASSERT_TRUE(!vec || reinterpret_cast<uintptr_t>(src[0].data()) % 16 == 0) << "the 16-byte path needs aligned rows";
  r.pos0[0] = q_offset;
  r.pos0[1] = 0;
  r.rope = runtime::rope_args(params, false, D, q_offset + Nq);
  r.vec = vec;
  std::vector<float> cos_t, sin_t;  // the caller's tables: random rotations, not RoPE's
  if (caller_tables) {
    const int positions = static_cast<int>(q_offset + Nq), half = r.rope.half;
    cos_t.resize(static_cast<size_t>(positions) * half), sin_t.resize(cos_t.size());
    std::uniform_real_distribution<double> ang(-3.1, 3.1);
    for (size_t i = 0; i < cos_t.size(); ++i) {
      const double a = ang(rng);
      cos_t[i] = static_cast<float>(std::cos(a)), sin_t[i] = static_cast<float>(std::sin(a));
    }
    r.rope.cos_table = cos_t.data(), r.rope.sin_table = sin_t.data(), r.rope.table_positions = positions;
  }
  attnfuse_host_cuda::launch_on_host(3, codegen::cuda::kRotateThreads,
                                     [&] { RotateKernel<E, D, kNeox, kInterleave>::run(r); });
  const RopeTables tables{r.rope.turn,      r.rope.limit,     r.rope.factor,          r.rope.half,
                          r.rope.cos_table, r.rope.sin_table, r.rope.table_positions};
  const int half = r.rope.half;
  for (int t = 0; t < 2; ++t)
    for (int64_t row = 0; row < r.rows[t]; ++row) {
      const int n = static_cast<int>(row % lens[t]);
      std::vector<E> one(src[t].begin() + row * kPitch, src[t].begin() + (row + 1) * kPitch);
      threadIdx.x = 0;
      attnfuse_kernels::rotate_tile_at<E, kNeox, 1, kPitch, 1>(
          one.data(), [&](int) { return static_cast<int>(r.pos0[t] + n); }, tables);
      for (int d = 0; d < D; ++d) {
        // Interleaved: pair j's dims (j, j + half) land at (2j, 2j + 1).
        const int from = !kInterleave || d >= 2 * half ? d : (d % 2 == 0 ? d / 2 : d / 2 + half);
        ASSERT_EQ(dst[t][row * D + d].bits, one[from].bits)
            << (t ? "K" : "Q") << " row " << row << " dim " << d << (vec ? " (16-byte path)" : " (32-bit path)");
      }
    }
}

TEST(RopeKernelOnHost, PrerotationKernelGivesTheFusedRotationsBits) {
  std::mt19937 rng(7);
  RopeParams llama3;
  llama3.base = 500000;
  llama3.rope_type = RopeScaling::Llama3;
  llama3.factor = 8;
  llama3.original_max_position_embeddings = 8192;
  for (bool vec : {true, false}) {
    check_prerotation<bf16_t, 128, true>(llama3, vec, rng);
    check_prerotation<bf16_t, 128, true, true>(llama3, vec, rng);  // interleaved (rope_window's wgmma form)
    RopeParams gptj;
    gptj.style = RopeStyle::Gptj;
    gptj.rotary_dim = 32;
    check_prerotation<f16_t, 64, false>(gptj, vec, rng);
    RopeParams partial = llama3;  // unrotated dims copied through
    partial.rotary_dim = 64;
    check_prerotation<f16_t, 128, true>(partial, vec, rng);
    check_prerotation<bf16_t, 128, true>(llama3, vec, rng, true);  // the caller's cos/sin tables
  }
}

// Calls whose lengths are device memory (paged caches, documents) stage their RoPE tables by the
// length the kernel finds (FwdParams::rope_len): the fixed set up to the original context; past
// it longrope's long set and dynamic's frequencies computed in float64 on the device, whose turns
// and rope_window limits must be the host's (rope_args at that length, in long double): turns to
// a few 2^-64 of a turn (the two-term 1/2π; one term alone is up to ~180 off), limits exactly. (Here
// both sides call the host's pow; the device's is within 2 ulp of it.)
TEST(RopeKernelOnHost, LengthDependentScalingsStageTheHostsFrequencies) {
  using attnfuse_kernels::RopeArgs;
  constexpr int D = 128, kPairs = D / 2;
  RopeParams dyn;
  dyn.base = 500000;
  dyn.rope_type = RopeScaling::Dynamic;
  dyn.factor = 4;
  dyn.original_max_position_embeddings = 8192;
  dyn.window_k = 1.5;
  RopeParams lr = dyn;
  lr.rope_type = RopeScaling::Longrope;
  lr.factor = 16;
  for (int r = 0; r < kPairs; ++r) {
    lr.short_factor.push_back(1.0 + 0.01 * r);
    lr.long_factor.push_back(1.0 + 0.7 * r);
  }
  alignas(16) char smem[attnfuse_kernels::RopeTableBytes<kPairs>::value];
  const attnfuse_host_cuda::Dim3 saved = blockDim;  // (the emulation's globals; put back below)
  blockDim = {32, 1, 1};
  for (const RopeParams& params : {dyn, lr})
    for (const int64_t len : {int64_t{1}, int64_t{8192}, int64_t{8193}, int64_t{40000}, int64_t{1} << 30}) {
      SCOPED_TRACE(::testing::Message() << "rope_type " << static_cast<int>(params.rope_type) << " length " << len);
      const runtime::DeviceLengthRope& d = runtime::device_length_rope_args(params, true, D);
      const RopeArgs a = d.args;
      attnfuse_kernels::RopeLengthRule rule = d.rule;
      const std::vector<unsigned long long> long_set = d.long_set;
      rule.long_set = long_set.empty() ? nullptr : long_set.data();
      ASSERT_EQ(rule.rule, params.rope_type == RopeScaling::Dynamic ? attnfuse_kernels::kRopeLenDynamic
                                                                    : attnfuse_kernels::kRopeLenLongrope);
      for (unsigned t = 0; t < 32; ++t) {  // the block's threads, one after another
        threadIdx = {t, 0, 0};
        attnfuse_kernels::stage_rope_tables<kPairs>(a, smem, rule, static_cast<int>(len));
      }
      const RopeArgs& want = runtime::rope_args(params, true, D, len);
      const auto* turn = reinterpret_cast<const unsigned long long*>(smem);
      const auto* limit = reinterpret_cast<const int*>(smem + kPairs * 8);
      for (int r = 0; r < kPairs; ++r) {
        const auto diff = static_cast<int64_t>(turn[r] - want.turn[r]);
        EXPECT_LE(std::abs(diff), 4) << "pair " << r << " turn";
        EXPECT_EQ(limit[r], want.limit[r]) << "pair " << r;
      }
      EXPECT_EQ(std::memcmp(&want.factor, &a.factor, sizeof(float)), 0);
    }
  blockDim = saved;
}

}  // namespace
}  // namespace attnfuse
