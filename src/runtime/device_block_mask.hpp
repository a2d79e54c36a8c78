// A BlockMask's CSR on the device (what the block-sparse kernel reads, params.cuh bs_*): one
// allocation per mask, uploaded by its first CUDA launch and kept with the mask
// (BlockMask::device_copy), so a reused mask costs nothing after the first call.
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {

struct DeviceBlockMask {
  CUdeviceptr base = 0;
  const int* row_ptr = nullptr;
  const int* cols = nullptr;
  const unsigned char* full = nullptr;
  const int64_t* bits_ptr = nullptr;
  const uint64_t* bits = nullptr;
  // The mask's rows by descending active-block count (ties in row order): the prefill kernel's
  // launch order of query tiles (params.cuh bs_order).
  const int* order = nullptr;
  ~DeviceBlockMask();
};

// The mask the prefill kernel reads for its bm x bn tile: `mask` itself where its blocks are
// multiples of the tile; its coarsening to the tile (BlockMask::coarsened, built on first use
// and kept with the mask, so a reused mask pays once) where the tile is a multiple of its
// blocks; nullptr where neither holds. Thread-safe.
const BlockMask* tile_block_mask(const BlockMask& mask, int bm, int bn);

// The mask's rows (batch, head, query block, flattened as in its CSR) sorted by descending
// active-block count, ties in row order: a stable order, so equal rows keep the grid's order.
std::vector<int32_t> heaviest_rows_first(const BlockMask& mask);

// The mask's device copy, uploaded now (synchronously) if it has none yet; thread-safe. Throws
// Error(Unsupported) for masks with more than 2^31 - 1 active blocks.
const DeviceBlockMask& upload_block_mask(const BlockMask& mask);

}  // namespace attnfuse::runtime
