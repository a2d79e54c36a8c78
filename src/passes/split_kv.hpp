// Split-KV (flash decoding): into how many parts the launch cuts each query tile's key axis.
//
// A decode call has few query tiles (B x Hkv of them once a GQA group shares a tile), each with
// a long key axis: Llama-3-8B at B = 1 gives 8 blocks for 132 SMs, so without splitting 94% of
// the GPU (and of its memory bandwidth) idles. Cutting the key tiles into S parts gives S times
// the blocks; each part writes a partial (O, LSE) and a combine kernel merges them, at a cost of
// S x rows x (Dv + 1) fp32 written and read once, small next to K and V.
//
// Contract: a pure function of the launch's shape and the device (remembered per thread for the
// last few shapes: it runs on every decode launch). Returns 1 when the grid
// already fills 80% of the device's resident blocks (the split would only add the combine's
// traffic), else the smallest S in [1, kMaxSplits] within 5% of the best modelled time
// ceil(key_tiles / S) x ceil(S x blocks / capacity), with at least kMinTilesPerSplit key tiles
// per part (a part's pipeline must have a next tile to prefetch while it computes).
//
// Ragged grids (varlen decode over packed documents: each block's key count is its document's,
// which the host cannot read, the offsets being device memory) are cut into more parts, whatever
// the 80% rule says: until the grid holds kRaggedWaves waves of resident blocks, with at least
// kMinTilesPerRaggedPart key tiles of the mean length per part and at most kMaxRaggedSplits parts
// (one block merges them all), or the uniform choice where that is more. The hardware then
// balances the parts as SMs free up, where unsplit the longest documents' blocks ran on alone. On
// an H100, 32 one-query sequences with caches of 1k-32k keys (Llama-3-8B heads, 256 unsplit
// blocks): 0.860 ms unsplit, 0.792 / 0.781 / 0.776 ms in 2 / 4 / 8 parts; the same keys in 32
// equal caches 0.760 ms unsplit, 0.772-0.776 ms split (bench/results/2026-12-06-h100-session45/).
#pragma once

#include <cstdint>

namespace attnfuse::passes {

inline constexpr int kMaxSplits = 128;
inline constexpr int64_t kMinTilesPerSplit = 2;
inline constexpr int64_t kRaggedWaves = 8;
inline constexpr int64_t kMinTilesPerRaggedPart = 8;
inline constexpr int64_t kMaxRaggedSplits = 16;

struct SplitShape {
  int64_t blocks;       // blocks of the unsplit grid (query tiles x head groups x batch)
  int64_t key_tiles;    // key tiles a block visits (the longest, or the mean for ragged batches)
  int sms;              // multiprocessors
  int blocks_per_sm;    // resident blocks per SM (occupancy of the kernel)
  bool ragged = false;  // blocks' key counts differ and are unknown here (varlen decode)
};

int choose_num_splits(const SplitShape& s);

}  // namespace attnfuse::passes
