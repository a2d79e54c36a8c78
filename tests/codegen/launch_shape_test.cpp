// The host side of the emitted kernel's launch shape (codegen/cuda/emit.hpp): dynamic shared
// memory and the paged decode tiles' staged page list. The decode tiles' speed rests on how many
// blocks share an SM (passes::cuda_decode_tile), so these tests pin the occupancy each layout
// is meant to keep, as well as the byte counts.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include "attnfuse/program.hpp"
#include "codegen/cuda/emit.hpp"
#include "passes/tile_sizes.hpp"

namespace attnfuse {
namespace {

constexpr int kSmemPerSm = 233472;  // sm_90: 228 KB of shared memory per SM
constexpr int kReservedPerBlock = 1024;  // the driver's share of each resident block

int blocks_per_sm(int smem_bytes) { return kSmemPerSm / (smem_bytes + kReservedPerBlock); }

KernelSpec decode_spec(const char* program, int head_dim, bool paged, bool split = false) {
  KernelSpec s = Program::parse(program).compile({Target::Cuda, DType::BF16, head_dim, RopeMode::Fused});
  s.tile = passes::cuda_decode_tile({.head_dim = head_dim, .rows = 8, .split = split});
  if (paged) s.kv_layout = KvLayout::Paged;
  return s;
}

constexpr const char* kCausal = "softmax(causal(scaled_dot_product(Q, K))) @ V";

TEST(LaunchShape, PagedDecodeTilesStageTheirPageIdsAndKeepTheirOccupancy) {
  for (int d : {64, 128}) {
    SCOPED_TRACE(d);
    const KernelSpec contiguous = decode_spec(kCausal, d, false);
    const KernelSpec paged = decode_spec(kCausal, d, true);
    EXPECT_EQ(codegen::cuda::page_list_slots(contiguous), 0);
    EXPECT_EQ(codegen::cuda::page_list_slots(paged), passes::kCudaPageListSlots);
    EXPECT_EQ(codegen::cuda::shared_memory_bytes(paged),
              codegen::cuda::shared_memory_bytes(contiguous) + passes::kCudaPageListSlots * 4);
    // The page list must not cost a resident block: three two-stage blocks per SM at D = 128
    // (passes::cuda_decode_tile's comment), two of the split call's three-stage tile.
    EXPECT_EQ(blocks_per_sm(codegen::cuda::shared_memory_bytes(paged)),
              blocks_per_sm(codegen::cuda::shared_memory_bytes(contiguous)));
    const KernelSpec paged_split = decode_spec(kCausal, d, true, true);
    EXPECT_EQ(blocks_per_sm(codegen::cuda::shared_memory_bytes(paged_split)),
              blocks_per_sm(codegen::cuda::shared_memory_bytes(decode_spec(kCausal, d, false, true))));
  }
  EXPECT_EQ(blocks_per_sm(codegen::cuda::shared_memory_bytes(decode_spec(kCausal, 128, true))), 3);
  EXPECT_EQ(blocks_per_sm(codegen::cuda::shared_memory_bytes(decode_spec(kCausal, 128, true, true))), 2);
  // With the in-kernel rotation's tables as well (a paged call rotates in the kernel).
  EXPECT_EQ(blocks_per_sm(codegen::cuda::shared_memory_bytes(
                decode_spec("softmax(causal(rope(Q, K, base=500000))) @ V", 128, true))),
            3);
}

TEST(LaunchShape, TmaPagedDecodeTilesStageLongerListsAtTheSameOccupancy) {
  // The tiles that take pages by TMA hold kCudaPageListSlotsTma ids (a part of 16k keys at
  // pages of 16), and still as many blocks per SM as contiguous calls: three unsplit 64-key
  // tiles at D = 128, two split ones, one of the 128-key tile.
  for (const char* program : {kCausal, "softmax(causal(rope(Q, K, base=500000))) @ V"}) {
    for (const bool split : {false, true}) {
      for (const int block_k : {64, 128}) {
        SCOPED_TRACE(fmt::format("{} split {} block_k {}", program, split, block_k));
        KernelSpec paged = decode_spec(program, 128, true, split);
        paged.tile.tma_kv = true;
        paged.tile.block_k = block_k;
        KernelSpec contiguous = paged;
        contiguous.kv_layout = KvLayout::Contiguous;
        EXPECT_EQ(codegen::cuda::page_list_slots(paged), passes::kCudaPageListSlotsTma);
        EXPECT_EQ(codegen::cuda::shared_memory_bytes(paged),
                  codegen::cuda::shared_memory_bytes(contiguous) + passes::kCudaPageListSlotsTma * 4);
        const int blocks = blocks_per_sm(codegen::cuda::shared_memory_bytes(paged));
        EXPECT_EQ(blocks, blocks_per_sm(codegen::cuda::shared_memory_bytes(contiguous)));
        if (block_k == 64) {
          EXPECT_EQ(blocks, split ? 2 : 3);
        }
      }
    }
  }
  EXPECT_NE(codegen::cuda::emit_forward([] {
              KernelSpec s = decode_spec(kCausal, 128, true);
              s.tile.tma_kv = true;
              return s;
            }()).find(fmt::format("kPageListSlots = {};", passes::kCudaPageListSlotsTma)),
            std::string::npos);
}

TEST(LaunchShape, OnlyDensePagedDecodeTilesAtUpTo128DimsStageIds) {
  // D = 256 and the prefill tile look pages up per row; BlockMask rows are not one key range.
  EXPECT_EQ(codegen::cuda::page_list_slots(decode_spec(kCausal, 256, true)), 0);
  EXPECT_EQ(codegen::cuda::page_list_slots(
                decode_spec("softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V", 128, true)),
            0);
  KernelSpec prefill = Program::parse(kCausal).compile({Target::Cuda, DType::BF16, 128});
  prefill.kv_layout = KvLayout::Paged;
  EXPECT_EQ(codegen::cuda::page_list_slots(prefill), 0);
  // The emitted Spec carries the count the kernel sizes its list by.
  EXPECT_NE(codegen::cuda::emit_forward(decode_spec(kCausal, 128, true)).find("kPageListSlots = 256;"),
            std::string::npos);
  EXPECT_NE(codegen::cuda::emit_forward(decode_spec(kCausal, 128, false)).find("kPageListSlots = 0;"),
            std::string::npos);
}

TEST(LaunchShape, TheProducerWarpIsAFifthWarpOfTmaDecodeTiles) {
  // TileConfig::producer_warp adds one warp to the block and to the emitted Spec where the decode
  // tile copies K/V by TMA (documents' decode tiles too); elsewhere (cp.async tiles) it is inert.
  KernelSpec tma = decode_spec(kCausal, 128, true, true);
  tma.tile.tma_kv = true;
  EXPECT_EQ(codegen::cuda::threads_per_block(tma), 128);
  tma.tile.producer_warp = true;
  EXPECT_TRUE(codegen::cuda::producer_warp(tma));
  EXPECT_EQ(codegen::cuda::threads_per_block(tma), 160);
  EXPECT_NE(codegen::cuda::emit_forward(tma).find("kProducerWarp = true;"), std::string::npos);
  EXPECT_NE(codegen::cuda::emit_forward(tma).find("__launch_bounds__(160, 1)"), std::string::npos);
  // The stage barriers share their 64 bytes: shared memory does not grow.
  KernelSpec plain_tma = tma;
  plain_tma.tile.producer_warp = false;
  EXPECT_EQ(codegen::cuda::shared_memory_bytes(tma), codegen::cuda::shared_memory_bytes(plain_tma));

  KernelSpec padded = decode_spec(kCausal, 128, true, true);
  padded.tile.producer_warp = true;  // no tma_kv
  EXPECT_FALSE(codegen::cuda::producer_warp(padded));
  EXPECT_EQ(codegen::cuda::threads_per_block(padded), 128);
  EXPECT_NE(codegen::cuda::emit_forward(padded).find("kProducerWarp = false;"), std::string::npos);
  KernelSpec docs = decode_spec("softmax(document(causal(scaled_dot_product(Q, K)))) @ V", 128, false, true);
  docs.tile.tma_kv = docs.tile.producer_warp = true;
  EXPECT_TRUE(codegen::cuda::producer_warp(docs));
  EXPECT_EQ(codegen::cuda::threads_per_block(docs), 160);
  EXPECT_NE(codegen::cuda::emit_forward(docs).find("kTmaKV = true;"), std::string::npos);
}

TEST(LaunchShape, TheWgmmaTilesProducerIsAWarpgroup) {
  // The wgmma prefill tile's producer is a whole warpgroup, so that setmaxnreg can move its
  // registers to the computing warpgroups: 384 threads next to two of them, 512 next to the
  // three of D = 64's 192-row tile, one block per SM. The tile pass gives it to the
  // one-block-per-SM wgmma tiles but two measured faster without it (128-row causal tiles at
  // D = 64, the two-sided window at D = 128); a tile meant for two blocks per SM (block-sparse
  // at D = 64) keeps none.
  KernelSpec wg = Program::parse("softmax(scaled_dot_product(Q, K)) @ V").compile({Target::Cuda, DType::BF16, 128});
  wg.tile = passes::cuda_arch_tile(wg, 90);
  ASSERT_TRUE(wg.tile.wgmma);
  ASSERT_EQ(wg.tile.min_blocks, 1);
  EXPECT_TRUE(wg.tile.producer_warp);
  EXPECT_TRUE(codegen::cuda::producer_warp(wg));
  EXPECT_EQ(codegen::cuda::threads_per_block(wg), 384);
  const std::string src = codegen::cuda::emit_forward(wg);
  EXPECT_NE(src.find("kProducerWarp = true;"), std::string::npos);
  EXPECT_NE(src.find("__launch_bounds__(384, 1)"), std::string::npos);
  KernelSpec off = wg;  // ATTNFUSE_CUDA_WGMMA_PRODUCER=0
  off.tile.producer_warp = false;
  EXPECT_EQ(codegen::cuda::threads_per_block(off), 256);
  EXPECT_EQ(codegen::cuda::shared_memory_bytes(off), codegen::cuda::shared_memory_bytes(wg));
  KernelSpec two = wg;
  two.tile.min_blocks = 2;
  EXPECT_FALSE(codegen::cuda::producer_warp(two));
  EXPECT_EQ(codegen::cuda::threads_per_block(two), 256);
  KernelSpec paged = wg;  // the wgmma tile copies paged K/V by cp.async
  paged.kv_layout = KvLayout::Paged;
  EXPECT_FALSE(codegen::cuda::producer_warp(paged));

  KernelSpec rows192 = Program::parse("softmax(scaled_dot_product(Q, K)) @ V").compile({Target::Cuda, DType::BF16, 64});
  rows192.tile = passes::cuda_arch_tile(rows192, 90);
  ASSERT_EQ(rows192.tile.block_q, 192);
  EXPECT_TRUE(codegen::cuda::producer_warp(rows192));
  EXPECT_EQ(codegen::cuda::threads_per_block(rows192), 512);
  EXPECT_NE(codegen::cuda::emit_forward(rows192).find("__launch_bounds__(512, 1)"), std::string::npos);
  rows192.tile.producer_warp = false;
  EXPECT_EQ(codegen::cuda::threads_per_block(rows192), 384);

  KernelSpec sparse = Program::parse("softmax(block_sparse(scaled_dot_product(Q, K))) @ V").compile({Target::Cuda, DType::BF16, 64});
  sparse.tile = passes::cuda_arch_tile(sparse, 90);
  EXPECT_EQ(sparse.tile.min_blocks, 2);
  EXPECT_FALSE(sparse.tile.producer_warp);
  KernelSpec window = Program::parse("softmax(sliding_window(scaled_dot_product(Q, K), 128)) @ V").compile({Target::Cuda, DType::BF16, 128});
  window.tile = passes::cuda_arch_tile(window, 90);
  EXPECT_FALSE(window.tile.producer_warp);  // 0.231 against 0.237 ms with it (Llama-3-8B, 8k)
  KernelSpec causal64 = Program::parse(kCausal).compile({Target::Cuda, DType::BF16, 64});
  causal64.tile = passes::cuda_arch_tile(causal64, 90);
  EXPECT_EQ(causal64.tile.block_q, 192);
  EXPECT_TRUE(causal64.tile.producer_warp);  // fits 160 registers with per-row key ranges
  EXPECT_EQ(codegen::cuda::threads_per_block(causal64), 512);
  KernelSpec alibi64 = Program::parse("softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V")
                           .compile({Target::Cuda, DType::BF16, 64});
  alibi64.tile = passes::cuda_arch_tile(alibi64, 90);
  EXPECT_EQ(alibi64.tile.block_q, 128);
  EXPECT_FALSE(alibi64.tile.producer_warp);  // 128-row causal at D = 64: measured slower with it
  KernelSpec causal128 = Program::parse(kCausal).compile({Target::Cuda, DType::BF16, 128});
  causal128.tile = passes::cuda_arch_tile(causal128, 90);
  EXPECT_TRUE(causal128.tile.producer_warp);
}

}  // namespace
}  // namespace attnfuse
