// A BlockMask's CSR on the device (what the block-sparse kernel reads, params.cuh bs_*): one
// allocation per mask, uploaded by its first CUDA launch and kept with the mask
// (BlockMask::device_copy), so a reused mask costs nothing after the first call.
#pragma once

#include <cstdint>

#include "attnfuse/block_mask.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/sparse_work.hpp"

namespace attnfuse::runtime {

struct DeviceBlockMask {
  CUdeviceptr base = 0;
  const int* row_ptr = nullptr;
  const int* cols = nullptr;
  const unsigned char* full = nullptr;
  const int64_t* bits_ptr = nullptr;
  const uint64_t* bits = nullptr;
  ~DeviceBlockMask();
};

// A prefill work list on the device (sparse_work.hpp), made for one launch shape and kept.
struct DeviceSparseWork {
  SparseWorkShape shape;
  int64_t num_items = 0, slots = 0;
  CUdeviceptr items = 0;
  ~DeviceSparseWork();
};

// The mask the prefill kernel reads for its bm x bn tile: `mask` itself where its blocks are
// multiples of the tile; its coarsening to the tile (BlockMask::coarsened, built on first use
// and kept with the mask, so a reused mask pays once) where the tile is a multiple of its
// blocks; nullptr where neither holds. Thread-safe.
const BlockMask* tile_block_mask(const BlockMask& mask, int bm, int bn);

// The mask's device copy, uploaded now (synchronously) if it has none yet; thread-safe. Throws
// Error(Unsupported) for masks with more than 2^31 - 1 active blocks.
const DeviceBlockMask& upload_block_mask(const BlockMask& mask);

// The work list of `mask` (the mask the kernel reads) for `shape`: built and uploaded
// (synchronously) on first use, then kept with the mask (BlockMask::work_lists) for its lifetime
// (a mask sees few shapes). Thread-safe.
const DeviceSparseWork& sparse_work(const BlockMask& mask, const SparseWorkShape& shape);

}  // namespace attnfuse::runtime
