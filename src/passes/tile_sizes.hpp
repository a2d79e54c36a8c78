// The one place tile shapes are chosen: a constexpr function of target, head dim, dtype, masks
// and score op, whose comments record why each number is what it is (FA3's tile_size.h idea).
#pragma once

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"

namespace attnfuse::passes {

// Largest head dim the CUDA kernel template can hold: Q tile plus two stages of K and V tiles
// must fit the 227 KB of shared memory one block may use on sm_90 (see kCudaSmemLimit).
inline constexpr int kCudaMaxHeadDim = 256;
inline constexpr int kCudaSmemLimit = 227 * 1024;

// Shared memory of the CUDA forward template (attention_fwd.cuh): Q tile + `stages` K and V tiles,
// rows padded by 8 elements, 2-byte elements; kernels that rotate or prune pairs stage their
// per-pair RoPE tables too (8-byte turn + 4-byte limit per pair). The one formula for both the
// tile pass's checks and the launch (codegen::cuda::shared_memory_bytes).
// The wgmma form stores tiles unpadded (swizzled) plus 1 KB of slack to align them and 64 B
// for its TMA barriers; its rope_window (prerotated) stages the 4-byte window limits alone.
// The mma.sync and decode tiles' staged RoPE tables: 12 bytes a pair (rope.cuh RopeTableBytes).
constexpr int cuda_rope_table_bytes(int head_dim) { return (head_dim / 2) * 12; }
constexpr int cuda_smem_bytes(const TileConfig& t, int head_dim, bool rope_tables = false) {
  if (t.wgmma)
    return (t.block_q + 2 * t.stages * t.block_k) * head_dim * 2 + 1024 + 64 + (rope_tables ? (head_dim / 2) * 4 : 0);
  return (t.block_q + 2 * t.stages * t.block_k) * (head_dim + 8) * 2 +
         (rope_tables ? cuda_rope_table_bytes(head_dim) : 0);
}

// head_dim == 0 means "decided at run time" (CPU only: the CPU kernel takes D as an argument).
constexpr TileConfig tile_sizes(Target target, int head_dim, DType dtype, MaskSet masks,
                                ScoreKind score, ModifierChain modifiers = {},
                                NormKind norm = NormKind::Softmax, bool gptj = false) {
  TileConfig t;
  if (target == Target::Cpu) {
    // CPU: one task owns block_q query rows and streams K/V tiles of block_k keys past them
    // (online softmax; the score tile is block_q x block_k fp32 and never leaves the core).
    //  - fp32 K and V tiles of 64 keys x D <= 128 are <= 32 KB each: about one L1d (32 KB on the
    //    EPYC build machine, 48 KB on recent Intel), so the tile being scored streams from L1/L2
    //    while Q (32 KB) + O accumulator (32 KB) + S tile (16 KB) + K + V (64 KB) = 144 KB sit in
    //    the 1 MB per-core L2 with room to spare for the next tiles' prefetch.
    //  - block_q = 64 rather than 128: each extra query row amortizes the K/V stream further, but
    //    causal and sliding-window programs waste about half a tile per row block on the
    //    diagonal, and Nq = 1k with B*H = 1 must still give 16 tasks to spread over the cores.
    //  - D > 128 (e.g. 256): halve block_k so the K tile stays at 32 KB.
    //  - bf16/fp16 inputs: the kernel widens each tile to fp32 once, so the working set is the
    //    fp32 one and the same shape applies.
    //  - head_dim == 0 (run-time D): the D <= 128 shape, the common case (64, 80, 96, 128).
    // Not measured yet: the CPU benchmark of issue 2 is where these get checked.
    t.block_q = 64;
    t.block_k = head_dim > 128 ? 32 : 64;
    t.num_warps = 0;
    t.stages = 0;
    return t;
  }
  // CUDA (attention_fwd.cuh, mma.sync m16n8k16): 16 query rows per warp, 8 warps.
  // Measured on the H200 (bench/results/2026-11-30-tile-sweep.txt; Llama-3-8B geometry, bf16,
  // attnfuse alone, TFLOP/s at N = 8k causal / dense):
  //   128x64x8 205.6 / 233.3   128x128x8 244.8 / 274.0   64x64x4 207.9 / 229.4
  //   128x32x8 163.0 / 187.1   64x128x4 202.4 / 216.8
  //  - block_k = 128 wins by 15-20% for plain programs: half the barriers and softmax
  //    bookkeeping per key, and each warp's Q fragments are reused over twice the keys. It needs
  //    about 254 registers at D = 128, so per-cell modifiers (alibi, bias, softcap) and ReLU
  //    normalisation, which add live values per cell, keep block_k = 64 (causal+alibi measured
  //    190.5 at 128 vs 197.6 at 64, and spills appear at D = 256).
  //  - D = 256: block_k = 32 keeps the 128-float O accumulator per thread spill-free (16 with
  //    per-cell work: alibi at 32 spilled 36-56 B).
  //  - More rows per warp (4 warps x 32 rows) would halve shared-memory traffic per FLOP but
  //    spills at D = 128 (255 registers + 108 B of spill stores); 8 warps it is.
  //  - stages = 2: the template double-buffers K/V with cp.async.
  //  - dtype: fp16 and bf16 tiles are the same size; fp32 does not run on tensor cores.
  //  - masks do not change the shape (causal/sliding skip whole tiles either way), except
  //    block-sparse with a sliding window at D = 96 and 128 (below).
  (void)dtype;
  //  - rope (fused placement) rotates each K tile in shared memory between the barrier and the
  //    MMA: work per key, not per cell, and dead before the scores are live, so it keeps the
  //    plain tile at D <= 128 (255 registers, no spill at D = 128; Llama-3-8B N=16k 177 vs 158
  //    TFLOP/s at block_k 128 vs 64). At D = 256 the rotation's registers push block_k 32 into
  //    spills (64 B): 16 it is.
  //  - rope_window masks Q fragments per tile and adds its few boundary pairs per cell from
  //    shared memory, one pair at a time: 254 registers and no spill at 128 x 128 x 8 (D = 128,
  //    fused), 0 spill at D = 256 block_k 32, so it keeps the plain tiles too.
  const bool per_cell_work = modifiers.size() > 0 || norm == NormKind::ReluAttention;
  t.block_q = 128;
  t.stages = 2;
  // rope_window's boundary terms plus a per-cell modifier spill at 4 warps too (16 B, gptj
  // rope_window + alibi + sliding window, fp16, sm_80). Since the kernel learned documents,
  // pages and split-KV (issue 5), the in-kernel rotation and rope_window's pair plan spill 8 B
  // at 4 warps as well (rope fused / rope_window at D = 64, 255 registers): they take the 8-warp
  // layout with block_k 64 (the bias programs' tile; 163-180 registers, no spill).
  const bool rotates_or_prunes = score == ScoreKind::Rope || score == ScoreKind::RopeWindow;
  const bool spills_at_4_warps = modifiers.has(ModifierKind::AdditiveBias) || rotates_or_prunes;
  if (head_dim <= 64 && !spills_at_4_warps) {
    // 4 warps x 32 rows: each K/V fragment read from shared memory feeds two MMA atoms, half the
    // ldmatrix traffic per FLOP of 8 x 16. GPT-2 (D=64) N=4k: causal 190.8 -> 215.5, dense
    // 231.6 -> 267.8 TFLOP/s against 128x128x8; 128x32x4 is slower (168.7 / 204.5). The bias
    // hook's row pointers spill at 4 warps, so bias programs take the 8-warp layout below.
    t.num_warps = 4;
    t.block_k = 64;
  } else if (head_dim <= 128) {
    // 4 x 32 is faster here too (Llama-3-8B N=8k: 277 / 300.6 vs 267 / 288 causal / dense;
    // alibi 247.9 vs 223.5) but spills at D = 96 and 128 (168 B at D = 128, 255 registers), so
    // the spill-free 8 x 16 layout stays until the kernel's register use comes down.
    t.num_warps = 8;
    t.block_k = per_cell_work || (head_dim <= 64 && rotates_or_prunes) ? 64 : 128;
    // gptj pairs adjacent dims, and its fused rotation spills 8 B at block_k 128 (D = 128, sm_90,
    // 255 registers) where neox does not: block_k 64 (225 registers).
    if (score == ScoreKind::Rope && gptj) t.block_k = 64;
    // All three modifiers at once (alibi + additive_bias + softcap) at D = 128 spill at
    // block_k 64 since the kernel learned documents, pages and splits (255 registers, 152-200 B);
    // block_k 32 holds the score tile in 209 registers with no spill.
    if (modifiers.size() >= 3 && head_dim > 96) t.block_k = 32;
    // A block-sparse partial block's row bits next to a sliding window's two per-cell limits
    // push 128-key tiles at D = 128 past 255 registers (62-536 B of spill on sm_80 and sm_90;
    // D = 96 sat at 255 without spilling): 64 keys, like per-cell modifiers (block masks of 64
    // or more keys still fit the tile).
    if (masks.has(MaskKind::BlockSparse) && masks.has(MaskKind::SlidingWindow) && head_dim > 64 && t.block_k > 64)
      t.block_k = 64;
  } else {
    t.num_warps = 8;
    t.block_k = per_cell_work || score == ScoreKind::Rope ? 16 : 32;
  }
  return t;
}

// The tile of a CUDA rope / rope_window spec once its placement is resolved: in prerotate mode
// the attention kernel reads rotated Q and K and does no rotation, so plain rope takes the
// plain kernel's tile (rope_window keeps its per-cell boundary work).
constexpr TileConfig cuda_tile_for_rope_mode(const KernelSpec& spec, RopeMode mode) {
  const ScoreKind effective =
      mode == RopeMode::Prerotate && spec.score == ScoreKind::Rope ? ScoreKind::ScaledDot : spec.score;
  return tile_sizes(Target::Cuda, spec.head_dim, spec.dtype, spec.masks, effective, spec.modifiers, spec.norm,
                    spec.scalars.rope.style == RopeStyle::Gptj);
}

// The decode variant (runtime::LaunchTuning, Nq <= 16): a GQA group's query heads share the
// rows of one tile, so each K/V tile crosses the memory bus once per KV head, and split-KV
// spreads the key axis over the SMs. `rows` = group x Nq, the real rows of a tile.
//  - rows <= 16 (Llama-3 decode: 4 or 8 rows): one 16-row atom shared by 4 warps that each take
//    a quarter of every 64-key tile (key_warps = 4) and merge at the end. Measured on the H200
//    (bench/results/2026-12-01-h200-decode/decode_tile_sweep.txt), the 64-row tile with one busy
//    warp (the others only load) topped out at 2.4 TB/s at B1 / 32k and 3.8 at B32: one warp's
//    MMA/softmax chain per tile, not memory, set the pace; 1-2 warp blocks and 128-key tiles
//    were slower. 16 rows x 2 stages of 64 keys is 74 KB at D = 128: three blocks, twelve
//    computing warps per SM.
//  - `split` (the call cuts the key axis into parts, D <= 128):
//    three stages (108 KB, two blocks per SM). A split block streams few key tiles, so its
//    pipeline's depth, not the SM's block count, bounds it: on the H200, 8B B1 / 32k 0.048 ->
//    0.044 ms, B8 / 4k 0.046 -> 0.043, 70B B1 / 32k 0.053 -> 0.048
//    (bench/results/2026-12-01-h200-session9/call1/). Unsplit grids (B32) keep two stages (three
//    were 2-5% slower there). Paged K/V with three stages was 17-20% slower at B8 / 32k (parts
//    of ~85 key tiles, where three blocks per SM hide the page lookups better) but 4-6% faster
//    at 70B B1 / 32k (parts of ~11-16 tiles; session9/call4): the runtime gives paged split
//    calls that copy pages by cp.async the deep tile only when a part streams at most
//    kPagedDeepMaxTiles key tiles (70B B1: +12-14% -> +10% over contiguous at pages of 64;
//    session12/call3). Pages copied by TMA take it over long parts too: 8B B8 / 32k at pages
//    of 16, 0.2723 -> 0.2522 ms (contiguous 0.2399; bench/results/2026-12-02-h200-session16/).
//  - `wide_keys` (Hopper copies K/V by TMA, cuda_decode_wide_keys; D = 128): 128-key tiles
//    in three stages for split calls and paged ones (198 KB, one block per SM), two for
//    unsplit contiguous ones (below). Fewer, larger copies and half the
//    block barriers per byte; measured on the H200 against the 64-key tiles above (ms, 8B B1 /
//    32k, B8 / 4k, B32 / 32k, 70B B1 / 32k): 0.0418 / 0.0408 / 1.018 / 0.0446 -> 0.0394 /
//    0.0393 / 0.997 / 0.0415 (bench/results/2026-12-02-h200-session14/, call 2). Nsight at B32:
//    L2 throughput 96% at 4.24 TB/s of DRAM reads: the L2 now bounds the stream. Unsplit
//    calls take two stages of 128 keys (135 KB, still one block per SM): fewer bytes in flight
//    streamed faster at Llama-3-8B B32, 4k / 32k / 128k 0.1248 / 0.9561 / 3.819 ms (three stages)
//    -> 0.1245 / 0.9455 / 3.750 (two interleaved rounds; 64-key tiles in three stages
//    0.1243 / 0.9533 / 3.758, in two 0.1282 / 0.9545 / 3.790; two splits 0.1307 / 0.958 / 3.90;
//    bench/results/2026-12-04-h200-session30/call4/; the A/B in call5: 1.005x / 1.010x / 1.020x,
//    the other contiguous cells level). Split calls keep three, and so do unsplit paged calls
//    (`paged`): two stages of page boxes took 8B B32 / 32k at pages of 64 0.9542 -> 0.9826 ms
//    (call5). Paged caches
//    take the 128-key tile only in modules that copy pages by TMA, and only in boxes of 64 rows
//    or more (cuda_decode_wide_keys): B8's unsplit padded module was 65-69% slower with it; at
//    pages of 64 8B B8 / 32k went 0.2831 -> 0.2506 ms and 70B B1 / 32k 0.0457 -> 0.0433, at
//    pages of 16 both were slower (0.2787 -> 0.3175, 0.0466 -> 0.0471;
//    bench/results/2026-12-02-h200-session15/call2/).
//  - more rows (speculative decoding with wide groups): 64 rows over 4 warps, 64-key tiles.
//  - `rotates` (fused RoPE: each K tile is rotated in shared memory between its arrival and its
//    product) keeps two stages in split calls too: the rotation's
//    chains (LDS -> angle -> MUFU sin/cos -> rotate -> STS) are latency-bound, and the third
//    block per SM hides them where the deeper pipeline did not. On an H100, fused RoPE decode
//    (ms, three stages -> two, two rounds): Llama-3-8B B1 / 32k 0.094 -> 0.085, B8 / 32k 0.609
//    -> 0.499-0.503, B32 / 4k 0.268 -> 0.269, Llama-3-70B B1 / 32k 0.097 -> 0.089, B1 / 128k
//    0.316 -> 0.278 (bench/results/2026-12-05-h100-session39/). Nsight on the three-stage tile
//    at B8 (call3): 38% of the warp samples stall on fixed-latency dependencies and 27% issue,
//    against 20% waiting on memory in the plain cp.async tile. Paged caches too: 70B B1 / 32k,
//    fused, 0.104-0.105 -> 0.094-0.097 ms at pages of 16 and of 64 (two rounds, H100,
//    bench/results/2026-12-05-h100-session40/call1/). For the same reason a rotating tile never
//    takes 128 keys: by TMA on Hopper it keeps 64-key tiles in two stages (72 KB, three blocks
//    per SM), 1.06-1.12x the cp.async tile on an H100 (8B B1 / B8 / 70B B1 / 32k 0.071 / 0.405 /
//    0.076 -> 0.066 / 0.378 / 0.070-0.072 ms, 70B pages of 16 0.076 -> 0.068;
//    bench/results/2026-12-06-h100-session43/call2/), where the 128-key TMA tile (one block per
//    SM) had been 12-18% slower (bench/results/2026-12-05-h100-session39/call1/).
//  - D = 256 keeps 64-key tiles (16 keys per warp is the MMA minimum): 143 KB, one block per SM.
//  - rope_window carries a pair plan one tile ahead, so it keeps two stages (runtime: resolved).
inline constexpr int64_t kPagedDeepMaxTiles = 32;
// A paged decode block copies its parts' page ids into shared memory once, ahead of its first
// K/V copy, when they number at most this many (kv_copy.cuh, stage_page_list), so each
// tile's lookups are shared-memory loads instead of dependent global ones. The tiles that take
// pages by TMA (Hopper, page sizes that are multiples of 8) hold 1024 ids (4 KB): a part of 16k
// keys at pages of 16, where Llama-3-8B B8 / 32k splits into parts of ~8k keys, with three
// unsplit D = 128 blocks per SM still (3 x 74 KB). The cp.async tiles pad their rows and rotate
// from staged tables, so they keep 256 ids (1 KB; a 32-tile part at pages of 8 keys or more),
// which keeps their three blocks per SM too.
inline constexpr int kCudaPageListSlots = 256;
inline constexpr int kCudaPageListSlotsTma = 1024;
// Whether a Hopper decode tile takes 128 keys (cuda_decode_tile's `wide_keys`): K/V by TMA
// (`tma`) from a contiguous cache, or from pages where the copy engine's boxes hold 64 rows or
// more (`large_boxes`: page sizes that are multiples of 64). Which paged calls copy by TMA is the
// runtime's choice (CudaKernel::plan).
constexpr bool cuda_decode_wide_keys(bool tma, bool paged, bool large_boxes) {
  return tma && (!paged || large_boxes);
}

// What a decode call's tile depends on (cuda_decode_tile), named at the call site:
// cuda_decode_tile({.head_dim = 128, .rows = 8, .split = true}).
struct DecodeTileCall {
  int head_dim = 128;
  int64_t rows = 16;       // real rows of a tile: a GQA group x Nq
  bool split = false;      // the call cuts the key axis into parts
  bool wide_keys = false;  // Hopper's 128-key tile (cuda_decode_wide_keys)
  bool paged = false;      // K/V in pages
  bool rotates = false;    // fused RoPE: K tiles rotated in the kernel
};

constexpr TileConfig cuda_decode_tile(const DecodeTileCall& c) {
  TileConfig t;
  t.num_warps = 4;
  t.pack_gqa = true;
  t.stages = 2;
  t.block_k = 64;
  if (c.rows <= 16) {
    t.block_q = 16;
    t.key_warps = 4;
    if (c.split && c.head_dim <= 128 && !c.rotates) t.stages = 3;
    if (c.wide_keys && c.head_dim == 128 && !c.rotates) t.block_k = 128, t.stages = c.split || c.paged ? 3 : 2;
  } else {
    t.block_q = 64;
    t.key_warps = 1;
    t.block_k = c.head_dim > 128 ? 32 : 64;
  }
  return t;
}

// Hopper (sm_90, compiled as sm_90a): the prefill tile's two matrix products become
// warpgroup MMAs (attention_fwd.cuh, Spec::kWgmma): two warpgroups of 64 rows each issue
// S = Q K^T (m64nBNk16, Q and K from swizzled smem) and O += P V (m64nDk16, P from registers).
// wgmma keeps no Q or K fragments in registers and issues one instruction per 16 dims where
// mma.sync issued BN/8 of them plus ldmatrix, so the tensor cores stay busier at the same tile.
//  - Covered: D 64 and 128 (whole 64-element swizzle blocks, N <= 128), every mask and modifier,
//    ReLU, documents, paged K/V, block-sparse, and rope and rope_window in prerotate placement
//    (rope_window reads the pairs interleaved and skips dead leading k steps: rope.cuh WindowCut).
//  - Not covered (keep mma.sync): the fused rotation (it rotates tiles in the padded layout), the
//    decode tiles (16/64 rows), D 96 and 256.
//  - Each warpgroup overlaps its softmax of tile j with the P V product of tile j - 1
//    (fwd_wgmma.cuh), which needs three K/V stages: 225 KB at D = 128, block_k 128.
//  - D = 64 takes four stages (145 KB; 153 KB with 192 rows): two tiles load ahead while the
//    warpgroups drift apart in the decoupled schedule (fwd_wgmma.cuh); at D = 128 a fourth stage
//    does not fit.
//  - A producer warpgroup (kv_copy.cuh, KvCopy::producer) issues the TMA tiles: 384
//    threads, setmaxnreg gives it 24 registers and the computing warpgroups 240, and no
//    computing warp waits for the other warpgroup to free a stage. On the H200 against the loader
//    thread inside warpgroup 1 (bench/results/2026-12-02-h200-session17/, CLI A/B, two rounds):
//    Llama-3-8B causal 8k / 32k 1.086x / 1.076x, dense 8k 1.115x, causal+alibi 8k 1.113x,
//    causal+window 8k 1.024x; GPT-2 dense 8k 1.094x. GPT-2 causal (D = 64) lost at 4k / 8k / 16k
//    (0.966x / 0.981x / 0.986x; 1.012x at 32k), so D = 64 causal tiles of 128 rows keep the
//    loader thread. Tiles meant for two blocks per SM keep none (384 threads at 168 registers
//    fit once), nor does the D = 128 two-sided window (measured slower with it, below). The
//    192-row tile (below) takes a producer next to three computing warpgroups.
//  - block_k 128, or 64 where per-cell work (modifiers, ReLU) would push S + O past the register
//    budget at D = 128 (the same line the mma.sync tile draws). Block-sparse keeps the tile's
//    block_k so that masks built for it stay multiples of it.
constexpr bool cuda_wgmma_eligible(const KernelSpec& s) {
  const bool rope_in_kernel = s.score != ScoreKind::ScaledDot && s.rope_mode != RopeMode::Prerotate;
  return (s.head_dim == 64 || s.head_dim == 128) && (s.dtype == DType::BF16 || s.dtype == DType::F16) &&
         !s.tile.pack_gqa && s.tile.key_warps == 1 && !rope_in_kernel;
}

// The 192-row wgmma tile (three computing warpgroups; FlashAttention-3's shape at head dim 64):
// each K/V tile that lands feeds 1.5x the rows, and twelve computing warps per SM instead of
// eight hide more of one warpgroup's softmax under the others' products. D = 64 only: S, P and
// O of a 128-key tile take 128 of the 160 registers a computing thread has next to the producer
// warpgroup (512 threads). On the H200 (bench/results/2026-12-02-h200-session18/, CLI A/B, two
// rounds, GPT-2 geometry B4 H12), against the 128-row tile:
//  - call1, before cells tested a per-row key range (causal tiles then kept the loader thread):
//    causal 4k / 8k / 16k / 32k 1.046x / 1.124x / 1.142x / 1.180x, dense 8k 1.163x;
//  - call3, with it (and the producer): causal 4k / 8k / 32k 1.11x / 1.20x / 1.23x, causal
//    window 1024 8k 1.03x. A two-sided window of 256 was 0.99x (0.279 against 0.275 ms, one
//    round): it keeps 128 rows, as its tiles cross more key tiles per row.
// It takes the plain scores (prerotated rope included) under no mask, causal, or a causal
// window, with softmax or ReLU, over a contiguous cache (TMA). Also kept at 128 rows:
//  - block-sparse (masks come in 128-row blocks), documents (by TMA since the twenty-seventh
//    session) and paged caches (cp.async): not measured at 192 rows;
//  - score modifiers and rope_window: at 160 registers their use falls on either side of the
//    limit by combination (NVRTC sm_90a: alibi causal 112 B of spill, alibi dense none, softcap
//    causal 116 B, rope_window 32-184 B), which no rule of a few lines tracks.
constexpr bool cuda_wgmma_192_rows(const KernelSpec& s, const TileConfig& t) {
  const unsigned sequence_masks =
      (1u << static_cast<unsigned>(MaskKind::Causal)) | (1u << static_cast<unsigned>(MaskKind::SlidingWindow));
  const bool two_sided_window = s.masks.has(MaskKind::SlidingWindow) && !s.masks.has(MaskKind::Causal);
  return s.head_dim == 64 && t.wgmma && t.min_blocks == 1 && s.kv_layout == KvLayout::Contiguous &&
         (s.masks.bits() & ~sequence_masks) == 0 && !two_sided_window && s.modifiers.size() == 0 &&
         (s.score == ScoreKind::ScaledDot || s.score == ScoreKind::Rope);
}

constexpr TileConfig cuda_arch_tile(const KernelSpec& s, int arch) {
  // wgmma is sm_90a only: Blackwell (sm_100+) replaced it with tcgen05, so it keeps mma.sync.
  if (arch != 90 || !cuda_wgmma_eligible(s)) return s.tile;
  TileConfig t = s.tile;
  const bool per_cell_work = s.modifiers.size() > 0 || s.norm == NormKind::ReluAttention;
  t.wgmma = true;
  t.block_q = 128;
  t.num_warps = 8;
  t.stages = s.head_dim == 64 ? 4 : 3;  // fwd_wgmma.cuh: V of tile j - 1 is read while j + 1 loads
  // (D = 64 with three modifiers at block_k 128 spills 60 B: 64 too.)
  const bool heavy = per_cell_work && (s.head_dim == 128 || s.modifiers.size() >= 3);
  if (!s.masks.has(MaskKind::BlockSparse)) t.block_k = heavy ? 64 : 128;
  else if (t.block_k != 64) t.block_k = 128;
  // Block-sparse rows keep few key tiles, so a second resident block hides one block's Q load
  // and epilogue under the other's tiles. The mask alone at D = 64 fits 128 registers without a
  // spill (120); with causal, windows or modifiers it spills (92-308 B), so those keep one.
  if (s.masks.bits() == (1u << static_cast<unsigned>(MaskKind::BlockSparse)) && s.modifiers.size() == 0 &&
      s.head_dim == 64 && s.norm == NormKind::Softmax)
    t.min_blocks = 2;
  // The producer (used where the tile copies by TMA, codegen::cuda::producer_warp). Two tiles keep
  // the loader thread, both measured faster with it: D = 64 causal tiles of 128 rows (the A/B
  // above), and the D = 128 two-sided window (Llama-3-8B, window 256, 8k: 0.231 against 0.237 ms,
  // bench/results/2026-12-02-h200-session18/call3/ab128/; it spilled 20 B with the producer until
  // cells tested a per-row key range).
  const bool causal = s.masks.has(MaskKind::Causal);
  const bool two_sided_window = s.masks.has(MaskKind::SlidingWindow) && !causal;
  t.producer_warp = t.min_blocks == 1 && !(s.head_dim == 64 && causal) && !(s.head_dim == 128 && two_sided_window);
  if (cuda_wgmma_192_rows(s, t)) {
    t.block_q = 192;
    t.num_warps = 12;
    // With the producer: 512 threads, 160 registers for each computing one. Causal tiles fit
    // since cells test a per-row key range (they spilled 108-212 B before), and the producer then
    // won: GPT-2 causal 32k / 8k / 4k 1.03x / 1.03x / 1.02x over the loader thread
    // (bench/results/2026-12-02-h200-session18/call3/ab64/).
    t.producer_warp = true;
  }
  return t;
}

// The wgmma tile of block-sparse masks in 64-row blocks at D = 64 (BigBird's 64 x 64): one
// computing warpgroup of 64 rows, so a tile walks exactly its mask row's blocks instead of the
// union of two rows' (the 128-row tile's coarsening), three blocks per SM (73 KB of four
// 64-key stages each; 170 registers).
constexpr TileConfig cuda_wgmma_64_rows(TileConfig t) {
  t.block_q = 64;
  t.num_warps = 4;
  t.block_k = 64;
  t.stages = 4;
  t.min_blocks = 3;
  t.producer_warp = false;
  t.skip_row_groups = false;
  return t;
}

// Whether a block-sparse call over a mask of mask_bq x mask_bk blocks takes that tile: plain
// scores (the tile is tested on the GPU without RoPE) on a wgmma prefill tile at D = 64, blocks
// of a multiple of 64 rows that the 128-row tile would have to coarsen (a multiple of 128 is read
// as it is), 64 keys or a multiple.
constexpr bool cuda_sparse_64_rows(const KernelSpec& s, const TileConfig& t, int64_t mask_bq, int64_t mask_bk) {
  return t.wgmma && s.head_dim == 64 && s.score == ScoreKind::ScaledDot && s.masks.has(MaskKind::BlockSparse) &&
         mask_bq % 128 != 0 && mask_bq % 64 == 0 && mask_bk % 64 == 0;
}

// The CUDA choices must be launchable for every head dim the template supports.
namespace detail {
constexpr bool cuda_tile_ok(int d, ScoreKind score) {
  const TileConfig t = tile_sizes(Target::Cuda, d, DType::BF16, MaskSet{}, score);
  return t.block_q % (16 * t.num_warps) == 0 && t.block_k % 16 == 0 &&
         cuda_smem_bytes(t, d, score != ScoreKind::ScaledDot) <= kCudaSmemLimit;
}
}  // namespace detail
static_assert(detail::cuda_tile_ok(32, ScoreKind::ScaledDot) && detail::cuda_tile_ok(64, ScoreKind::Rope) &&
              detail::cuda_tile_ok(64, ScoreKind::ScaledDot) && detail::cuda_tile_ok(96, ScoreKind::ScaledDot) &&
              detail::cuda_tile_ok(128, ScoreKind::Rope) && detail::cuda_tile_ok(256, ScoreKind::ScaledDot) &&
              detail::cuda_tile_ok(128, ScoreKind::RopeWindow) && detail::cuda_tile_ok(256, ScoreKind::RopeWindow),
              "a CUDA tile choice breaks the kernel template's constraints");

}  // namespace attnfuse::passes
