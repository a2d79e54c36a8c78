// CudaKernel::plan: which compiled variant a call takes (decode or prefill tile, paged copies,
// block-sparse modules), its split count, grid and dependent launch (cuda_backend.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "attnfuse/error.hpp"
#include "passes/split_kv.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_backend_internal.hpp"
#include "runtime/cuda_knobs.hpp"
#include "runtime/device_block_mask.hpp"
#include "runtime/sparse_work.hpp"

namespace attnfuse::runtime {

namespace {

// Block-sparse prefill: a one-dimensional grid over the mask's work list (runtime/sparse_work.hpp),
// whose rows longer than the average load of one resident block are cut into parts (a forced
// split count cuts every row into that many). The list is made for the mask the kernel reads
// (tile_block_mask: coarsened to the tile when finer) and kept with it.
LaunchPlan plan_sparse(LaunchPlan pl, const LoadedModule& m, const CallShape& c, const BlockMask& given,
                       const LaunchTuning& tuning) {
  const int bm = m.spec.tile.block_q, bn = m.spec.tile.block_k;
  const BlockMask* mask = tile_block_mask(given, bm, bn);
  if (!mask || mask->block_q() % bm != 0 || mask->block_k() % bn != 0)
    throw Error(ErrorCode::Unsupported,
                fmt::format("the BlockMask's blocks ({} x {}) must be multiples or divisors of the CUDA kernel's "
                            "tile ({} x {}) for this program; build the mask with block sizes that are (128 x 128 "
                            "always works)", given.block_q(), given.block_k(), bm, bn));
  SparseWorkShape shape;
  shape.sub = mask->block_k() / bn;
  shape.per_row = (mask->batch() == 1 ? c.B : 1) * (mask->heads() == 1 ? c.Hq : 1) * (mask->block_q() / bm);
  if (tuning.num_splits > 0) {
    shape.forced_parts = tuning.num_splits;
  } else {
    const int64_t total = static_cast<int64_t>(mask->csr().cols.size()) * shape.sub * shape.per_row;
    shape.cap_tiles = sparse_cap_tiles(total, int64_t{device_info().multiprocessors} * blocks_per_sm(m));
  }
  const DeviceSparseWork& work = sparse_work(*mask, shape);
  const int64_t blocks = work.num_items * shape.per_row;
  if (blocks > INT32_MAX)
    throw Error(ErrorCode::Shape, "the call's grid exceeds CUDA's limits (2^31 - 1 blocks of block-sparse work)");
  pl.module = &m;
  pl.num_splits = 1;
  pl.sparse_work = &work;
  pl.grid[0] = static_cast<unsigned>(blocks);
  return pl;
}

}  // namespace

LaunchPlan CudaKernel::plan(const AttentionArgs& args, const ScalarArgs& scalars, const LaunchTuning& tuning) const {
  const CallShape c = call_shape(args);
  LaunchPlan pl;
  pl.kv_layout = args.paged ? KvLayout::Paged : KvLayout::Contiguous;
  const BlockMask* mask = args.block_mask;
  const int64_t ratio = c.Hkv > 0 ? c.Hq / c.Hkv : 1;
  // GQA packing puts several heads in one tile: a per-head BlockMask would differ across its rows.
  const bool packable = !(mask && mask->heads() > 1 && ratio > 1);
  if (tuning.variant == LaunchTuning::Variant::Decode) {
    if (!packable)
      throw Error(ErrorCode::Unsupported, "the decode variant packs a GQA group's heads into one tile, "
                                          "which a per-head BlockMask cannot share; use a head-broadcast mask");
    pl.decode = true;
  } else {
    pl.decode = tuning.variant == LaunchTuning::Variant::Auto && packable && c.queries <= kDecodeMaxQueries;
  }
  pl.rope_mode = spec_.score == ScoreKind::ScaledDot ? spec_.rope_mode : rope_mode_for(args, scalars, pl.decode);
  const int64_t group = pl.decode ? ratio : 1;
  const int64_t decode_rows = pl.decode ? group * c.queries : 0;
  // How the decode tiles copy a paged cache's pages: by TMA on Hopper where the page size is a
  // multiple of 8 rows (boxes of 64 rows or more where it is a multiple of 64), else cp.async.
  PageCopy pages = PageCopy::TmaSmallBoxes;
  if (args.paged) {
    const int64_t ps = args.paged->page_size();
    pages = ps % 8 != 0 || !paged_tma_enabled() ? PageCopy::CpAsync
            : ps % 64 == 0                      ? PageCopy::TmaLargeBoxes
                                                : PageCopy::TmaSmallBoxes;
  }
  // Unsplit paged calls copy their pages as split ones do: on the H200 8B B32 / 32k went from the
  // padded cp.async module's 1.0534 / 1.0505 ms at pages of 16 / 64 to 0.9683 / 0.9633 by TMA
  // (contiguous 0.94; bench/results/2026-12-02-h200-session16/). ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=0
  // keeps them on the padded module. (Contiguous caches ignore the page copy.)
  const LoadedModule* m = &module(pl.rope_mode, decode_rows, pl.kv_layout, false,
                                  paged_tma_unsplit_enabled() ? pages : PageCopy::CpAsync);
  const int bm = m->spec.tile.block_q, bn = m->spec.tile.block_k;
  const int64_t heads = pl.decode ? c.Hkv : c.Hq;
  const int64_t slots = args.cu_seqlens_q ? group * c.Nq / bm + c.docs : (group * c.Nq + bm - 1) / bm;
  if (mask && !pl.decode && !args.cu_seqlens_q) {
    // Masks of 64-row blocks at D = 64 take the 64-row tile, which reads them as they are.
    // Other masks whose blocks leave some of the tile's 64-row groups without cells (finer than
    // the tile, coarsened to it) take the module whose warpgroups skip those blocks; the same
    // loop cost full-block masks 7%, hence the per-call choice. On the H200, BigBird at
    // 64-blocks (4k, GPT-2 heads): 0.224 ms coarsened, 0.116 with the skips, 0.098 on the 64-row
    // tile (bench/results/2026-12-04-h200-session29/, call3 and call5). Plain scores only: the
    // GPU tests cover neither module with prerotated rope or rope_window, which keep the plain one.
    if (m->spec.tile.wgmma && spec_.masks.has(MaskKind::BlockSparse) && spec_.score == ScoreKind::ScaledDot) {
      // (`all` judges every mask of 64-row multiples as if its blocks were 64 rows.)
      const Sparse64Rows rule = sparse_64_rows_mode();
      const bool rows64 = rule != Sparse64Rows::Off && mask->block_q() % 64 == 0 &&
                          passes::cuda_sparse_64_rows(spec_, m->spec.tile, rule == Sparse64Rows::All ? 64 : mask->block_q(),
                                                      mask->block_k());
      const BlockMask* tiled = rows64 ? nullptr : tile_block_mask(*mask, bm, bn);
      if (rows64) m = &rows64_module(pl.rope_mode);
      else if (tiled && upload_block_mask(*tiled).group_states) m = &row_group_module(pl.rope_mode);
    }
    return plan_sparse(pl, *m, c, *mask, tuning);
  }
  // The key tiles a block visits with tiles of `block_k` keys.
  const auto tiles_of = [&](int block_k) -> int64_t {
    if (mask && mask->num_q_blocks() > 0) {
      const int64_t rows = mask->batch() * mask->heads() * mask->num_q_blocks();
      // Active key blocks per row, in tiles (a mask finer than the tile gives fractions of one).
      const int64_t cols = static_cast<int64_t>(mask->csr().cols.size());
      return std::max<int64_t>(cols > 0, cols * mask->block_k() / (std::max<int64_t>(rows, 1) * block_k));
    }
    return (c.mean_nk + block_k - 1) / block_k;
  };
  const int64_t key_tiles = tiles_of(bn);
  const int forced = tuning.num_splits > 0 ? tuning.num_splits
                                           : (pl.decode ? decode_splits_override().value_or(0) : 0);
  const auto choose = [&](const LoadedModule& k) {
    return forced > 0 ? forced
                      : passes::choose_num_splits({std::max<int64_t>(slots, 1) * heads * c.B,
                                                   tiles_of(k.spec.tile.block_k), device_info().multiprocessors,
                                                   blocks_per_sm(k), pl.decode && args.cu_seqlens_k.has_value()});
  };
  int splits = choose(*m);
  // A split narrow decode call may take a deeper tile (passes::cuda_decode_tile): its blocks stream
  // few key tiles each. Same rows, so only the split count is chosen again, for its occupancy and
  // its key tiles. Paged K/V:
  //  - copied by TMA (Hopper, pages of a multiple of 8 rows): the deep module whatever the parts'
  //    length, in 128-key tiles where the boxes hold 64 rows or more at D = 128. On the H200, 8B
  //    B8 / 32k (parts of ~85 64-key tiles): pages of 16 0.2723 -> 0.2522 ms (contiguous 0.2399;
  //    bench/results/2026-12-02-h200-session16/), pages of 64 0.2831 -> 0.2506 (session15/call2);
  //  - copied by cp.async: the deep module only where the parts are short (kPagedDeepMaxTiles,
  //    judged on the two-stage split so that longer calls never compile it). Its three stages
  //    were 17-20% slower over long parts (passes/tile_sizes.hpp).
  // (Hopper's 128-key tile goes from two stages to three here too; overridden tiles resolve to
  // the same module: nothing to redo.)
  const bool long_parts_ok = pl.kv_layout == KvLayout::Contiguous || decode_tma(pl.rope_mode, pl.kv_layout, pages);
  const bool deep_fits = long_parts_ok || (key_tiles + splits - 1) / std::max(splits, 1) <=
                                              paged_deep_max_tiles_override().value_or(passes::kPagedDeepMaxTiles);
  if (splits > 1 && decode_rows > 0 && deep_fits) {
    const LoadedModule& deep = module(pl.rope_mode, decode_rows, pl.kv_layout, true, pages);
    if (&deep != m) {
      if (const int s = choose(deep); s > 1) m = &deep, splits = s;
    }
  }
  // Short split parts over boxes of 8-32 rows: the producer warp and 128-key tiles
  // (kPagedProducerMaxKeys). Same rows again, so only the split count is chosen anew. (Where
  // decode_tma holds for the small boxes it holds for the produced form, which then always
  // resolves with the producer warp.)
  if (args.paged && splits > 1 && decode_rows > 0 && decode_rows <= 16 && pages == PageCopy::TmaSmallBoxes &&
      decode_tma(pl.rope_mode, pl.kv_layout, pages) && !decode_tile_override() &&
      (tiles_of(m->spec.tile.block_k) + splits - 1) / splits * m->spec.tile.block_k <= kPagedProducerMaxKeys) {
    const LoadedModule& produced = module(pl.rope_mode, decode_rows, pl.kv_layout, true, PageCopy::TmaSmallBoxesProduced);
    if (const int s = choose(produced); s > 1) m = &produced, splits = s;
  }
  pl.module = m;
  pl.num_splits = std::clamp(splits, 1, passes::kMaxSplits);
  pl.merge_in_kernel = pl.num_splits > 1 && pl.decode && !tuning.combine_kernel;
  using Dependent = LaunchTuning::DependentLaunch;
  const int64_t block_keys = (tiles_of(m->spec.tile.block_k) + pl.num_splits - 1) / pl.num_splits * m->spec.tile.block_k;
  pl.dependent_launch = dependent_launch_enabled() && dependent_launch_available() &&
                        (tuning.dependent_launch == Dependent::On ||
                         (tuning.dependent_launch == Dependent::Auto && pl.decode && block_keys <= kDependentLaunchMaxKeys));
  // Bias programs put the batch entries in x, next to each other (work.cuh, init): a bias
  // broadcast over the batch is read from DRAM once per query tile, L2 serving the other entries.
  const bool batch_in_x = spec_.needs_bias();
  const int64_t grid_x = std::max<int64_t>(slots, 1) * pl.num_splits * (batch_in_x ? c.B : 1);
  if (grid_x > INT32_MAX || heads > 65535 || c.B > 65535)
    throw Error(ErrorCode::Shape, "the call's grid exceeds CUDA's limits (2^31 - 1 query tiles x splits, "
                                  "65535 heads and batches)");
  pl.grid[0] = static_cast<unsigned>(grid_x);
  pl.grid[1] = static_cast<unsigned>(heads);
  pl.grid[2] = static_cast<unsigned>(batch_in_x ? 1 : c.B);
  return pl;
}

}  // namespace attnfuse::runtime
