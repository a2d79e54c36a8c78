// The CUDA backend's environment knobs: tile overrides for the sweeps in bench/ and the Hopper
// A/B switches. Each is read once per process; the parsers are separate so tests can feed them
// text. Malformed values throw Error(Unsupported) naming the knob and its format.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::runtime {

// ATTNFUSE_CUDA_TILE=block_q,block_k,num_warps replaces the tile pass's choice (the mma.sync
// form, two stages). Null or empty text: no override.
std::optional<TileConfig> parse_tile_knob(const char* text);
// ATTNFUSE_CUDA_DECODE_TILE=block_q,block_k,num_warps,stages[,key_warps] replaces every tile of
// the decode variant (split or not, contiguous or paged).
std::optional<TileConfig> parse_decode_tile_knob(const char* text);
// ATTNFUSE_CUDA_DECODE_SPLITS=n (1-128) fixes the split count of decode-variant calls that do not
// set LaunchTuning::num_splits (the sweeps' way to try counts the split pass would not choose).
std::optional<int> parse_decode_splits_knob(const char* text);
// ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES=n (n >= 1) replaces passes::kPagedDeepMaxTiles: a paged split
// call takes the deep (on Hopper: TMA, 128-key) module when its parts stream at most n 64-key tiles.
std::optional<int64_t> parse_paged_deep_max_tiles_knob(const char* text);
// ATTNFUSE_CUDA_WGMMA_TILE=block_k,min_blocks[,stages[,block_q]] replaces those choices of the
// Hopper form's prefill tile (block_k 64 or 128, 1-3 blocks per SM, 3 or 4 K/V stages, 128 or 192
// query rows; stages and block_q 0: the pass's). 192 rows (three computing warpgroups) apply at
// D = 64 only, outside block-sparse programs (whose masks are cut in 128-row blocks).
struct WgmmaTileKnob {
  int block_k, min_blocks, stages, block_q;
};
std::optional<WgmmaTileKnob> parse_wgmma_tile_knob(const char* text);
// ATTNFUSE_CUDA_TMA_L2_PROMOTE=none|64|128|256: the L2 promotion of every tensor map (the bytes
// the L2 fetches around a copy engine's request), in place of the runtime's per-kernel choice
// (CudaKernel::launch). Returns cuda.h's CUtensorMapL2promotion value (0 none, 1, 2, 3 for 64,
// 128, 256 bytes); null or empty text: no override.
std::optional<int> parse_tma_l2_promotion_knob(const char* text);

// The knobs as this process's environment sets them.
const std::optional<TileConfig>& tile_override();
const std::optional<TileConfig>& decode_tile_override();
const std::optional<int>& decode_splits_override();
const std::optional<int64_t>& paged_deep_max_tiles_override();
const std::optional<WgmmaTileKnob>& wgmma_tile_override();
// ATTNFUSE_CUDA_WGMMA=0 keeps the prefill kernel in its mma.sync form on Hopper;
// ATTNFUSE_CUDA_TMA=0 keeps the wgmma form's K/V loads on cp.async.
bool wgmma_enabled();
bool tma_enabled();
// ATTNFUSE_CUDA_DECODE_TMA=0 keeps the decode tiles' K/V loads on cp.async on Hopper.
bool decode_tma_enabled();
// ATTNFUSE_CUDA_PAGED_TMA=0 keeps them on cp.async for paged caches only (the padded module, as
// for page sizes that are not a multiple of 8).
bool paged_tma_enabled();
// ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=0 keeps unsplit paged decode calls on the padded cp.async
// module (split calls still copy pages by TMA; CudaKernel::plan).
bool paged_tma_unsplit_enabled();
// ATTNFUSE_CUDA_SPARSE_64_ROWS: which block-sparse calls at D = 64 take the 64-row wgmma tile
// (passes::cuda_wgmma_64_rows; CudaKernel::plan). Unset or 1: masks of 64-row blocks the
// 128-row tile would coarsen (passes::cuda_sparse_64_rows); 0: none (they stay on the 128-row
// tile, row groups skipping); all: every mask whose blocks are multiples of 64 x 64 (an
// experiment: 128-row blocks then run as two 64-row tiles, 1.12-1.15x slower on the 128-block
// BigBird, bench/results/2026-12-04-h200-session30/call1/). Other text is refused.
enum class Sparse64Rows { Off, Auto, All };
Sparse64Rows parse_sparse_64_rows_knob(const char* text);
Sparse64Rows sparse_64_rows_mode();
// ATTNFUSE_CUDA_DECODE_PRODUCER=1 gives Hopper's TMA decode tiles a producer warp that issues
// their copies (TileConfig::producer_warp): an experiment, off by default until measured.
bool decode_producer_enabled();
// Merges of 16-bit states in chunks of 16 take their own entry, which holds the loaded words
// instead of floats (merge_states_entry; the H200's cascade prefill 66 -> 51 us); with
// ATTNFUSE_CUDA_MERGE_HALF=0 they take the chunk-of-16 entry of every dtype.
bool merge_half_entry_enabled();
// ATTNFUSE_CUDA_WGMMA_PRODUCER=0 takes the Hopper wgmma prefill tile's producer warpgroup away
// (TileConfig::producer_warp, set by passes::cuda_arch_tile): its loader is then a thread of
// warpgroup 1, as before the seventeenth session.
bool wgmma_producer_enabled();
// ATTNFUSE_CUDA_PDL=0 launches every kernel in stream order, without programmatic dependent
// launch, whatever LaunchTuning::dependent_launch says (CudaKernel::plan).
bool dependent_launch_enabled();
// ATTNFUSE_CUDA_EARLY_L2: how many K/V tiles a TMA decode tile launched as a programmatic
// dependent (contiguous K/V, or a settled page table) asks L2 for, with its Q rows, before the grid
// dependency wait (FwdParams::early_l2; the kernel takes at most its stages). 0 stops the hints;
// unset or empty: kEarlyL2DefaultTiles. Other text than 0-16 is refused.
inline constexpr int kEarlyL2DefaultTiles = 16;  // every stage the tile has
std::optional<int> parse_early_l2_knob(const char* text);
int early_l2_tiles();
// ATTNFUSE_NVRTC_LINEINFO=1 compiles kernels with source line information (nvrtc_options).
bool nvrtc_lineinfo_enabled();
// The tensor maps' L2 promotion override (parse_tma_l2_promotion_knob).
const std::optional<int>& tma_l2_promotion_override();

}  // namespace attnfuse::runtime
