// BlockMask::coarsened: the same cells in larger blocks, built from the fine CSR and bitmaps
// directly (word operations; no per-cell predicate calls), one task per coarse row.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/error.hpp"
#include "sparsity/row_build.hpp"

namespace attnfuse {
namespace {

// Sets bits [lo, lo + len) of `words`.
void set_bits(uint64_t* words, int64_t lo, int64_t len) {
  while (len > 0) {
    const int64_t w = lo >> 6, off = lo & 63, n = std::min<int64_t>(len, 64 - off);
    const uint64_t run = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << off;
    words[w] |= run;
    lo += n;
    len -= n;
  }
}

}  // namespace

BlockMask BlockMask::coarsened(int block_q, int block_k) const {
  if (block_q <= 0 || block_k <= 0 || block_q % block_q_ != 0 || block_k % block_k_ != 0)
    throw Error(ErrorCode::Shape,
                fmt::format("BlockMask::coarsened: blocks of {} x {} are not multiples of the mask's {} x {}",
                            block_q, block_k, block_q_, block_k_));
  if (block_q == block_q_ && block_k == block_k_) return *this;
  const int64_t rq = block_q / block_q_, rk = block_k / block_k_;
  BlockMask m = with_dims("coarsened", batch_, heads_, q_len_, kv_len_, block_q, block_k);
  const int64_t nrows = batch_ * heads_ * m.nqb_;
  const int64_t words_per_block = (int64_t{block_q} * block_k + 63) / 64;
  std::vector<RowBuild> rows(static_cast<size_t>(nrows));

  // Coarse row (b, h, cq) gathers fine rows cq*rq .. cq*rq + rq - 1; their entries, each sorted,
  // are walked together by coarse column. A coarse block is full where all the fine blocks under
  // it exist in the CSR and are full, and partial otherwise (a listed fine block keeps a cell).
#pragma omp parallel for schedule(dynamic, 4) if (nrows > 64)
  for (int64_t r = 0; r < nrows; ++r) {
    const int64_t cq = r % m.nqb_, bh = r / m.nqb_;
    const int64_t fq0 = cq * rq, fq1 = std::min(nqb_, fq0 + rq);
    std::vector<int64_t> pos, end;
    for (int64_t fq = fq0; fq < fq1; ++fq) {
      const int64_t fr = bh * nqb_ + fq;  // bh is (b * heads + h) over this mask's own axes
      pos.push_back(row_ptr_[static_cast<size_t>(fr)]);
      end.push_back(row_ptr_[static_cast<size_t>(fr + 1)]);
    }
    RowBuild& rb = rows[static_cast<size_t>(r)];
    std::vector<uint64_t> cell(static_cast<size_t>(words_per_block));
    for (;;) {
      int64_t ck = -1;  // the next coarse column any fine row reaches
      for (size_t i = 0; i < pos.size(); ++i)
        if (pos[i] < end[i]) {
          const int64_t c = col_idx_[static_cast<size_t>(pos[i])] / rk;
          ck = ck < 0 ? c : std::min(ck, c);
        }
      if (ck < 0) break;
      const int64_t fk0 = ck * rk, fk1 = std::min(nkb_, fk0 + rk);
      int64_t listed = 0;
      bool all_full = true;
      std::fill(cell.begin(), cell.end(), 0);
      for (size_t i = 0; i < pos.size(); ++i) {
        const int64_t fq = fq0 + static_cast<int64_t>(i);
        const int64_t oq = (fq - fq0) * block_q_, rows_in = std::min<int64_t>(block_q_, q_len_ - fq * block_q_);
        for (; pos[i] < end[i] && col_idx_[static_cast<size_t>(pos[i])] < fk1; ++pos[i]) {
          const auto e = static_cast<size_t>(pos[i]);
          const int64_t fk = col_idx_[e], ok = (fk - fk0) * block_k_;
          const int64_t cols_in = std::min<int64_t>(block_k_, kv_len_ - fk * block_k_);
          ++listed;
          if (full_[e]) {
            for (int64_t i2 = 0; i2 < rows_in; ++i2) set_bits(cell.data(), (oq + i2) * block_k + ok, cols_in);
            continue;
          }
          all_full = false;
          const uint64_t* fine = bitmap_.data() + bitmap_ptr_[e];
          for (int64_t i2 = 0; i2 < rows_in; ++i2)
            for (int64_t j = 0; j < cols_in; ++j) {
              const int64_t bit = i2 * block_k_ + j;
              if ((fine[bit >> 6] >> (bit & 63)) & 1u) {
                const int64_t to = (oq + i2) * block_k + ok + j;
                cell[static_cast<size_t>(to >> 6)] |= uint64_t{1} << (to & 63);
              }
            }
        }
      }
      const bool full = all_full && listed == (fq1 - fq0) * (fk1 - fk0);
      rb.cols.push_back(static_cast<int32_t>(ck));
      rb.full.push_back(full ? 1 : 0);
      if (!full) rb.bits.insert(rb.bits.end(), cell.begin(), cell.end());
    }
  }
  assemble(m, rows, words_per_block);
  return m;
}

}  // namespace attnfuse
