// BlockMask construction (from a per-cell predicate or a dense block grid) and its CSR queries.
#include "attnfuse/block_mask.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <limits>

#include "attnfuse/error.hpp"

namespace attnfuse {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_dims(const char* who, int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                int block_q, int block_k) {
  if (block_q < 1 || block_k < 1)
    throw Error(ErrorCode::Shape,
                fmt::format("BlockMask::{}: block sizes must be >= 1 (got block_q={}, block_k={})",
                            who, block_q, block_k));
  if (batch < 0 || heads < 0 || q_len < 0 || kv_len < 0)
    throw Error(ErrorCode::Shape,
                fmt::format("BlockMask::{}: batch, heads and lengths must be >= 0 (got batch={}, "
                            "heads={}, q_len={}, kv_len={})",
                            who, batch, heads, q_len, kv_len));
  // Key-block indices are stored as int32 (like CSR indices in every GPU sparse format).
  if (ceil_div(kv_len, block_k) > std::numeric_limits<int32_t>::max())
    throw Error(ErrorCode::Shape,
                fmt::format("BlockMask::{}: kv_len {} / block_k {} gives more key blocks than an "
                            "int32 index can hold",
                            who, kv_len, block_k));
}

// One row of blocks (b, h, qb) while it is being built; rows are built in parallel and then
// concatenated, so no thread ever appends to shared vectors.
struct RowBuild {
  std::vector<int32_t> cols;
  std::vector<uint8_t> full;
  std::vector<int64_t> bitmap_off;  // offset into `bits`, -1 when full
  std::vector<uint64_t> bits;
};

// Stitch the per-row results into the CSR arrays.
void assemble(std::vector<RowBuild>& rows, std::vector<int64_t>& row_ptr,
                     std::vector<int32_t>& col_idx, std::vector<uint8_t>& full,
                     std::vector<int64_t>& bitmap_ptr, std::vector<uint64_t>& bitmap) {
  row_ptr.assign(rows.size() + 1, 0);
  int64_t words = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    row_ptr[r + 1] = row_ptr[r] + static_cast<int64_t>(rows[r].cols.size());
    words += static_cast<int64_t>(rows[r].bits.size());
  }
  const auto n = static_cast<size_t>(row_ptr.back());
  col_idx.resize(n);
  full.resize(n);
  bitmap_ptr.resize(n);
  bitmap.resize(static_cast<size_t>(words));
  int64_t word_base = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto e0 = static_cast<size_t>(row_ptr[r]);
    RowBuild& rb = rows[r];
    std::copy(rb.cols.begin(), rb.cols.end(), col_idx.begin() + static_cast<ptrdiff_t>(e0));
    std::copy(rb.full.begin(), rb.full.end(), full.begin() + static_cast<ptrdiff_t>(e0));
    for (size_t e = 0; e < rb.cols.size(); ++e)
      bitmap_ptr[e0 + e] = rb.bitmap_off[e] < 0 ? -1 : word_base + rb.bitmap_off[e];
    std::copy(rb.bits.begin(), rb.bits.end(), bitmap.begin() + word_base);
    word_base += static_cast<int64_t>(rb.bits.size());
    rb = RowBuild{};  // free as we go: large masks should not need twice the memory
  }
}

}  // namespace

BlockMask BlockMask::with_dims(const char* who, int64_t batch, int64_t heads, int64_t q_len,
                               int64_t kv_len, int block_q, int block_k) {
  check_dims(who, batch, heads, q_len, kv_len, block_q, block_k);
  BlockMask m;
  m.batch_ = batch;
  m.heads_ = heads;
  m.q_len_ = q_len;
  m.kv_len_ = kv_len;
  m.block_q_ = block_q;
  m.block_k_ = block_k;
  m.nqb_ = ceil_div(q_len, block_q);
  m.nkb_ = ceil_div(kv_len, block_k);
  return m;
}

BlockMask BlockMask::from_predicate(const Predicate& keep, int64_t batch, int64_t heads,
                                    int64_t q_len, int64_t kv_len, int block_q, int block_k) {
  BlockMask m = with_dims("from_predicate", batch, heads, q_len, kv_len, block_q, block_k);
  if (!keep) throw Error(ErrorCode::Shape, "BlockMask::from_predicate: the predicate is empty");

  const int64_t nrows = batch * heads * m.nqb_;
  const int64_t words_per_block = ceil_div(int64_t{block_q} * block_k, 64);
  std::vector<RowBuild> rows(static_cast<size_t>(nrows));
  std::exception_ptr failure;

  // The predicate is called concurrently from several threads: it must be thread-safe (a pure
  // function of its arguments, as every mask predicate is).
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t r = 0; r < nrows; ++r) {
    try {
      const int64_t qb = r % m.nqb_;
      const int64_t h = (r / m.nqb_) % heads;
      const int64_t b = r / (m.nqb_ * heads);
      const int64_t q0 = qb * block_q, q1 = std::min(q_len, q0 + block_q);
      RowBuild& rb = rows[static_cast<size_t>(r)];
      std::vector<uint64_t> cell(static_cast<size_t>(words_per_block));
      for (int64_t kb = 0; kb < m.nkb_; ++kb) {
        const int64_t k0 = kb * block_k, k1 = std::min(kv_len, k0 + block_k);
        std::fill(cell.begin(), cell.end(), 0);
        int64_t kept = 0;
        for (int64_t q = q0; q < q1; ++q)
          for (int64_t kv = k0; kv < k1; ++kv)
            if (keep(b, h, q, kv)) {
              const int64_t bit = (q - q0) * block_k + (kv - k0);
              cell[static_cast<size_t>(bit >> 6)] |= uint64_t{1} << (bit & 63);
              ++kept;
            }
        if (kept == 0) continue;
        rb.cols.push_back(static_cast<int32_t>(kb));
        // Full means every in-range cell is kept (the last block may be cut by the lengths).
        const bool is_full = kept == (q1 - q0) * (k1 - k0);
        rb.full.push_back(is_full ? 1 : 0);
        if (is_full) {
          rb.bitmap_off.push_back(-1);
        } else {
          rb.bitmap_off.push_back(static_cast<int64_t>(rb.bits.size()));
          rb.bits.insert(rb.bits.end(), cell.begin(), cell.end());
        }
      }
    } catch (...) {
#pragma omp critical(attnfuse_block_mask_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  assemble(rows, m.row_ptr_, m.col_idx_, m.full_, m.bitmap_ptr_, m.bitmap_);
  return m;
}

BlockMask BlockMask::from_dense(const uint8_t* grid, int64_t batch, int64_t heads, int64_t q_len,
                                int64_t kv_len, int block_q, int block_k) {
  BlockMask m = with_dims("from_dense", batch, heads, q_len, kv_len, block_q, block_k);
  const int64_t nrows = batch * heads * m.nqb_;
  if (nrows * m.nkb_ > 0 && grid == nullptr)
    throw Error(ErrorCode::Shape, "BlockMask::from_dense: the grid pointer is null");

  // Every active block is full, so there are no bitmaps: a single pass builds the CSR.
  m.row_ptr_.assign(static_cast<size_t>(nrows + 1), 0);
  for (int64_t r = 0; r < nrows; ++r) {
    const uint8_t* row = grid + r * m.nkb_;
    for (int64_t kb = 0; kb < m.nkb_; ++kb)
      if (row[kb] != 0) {
        m.col_idx_.push_back(static_cast<int32_t>(kb));
        m.full_.push_back(1);
        m.bitmap_ptr_.push_back(-1);
      }
    m.row_ptr_[static_cast<size_t>(r + 1)] = static_cast<int64_t>(m.col_idx_.size());
  }
  return m;
}

int64_t BlockMask::row_index(int64_t b, int64_t h, int64_t qb) const {
  // Broadcast axes (size 1) accept any index; others must be in range.
  const int64_t bb = batch_ == 1 ? 0 : b;
  const int64_t hh = heads_ == 1 ? 0 : h;
  if (bb < 0 || bb >= batch_ || hh < 0 || hh >= heads_ || qb < 0 || qb >= nqb_)
    throw Error(ErrorCode::Shape,
                fmt::format("BlockMask: row (b={}, h={}, q_block={}) is outside the mask "
                            "(batch={}, heads={}, q_blocks={})",
                            b, h, qb, batch_, heads_, nqb_));
  return (bb * heads_ + hh) * nqb_ + qb;
}

std::span<const int32_t> BlockMask::kv_blocks(int64_t b, int64_t h, int64_t qb) const {
  const auto r = static_cast<size_t>(row_index(b, h, qb));
  const auto e0 = static_cast<size_t>(row_ptr_[r]), e1 = static_cast<size_t>(row_ptr_[r + 1]);
  return {col_idx_.data() + e0, e1 - e0};
}

std::span<const uint8_t> BlockMask::full_flags(int64_t b, int64_t h, int64_t qb) const {
  const auto r = static_cast<size_t>(row_index(b, h, qb));
  const auto e0 = static_cast<size_t>(row_ptr_[r]), e1 = static_cast<size_t>(row_ptr_[r + 1]);
  return {full_.data() + e0, e1 - e0};
}

bool BlockMask::keeps(int64_t b, int64_t h, int64_t q, int64_t kv) const {
  if (q < 0 || q >= q_len_ || kv < 0 || kv >= kv_len_) return false;
  const int64_t qb = q / block_q_, kb = kv / block_k_;
  const auto r = static_cast<size_t>(row_index(b, h, qb));
  const auto first = col_idx_.begin() + row_ptr_[r];
  const auto last = col_idx_.begin() + row_ptr_[r + 1];
  const auto it = std::lower_bound(first, last, static_cast<int32_t>(kb));
  if (it == last || *it != kb) return false;
  const auto e = static_cast<size_t>(it - col_idx_.begin());
  if (full_[e]) return true;
  const int64_t bit = (q - qb * block_q_) * block_k_ + (kv - kb * block_k_);
  return (bitmap_[static_cast<size_t>(bitmap_ptr_[e] + (bit >> 6))] >> (bit & 63)) & 1u;
}

double BlockMask::density() const {
  const int64_t total = batch_ * heads_ * nqb_ * nkb_;
  if (total == 0) return 0.0;
  return static_cast<double>(col_idx_.size()) / static_cast<double>(total);
}

}  // namespace attnfuse
