// A BlockMask's CSR on the device (what the block-sparse kernel reads, params.cuh bs_*): one
// allocation per mask, uploaded by its first CUDA launch and kept with the mask
// (BlockMask::device_copy), so a reused mask costs nothing after the first call.
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/sparse_work.hpp"

namespace attnfuse::runtime {

struct DeviceBlockMask {
  CUdeviceptr base = 0;
  const int* row_ptr = nullptr;
  const int* cols = nullptr;
  const uint32_t* state = nullptr;  // entry_states
  bool group_states = false;        // some entry has a group bit (kBsGroupEmpty or kBsGroupFull)
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

// The kernel's state word of each CSR entry (params.cuh kBs*): kBsFull for a full block; for a
// partial one, per group of 64 rows (the wgmma tile's warpgroup), whether the group keeps none
// of its cells or all of them, counting only rows below q_len and keys below kv_len. A mask
// finer than the tile, coarsened to it, lists a coarse block wherever one of its fine rows has
// an active block; the states let the other rows' warpgroups skip it instead of masking every
// cell. Groups past kBsMaxGroups carry no state (read as partial).
std::vector<uint32_t> entry_states(const BlockMask& mask);

// The mask's device copy, uploaded now (synchronously) if it has none yet; thread-safe. Throws
// Error(Unsupported) for masks with more than 2^31 - 1 active blocks.
const DeviceBlockMask& upload_block_mask(const BlockMask& mask);

// The work list of `mask` (the mask the kernel reads) for `shape`: built and uploaded
// (synchronously) on first use, then kept with the mask (BlockMask::work_lists) for its lifetime
// (a mask sees few shapes). Thread-safe.
const DeviceSparseWork& sparse_work(const BlockMask& mask, const SparseWorkShape& shape);

}  // namespace attnfuse::runtime
