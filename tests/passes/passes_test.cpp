// Tests of the passes one by one (fuse, tile, lower), the pipeline's trace, and tile_sizes.
#include <gtest/gtest.h>

#include <cstdlib>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "ir/verifier.hpp"
#include "pass_helpers.hpp"
#include "passes/fuse.hpp"
#include "passes/lower.hpp"
#include "passes/pipeline.hpp"
#include "passes/tile.hpp"
#include "passes/tile_sizes.hpp"

namespace attnfuse::testing {
namespace {

using ir::Op;
using passes::FusedAttention;

FusedAttention fused(const ir::Graph& g) {
  ir::verify(g);  // the contract of fuse
  return passes::fuse(g);
}

TEST(Fuse, RecognisesRolesAndKeepsModifierOrder) {
  const auto f = fused(program(sdp(), {{Op::Causal}, {Op::Alibi}, {Op::Softcap, {param("cap", 30.0)}}}));
  EXPECT_EQ(f.score, ScoreKind::ScaledDot);
  EXPECT_TRUE(f.masks.has(MaskKind::Causal));
  EXPECT_FALSE(f.masks.has(MaskKind::SlidingWindow));
  ASSERT_EQ(f.modifiers.size(), 2);
  EXPECT_EQ(f.modifiers[0], ModifierKind::Alibi);
  EXPECT_EQ(f.modifiers[1], ModifierKind::Softcap);
  EXPECT_EQ(f.norm, NormKind::Softmax);
  EXPECT_EQ(f.scalars.softcap, 30.0);

  const auto g = fused(program(sdp(), {{Op::Softcap, {param("cap", 30.0)}}, {Op::Causal}, {Op::Alibi}}));
  EXPECT_EQ(g.modifiers[0], ModifierKind::Softcap) << "program order, innermost first";
  EXPECT_EQ(g.modifiers[1], ModifierKind::Alibi);
  EXPECT_NE(f.modifiers, g.modifiers);
  EXPECT_EQ(f.masks, g.masks) << "masks are a set: their position in the chain does not matter";
}

TEST(Fuse, ScoreOpsNormsMasksAndScalars) {
  const auto a = fused(program({Op::Rope, {param("base", 500000.0), param("style", std::string("gptj"))}},
                               {{Op::SlidingWindow, {param("window", 256.0)}}, {Op::BlockSparse}},
                               Op::ReluAttention));
  EXPECT_EQ(a.score, ScoreKind::Rope);
  EXPECT_EQ(a.norm, NormKind::ReluAttention);
  EXPECT_TRUE(a.masks.has(MaskKind::SlidingWindow));
  EXPECT_TRUE(a.masks.has(MaskKind::BlockSparse));
  EXPECT_EQ(a.scalars.window, 256);
  EXPECT_EQ(a.scalars.rope.base, 500000.0);
  EXPECT_EQ(a.scalars.rope.style, RopeStyle::Gptj);

  const auto b = fused(program({Op::ScaledDotProduct, {param("scale", 0.125)}}, {{Op::Full}}));
  EXPECT_TRUE(b.masks.empty()) << "full adds no mask";
  EXPECT_EQ(b.modifiers.size(), 0);
  ASSERT_TRUE(b.scalars.scale.has_value());
  EXPECT_EQ(*b.scalars.scale, 0.125);

  const auto c = fused(program({Op::RopeWindow, {param("k", 2.0)}}, {{Op::Causal}, {Op::AdditiveBias}}));
  EXPECT_EQ(c.score, ScoreKind::RopeWindow);
  EXPECT_EQ(c.scalars.rope.window_k, 2.0);
  EXPECT_EQ(c.modifiers[0], ModifierKind::AdditiveBias);

  const auto d = fused(program(sdp(), {}));  // softmax(scaled_dot_product(Q, K)) @ V
  EXPECT_TRUE(d.masks.empty());
  EXPECT_FALSE(d.scalars.scale.has_value());
}

TEST(Fuse, RejectsWhatOneKernelCannotHold) {
  // Not verified on purpose: fuse must still refuse, with a Verify error, rather than guess.
  const ir::Graph twice = program(sdp(), {{Op::Alibi}, {Op::Alibi}});
  try {
    passes::fuse(twice);
    FAIL() << "alibi twice must not fuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("alibi is applied twice"), std::string::npos) << e.what();
  }
  ir::Builder b;
  const ir::NodeId q = b.tensor("Q"), k = b.tensor("K");
  const ir::NodeId s = b.call(Op::ScaledDotProduct, {q, k}, {});
  const ir::NodeId p = b.call(Op::Softmax, {s}, {});
  const ir::Graph no_pv = std::move(b).finish(p);
  try {
    passes::fuse(no_pv);
    FAIL() << "a program without @ V must not fuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("@ V"), std::string::npos) << e.what();
  }
  // Two sliding windows (if a graph ever carried them) intersect: the smaller wins.
  const ir::Graph two = program(sdp(), {{Op::SlidingWindow, {param("window", 64.0)}},
                                        {Op::SlidingWindow, {param("window", 16.0)}}});
  EXPECT_EQ(passes::fuse(two).scalars.window, 16);
}

TEST(TileSizes, CpuChoices) {
  const MaskSet none;
  for (int d : {0, 32, 64, 80, 96, 128}) {
    const TileConfig t = passes::tile_sizes(Target::Cpu, d, DType::F32, none, ScoreKind::ScaledDot);
    EXPECT_EQ(t.block_q, 64) << d;
    EXPECT_EQ(t.block_k, 64) << d;
    EXPECT_EQ(t.num_warps, 0);
  }
  EXPECT_EQ(passes::tile_sizes(Target::Cpu, 256, DType::BF16, none, ScoreKind::ScaledDot).block_k, 32);
  static_assert(passes::tile_sizes(Target::Cpu, 64, DType::F32, MaskSet{}, ScoreKind::ScaledDot).block_q == 64,
                "tile_sizes is usable at compile time");
}

TEST(TileSizes, CudaChoicesFitTheTemplate) {
  for (int d : {32, 64, 80, 96, 128, 256})
    for (ScoreKind sk : {ScoreKind::ScaledDot, ScoreKind::Rope}) {
      const TileConfig t = passes::tile_sizes(Target::Cuda, d, DType::F16, MaskSet{}, sk);
      EXPECT_EQ(t.block_q, 128);
      // 4 x 32 rows where it does not spill: plain programs at D <= 64 (the in-kernel rotation
      // spills there, so rope takes 8 x 16).
      EXPECT_EQ(t.num_warps, d <= 64 && sk == ScoreKind::ScaledDot ? 4 : 8) << d;
      EXPECT_EQ(t.stages, 2);
      EXPECT_EQ(t.block_q % (16 * t.num_warps), 0);
      EXPECT_EQ(t.block_k % 16, 0);
      EXPECT_LE(passes::cuda_smem_bytes(t, d), passes::kCudaSmemLimit) << d;
    }
  // Measured choices (tile_sizes.hpp): wide key tiles for plain programs, 64 where per-cell work
  // adds live registers, 32 at D = 256.
  ModifierChain alibi;
  alibi.push(ModifierKind::Alibi);
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 128, DType::BF16, MaskSet{}, ScoreKind::ScaledDot).block_k, 128);
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 128, DType::BF16, MaskSet{}, ScoreKind::ScaledDot, alibi).block_k, 64);
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 64, DType::BF16, MaskSet{}, ScoreKind::ScaledDot, {},
                               NormKind::ReluAttention).block_k, 64);
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 64, DType::BF16, MaskSet{}, ScoreKind::Rope).block_k, 64);
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 256, DType::BF16, MaskSet{}, ScoreKind::ScaledDot).block_k, 32);
  // Spill-driven choices: gptj's fused rotation and all three modifiers at once at D = 128.
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 128, DType::BF16, MaskSet{}, ScoreKind::Rope).block_k, 128);
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 128, DType::BF16, MaskSet{}, ScoreKind::Rope, {}, NormKind::Softmax,
                               /*gptj=*/true).block_k, 64);
  ModifierChain three = alibi;
  three.push(ModifierKind::AdditiveBias);
  three.push(ModifierKind::Softcap);
  EXPECT_EQ(passes::tile_sizes(Target::Cuda, 128, DType::BF16, MaskSet{}, ScoreKind::ScaledDot, three).block_k, 32);
  // Block-sparse with a sliding window at D 96-128 (row bits next to the window's limits);
  // either mask alone keeps the wide tile.
  MaskSet sparse, window, both;
  sparse.add(MaskKind::BlockSparse);
  window.add(MaskKind::SlidingWindow);
  both.add(MaskKind::BlockSparse);
  both.add(MaskKind::SlidingWindow);
  for (int d : {96, 128}) {
    EXPECT_EQ(passes::tile_sizes(Target::Cuda, d, DType::BF16, both, ScoreKind::ScaledDot).block_k, 64) << d;
    EXPECT_EQ(passes::tile_sizes(Target::Cuda, d, DType::BF16, sparse, ScoreKind::ScaledDot).block_k, 128) << d;
    EXPECT_EQ(passes::tile_sizes(Target::Cuda, d, DType::BF16, window, ScoreKind::ScaledDot).block_k, 128) << d;
  }
}

// The decode tiles (tile_sizes.hpp): a 16-row atom over 4 key-split warps up to 16 rows, 64 rows
// beyond; a third stage for the narrow tile of a split call at D <= 128 and for Hopper's paged
// 128-key tile; every one fits shared memory with the block counts the comment promises.
TEST(TileSizes, DecodeTilesFollowRowsSplitAndHeadDim) {
  for (int d : {64, 96, 128, 256})
    for (int64_t rows : {1, 4, 8, 16, 17, 32, 64})
      for (bool split : {false, true})
        for (bool tma : {false, true})
          for (bool paged : {false, true})
            for (bool rotates : {false, true}) {
              if (rotates && tma) continue;  // the rotating tiles copy K/V by cp.async (CudaKernel::decode_tma)
              const TileConfig t = passes::cuda_decode_tile(
                  {.head_dim = d, .rows = rows, .split = split, .wide_keys = tma, .paged = paged, .rotates = rotates});
              SCOPED_TRACE(::testing::Message() << "d=" << d << " rows=" << rows << " split=" << split << " tma=" << tma
                                                << " paged=" << paged << " rotates=" << rotates);
              const bool wide_keys = tma && rows <= 16 && d == 128;  // Hopper's TMA narrow tile
              EXPECT_TRUE(t.pack_gqa);
              EXPECT_EQ(t.num_warps, 4);
              EXPECT_EQ(t.block_q, rows <= 16 ? 16 : 64);
              EXPECT_EQ(t.key_warps, rows <= 16 ? 4 : 1);
              EXPECT_EQ(t.block_k, wide_keys ? 128 : (rows > 16 && d > 128 ? 32 : 64));
              // Three stages in split calls, except where K is rotated in the kernel; unsplit, only
              // the paged 128-key tile keeps a third.
              EXPECT_EQ(t.stages, (split && rows <= 16 && d <= 128 && !rotates) || (wide_keys && paged) ? 3 : 2);
              EXPECT_LE(passes::cuda_smem_bytes(t, d), passes::kCudaSmemLimit);
            }
  // Hopper's 128-key tile: one block per SM (two or three 64 KB stages, with Q and the barriers).
  const auto bytes = [](const passes::DecodeTileCall& c) {
    return passes::cuda_smem_bytes(passes::cuda_decode_tile(c), 128) + 1024;
  };
  EXPECT_GT(2 * bytes({.rows = 8, .wide_keys = true}), 228 * 1024);
  EXPECT_GT(2 * bytes({.rows = 8, .split = true, .wide_keys = true}), 228 * 1024);
  // Llama-3 decode at D = 128: three blocks per SM unsplit, and split with fused RoPE; two with
  // the split call's third stage.
  EXPECT_LE(3 * bytes({.rows = 8, .split = true, .rotates = true}), 228 * 1024);
  EXPECT_LE(3 * bytes({.rows = 8}), 228 * 1024);
  EXPECT_LE(2 * bytes({.rows = 8, .split = true}), 228 * 1024);
}

// Hopper: the prefill tile of D 64 / 128 takes the wgmma form (3 stages, 8 warps, 128 rows) and
// fits the 227 KB of shared memory; in-kernel RoPE, decode tiles and other head dims keep
// mma.sync, and sm_80 never changes.
TEST(TileSizes, HopperTileTakesTheWgmmaFormWhereItApplies) {
  auto spec = [](const char* program, int d, RopeMode mode = RopeMode::Auto) {
    return Program::parse(program).compile({Target::Cuda, DType::BF16, d, mode});
  };
  const char* causal = "softmax(causal(scaled_dot_product(Q, K))) @ V";
  for (int d : {64, 128}) {
    const KernelSpec s = spec(causal, d);
    const TileConfig t = passes::cuda_arch_tile(s, 90);
    EXPECT_TRUE(t.wgmma) << d;
    EXPECT_EQ(t.block_q, d == 64 ? 192 : 128) << "three computing warpgroups at D = 64";
    EXPECT_EQ(t.block_k, 128);
    EXPECT_EQ(t.num_warps, t.block_q / 16);
    EXPECT_EQ(t.stages, d == 64 ? 4 : 3) << "a fourth stage fits at D = 64 only";
    EXPECT_EQ(t.min_blocks, 1);
    EXPECT_LE(passes::cuda_smem_bytes(t, d), passes::kCudaSmemLimit) << d;
    EXPECT_EQ(passes::cuda_arch_tile(s, 80), s.tile) << "sm_80 keeps the mma.sync tile";
    EXPECT_EQ(passes::cuda_arch_tile(s, 100), s.tile) << "Blackwell has no wgmma";
  }
  EXPECT_EQ(passes::cuda_arch_tile(spec("softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V", 128), 90).block_k, 64);
  EXPECT_EQ(passes::cuda_arch_tile(
                spec("softmax(softcap(additive_bias(alibi(causal(scaled_dot_product(Q, K)))), 30)) @ V", 64), 90)
                .block_k,
            64);
  EXPECT_FALSE(passes::cuda_arch_tile(spec(causal, 96), 90).wgmma);
  EXPECT_FALSE(passes::cuda_arch_tile(spec(causal, 256), 90).wgmma);
  const char* rope = "softmax(causal(rope(Q, K))) @ V";
  EXPECT_FALSE(passes::cuda_arch_tile(spec(rope, 128, RopeMode::Fused), 90).wgmma) << "rotation reads padded tiles";
  EXPECT_FALSE(passes::cuda_arch_tile(spec(rope, 128, RopeMode::Auto), 90).wgmma);
  EXPECT_TRUE(passes::cuda_arch_tile(spec(rope, 128, RopeMode::Prerotate), 90).wgmma);
  const char* window = "softmax(causal(rope_window(Q, K, k=1))) @ V";
  EXPECT_FALSE(passes::cuda_arch_tile(spec(window, 128), 90).wgmma);
  EXPECT_FALSE(passes::cuda_arch_tile(spec(window, 128, RopeMode::Fused), 90).wgmma);
  for (int d : {64, 128}) {  // prerotated rope_window: the wgmma form, with its limits in smem
    const TileConfig t = passes::cuda_arch_tile(spec(window, d, RopeMode::Prerotate), 90);
    EXPECT_TRUE(t.wgmma) << d;
    EXPECT_EQ(t.stages, d == 64 ? 4 : 3) << d;
    EXPECT_EQ(passes::cuda_smem_bytes(t, d, true), passes::cuda_smem_bytes(t, d) + d / 2 * 4);
    EXPECT_LE(passes::cuda_smem_bytes(t, d, true), passes::kCudaSmemLimit) << d;
  }
  // Block-sparse masks of 64-row blocks at D = 64: the 64-row tile (one warpgroup, three blocks
  // per SM) where the 128-row tile would coarsen them.
  const KernelSpec sparse64 = spec("softmax(block_sparse(scaled_dot_product(Q, K))) @ V", 64);
  const TileConfig t128 = passes::cuda_arch_tile(sparse64, 90);
  EXPECT_TRUE(passes::cuda_sparse_64_rows(sparse64, t128, 64, 64));
  EXPECT_TRUE(passes::cuda_sparse_64_rows(sparse64, t128, 192, 128));
  EXPECT_FALSE(passes::cuda_sparse_64_rows(sparse64, t128, 128, 64)) << "read by the 128-row tile as it is";
  EXPECT_FALSE(passes::cuda_sparse_64_rows(sparse64, t128, 32, 64)) << "coarsened to the 128-row tile";
  EXPECT_FALSE(passes::cuda_sparse_64_rows(sparse64, t128, 64, 32));
  EXPECT_FALSE(passes::cuda_sparse_64_rows(sparse64, passes::cuda_arch_tile(sparse64, 80), 64, 64)) << "mma.sync";
  EXPECT_FALSE(passes::cuda_sparse_64_rows(spec("softmax(block_sparse(scaled_dot_product(Q, K))) @ V", 128),
                                           t128, 64, 64));
  const KernelSpec rope64 = spec("softmax(block_sparse(causal(rope(Q, K)))) @ V", 64, RopeMode::Prerotate);
  EXPECT_FALSE(passes::cuda_sparse_64_rows(rope64, passes::cuda_arch_tile(rope64, 90), 64, 64)) << "plain scores only";
  const TileConfig t64 = passes::cuda_wgmma_64_rows(t128);
  EXPECT_EQ(t64.block_q, 64);
  EXPECT_EQ(t64.num_warps, 4);
  EXPECT_LE(3 * (passes::cuda_smem_bytes(t64, 64) + 1024), 228 * 1024) << "three blocks per SM";
  KernelSpec decode = spec(causal, 128);
  decode.tile = passes::cuda_decode_tile({.head_dim = 128, .rows = 16});
  EXPECT_FALSE(passes::cuda_arch_tile(decode, 90).wgmma);
  // Block-sparse keeps the tile's key width, so masks built for it stay multiples of it.
  const KernelSpec sparse = spec("softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V", 64);
  EXPECT_EQ(passes::cuda_arch_tile(sparse, 90).block_k, sparse.tile.block_k);
  EXPECT_EQ(passes::cuda_arch_tile(sparse, 90).block_q, 128) << "masks come in 128-row blocks";
}

TEST(TileSizes, HopperD64TakesThe192RowTileForPlainScores) {
  auto tile = [](const char* program, RopeMode mode = RopeMode::Auto, KvLayout kv = KvLayout::Contiguous) {
    KernelSpec s = Program::parse(program).compile({Target::Cuda, DType::BF16, 64, mode});
    s.kv_layout = kv;
    return passes::cuda_arch_tile(s, 90);
  };
  // Three computing warpgroups plus the producer warpgroup (512 threads), dense or causal.
  for (const char* p : {"softmax(scaled_dot_product(Q, K)) @ V", "softmax(causal(scaled_dot_product(Q, K))) @ V",
                        "relu_attention(causal(scaled_dot_product(Q, K))) @ V",
                        "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V"}) {
    const TileConfig t = tile(p);
    EXPECT_EQ(t.block_q, 192) << p;
    EXPECT_EQ(t.num_warps, 12) << p;
    EXPECT_TRUE(t.producer_warp) << p;
    EXPECT_LE(passes::cuda_smem_bytes(t, 64), passes::kCudaSmemLimit) << p;
  }
  EXPECT_EQ(tile("softmax(causal(rope(Q, K))) @ V", RopeMode::Prerotate).block_q, 192) << "prerotated: plain scores";
  // The 128-row tile elsewhere: per-cell modifiers (register use on the edge of the budget), a
  // two-sided window (measured level), rope_window, block masks, documents and pages (cp.async).
  for (const char* p : {"softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V",
                        "softmax(softcap(scaled_dot_product(Q, K), 30)) @ V",
                        "softmax(sliding_window(scaled_dot_product(Q, K), 256)) @ V",
                        "softmax(block_sparse(scaled_dot_product(Q, K))) @ V",
                        "softmax(document(causal(scaled_dot_product(Q, K)))) @ V"})
    EXPECT_EQ(tile(p).block_q, 128) << p;
  EXPECT_EQ(tile("softmax(causal(rope_window(Q, K, k=1))) @ V", RopeMode::Prerotate).block_q, 128);
  EXPECT_EQ(tile("softmax(causal(scaled_dot_product(Q, K))) @ V", RopeMode::Auto, KvLayout::Paged).block_q, 128);
  // 128-row causal tiles at D = 64 keep the loader thread (measured faster).
  EXPECT_FALSE(tile("softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V").producer_warp);
}

TEST(Tile, TakesTargetDtypeHeadDimAndRejectsBadOnes) {
  const auto f = fused(program(sdp(), {{Op::Causal}}));
  const auto cpu = passes::tile(f, {Target::Cpu, DType::BF16, 0});
  EXPECT_EQ(cpu.fused, f);
  EXPECT_EQ(cpu.target, Target::Cpu);
  EXPECT_EQ(cpu.dtype, DType::BF16);
  EXPECT_EQ(cpu.head_dim, 0);
  EXPECT_EQ(cpu.tile, passes::tile_sizes(Target::Cpu, 0, DType::BF16, f.masks, f.score));
  const auto cuda = passes::tile(f, {Target::Cuda, DType::F16, 128});
  EXPECT_EQ(cuda.tile.num_warps, 8);

  auto code = [&](CompileOptions o) {
    try {
      passes::tile(f, o);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  EXPECT_EQ(code({Target::Cuda, DType::F16, 0}), ErrorCode::Shape);
  EXPECT_EQ(code({Target::Cuda, DType::F16, 512}), ErrorCode::Unsupported);
  EXPECT_EQ(code({Target::Cpu, DType::F32, -1}), ErrorCode::Shape);
}

TEST(Lower, CopiesEveryFieldAndChecksRotaryDim) {
  const auto f = fused(program({Op::Rope, {param("rotary_dim", 64.0)}},
                               {{Op::Causal}, {Op::Alibi, {param("slopes", std::vector<double>{0.5, 0.25})}}}));
  const auto t = passes::tile(f, {Target::Cpu, DType::F32, 128});
  const KernelSpec s = passes::lower(t);
  EXPECT_EQ(s.score, ScoreKind::Rope);
  EXPECT_EQ(s.masks, f.masks);
  EXPECT_EQ(s.modifiers, f.modifiers);
  EXPECT_EQ(s.norm, f.norm);
  EXPECT_EQ(s.target, Target::Cpu);
  EXPECT_EQ(s.tile, t.tile);
  EXPECT_EQ(s.dtype, DType::F32);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.scalars, f.scalars);
  EXPECT_EQ(s.scalars.alibi, AlibiSlopes::Custom);
  EXPECT_FALSE(s.needs_bias());

  const auto small = passes::tile(f, {Target::Cpu, DType::F32, 32});
  try {
    passes::lower(small);
    FAIL() << "rotary_dim 64 > head dim 32";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Shape);
    EXPECT_NE(std::string(e.what()).find("rotary_dim=64"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, TracesTheIrAfterEveryPassInOrder) {
  const ir::Graph g = program(sdp(), {{Op::Causal}, {Op::Softcap, {param("cap", 50.0)}}});
  ir::verify(g);
  std::string trace;
  const KernelSpec s = passes::run_pipeline(g, {Target::Cpu, DType::F32, 64}, &trace);
  const char* heads[] = {"== after verify ==\n", "== after fuse ==\nfused_attention\n",
                         "== after tile ==\ntiled_attention\n", "== after lower ==\nkernel_spec\n"};
  size_t at = 0;
  for (const char* h : heads) {
    const size_t found = trace.find(h, at);
    ASSERT_NE(found, std::string::npos) << "missing or out of order: " << h << "\n" << trace;
    at = found + 1;
  }
  EXPECT_NE(trace.find("MaskOp causal"), std::string::npos) << "the verified IR opens the trace\n" << trace;
  EXPECT_NE(trace.find(to_string(s)), std::string::npos) << "the lower step prints the spec itself";
  EXPECT_EQ(to_string(passes::run_pipeline(g, {Target::Cpu, DType::F32, 64}, nullptr)), to_string(s));
}

TEST(Pipeline, DebugEnvPrintsToStderr) {
  const ir::Graph g = program(sdp(), {{Op::Causal}});
  ::setenv("ATTNFUSE_DEBUG", "1", 1);
  ::testing::internal::CaptureStderr();
  passes::run_pipeline(g, {}, nullptr);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("ATTNFUSE_DEBUG");
  EXPECT_NE(err.find("== after fuse =="), std::string::npos) << err;
  EXPECT_NE(err.find("== after lower =="), std::string::npos) << err;
  ::testing::internal::CaptureStderr();
  passes::run_pipeline(g, {}, nullptr);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "silent without ATTNFUSE_DEBUG=1";
}

TEST(Pipeline, ScalarValuesDoNotChangeTheStructure) {
  const auto a = passes::run_pipeline(program(sdp(), {{Op::SlidingWindow, {param("window", 128.0)}}}), {}, nullptr);
  const auto b = passes::run_pipeline(program(sdp(), {{Op::SlidingWindow, {param("window", 4096.0)}}}), {}, nullptr);
  EXPECT_EQ(a.masks, b.masks);
  EXPECT_EQ(a.tile, b.tile);
  EXPECT_EQ(a.scalars.window, 128);
  EXPECT_EQ(b.scalars.window, 4096);
  const std::string pa = to_string(a), pb = to_string(b);
  const std::string structure_a = pa.substr(0, pa.find("run-time scalars"));
  EXPECT_EQ(structure_a, pb.substr(0, pb.find("run-time scalars")))
      << "the printout keeps compile-time structure above the run-time scalars";
}

}  // namespace
}  // namespace attnfuse::testing
