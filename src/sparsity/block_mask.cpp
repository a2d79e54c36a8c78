// BlockMask construction (per-cell predicate, block classifier, per-block cells, dense block
// grid), its CSR queries and its ASCII drawing.
#include "attnfuse/block_mask.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <vector>

#include "attnfuse/error.hpp"
#include "sparsity/row_build.hpp"

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

}  // namespace

BlockMask BlockMask::build(const char* who, const BlockClassifier* classify, const CellEvaluator& cells,
                           int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len, int block_q,
                           int block_k) {
  BlockMask m = with_dims(who, batch, heads, q_len, kv_len, block_q, block_k);
  if (!cells) throw Error(ErrorCode::Shape, fmt::format("BlockMask::{}: the predicate is empty", who));
  if (classify != nullptr && !*classify)
    throw Error(ErrorCode::Shape, fmt::format("BlockMask::{}: the block classifier is empty", who));

  const int64_t nrows = batch * heads * m.nqb_;
  const int64_t words_per_block = ceil_div(int64_t{block_q} * block_k, 64);
  std::vector<RowBuild> rows(static_cast<size_t>(nrows));
  std::exception_ptr failure;

  // Two ways to be fast. The cell loop is compiled with the predicate (one evaluator call per
  // block), so arithmetic predicates run vectorized; through std::function it cost ~2 ns per cell
  // per thread, 15-45 s at 128k on the 2-core dev machine. The classifier removes cells instead:
  // only Partial blocks are evaluated, O(diagonal) of them for structured masks, and the same masks
  // take 10-80 ms (bench/results/2026-11-30-block-mask-construction.txt).
  //
  // One task per block row (b, h, qb): rows cost very different amounts (a causal row's work grows
  // with qb), hence the dynamic schedule.
#pragma omp parallel
  {
    std::vector<uint64_t> cell(static_cast<size_t>(words_per_block));
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < nrows; ++r) {
      try {
        const int64_t qb = r % m.nqb_;
        const int64_t h = (r / m.nqb_) % heads;
        const int64_t b = r / (m.nqb_ * heads);
        const int64_t q0 = qb * block_q, q1 = std::min(q_len, q0 + block_q);
        RowBuild& rb = rows[static_cast<size_t>(r)];
        for (int64_t kb = 0; kb < m.nkb_; ++kb) {
          const int64_t k0 = kb * block_k, k1 = std::min(kv_len, k0 + block_k);
          const BlockKind said = classify ? (*classify)(b, h, q0, q1, k0, k1) : BlockKind::Partial;
          if (said == BlockKind::Inactive) continue;
          bool is_full = said == BlockKind::Full;
          if (!is_full) {  // Partial, or a value outside the enum: ask the cells
            std::fill(cell.begin(), cell.end(), 0);
            const int64_t kept = cells(b, h, q0, q1, k0, k1, cell.data());
            if (kept == 0) continue;
            // Full means every in-range cell is kept (the last block may be cut by the lengths).
            is_full = kept == (q1 - q0) * (k1 - k0);
            if (!is_full) rb.bits.insert(rb.bits.end(), cell.begin(), cell.end());
          }
          rb.cols.push_back(static_cast<int32_t>(kb));
          rb.full.push_back(is_full ? 1 : 0);
        }
      } catch (...) {
#pragma omp critical(attnfuse_block_mask_failure)
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);

  assemble(m, rows, words_per_block);
  return m;
}

void BlockMask::assemble(BlockMask& m, std::vector<RowBuild>& rows, int64_t words_per_block) {
  const auto nrows = static_cast<int64_t>(rows.size());
  // Prefix sums give every row its place in the CSR; then rows are copied in parallel. The staging
  // and the CSR coexist until the copy ends: for a partial-heavy mask that is twice its bitmaps.
  m.row_ptr_.assign(static_cast<size_t>(nrows + 1), 0);
  std::vector<int64_t> word_base(static_cast<size_t>(nrows + 1), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    m.row_ptr_[r + 1] = m.row_ptr_[r] + static_cast<int64_t>(rows[r].cols.size());
    word_base[r + 1] = word_base[r] + static_cast<int64_t>(rows[r].bits.size());
  }
  const auto n = static_cast<size_t>(m.row_ptr_.back());
  m.col_idx_.resize(n);
  m.full_.resize(n);
  m.bitmap_ptr_.resize(n);
  m.bitmap_.resize(static_cast<size_t>(word_base.back()));
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t r = 0; r < nrows; ++r) {
    RowBuild& rb = rows[static_cast<size_t>(r)];
    const auto e0 = static_cast<size_t>(m.row_ptr_[static_cast<size_t>(r)]);
    int64_t word = word_base[static_cast<size_t>(r)];
    std::copy(rb.cols.begin(), rb.cols.end(), m.col_idx_.begin() + static_cast<ptrdiff_t>(e0));
    std::copy(rb.full.begin(), rb.full.end(), m.full_.begin() + static_cast<ptrdiff_t>(e0));
    for (size_t e = 0; e < rb.cols.size(); ++e) {
      m.bitmap_ptr_[e0 + e] = rb.full[e] ? -1 : word;
      if (!rb.full[e]) word += words_per_block;
    }
    std::copy(rb.bits.begin(), rb.bits.end(), m.bitmap_.begin() + word_base[static_cast<size_t>(r)]);
    rb = RowBuild{};
  }
}

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

BlockMask::CellEvaluator BlockMask::cells_of_filler(const BlockFiller& fill, int block_k) {
  if (!fill) return {};
  return [&fill, block_k](int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1, uint64_t* cell) {
    const int64_t cols = k1 - k0;
    std::vector<uint8_t> bytes(static_cast<size_t>((q1 - q0) * cols), 0);
    fill(b, h, q0, q1, k0, k1, bytes.data());
    // The filled bytes are the predicate: a table lookup, which the cell loop vectorizes.
    const uint8_t* kept = bytes.data();
    const auto keep = [kept, q0, k0, cols](int64_t, int64_t, int64_t q, int64_t kv) {
      return kept[(q - q0) * cols + (kv - k0)] != 0;
    };
    return block_mask_cells::evaluate(keep, b, h, q0, q1, k0, k1, block_k, cell);
  };
}

BlockMask BlockMask::from_block_cells(const BlockFiller& fill, int64_t batch, int64_t heads, int64_t q_len,
                                      int64_t kv_len, int block_q, int block_k) {
  return build("from_block_cells", nullptr, cells_of_filler(fill, block_k), batch, heads, q_len, kv_len, block_q,
               block_k);
}

BlockMask BlockMask::from_block_cells(const BlockClassifier& classify, const BlockFiller& fill, int64_t batch,
                                      int64_t heads, int64_t q_len, int64_t kv_len, int block_q, int block_k) {
  return build("from_block_cells", &classify, cells_of_filler(fill, block_k), batch, heads, q_len, kv_len, block_q,
               block_k);
}

BlockMask BlockMask::from_dense(const uint8_t* grid, int64_t batch, int64_t heads, int64_t q_len,
                                int64_t kv_len, int block_q, int block_k) {
  BlockMask m = with_dims("from_dense", batch, heads, q_len, kv_len, block_q, block_k);
  const int64_t nrows = batch * heads * m.nqb_, nkb = m.nkb_;
  if (nrows * nkb > 0 && grid == nullptr)
    throw Error(ErrorCode::Shape, "BlockMask::from_dense: the grid pointer is null");

  // Every active block is full, so there are no bitmaps: count per row, prefix sum, fill; both
  // passes are parallel over rows where the grid is large enough to pay for waking the thread
  // team. (The H200 benchmark, sharing its cores with PyTorch's own OpenMP pool, measured 16 ms
  // for 64 x 64- and 128 x 128-block grids that a single thread reads in microseconds.)
  const bool parallel = nrows * nkb >= (int64_t{1} << 20);
  m.row_ptr_.assign(static_cast<size_t>(nrows + 1), 0);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < nrows; ++r) {
    const uint8_t* row = grid + r * nkb;
    m.row_ptr_[static_cast<size_t>(r + 1)] = nkb - std::count(row, row + nkb, uint8_t{0});
  }
  for (size_t r = 0; r < static_cast<size_t>(nrows); ++r) m.row_ptr_[r + 1] += m.row_ptr_[r];
  const auto n = static_cast<size_t>(m.row_ptr_.back());
  m.col_idx_.resize(n);
  m.full_.assign(n, 1);
  m.bitmap_ptr_.assign(n, -1);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < nrows; ++r) {
    const uint8_t* row = grid + r * nkb;
    auto e = static_cast<size_t>(m.row_ptr_[static_cast<size_t>(r)]);
    for (int64_t kb = 0; kb < nkb; ++kb)
      if (row[kb] != 0) m.col_idx_[e++] = static_cast<int32_t>(kb);
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

std::string BlockMask::to_string(int64_t b, int64_t h, int max_cells) const {
  if (max_cells < 1)
    throw Error(ErrorCode::Shape, fmt::format("BlockMask::to_string: max_cells must be >= 1 (got {})", max_cells));
  const int64_t bb = batch_ == 1 ? 0 : b, hh = heads_ == 1 ? 0 : h;
  if (bb < 0 || bb >= batch_ || hh < 0 || hh >= heads_)
    throw Error(ErrorCode::Shape, fmt::format("BlockMask::to_string: (b={}, h={}) is outside the mask "
                                              "(batch={}, heads={})",
                                              b, h, batch_, heads_));
  const auto row0 = static_cast<size_t>((bb * heads_ + hh) * nqb_);
  const auto e_begin = static_cast<size_t>(row_ptr_[row0]);
  const auto e_end = static_cast<size_t>(row_ptr_[row0 + static_cast<size_t>(nqb_)]);
  const auto nfull = std::count(full_.begin() + static_cast<ptrdiff_t>(e_begin),
                                full_.begin() + static_cast<ptrdiff_t>(e_end), uint8_t{1});
  const auto nactive = static_cast<int64_t>(e_end - e_begin);
  const int64_t blocks = nqb_ * nkb_;
  std::string out = fmt::format(
      "BlockMask b={} h={} (batch {}, heads {}): q_len {}, kv_len {}, block {}x{} (grid {} x {}), "
      "density {:.3g}% ({} full '#', {} partial '+', {} inactive '.')\n",
      b, h, batch_, heads_, q_len_, kv_len_, block_q_, block_k_, nqb_, nkb_,
      blocks == 0 ? 0.0 : 100.0 * static_cast<double>(nactive) / static_cast<double>(blocks), nfull,
      nactive - nfull, blocks - nactive);

  // Each character stands for fq x fk blocks; in a group the strongest state wins, so a lone
  // active block in a sea of inactive ones still shows (what one looks for in a big mask).
  const int64_t fq = std::max<int64_t>(1, ceil_div(nqb_, max_cells));
  const int64_t fk = std::max<int64_t>(1, ceil_div(nkb_, max_cells));
  if (fq > 1 || fk > 1)
    out += fmt::format("(downsampled: one character = {} x {} blocks, showing the strongest of them: "
                       "# over + over .)\n",
                       fq, fk);
  static constexpr char kGlyph[] = {'.', '+', '#'};
  std::vector<uint8_t> line(static_cast<size_t>(ceil_div(nkb_, fk)));
  for (int64_t g = 0; g * fq < nqb_; ++g) {
    std::fill(line.begin(), line.end(), 0);
    for (int64_t qb = g * fq; qb < std::min(nqb_, (g + 1) * fq); ++qb) {
      const auto r = row0 + static_cast<size_t>(qb);
      for (auto e = static_cast<size_t>(row_ptr_[r]); e < static_cast<size_t>(row_ptr_[r + 1]); ++e) {
        uint8_t& c = line[static_cast<size_t>(col_idx_[e] / fk)];
        c = std::max<uint8_t>(c, full_[e] ? 2 : 1);
      }
    }
    for (uint8_t c : line) out += kGlyph[c];
    out += '\n';
  }
  return out;
}

}  // namespace attnfuse
