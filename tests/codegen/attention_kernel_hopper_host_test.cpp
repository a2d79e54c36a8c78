// The forward attention kernel's Hopper forms run as whole grids on the host against the float64
// reference: the wgmma prefill tiles (fwd_wgmma.cuh: 192 rows with a producer warpgroup, 128
// with the loader thread or the producer, the 64-row block-sparse tile, row groups that skip;
// decoupled over TMA and lockstep over cp.async) and the decode tiles that take K/V by the copy
// engine (kv_copy.cuh: contiguous and paged boxes, the 128-key tile, the producer warp), with
// wgmma, mbarriers and TMA emulated (codegen/kernel_host_hopper.hpp). These are the kernels every
// H100 and H200 call runs; CI has no GPU, so a change to them is checked here before a device runs
// it. Each Spec is checked against the tile pass (passes::cuda_arch_tile, cuda_decode_tile) and
// the emitter's producer and thread count (check_kernel).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/attention_kernel_host.hpp"

namespace attnfuse {
namespace {

using namespace kernel_host_test;

constexpr const char* kCausal = "softmax(causal(scaled_dot_product(Q, K))) @ V";

// Hopper's tiles: rows, keys, warps, stages, key warps, packed decode, wgmma, TMA, producer, row
// groups.
constexpr Tile kWgmma192{192, 128, 12, 4, 1, false, true, true, true, false};      // D 64, causal
constexpr Tile kWgmma128{128, 128, 8, 3, 1, false, true, true, true, false};       // D 128
constexpr Tile kWgmma128Loader{128, 128, 8, 4, 1, false, true, true, false, false};  // D 64, loader thread
constexpr Tile kWgmma128Bn64{128, 64, 8, 3, 1, false, true, true, true, false};     // D 128, per-cell work
constexpr Tile kWgmmaSparse{128, 64, 8, 4, 1, false, true, true, false, false};     // D 64, two blocks per SM
constexpr Tile kWgmmaSparseGroups{128, 64, 8, 4, 1, false, true, true, false, true};
constexpr Tile kWgmmaSparse64{64, 64, 4, 4, 1, false, true, true, false, false};    // 64-row masks
constexpr Tile kWgmmaPaged{128, 128, 8, 3, 1, false, true, false, false, false};    // D 128, pages by cp.async

// The wgmma prefill tiles over TMA (the decoupled schedule: stage barriers, no block barrier per
// tile) and over cp.async (lockstep), with the producer warpgroup and with the loader thread.
TEST(HopperKernelOnHost, WgmmaPrefillTilesMaskTheDiagonal) {
  std::mt19937 rng(90);
  // 192 rows: three computing warpgroups and the producer (512 threads); a tile past the rows;
  // chunked prefill (queries at the end of the keys), so that blocks stream more key tiles than
  // there are stages and every stage barrier turns over.
  check_kernel<HostSpec<bf16_t, 64, kWgmma192>>(kCausal, 1, 2, 1, 300, 900, 1, rng);
  // 128 rows at D = 128, the producer warpgroup.
  check_kernel<HostSpec<f16_t, 128, kWgmma128>>(kCausal, 1, 2, 2, 150, 633, 1, rng);
  // The same module without tensor maps: cp.async, the lockstep schedule, the producer exits.
  check_kernel<HostSpec<bf16_t, 128, kWgmma128>>(kCausal, 1, 2, 1, 200, 200, 1, rng, {.tensor_maps = false});
}

TEST(HopperKernelOnHost, WgmmaTilesWithModifiersAndWindows) {
  std::mt19937 rng(91);
  // D = 64 causal with a modifier: 128 rows, the loader thread (thread 128) issues the copies.
  check_kernel<HostSpec<bf16_t, 64, kWgmma128Loader, Features{.alibi = true}>>(
      "softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V", 1, 4, 2, 170, 700, 1, rng);
  // An additive bias broadcast over three batch entries, which run side by side in x; then one in
  // the inputs' dtype (its lines prefetched 64 keys apart), every row 8-byte aligned (200 keys)
  // and most rows not (203).
  check_kernel<HostSpec<bf16_t, 64, kWgmma128Loader, Features{.bias = true}>>(
      "softmax(additive_bias(causal(scaled_dot_product(Q, K)))) @ V", 3, 1, 1, 140, 200, 1, rng);
  for (const int nk : {200, 203})
    check_kernel<HostSpec<bf16_t, 64, kWgmma128Loader, Features{.bias = true}>>(
        "softmax(additive_bias(causal(scaled_dot_product(Q, K)))) @ V", 2, 1, 1, 140, nk, 1, rng,
        {.bias_16bit = true});
  // D = 128 with per-cell work: 64-key tiles.
  check_kernel<HostSpec<bf16_t, 128, kWgmma128Bn64, Features{.softcap = true}>>(
      "softmax(softcap(causal(scaled_dot_product(Q, K)), 20)) @ V", 1, 2, 1, 140, 140, 1, rng);
  // A causal window that leaves whole tiles behind the diagonal, at D = 128 and on the 192-row
  // tile; and the 192-row tile unmasked (no cell test at all).
  check_kernel<HostSpec<bf16_t, 128, kWgmma128, Features{.window = true}>>(
      "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 70)) @ V", 1, 2, 1, 300, 300, 1, rng);
  check_kernel<HostSpec<f16_t, 64, kWgmma192, Features{.window = true}>>(
      "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 200)) @ V", 1, 2, 1, 400, 700, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kWgmma192, Features{.causal = false}>>(
      "softmax(scaled_dot_product(Q, K)) @ V", 1, 2, 2, 250, 390, 1, rng);
}

// Packed documents by TMA: a tile's rows past its document hold the next document's keys, which
// the kernel masks in S and zeroes in V.
TEST(HopperKernelOnHost, WgmmaDocumentsByTma) {
  std::mt19937 rng(92);
  const std::vector<int32_t> docs{130, 1, 100, 60};
  check_kernel<HostSpec<bf16_t, 64, kWgmma128Loader, Features{.document = true}>>(
      "softmax(document(causal(scaled_dot_product(Q, K)))) @ V", 1, 2, 1, 291, 291, 1, rng, {.docs = docs});
  // The next document's first keys are +Inf in V. Its own queries keep none of them (keys
  // longer than queries, aligned bottom-right, under a window of 20), so its tiles there are
  // skipped whole and the reference is finite; but they sit in the previous document's last tile,
  // which would write NaN had it multiplied their P = 0 instead of zeroing them. (A key masked
  // inside a tile its own queries load is multiplied, as in every flash kernel: P = 0 times +Inf
  // is NaN there.)
  const std::vector<int32_t> queries{100, 1, 80, 40}, keys{130, 200, 260, 200};
  check_kernel<HostSpec<bf16_t, 64, kWgmma128Loader, Features{.window = true, .document = true}>>(
      "softmax(document(sliding_window(causal(scaled_dot_product(Q, K)), 20))) @ V", 1, 2, 1, 221, 790, 1, rng,
      {.docs = queries, .key_docs = keys, .inf_v_rows = row_runs({130, 330, 590}, 16)});
}

// Paged prefill on the wgmma tile copies its pages by cp.async (lockstep).
TEST(HopperKernelOnHost, WgmmaPagedPrefill) {
  std::mt19937 rng(93);
  check_kernel<HostSpec<bf16_t, 128, kWgmmaPaged, Features{.paged = true}>>(kCausal, 2, 2, 1, 140, 170, 1, rng,
                                                                            {.page_size = 16});
}

// Block-sparse on the wgmma tiles: 128-row blocks read as they are, 64-row blocks on the 64-row
// tile and on the 128-row tile whose row groups skip the blocks they do not keep.
TEST(HopperKernelOnHost, WgmmaBlockSparse) {
  std::mt19937 rng(94);
  const int N = 330;
  for (int block : {64, 128}) {
    const BlockMask mask = random_block_grid(rng, 2, N, block, 2);
    const char* program = "softmax(block_sparse(scaled_dot_product(Q, K))) @ V";
    if (block == 128) {
      check_kernel<HostSpec<bf16_t, 64, kWgmmaSparse, Features{.block_sparse = true, .causal = false}>>(
          program, 1, 2, 1, N, N, 1, rng, {.mask = &mask});
      // The work list with every row cut in two parts, merged in the kernel.
      check_kernel<HostSpec<bf16_t, 64, kWgmmaSparse, Features{.block_sparse = true, .causal = false}>>(
          program, 2, 2, 1, N, N, 1, rng, {.mask = &mask, .sparse_parts = 2});
    } else {
      check_kernel<HostSpec<bf16_t, 64, kWgmmaSparse64, Features{.block_sparse = true, .causal = false}>>(
          program, 1, 2, 1, N, N, 1, rng, {.mask = &mask});
      check_kernel<HostSpec<bf16_t, 64, kWgmmaSparseGroups, Features{.block_sparse = true, .causal = false}>>(
          program, 1, 2, 1, N, N, 1, rng, {.mask = &mask});
    }
  }
}

// rope_window's wgmma form: Q and K prerotated with interleaved pairs, each tile's leading k steps
// of dead pairs never issued (WindowCut), boundary pairs taken back per cell.
TEST(HopperKernelOnHost, WgmmaRopeWindowCutsAndCorrects) {
  std::mt19937 rng(97);
  constexpr Features kWin{.neox = false, .pair_window = true};  // (the interleaved pairs read as gptj's)
  for (const char* k : {"0.25", "1", "8"}) {
    const std::string win = std::string("softmax(causal(rope_window(Q, K, k=") + k + "))) @ V";
    check_kernel<HostSpec<bf16_t, 64, kWgmma128Loader, kWin>>(win, 1, 2, 1, 200, 380, 1, rng);
    check_kernel<HostSpec<f16_t, 128, kWgmma128, kWin>>(win, 1, 2, 2, 260, 260, 1, rng);
  }
}

// Decode tiles by TMA: Q padded, K/V stages swizzled by the copy engine, one mbarrier per stage.
constexpr Tile kTmaDecode64{16, 64, 4, 2, 4, true, false, true, false, false};
constexpr Tile kTmaDecode64Split{16, 64, 4, 3, 4, true, false, true, false, false};
constexpr Tile kTmaDecodeWide{16, 128, 4, 2, 4, true, false, true, false, false};
constexpr Tile kTmaDecodeWideSplit{16, 128, 4, 3, 4, true, false, true, false, false};
constexpr Tile kTmaDecodeWideProduced{16, 128, 4, 3, 4, true, false, true, true, false};

TEST(HopperKernelOnHost, TmaDecodeTiles) {
  std::mt19937 rng(95);
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64>>(kCausal, 2, 8, 2, 1, 203, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64Split>>(kCausal, 1, 4, 1, 3, 389, 3, rng);
  // The 128-key tile at D = 128, unsplit and split (merged in the kernel).
  check_kernel<HostSpec<f16_t, 128, kTmaDecodeWide>>(kCausal, 1, 4, 2, 1, 300, 1, rng);
  check_kernel<HostSpec<bf16_t, 128, kTmaDecodeWideSplit>>(kCausal, 1, 8, 2, 2, 1277, 2, rng);
  // A one-key cache, and the module's cp.async fallback.
  check_kernel<HostSpec<bf16_t, 128, kTmaDecodeWide>>(kCausal, 1, 4, 2, 1, 1, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64>>(kCausal, 1, 4, 1, 1, 150, 1, rng, {.tensor_maps = false});
}

// Fused RoPE decode on the TMA tile: each stage the copy engine lands is rotated in place, in
// its swizzled layout, before the product (Q, padded, once per block).
TEST(HopperKernelOnHost, TmaDecodeRotatesEachLandedStage) {
  std::mt19937 rng(99);
  constexpr Tile kRotating{16, 64, 4, 2, 4, true, false, true, false, false};
  constexpr Tile kRotatingProduced{16, 64, 4, 2, 4, true, false, true, true, false};
  const char* rope = "softmax(causal(rope(Q, K, base=500000))) @ V";
  check_kernel<HostSpec<bf16_t, 128, kRotating, Features{.rotate = true, .rope_half = 64}>>(rope, 1, 8, 2, 1, 333, 1,
                                                                                          rng);
  check_kernel<HostSpec<bf16_t, 128, kRotating, Features{.rotate = true, .rope_half = 64}>>(rope, 2, 4, 1, 3, 700, 2,
                                                                                          rng);
  check_kernel<HostSpec<f16_t, 64, kRotating, Features{.rotate = true, .neox = false, .rope_half = 8}>>(
      "softmax(causal(rope(Q, K, style=gptj, rotary_dim=16))) @ V", 1, 4, 2, 2, 270, 1, rng);
  check_kernel<HostSpec<bf16_t, 128, kRotatingProduced,
                        Features{.rotate = true, .paged = true, .rope_half = 64, .page_slots = 1024}>>(
      rope, 2, 8, 1, 1, 900, 2, rng, {.page_size = 16});
}

// Varlen decode through packed documents (one to three queries each, caches of their own
// lengths): each document's decode tiles copy its keys by TMA from its first row and zero the V
// rows of its last tile that belong to the next document.
TEST(HopperKernelOnHost, TmaDecodeOverDocuments) {
  std::mt19937 rng(98);
  const std::vector<int32_t> queries{1, 3, 1, 2, 1}, keys{300, 77, 1, 513, 129};
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64, Features{.document = true}>>(
      "softmax(document(causal(scaled_dot_product(Q, K)))) @ V", 1, 8, 2, 8, 1020, 1, rng,
      {.docs = queries, .key_docs = keys});
  check_kernel<HostSpec<bf16_t, 128, kTmaDecodeWide, Features{.alibi = true, .document = true}>>(
      "softmax(alibi(document(causal(scaled_dot_product(Q, K))))) @ V", 1, 4, 1, 8, 1020, 1, rng,
      {.docs = queries, .key_docs = keys});
  // Under a window of 40, the first 64 keys of documents 1, 3 and 4 are kept by none of their
  // queries (their tiles are skipped whole) but lie in the previous document's last tile: +Inf
  // in V there must not reach it (zero_tail_rows).
  const std::vector<int32_t> far_keys{300, 200, 1, 513, 129};
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64, Features{.window = true, .document = true}>>(
      "softmax(document(sliding_window(causal(scaled_dot_product(Q, K)), 40))) @ V", 1, 8, 2, 8, 1143, 1, rng,
      {.docs = queries, .key_docs = far_keys, .inf_v_rows = row_runs({300, 501, 1014}, 20)});
}

// Paged decode by TMA: boxes of gcd(page size, block_k) rows looked up per tile (the staged page
// list), rows past a sequence's last page zeroed in V; the producer warp for short split parts.
TEST(HopperKernelOnHost, TmaPagedDecode) {
  std::mt19937 rng(96);
  constexpr Features kPaged{.paged = true, .page_slots = 1024};
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64Split, kPaged>>(kCausal, 3, 8, 2, 1, 500, 2, rng, {.page_size = 16});
  check_kernel<HostSpec<bf16_t, 128, kTmaDecodeWideSplit, kPaged>>(kCausal, 2, 4, 1, 1, 1100, 2, rng,
                                                                   {.page_size = 64});
  check_kernel<HostSpec<f16_t, 128, kTmaDecodeWideProduced, kPaged>>(kCausal, 2, 8, 2, 1, 1301, 2, rng,
                                                                     {.page_size = 16});
  // A settled page table (PagedKV::table_settled): the block stages its page list, and the
  // producer looks up its first tile's pages, before the grid dependency wait.
  check_kernel<HostSpec<bf16_t, 128, kTmaDecodeWideProduced, kPaged>>(kCausal, 1, 8, 1, 1, 1500, 2, rng,
                                                                      {.page_size = 32, .settled_table = true});
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64Split, kPaged>>(kCausal, 2, 4, 2, 1, 420, 2, rng,
                                                                {.page_size = 16, .settled_table = true});
  // Pages whose strides the copy engine refuses: the same module copies them by cp.async.
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64Split, kPaged>>(kCausal, 1, 4, 1, 1, 100, 2, rng,
                                                                {.page_size = 16, .tensor_maps = false});
}

// The stage barriers under the two adversarial schedules the emulator has for them.
// - The computing warps lag (attnfuse_host_cuda::Lag: they run only while no other thread can,
//   and give way before every mbarrier wait), and tensor copies land at issue: the loader or
//   producer runs as far ahead as the barriers let it, so one that refilled a stage before every
//   warp had released it would overwrite a tile still to be read.
// - Tensor copies land just before the next operation on their barrier: a warp that read a stage
//   without waiting for it would read the stage's previous tile, or the poison.
TEST(HopperKernelOnHost, StagesHoldUnderAdversarialSchedules) {
  std::mt19937 rng(99);
  // 128 rows at D = 64: the loader is thread 128, of the second computing warpgroup.
  using Loader = HostSpec<bf16_t, 64, kWgmma128Loader, Features{.alibi = true}>;
  const char* alibi = "softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V";
  check_kernel<Loader>(alibi, 1, 1, 1, 100, 900, 1, rng, {.lag = {0, 128}});
  check_kernel<Loader>(alibi, 1, 1, 1, 100, 900, 1, rng, {.tma_late = true});
  // 128 rows at D = 128 with the producer warpgroup (threads 256 .. 383).
  using Produced = HostSpec<f16_t, 128, kWgmma128>;
  check_kernel<Produced>(kCausal, 1, 1, 1, 100, 900, 1, rng, {.lag = {0, 256}});
  check_kernel<Produced>(kCausal, 1, 1, 1, 100, 900, 1, rng, {.tma_late = true});
  // Decode tiles: thread 0 issues the copies, the block meets at a barrier every tile.
  check_kernel<HostSpec<bf16_t, 64, kTmaDecode64Split>>(kCausal, 1, 8, 2, 1, 700, 2, rng, {.tma_late = true});
  // The decode producer warp (threads 128 .. 159).
  using PagedProduced = HostSpec<f16_t, 128, kTmaDecodeWideProduced, Features{.paged = true, .page_slots = 1024}>;
  check_kernel<PagedProduced>(kCausal, 1, 8, 1, 1, 1500, 2, rng, {.page_size = 16, .lag = {0, 128}});
  check_kernel<PagedProduced>(kCausal, 1, 8, 1, 1, 1500, 2, rng, {.page_size = 16, .tma_late = true});
  // The lockstep schedule over cp.async (no tensor maps; paged prefill): copies landing at issue
  // while the first warp lags behind every block barrier (a refill before the barrier that frees
  // its stage would land under that warp's reads).
  const CallOptions lockstep{.tensor_maps = false, .lag = {0, 32}, .cp_async_early = true};
  check_kernel<Produced>(kCausal, 1, 1, 1, 100, 900, 1, rng, lockstep);
  CallOptions paged = lockstep;
  paged.page_size = 16;
  check_kernel<HostSpec<bf16_t, 128, kWgmmaPaged, Features{.paged = true}>>(kCausal, 1, 1, 1, 100, 700, 1, rng, paged);
}

}  // namespace
}  // namespace attnfuse
