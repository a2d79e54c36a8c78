// BlockMask: which (query block, key block) pairs of a block_sparse program are active, in CSR
// form per query block, with full blocks (every cell kept) told apart from partial ones.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "attnfuse/block_mask_cells.hpp"

namespace attnfuse {

class BlockMask {
 public:
  // Keep cell (b, h, q, kv)? Called concurrently from several threads, so it must be thread-safe
  // (a pure function of its arguments, as every mask predicate is).
  using Predicate = std::function<bool(int64_t b, int64_t h, int64_t q, int64_t kv)>;

  // The three states of a block: no cell kept, every cell kept, some kept (a cell bitmap).
  enum class BlockKind : uint8_t { Inactive, Full, Partial };
  // Says what it can about the block of cells [q0, q1) x [kv0, kv1) of (b, h) (already cut by the
  // lengths at the edges) without looking at cells: Inactive or Full when it is sure, Partial for
  // "mixed or unknown: evaluate the cells". Same thread-safety rule as Predicate.
  using BlockClassifier = std::function<BlockKind(int64_t b, int64_t h, int64_t q0, int64_t q1,
                                                  int64_t kv0, int64_t kv1)>;

  // batch / heads == 1 broadcast over that axis (the predicate is then only asked about index 0,
  // so a head-broadcast mask costs what one head does). A block is active iff some cell is kept,
  // full iff every cell is kept; partial blocks keep a per-cell bitmap, so the mask keeps exactly
  // the cells the predicate keeps while kernels skip inactive blocks and skip checks on full ones.
  // Evaluates the predicate once per cell: q_len * kv_len calls per (b, h), about 17 G at 128k.
  // `keep` is any callable (a lambda, a function pointer, a Predicate); it is compiled into the
  // cell loop (block_mask_cells.hpp), so an arithmetic lambda runs vectorized: a causal mask at
  // 128k in 2.4 s on 2 cores, where a Predicate (std::function, a call per cell) takes 21 s
  // (bench/results/2026-12-07-block-mask-inlined-predicates.txt). Long structured masks want
  // from_block_classifier all the same.
  template <class Keep>
    requires std::is_invocable_r_v<bool, const Keep&, int64_t, int64_t, int64_t, int64_t>
  static BlockMask from_predicate(const Keep& keep, int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                                  int block_q = 128, int block_k = 128) {
    return build("from_predicate", nullptr, cells_of(keep, block_k), batch, heads, q_len, kv_len, block_q, block_k);
  }
  // (A Predicate, or `{}`, which is refused as an empty predicate.)
  static BlockMask from_predicate(const Predicate& keep, int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                                  int block_q = 128, int block_k = 128) {
    return from_predicate<Predicate>(keep, batch, heads, q_len, kv_len, block_q, block_k);
  }
  // The same mask as from_predicate(keep, ...), provided `classify` never contradicts `keep`: only
  // blocks it calls Partial have their cells evaluated (and are then stored by what the cells say,
  // so a cautious Partial is always exact, merely slower). Structured masks (causal, windows,
  // documents, block grids) classify all but O(diagonal) blocks, so a 128k mask takes milliseconds.
  template <class Keep>
    requires std::is_invocable_r_v<bool, const Keep&, int64_t, int64_t, int64_t, int64_t>
  static BlockMask from_block_classifier(const BlockClassifier& classify, const Keep& keep, int64_t batch,
                                         int64_t heads, int64_t q_len, int64_t kv_len, int block_q = 128,
                                         int block_k = 128) {
    return build("from_block_classifier", &classify, cells_of(keep, block_k), batch, heads, q_len, kv_len, block_q,
                 block_k);
  }
  static BlockMask from_block_classifier(const BlockClassifier& classify, const Predicate& keep, int64_t batch,
                                         int64_t heads, int64_t q_len, int64_t kv_len, int block_q = 128,
                                         int block_k = 128) {
    return from_block_classifier<Predicate>(classify, keep, batch, heads, q_len, kv_len, block_q, block_k);
  }
  // Fills the cells [q0, q1) x [kv0, kv1) of (b, h) at once: keep[(q - q0) * (kv1 - kv0) + (kv - kv0)]
  // nonzero keeps cell (q, kv); the bytes arrive zeroed. Same thread-safety rule as Predicate.
  using BlockFiller = std::function<void(int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1,
                                         uint8_t* keep)>;
  // The mask whose cells `fill` keeps, one call per block: for mask code that works on whole
  // blocks (an array library, a vectorized routine, a table lookup per block), and for callers
  // across the C ABI (attnfuse_block_mask_from_block_cells), where a call per cell would cost far
  // more than the mask. With `classify`, only the blocks it calls Partial are filled, as in
  // from_block_classifier; it must never contradict `fill`.
  static BlockMask from_block_cells(const BlockFiller& fill, int64_t batch, int64_t heads, int64_t q_len,
                                    int64_t kv_len, int block_q = 128, int block_k = 128);
  static BlockMask from_block_cells(const BlockClassifier& classify, const BlockFiller& fill, int64_t batch,
                                    int64_t heads, int64_t q_len, int64_t kv_len, int block_q = 128,
                                    int block_k = 128);
  // grid: [batch, heads, nqb, nkb] bool/uint8 (nonzero = active) with nqb = ceil(q_len/block_q),
  // nkb = ceil(kv_len/block_k). Active blocks are full: every cell of them is kept.
  static BlockMask from_dense(const uint8_t* grid, int64_t batch, int64_t heads, int64_t q_len,
                              int64_t kv_len, int block_q, int block_k);

  // The same cells in blocks of block_q x block_k, multiples of this mask's blocks: a coarse
  // block is full where every block under it is full, inactive where none is active, and
  // partial (with the cells of this mask) otherwise. The CUDA runtime uses it when a mask's
  // blocks are finer than its tile.
  BlockMask coarsened(int block_q, int block_k) const;

  int64_t batch() const { return batch_; }
  int64_t heads() const { return heads_; }
  int64_t q_len() const { return q_len_; }
  int64_t kv_len() const { return kv_len_; }
  int block_q() const { return block_q_; }
  int block_k() const { return block_k_; }
  int64_t num_q_blocks() const { return nqb_; }
  int64_t num_kv_blocks() const { return nkb_; }

  // Active key blocks of query block qb for (b, h) (broadcast axes are folded), ascending.
  std::span<const int32_t> kv_blocks(int64_t b, int64_t h, int64_t qb) const;
  // Parallel to kv_blocks(): 1 where that block is full.
  std::span<const uint8_t> full_flags(int64_t b, int64_t h, int64_t qb) const;
  // Cell bitmap of the e-th entry of kv_blocks(b, h, qb), or nullptr when that block is full:
  // bit (q - qb*block_q) * block_k + (kv - kb*block_k), least significant first in each word.
  // Lets kernels apply partial blocks without a lookup per cell.
  const uint64_t* cell_bits(int64_t b, int64_t h, int64_t qb, size_t e) const {
    const auto entry = static_cast<size_t>(row_ptr_[static_cast<size_t>(row_index(b, h, qb))]) + e;
    return bitmap_ptr_[entry] < 0 ? nullptr : bitmap_.data() + bitmap_ptr_[entry];
  }
  // Exact cell semantics (what the reference uses).
  bool keeps(int64_t b, int64_t h, int64_t q, int64_t kv) const;
  // Share of blocks that are active (over all rows of all (b, h)).
  double density() const;

  // ASCII drawing of one (b, h) (broadcast axes are folded): a header line with the lengths,
  // block sizes and density, then one line per query block with one character per key block:
  // '#' full, '+' partial, '.' inactive. Grids larger than max_cells blocks on a side are drawn
  // downsampled (a note says by how much); a character then stands for a group of blocks and shows
  // the strongest state in it (# over + over .), so no active block disappears from the picture.
  std::string to_string(int64_t b = 0, int64_t h = 0, int max_cells = 64) const;

  // The CSR as kernels read it: row (b, h, qb) -> row_index = (b * heads + h) * nqb + qb (b, h
  // folded to 0 on broadcast axes); its entries [row_ptr[row], row_ptr[row + 1]) hold the key
  // block, the full flag and the word offset of the cell bitmap (-1 for full blocks).
  struct Csr {
    std::span<const int64_t> row_ptr;
    std::span<const int32_t> cols;
    std::span<const uint8_t> full;
    std::span<const int64_t> bitmap_ptr;
    std::span<const uint64_t> bitmap;
  };
  Csr csr() const { return {row_ptr_, col_idx_, full_, bitmap_ptr_, bitmap_}; }

  // The CUDA runtime's copy of the CSR on the device, opaque here: made by the first CUDA launch
  // that reads this mask and shared by copies of it (a BlockMask never changes once built).
  std::shared_ptr<void>& device_copy() const { return device_copy_; }
  // The CUDA runtime's coarsened copy for its tile (runtime/device_block_mask.hpp), opaque here,
  // kept with the mask for the same reason.
  std::shared_ptr<void>& coarse_copy() const { return coarse_copy_; }
  // The CUDA runtime's prefill work lists for this mask (runtime/sparse_work.hpp), opaque here,
  // kept with the mask for the same reason.
  std::shared_ptr<void>& work_lists() const { return work_lists_; }

 private:
  mutable std::shared_ptr<void> device_copy_;
  mutable std::shared_ptr<void> coarse_copy_;
  mutable std::shared_ptr<void> work_lists_;
  // Checked dimensions, no blocks yet (the factories fill the CSR).
  static BlockMask with_dims(const char* who, int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                             int block_q, int block_k);
  int64_t row_index(int64_t b, int64_t h, int64_t qb) const;
  int64_t batch_ = 0, heads_ = 0, q_len_ = 0, kv_len_ = 0, nqb_ = 0, nkb_ = 0;
  int block_q_ = 128, block_k_ = 128;
  std::vector<int64_t> row_ptr_;     // [batch*heads*nqb + 1]
  std::vector<int32_t> col_idx_;     // active key block per entry
  std::vector<uint8_t> full_;        // per entry
  std::vector<int64_t> bitmap_ptr_;  // per entry: word offset of its cell bitmap, -1 if full
  std::vector<uint64_t> bitmap_;     // block_q*block_k bits per partial block, row-major

  // One row of blocks while it is built (src/sparsity/row_build.hpp), and the CSR from the rows.
  struct RowBuild;
  static void assemble(BlockMask& m, std::vector<RowBuild>& rows, int64_t words_per_block);
  // Evaluates the cells [q0, q1) x [kv0, kv1) of (b, h) into a zeroed block bitmap (row q - q0 at
  // bit (q - q0) * block_k) and returns how many it kept: one call per block, the predicate
  // inlined inside it (block_mask_cells::evaluate).
  using CellEvaluator = std::function<int64_t(int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0,
                                              int64_t kv1, uint64_t* cell)>;
  // The evaluator of `keep`, or an empty one for an empty predicate (a null Predicate or function
  // pointer), which build() refuses. It refers to `keep`, which outlives the build.
  template <class Keep>
  static CellEvaluator cells_of(const Keep& keep, int block_k) {
    if constexpr (std::is_constructible_v<bool, const Keep&>)
      if (!static_cast<bool>(keep)) return {};
    return [&keep, block_k](int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1, uint64_t* cell) {
      return block_mask_cells::evaluate(keep, b, h, q0, q1, kv0, kv1, block_k, cell);
    };
  }
  // The evaluator of a BlockFiller (empty for an empty one): the block's bytes, then packed bits.
  static CellEvaluator cells_of_filler(const BlockFiller& fill, int block_k);
  // The one construction path: classify (null = every block Partial), evaluate cells where needed.
  static BlockMask build(const char* who, const BlockClassifier* classify, const CellEvaluator& cells,
                         int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len, int block_q,
                         int block_k);
};

}  // namespace attnfuse
