// BlockMask's row under construction, shared by the factories (block_mask.cpp) and coarsening
// (block_mask_coarsen.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/block_mask.hpp"

namespace attnfuse {

// One row of blocks (b, h, qb) while it is being built; rows are built in parallel and then
// concatenated (BlockMask::assemble), so no thread ever appends to shared vectors. Only partial
// blocks store cells (the e-th partial block's bitmap is the e-th run of words_per_block words),
// so full and inactive blocks cost a few bytes whatever their size.
struct BlockMask::RowBuild {
  std::vector<int32_t> cols;
  std::vector<uint8_t> full;
  std::vector<uint64_t> bits;
};

}  // namespace attnfuse
