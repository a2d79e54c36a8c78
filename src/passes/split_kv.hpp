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
#pragma once

#include <cstdint>

namespace attnfuse::passes {

inline constexpr int kMaxSplits = 128;
inline constexpr int64_t kMinTilesPerSplit = 2;

struct SplitShape {
  int64_t blocks;     // blocks of the unsplit grid (query tiles x head groups x batch)
  int64_t key_tiles;  // key tiles a block visits (the longest, or the mean for ragged batches)
  int sms;            // multiprocessors
  int blocks_per_sm;  // resident blocks per SM (occupancy of the kernel)
};

int choose_num_splits(const SplitShape& s);

}  // namespace attnfuse::passes
