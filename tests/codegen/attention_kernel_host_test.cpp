// The forward attention kernel of attention_fwd.cuh, its mma.sync form, run as a whole grid on
// the host (codegen/kernel_host.hpp: a block's threads as fibers, mma.sync, ldmatrix and
// the warp collectives emulated at a barrier of the warp's 32 lanes) against the float64
// reference under DESIGN §3's rule. CI has no GPU: this runs the kernel's own code for the
// tiles every pre-Hopper GPU and every decode call use (the GQA-packed decode tile with its key
// warps and in-kernel split merge, the prefill tile, the fused RoPE rotation), so a change to
// that code is checked before a device runs it. The emulation is slow (every MMA is two
// meetings of 32 threads), so the shapes are small, with odd lengths.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/attention_kernel_host.hpp"

namespace attnfuse {
namespace {

using namespace kernel_host_test;

constexpr const char* kCausal = "softmax(causal(scaled_dot_product(Q, K))) @ V";
constexpr const char* kRope = "softmax(causal(rope(Q, K, base=500000))) @ V";
constexpr const char* kWindow = "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 45)) @ V";

// The narrow decode tile (tile_sizes.hpp cuda_decode_tile): a GQA group's queries packed into 16
// rows, four warps each taking 16 keys of every 64-key tile and merged through shared memory.
TEST(AttentionKernelOnHost, DecodeTilePacksTheGroupAndMergesKeyWarps) {
  std::mt19937 rng(2026);
  using Decode64 = HostSpec<bf16_t, 64, kDecode>;
  check_kernel<Decode64>(kCausal, 1, 8, 2, 1, 203, 1, rng);   // one token, a 4-head group
  check_kernel<Decode64>(kCausal, 2, 4, 1, 3, 130, 1, rng);   // three draft tokens: 12 of 16 rows
  check_kernel<HostSpec<f16_t, 128, kDecodeSplit>>(kCausal, 1, 4, 2, 1, 77, 1, rng);
  check_kernel<HostSpec<bf16_t, 256, kDecode>>(kCausal, 1, 2, 1, 1, 100, 1, rng);  // Gemma's head
  check_kernel<Decode64>(kCausal, 1, 4, 2, 1, 1, 1, rng);  // a one-key cache
  // Three queries over two keys, bottom-right: query 0 sits before every key and keeps none
  // (O = 0, LSE = -inf), in the unsplit call and through the split merge.
  check_kernel<Decode64>(kCausal, 2, 4, 1, 3, 2, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit>>(kCausal, 2, 4, 1, 3, 2, 2, rng);
  // Wide groups of speculative decoding (more than 16 rows): the 64-row tile, one key warp.
  check_kernel<HostSpec<bf16_t, 64, Tile{64, 64, 4, 2, 1, true}>>(kCausal, 1, 8, 2, 16, 180, 2, rng);
}

// Score modifiers in the cell loop (the hook after the scale), and rope_window's per-tile pair
// plan (dead pairs' dims zeroed in the Q fragments and their K chunks not loaded, boundary
// pairs corrected per cell, far tiles at a compile-time pruning level), exact per cell.
TEST(AttentionKernelOnHost, ModifiersAndRopeWindowPerCell) {
  std::mt19937 rng(31);
  constexpr Features kMods{.alibi = true, .softcap = true};
  const std::string mods = "softmax(softcap(alibi(causal(scaled_dot_product(Q, K))), 20)) @ V";
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kMods>>(mods, 1, 4, 2, 97, 120, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit, kMods>>(mods, 1, 8, 2, 1, 257, 2, rng);
  constexpr Features kWin{.rotate = true, .rope_half = 32, .pair_window = true};
  for (const char* k : {"0.25", "1", "8"}) {
    const std::string win = std::string("softmax(causal(rope_window(Q, K, k=") + k + "))) @ V";
    check_kernel<HostSpec<bf16_t, 64, kPrefill64, kWin>>(win, 1, 2, 1, 150, 300, 1, rng);
    check_kernel<HostSpec<f16_t, 64, kDecode, kWin>>(win, 1, 4, 1, 2, 333, 2, rng);
  }
}

// Additive bias: the batch entries of a query tile run side by side (grid x = (slot x B + b) x S
// + split, one z; CudaKernel::plan), the bias broadcast over the batch or given per entry, and a
// split decode call merges its parts on counters taken in that order. 121 keys leave most
// bias rows unaligned to 16 bytes, which the quads' wide bias loads must fall back from
// (bias_values, both dtypes); 136 keys align every 16-bit row. The bias is fp32 or in the
// inputs' dtype.
TEST(AttentionKernelOnHost, BiasBatchEntriesRunSideBySide) {
  std::mt19937 rng(47);
  constexpr Features kBias{.bias = true};
  const std::string prog = "softmax(additive_bias(causal(scaled_dot_product(Q, K)))) @ V";
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kBias>>(prog, 3, 2, 1, 97, 121, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kBias>>(prog, 3, 2, 1, 97, 120, 1, rng, {.bias_batches = 3});
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit, kBias>>(prog, 3, 4, 1, 1, 150, 2, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kBias>>(prog, 3, 2, 1, 97, 121, 1, rng, {.bias_16bit = true});
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kBias>>(prog, 2, 2, 1, 70, 136, 1, rng, {.bias_16bit = true});
  check_kernel<HostSpec<f16_t, 64, kPrefill64, kBias>>(prog, 2, 2, 1, 97, 120, 1, rng,
                                                       {.bias_batches = 2, .bias_16bit = true});
  check_kernel<HostSpec<f16_t, 64, kDecodeSplit, kBias>>(prog, 3, 4, 1, 1, 150, 2, rng, {.bias_16bit = true});
}

// Packed documents (cu_seqlens): no attention across them, each aligned bottom-right with its
// own positions, tiles straddling two documents, one-token documents, a window inside them.
TEST(AttentionKernelOnHost, DocumentsNeverAttendAcrossEachOther) {
  std::mt19937 rng(41);
  constexpr Features kDocs{.document = true};
  const std::vector<int32_t> docs{70, 1, 129, 33};
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kDocs>>("softmax(document(causal(scaled_dot_product(Q, K)))) @ V", 1, 2,
                                                        1, 233, 233, 1, rng, {.docs = docs});
  check_kernel<HostSpec<f16_t, 64, kPrefill64, Features{.window = true, .document = true}>>(
      "softmax(document(sliding_window(causal(scaled_dot_product(Q, K)), 50))) @ V", 1, 4, 2, 233, 233, 1, rng,
      {.docs = docs});
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.rotate = true, .rope_half = 32, .document = true}>>(
      "softmax(document(causal(rope(Q, K)))) @ V", 1, 2, 1, 233, 233, 1, rng, {.docs = docs});
}

// Varlen decode through packed documents: the GQA-packed decode tile per document, sized from the
// mean queries per document, a document with more queries than the mean taking more tiles.
TEST(AttentionKernelOnHost, DecodeOverDocumentsOfTheirOwnLengths) {
  std::mt19937 rng(43);
  check_kernel<HostSpec<bf16_t, 64, kDecode, Features{.document = true}>>(
      "softmax(document(causal(scaled_dot_product(Q, K)))) @ V", 1, 4, 1, 9, 700, 1, rng,
      {.docs = {1, 6, 2}, .key_docs = {250, 1, 449}});
  // Under a window of 40 the last document's first 64 keys are kept by none of its queries, so
  // no tile of its own loads them; +Inf in their V must not reach the one-key document before it,
  // whose tile spans them.
  check_kernel<HostSpec<bf16_t, 64, kDecode, Features{.window = true, .document = true}>>(
      "softmax(document(sliding_window(causal(scaled_dot_product(Q, K)), 40))) @ V", 1, 4, 1, 9, 700, 1, rng,
      {.docs = {1, 6, 2}, .key_docs = {250, 1, 449}, .inf_v_rows = row_runs({251}, 20)});
}

// Block-sparse: only a BlockMask row's active blocks are visited, full ones without a cell test,
// partial ones through their cell bitmaps; random grids with empty rows, under causal, per head.
TEST(AttentionKernelOnHost, BlockSparseVisitsOnlyActiveBlocks) {
  std::mt19937 rng(53);
  const int N = 300;
  for (int block : {64, 128}) {
    const BlockMask mask = random_block_grid(rng, 2, N, block, 1);
    check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.block_sparse = true}>>(
        "softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V", 1, 2, 1, N, N, 1, rng, {.mask = &mask});
    // The runtime's work list, every row cut in three parts (one per active block at most) run
    // by separate blocks and merged by the last of them.
    check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.block_sparse = true}>>(
        "softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V", 1, 2, 1, N, N, 1, rng,
        {.mask = &mask, .sparse_parts = 3});
  }
}

// The two RoPE placements give the same bits (README, RoPE on the GPU): the rotation kernel
// then the plain kernel, against the kernel that rotates Q and each K tile itself, on the same
// tile. Both rotate with the same routines, so the MMAs see identical operands and every
// later step is the same code. (This holds for the source, on the host; whether ptxas compiles
// both alike is the GPU's to show.)
template <class E, int D, Tile kT, int kHalf>
void check_placements_agree(int B, int Hq, int Hkv, int Nq, int Nk, std::mt19937& rng) {
  using Fused = HostSpec<E, D, kT, Features{.rotate = true, .rope_half = kHalf}>;
  using Plain = HostSpec<E, D, kT>;
  constexpr DType kType = std::is_same_v<E, bf16_t> ? DType::BF16 : DType::F16;
  const KernelSpec spec = Program::parse("softmax(causal(rope(Q, K, base=500000))) @ V").compile({Target::Cuda, kType, D});
  const std::vector<E> q = random_elements<E>(size_t(B) * Hq * Nq * D, rng),
                       k = random_elements<E>(size_t(B) * Hkv * Nk * D, rng),
                       v = random_elements<E>(size_t(B) * Hkv * Nk * D, rng);
  std::vector<E> o_fused(q.size(), E{0x7fc1}), o_pre(q.size(), E{0x7fc1}), q_rot, k_rot;
  std::vector<float> lse_fused(size_t(B) * Hq * Nq), lse_pre(lse_fused.size());
  FwdParams p = contiguous_params(B, Hq, Hkv, Nq, Nk, D);
  p.v = v.data();
  p.rope = runtime::rope_args(spec.scalars.rope, false, D, Nk);
  const int G = kT.pack ? Hq / Hkv : 1;
  const attnfuse_host_cuda::Dim3 grid{unsigned((G * Nq + kT.bm - 1) / kT.bm), unsigned(kT.pack ? Hkv : Hq), unsigned(B)};
  // Fused: the kernel rotates.
  p.q = q.data(), p.k = k.data(), p.o = o_fused.data(), p.lse = lse_fused.data();
  launch_forward<Fused>(p, grid);
  // Prerotate: the rotation kernel writes rotated copies (as the runtime launches it), which the
  // plain kernel reads.
  prerotate_on_host<E, D, true, false>(p, q, k, q_rot, k_rot, B, Hq, Hkv, Nq, Nk);
  p.q = q_rot.data(), p.k = k_rot.data(), p.o = o_pre.data(), p.lse = lse_pre.data();
  p.rope = {};
  launch_forward<Plain>(p, grid);
  for (size_t i = 0; i < o_fused.size(); ++i) ASSERT_EQ(o_fused[i].bits, o_pre[i].bits) << "O element " << i;
  for (size_t i = 0; i < lse_fused.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(lse_fused[i]), std::bit_cast<uint32_t>(lse_pre[i])) << "LSE row " << i;
  ASSERT_TRUE(std::isfinite(to_double(o_fused[0])));
}

TEST(AttentionKernelOnHost, BothRopePlacementsGiveTheSameBits) {
  std::mt19937 rng(61);
  check_placements_agree<bf16_t, 64, kPrefill64, 32>(1, 4, 2, 130, 130, rng);
  check_placements_agree<bf16_t, 128, kDecode, 64>(2, 8, 2, 1, 333, rng);
  check_placements_agree<f16_t, 96, kDecode, 48>(1, 4, 1, 2, 200, rng);
}

// Paged K/V (FlashInfer's layout and indptr conventions): sequences of their own lengths, pages
// in shuffled order, the block's page ids staged in shared memory; split and unsplit, page sizes
// that are and are not powers of two, against the same reference as a contiguous cache.
TEST(AttentionKernelOnHost, PagedDecodeReadsEachSequencesPages) {
  std::mt19937 rng(16);
  constexpr Features kPaged{.paged = true, .page_slots = 256};
  check_kernel<HostSpec<bf16_t, 64, kDecode, kPaged>>(kCausal, 3, 8, 2, 1, 150, 1, rng, {.page_size = 16});
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit, kPaged>>(kCausal, 2, 4, 1, 2, 301, 3, rng, {.page_size = 12});
  // A settled table: the page list staged (and its pages warmed) before the grid dependency wait.
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit, kPaged>>(kCausal, 2, 4, 1, 1, 301, 2, rng,
                                                           {.page_size = 16, .settled_table = true});
  // Pages of one key: a part of 300 pages exceeds the 256 staged ids, so the block looks its
  // pages up in the global table instead.
  check_kernel<HostSpec<bf16_t, 64, kDecode, kPaged>>(kCausal, 1, 4, 1, 1, 300, 1, rng, {.page_size = 1});
  check_kernel<HostSpec<f16_t, 64, kDecode, Features{.rotate = true, .paged = true, .rope_half = 32, .page_slots = 256}>>(
      kRope, 2, 4, 2, 1, 99, 1, rng, {.page_size = 32});
}

// Dynamic and longrope scalings depend on the call's length, which paged caches and documents
// keep in device memory: every block finds it (work.cuh rope_length_on_device: the longest
// sequence, or key document) and stages longrope's long factors or computes dynamic's
// frequencies when it is past the original context, the fixed set when it is not.
TEST(AttentionKernelOnHost, LengthDependentRopeFindsTheLengthOnTheDevice) {
  std::mt19937 rng(48);
  constexpr Features kPagedRope{.rotate = true, .paged = true, .rope_half = 32, .page_slots = 256};
  const auto dynamic = [](int orig) {
    return "softmax(causal(rope(Q, K, base=10000, rope_type=dynamic, factor=3, original_max_position_embeddings=" +
           std::to_string(orig) + "))) @ V";
  };
  std::string shorts = "[", longs = "[";
  for (int r = 0; r < 32; ++r) {
    if (r > 0) shorts += ", ", longs += ", ";
    shorts += fmt::format("{}", 1.0 + 0.02 * r);
    longs += fmt::format("{}", 1.0 + 0.9 * r);
  }
  const auto longrope = [&](int orig, const std::string& mask) {
    return "softmax(" + mask + "(rope(Q, K, base=10000, rope_type=longrope, factor=8, original_max_position_embeddings=" +
           std::to_string(orig) + ", short_factor=" + shorts + "], long_factor=" + longs + "])" +
           std::string(size_t(std::count(mask.begin(), mask.end(), '(')) + 2, ')') + " @ V";
  };
  // Paged sequences of 150 and 121 keys: past an original context of 64, within one of 4096.
  for (const int orig : {64, 4096}) {
    check_kernel<HostSpec<bf16_t, 64, kDecode, kPagedRope>>(dynamic(orig), 2, 4, 2, 1, 150, 1, rng, {.page_size = 16});
    check_kernel<HostSpec<bf16_t, 64, kDecodeSplit, kPagedRope>>(longrope(orig, "causal"), 2, 4, 1, 2, 150, 2, rng,
                                                                 {.page_size = 16});
  }
  // Documents of 70, 1, 129 and 33 tokens: the longest, 129, is past 100 and within 130.
  const std::vector<int32_t> docs{70, 1, 129, 33};
  constexpr Features kDocRope{.rotate = true, .rope_half = 32, .document = true};
  for (const int orig : {100, 130})
    check_kernel<HostSpec<bf16_t, 64, kPrefill64, kDocRope>>(longrope(orig, "document(causal"), 1, 2, 1, 233, 233, 1,
                                                             rng, {.docs = docs});
  // rope_window's limits follow the frequencies: dynamic's are computed with them.
  check_kernel<HostSpec<f16_t, 64, kPrefill64, Features{.rotate = true, .rope_half = 32, .pair_window = true,
                                                        .document = true}>>(
      "softmax(document(causal(rope_window(Q, K, k=0.5, rope_type=dynamic, factor=4, "
      "original_max_position_embeddings=40)))) @ V",
      1, 2, 1, 233, 233, 1, rng, {.docs = docs});
}

// A split call: each part's block writes partial rows and the last one merges them by LSE.
TEST(AttentionKernelOnHost, SplitDecodeMergesItsPartsInTheKernel) {
  std::mt19937 rng(7);
  using Decode64 = HostSpec<bf16_t, 64, kDecodeSplit>;
  check_kernel<Decode64>(kCausal, 1, 8, 2, 1, 389, 3, rng);  // 7 tiles over 3 parts
  check_kernel<Decode64>(kCausal, 1, 4, 1, 2, 97, 4, rng);   // more parts than tiles: empty parts
}

// The prefill tiles: causal tiles on the diagonal masked per cell, the others without masks.
TEST(AttentionKernelOnHost, PrefillTilesMaskTheDiagonalAndTheWindow) {
  std::mt19937 rng(11);
  check_kernel<HostSpec<f16_t, 64, kPrefill64>>(kCausal, 1, 2, 1, 131, 131, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64>>(kCausal, 1, 2, 2, 37, 150, 1, rng);  // chunked
  // The sm_80 tile at D = 128 (128 rows over 8 warps, three stages) with a sliding window, whose
  // lower edge leaves tiles behind the diagonal and masks cells in them.
  check_kernel<HostSpec<bf16_t, 128, Tile{128, 64, 8, 3, 1, false}, Features{.window = true}>>(kWindow, 1, 2, 1, 200,
                                                                                           200, 1, rng);
}

// The K/V stages under an adversarial schedule: cp.async lands at issue (the earliest moment)
// and warp 0 lags (it runs only while no other warp can), so the other warps run on to the next
// barrier first: a stage refilled before every warp has passed the barrier that
// frees it would be overwritten under warp 0's reads. (With copies landing at their wait, the
// default, such a refill lands only after the barrier, and no test could see it.)
TEST(AttentionKernelOnHost, StagesHoldUnderAnAdversarialSchedule) {
  std::mt19937 rng(12);
  const CallOptions adversarial{.lag = {0, 32}, .cp_async_early = true};
  check_kernel<HostSpec<bf16_t, 64, kPrefill64>>(kCausal, 1, 1, 1, 40, 400, 1, rng, adversarial);
  check_kernel<HostSpec<bf16_t, 128, Tile{128, 64, 8, 3, 1, false}, Features{.window = true}>>(
      kWindow, 1, 1, 1, 100, 400, 1, rng, adversarial);
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit>>(kCausal, 1, 4, 1, 1, 600, 2, rng, adversarial);
  // Fused RoPE rotates each K tile in its stage, between two barriers.
  check_kernel<HostSpec<bf16_t, 64, kDecode, Features{.rotate = true, .rope_half = 32}>>(kRope, 1, 4, 1, 1, 400, 1, rng,
                                                                                         adversarial);
}

// Fused RoPE: Q rotated once per tile, each K tile on arrival, in the fixed-unit form: whole
// heads (D = 96's 24 units on 120 of the tile's 128 threads) and power-of-two partial spans.
TEST(AttentionKernelOnHost, FusedRopeRotatesQAndEachKeyTile) {
  std::mt19937 rng(5);
  check_kernel<HostSpec<bf16_t, 64, kDecode, Features{.rotate = true, .rope_half = 32}>>(kRope, 1, 4, 1, 1, 150, 2, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.rotate = true, .rope_half = 32}>>(kRope, 1, 2, 1, 100, 100, 1,
                                                                                             rng);
  check_kernel<HostSpec<f16_t, 64, kDecode, Features{.rotate = true, .neox = false, .rope_half = 8}>>(
      "softmax(causal(rope(Q, K, style=gptj, rotary_dim=16))) @ V", 1, 4, 2, 2, 170, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.rotate = true, .rope_half = 16}>>(
      "softmax(causal(rope(Q, K, rotary_dim=32))) @ V", 1, 2, 1, 90, 90, 1, rng);
  check_kernel<HostSpec<bf16_t, 96, kDecode, Features{.rotate = true, .rope_half = 48}>>(kRope, 1, 8, 2, 1, 140, 1, rng);
}

}  // namespace
}  // namespace attnfuse
