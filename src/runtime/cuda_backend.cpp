// Compile, cache, load and launch the generated CUDA kernels.
#include "runtime/cuda_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <tuple>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <unordered_map>

#include "attnfuse/error.hpp"
#include "attnfuse/version.hpp"
#include "codegen/cuda/emit.hpp"
#include "codegen/cuda/kernels/params.cuh"
#include "common/sha256.hpp"
#include "passes/rope_placement.hpp"
#include "passes/split_kv.hpp"
#include "passes/tile_sizes.hpp"
#include "reference/reference.hpp"
#include "runtime/cuda_knobs.hpp"
#include "runtime/device_block_mask.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/kernel_sources.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/rope_args.hpp"
#include "runtime/stream_workspace.hpp"
#include "runtime/tma.hpp"

namespace attnfuse::runtime {
namespace {

// The in-memory key: exactly the structure the generated source depends on (never the scalars,
// so changing a window size or a slope does not recompile), packed into one integer so a warm
// lookup costs no allocation.
uint64_t structural_key(const KernelSpec& s, int arch) {
  uint64_t k = 0;
  auto put = [&k](uint64_t value, int bits) { k = (k << bits) | (value & ((1ull << bits) - 1)); };
  put(static_cast<uint64_t>(s.score), 2);
  put(s.masks.bits(), 4);
  put(s.modifiers.code(), 6);
  put(static_cast<uint64_t>(s.norm), 1);
  put(static_cast<uint64_t>(s.tile.block_q / 16), 5);  // multiples of 16, <= 496
  put(static_cast<uint64_t>(s.tile.block_k / 16), 5);
  put(static_cast<uint64_t>(s.tile.num_warps), 4);
  put(static_cast<uint64_t>(s.tile.key_warps > 1), 1);  // the narrow decode tile
  put(static_cast<uint64_t>(s.tile.stages), 3);
  put(static_cast<uint64_t>(s.dtype), 2);
  put(static_cast<uint64_t>(s.head_dim), 9);            // <= 256
  put(static_cast<uint64_t>(s.tile.wgmma), 1);          // the Hopper form
  put(static_cast<uint64_t>(s.tile.min_blocks), 2);     // 1-3 resident blocks per SM
  put(static_cast<uint64_t>(arch), 8);
  put(static_cast<uint64_t>(s.rope_mode), 2);         // the module of a resolved mode
  put(static_cast<uint64_t>(s.scalars.rope.style), 1);  // neox/gptj pairing is compiled in
  put(static_cast<uint64_t>(s.kv_layout), 1);           // paged K/V addressing
  put(static_cast<uint64_t>(s.tile.pack_gqa), 1);       // the decode variant
  put(static_cast<uint64_t>(s.tile.tma_kv), 1);         // ... with K/V by TMA
  put(static_cast<uint64_t>(s.tile.producer_warp), 1);  // ... issued by a producer warp
  put(static_cast<uint64_t>(s.tile.skip_row_groups), 1);  // block-sparse row groups skip
  return k;  // 61 bits
}

std::string describe(const KernelSpec& s) {
  std::string masks;
  for (MaskKind k : {MaskKind::Causal, MaskKind::SlidingWindow, MaskKind::BlockSparse, MaskKind::Document})
    if (s.masks.has(k)) masks += std::string(masks.empty() ? "" : "+") + mask_kind_name(k);
  std::string mods;
  for (int i = 0; i < s.modifiers.size(); ++i)
    mods += std::string(mods.empty() ? "" : "+") + modifier_kind_name(s.modifiers[i]);
  const std::string rope = s.score == ScoreKind::ScaledDot
                               ? ""
                               : fmt::format(" ({} {})", rope_style_name(s.scalars.rope.style),
                                             rope_mode_name(s.rope_mode));
  return fmt::format("{}{} {} [{}] [{}] {} D={} tile {}x{}{}{}{}{}{}", score_kind_name(s.score), rope,
                     norm_kind_name(s.norm), masks.empty() ? "full" : masks, mods,
                     dtype_name(s.dtype), s.head_dim, s.tile.block_q, s.tile.block_k,
                     s.tile.wgmma ? (s.tile.producer_warp ? " wgmma producer" : " wgmma") : "",
                     s.tile.min_blocks > 1 ? fmt::format(" x{}/SM", s.tile.min_blocks) : "",
                     s.tile.pack_gqa ? (s.tile.tma_kv ? (s.tile.producer_warp ? " decode tma producer" : " decode tma") : " decode") : "", s.kv_layout == KvLayout::Paged ? " paged" : "",
                     s.tile.skip_row_groups ? " row-group skips" : "");
}

}  // namespace

std::string cache_key(const KernelSpec& spec, int arch) {
  std::string material = codegen::cuda::emit_forward(spec);
  for (const auto& h : kernel_sources()) material += h.source;
  for (const auto& o : nvrtc_options(arch, NvrtcOutput::Cubin)) material += "\n" + o;
  material += "\nnvrtc " + nvrtc_version() + "\nattnfuse " ATTNFUSE_VERSION;
  return sha256_hex(material);
}

CompiledBinary compile_cuda(const KernelSpec& spec, int arch) {
  const std::string source = codegen::cuda::emit_forward(spec);
  const std::string key = cache_key(spec, arch);
  const DiskCache disk = DiskCache::from_environment();
  CompiledBinary out;
  if (auto hit = disk.load(key)) {
    out.cubin = std::move(*hit);
    out.from_disk = true;
    return out;
  }
  NvrtcResult r = nvrtc_compile(source, "attnfuse_" + key.substr(0, 16), arch, NvrtcOutput::Cubin);
  out.cubin = std::move(r.binary);
  out.registers = r.registers;
  out.spill_bytes = r.spill_bytes;
  out.compile_seconds = r.seconds;
  std::cerr << fmt::format("attnfuse: compiled {} for sm_{} in {:.2f} s ({} registers, {} spill bytes)\n",
                           describe(spec), arch, r.seconds, r.registers, r.spill_bytes);
  disk.store(key, out.cubin);
  return out;
}

namespace {

// Resident blocks per SM of a loaded kernel (shared memory, registers and threads bound it).
int blocks_per_sm(const LoadedModule& m) {
  const DeviceInfo& dev = device_info();
  int n = std::max(1, std::min(dev.max_blocks_per_sm, dev.max_threads_per_sm / std::max(m.threads, 32)));
  if (dev.max_shared_per_sm > 0) n = std::min(n, dev.max_shared_per_sm / (m.smem + 1024));
  if (dev.registers_per_sm > 0 && m.registers > 0) {
    const int regs_per_warp = (m.registers * 32 + 255) / 256 * 256;  // allocation unit: 256 per warp
    n = std::min(n, dev.registers_per_sm / (regs_per_warp * (m.threads / 32)));
  }
  return std::max(n, 1);
}

}  // namespace

CudaKernel::CudaKernel(const KernelSpec& spec) : spec_(spec) {
  for (auto& v : variants_) v.store(nullptr);
  for (auto& v : row_group_variants_) v.store(nullptr);
  for (auto& v : rows64_variants_) v.store(nullptr);
  prerotate_wgmma_ = spec_.score != ScoreKind::ScaledDot && resolved(RopeMode::Prerotate, 0, KvLayout::Contiguous).tile.wgmma;
}

RopeMode CudaKernel::default_mode() const {
  if (spec_.score == ScoreKind::ScaledDot) return spec_.rope_mode;
  return spec_.rope_mode == RopeMode::Auto ? RopeMode::Fused : spec_.rope_mode;
}

bool CudaKernel::decode_tma(RopeMode mode, KvLayout kv, PageCopy pages) const {
  // Hopper: K/V by TMA where the tiles are plain copies (no rotation or pair pruning in shared
  // memory, whole 64-dim column blocks; packed documents included), and for paged caches only
  // where the page size is a multiple of 8 rows: the cp.async fallback inside a TMA module reads
  // pages slower than the padded module does (70B B1 / 32k 0.0568 against 0.0508 ms,
  // bench/results/2026-12-02-h200-session13/call4/).
  // sm_90 only: the copy-engine and mbarrier primitives are compiled for sm_90a alone
  // (wgmma.cuh, ATTNFUSE_WGMMA), so on newer GPUs they would be empty and the tile never filled.
  return device_info().arch() == 90 && decode_tma_enabled() &&
         (kv == KvLayout::Contiguous || pages != PageCopy::CpAsync) &&
         spec_.score != ScoreKind::RopeWindow && !codegen::cuda::rotates_in_kernel(spec_.score, mode) &&
         spec_.head_dim % 64 == 0 && spec_.head_dim <= 128 && (spec_.dtype == DType::BF16 || spec_.dtype == DType::F16);
}

KernelSpec CudaKernel::resolved(RopeMode mode, int64_t decode_rows, KvLayout kv, bool split, PageCopy pages) const {
  KernelSpec r = spec_;
  r.rope_mode = mode;
  r.kv_layout = kv;
  if (decode_rows > 0) {
    const bool tma = decode_tma(mode, kv, pages);
    r.tile = decode_tile_override().value_or(
        passes::cuda_decode_tile(spec_.head_dim, decode_rows, split,
                                 passes::cuda_decode_wide_keys(tma, kv == KvLayout::Paged,
                                                               pages == PageCopy::TmaLargeBoxes ||
                                                                   pages == PageCopy::TmaSmallBoxesProduced),
                                 kv == KvLayout::Paged));
    if (spec_.score == ScoreKind::RopeWindow) r.tile.stages = 2;  // its pair plan runs one tile ahead
    r.tile.tma_kv = tma;
    r.tile.producer_warp =
        tma && (decode_producer_enabled() || (kv == KvLayout::Paged && pages == PageCopy::TmaSmallBoxesProduced));
  }
  else if (spec_.score != ScoreKind::ScaledDot && !tile_override()) r.tile = passes::cuda_tile_for_rope_mode(spec_, mode);
  if (decode_rows <= 0 && !tile_override() && wgmma_enabled()) r.tile = passes::cuda_arch_tile(r, device_info().arch());
  if (decode_rows <= 0 && r.tile.wgmma && !wgmma_producer_enabled()) r.tile.producer_warp = false;
  if (const auto& w = wgmma_tile_override(); w && r.tile.wgmma) {
    r.tile.block_k = w->block_k;
    r.tile.min_blocks = w->min_blocks;
    if (w->stages) r.tile.stages = w->stages;
    if (w->block_q && r.head_dim == 64 && !r.masks.has(MaskKind::BlockSparse)) {
      r.tile.block_q = w->block_q;
      r.tile.num_warps = w->block_q / 16;
    }
  }
  // The tile overrides are taken as given (a sweep must time what it names).
  const bool overridden = decode_rows > 0 ? decode_tile_override().has_value() : tile_override().has_value();
  if (!overridden) r = fit_shared_memory(r, device_info().max_shared_per_block);
  return r;
}

KernelSpec fit_shared_memory(KernelSpec spec, int max_bytes) {
  TileConfig& t = spec.tile;
  if (t.wgmma) return spec;
  while (codegen::cuda::shared_memory_bytes(spec) > max_bytes) {
    if (t.stages > 2) {
      --t.stages;
    } else if (t.block_k > 16 * t.key_warps) {  // each key-split warp keeps 16 keys at least
      t.block_k /= 2;
    } else if (t.key_warps > 1) {  // the same rows over half the warps, each with 16 keys
      t.key_warps /= 2;
      t.num_warps /= 2;
      t.block_k /= 2;
    } else if (t.num_warps > 1 && t.block_q > 16) {  // half the rows, the same rows per warp
      t.block_q /= 2;
      t.num_warps /= 2;
    } else {
      break;
    }
  }
  return spec;
}

namespace {

// The module in `slot`: compiled from make_spec() and stored there on first use. Thread-safe:
// callers that race both get load_module's one cached module.
template <class MakeSpec>
const LoadedModule& load_once(std::atomic<const LoadedModule*>& slot, MakeSpec&& make_spec) {
  if (const LoadedModule* m = slot.load(std::memory_order_acquire)) return *m;
  const LoadedModule& m = load_module(make_spec());
  slot.store(&m, std::memory_order_release);
  return m;
}

}  // namespace

const LoadedModule& CudaKernel::module(RopeMode mode, int64_t decode_rows, KvLayout kv, bool split,
                                       PageCopy pages) const {
  // prefill, narrow or wide decode tile, narrow decode tile of a split call
  const int shape = decode_rows <= 0 ? 0 : (decode_rows > 16 ? 2 : (split ? 3 : 1));
  const int kv_slot = kv == KvLayout::Contiguous ? 0 : 1 + static_cast<int>(pages);
  return load_once(variants_[static_cast<int>(mode) + 3 * shape + 12 * kv_slot], [&] {
    return resolved(mode, shape == 2 ? 64 : (shape == 0 ? 0 : 16), kv, shape == 3, pages);
  });
}

const LoadedModule& CudaKernel::row_group_module(RopeMode mode) const {
  return load_once(row_group_variants_[static_cast<int>(mode)], [&] {
    KernelSpec r = resolved(mode, 0, KvLayout::Contiguous);
    r.tile.skip_row_groups = r.tile.wgmma && r.masks.has(MaskKind::BlockSparse);
    return r;
  });
}

const LoadedModule& CudaKernel::rows64_module(RopeMode mode) const {
  return load_once(rows64_variants_[static_cast<int>(mode)], [&] {
    KernelSpec r = resolved(mode, 0, KvLayout::Contiguous);
    r.tile = passes::cuda_wgmma_64_rows(r.tile);
    return r;
  });
}

RopeMode CudaKernel::rope_mode_for(const AttentionArgs& args, const ScalarArgs& scalars, bool decode) const {
  if (spec_.score == ScoreKind::ScaledDot) return spec_.rope_mode;
  // Documents and paged caches rotate in the kernel: positions restart per document / follow
  // each sequence, which the rotation kernel's flat rows do not know.
  if (args.paged || args.cu_seqlens_k) {
    if (spec_.rope_mode == RopeMode::Prerotate)
      throw Error(ErrorCode::Unsupported, "rope_mode=prerotate is not supported with paged KV caches or "
                                          "document masks on CUDA; use fused or auto");
    return RopeMode::Fused;
  }
  if (spec_.rope_mode != RopeMode::Auto) return spec_.rope_mode;
  passes::RopeCallShape shape{args.q.shape[0], args.q.shape[1], args.k.shape[1], args.q.shape[2],
                              args.k.shape[2], spec_.head_dim, args.resolved_q_offset(),
                              spec_.masks.has(MaskKind::Causal),
                              spec_.masks.has(MaskKind::SlidingWindow) ? scalars.window : 0};
  // On Hopper the prerotated prefill runs the wgmma form while the fused rotation stays on
  // mma.sync: the model of that pairing (the decode tiles are mma.sync in both placements).
  return passes::choose_rope_mode(shape, passes::rope_cost_model_h200(!decode && prerotate_wgmma_));
}

namespace {

// Shapes of a call whatever holds K and V.
struct CallShape {
  int64_t B, Hq, Nq, Hkv;
  int64_t mean_nk;  // keys per sequence (the mean over a paged batch or over documents)
  int64_t docs;     // documents (1 without)
  int64_t queries;  // queries per sequence (queries_per_sequence)
};

CallShape call_shape(const AttentionArgs& a) {
  CallShape c{a.q.shape[0], a.q.shape[1], a.q.shape[2], a.k.shape[1], a.k.shape[2], 1, 0};
  if (a.paged) {
    const PagedKV& pk = *a.paged;
    c.Hkv = pk.heads();
    c.mean_nk = c.B > 0 ? static_cast<int64_t>(pk.page_indices.size()) * pk.page_size() / c.B : 0;
  }
  if (a.cu_seqlens_k) {
    c.docs = std::max<int64_t>(a.cu_seqlens_k->length - 1, 1);
    c.mean_nk = c.mean_nk / c.docs;
  }
  c.queries = queries_per_sequence(c.Nq, c.docs);
  return c;
}

}  // namespace

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
                                                   blocks_per_sm(k)});
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
  const int64_t grid_x = std::max<int64_t>(slots, 1) * pl.num_splits;
  if (grid_x > INT32_MAX || heads > 65535 || c.B > 65535)
    throw Error(ErrorCode::Shape, "the call's grid exceeds CUDA's limits (2^31 - 1 query tiles x splits, "
                                  "65535 heads and batches)");
  pl.grid[0] = static_cast<unsigned>(grid_x);
  pl.grid[1] = static_cast<unsigned>(heads);
  pl.grid[2] = static_cast<unsigned>(c.B);
  return pl;
}

namespace {

void check_rows_16b(const TensorView& t, const char* name, std::initializer_list<int> dims) {
  bool ok = reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
  for (int d : dims) ok = ok && t.strides[size_t(d)] % 8 == 0;
  if (!ok)
    throw Error(ErrorCode::Shape,
                fmt::format("{} must be 16-byte aligned with strides (other than the last) that are multiples "
                            "of 8 elements on CUDA (strides {}, {}, {})",
                            name, t.strides[0], t.strides[1], t.strides[2]));
}

}  // namespace

void CudaKernel::launch(const AttentionArgs& args, const ScalarArgs& scalars, CUstream stream,
                        const LaunchTuning& tuning) const {
  validate(spec_, scalars, args, IndexMemory::Device);  // spec_'s own scalars are the first program's
  if (args.q.dtype != spec_.dtype)
    throw Error(ErrorCode::DType, fmt::format("kernel compiled for {} but Q is {}", dtype_name(spec_.dtype),
                                              dtype_name(args.q.dtype)));
  const TensorView& kv_v = args.paged ? args.paged->v_pages : args.v;
  if (args.q.shape[3] != spec_.head_dim || kv_v.shape[3] != spec_.head_dim)
    throw Error(ErrorCode::Shape, fmt::format("kernel compiled for head dim {} but Q has {} and V has {}",
                                              spec_.head_dim, args.q.shape[3], kv_v.shape[3]));
  const CallShape c = call_shape(args);
  const int64_t B = c.B, Hq = c.Hq, Nq = c.Nq, Hkv = c.Hkv;
  const int64_t Nk = args.paged ? static_cast<int64_t>(args.paged->page_indices.size()) * args.paged->page_size()
                                : args.k.shape[2];
  if (B == 0 || Hq == 0 || Nq == 0) return;
  if (Nq > INT32_MAX || Nk > INT32_MAX || Hq > 65535 || B > 65535)
    throw Error(ErrorCode::Shape, "the CUDA backend takes up to 2^31-1 rows and 65535 heads/batches");
  // Tiles move with 16-byte cp.async copies: every row of Q, K and V must start 16-byte aligned.
  check_rows_16b(args.q, "Q", {0, 1, 2});
  if (args.paged) {
    check_rows_16b(args.paged->k_pages, "k_pages", {0, 1, 2});
    check_rows_16b(args.paged->v_pages, "v_pages", {0, 1, 2});
  } else {
    check_rows_16b(args.k, "K", {0, 1, 2});
    check_rows_16b(args.v, "V", {0, 1, 2});
  }
  // O is stored two dims per 32-bit store at b * s0 + h * s1 + i * s2 (the epilogue and the split
  // merge), so every row must start 4-byte aligned: the base and all three strides.
  if (args.out.strides[0] % 2 || args.out.strides[1] % 2 || args.out.strides[2] % 2 ||
      reinterpret_cast<uintptr_t>(args.out.data) % 4 != 0)
    throw Error(ErrorCode::Shape, fmt::format("O must be 4-byte aligned with even strides on CUDA (strides {}, {}, {})",
                                              args.out.strides[0], args.out.strides[1], args.out.strides[2]));
  // The kernel computes positions in 32 bits (one register per cell): every query position
  // i + q_offset and every key position must fit.
  const int64_t q_offset = args.paged ? args.q_offset.value_or(0) : args.resolved_q_offset();
  if (q_offset + Nq > INT32_MAX || q_offset < -int64_t{INT32_MAX} + Nk)
    throw Error(ErrorCode::Shape, fmt::format("q_offset {} puts query positions outside the 32-bit range "
                                              "the CUDA kernel uses", q_offset));
  // rope_window's per-cell window test compares Δ ± limit in 32 bits (fwd_wgmma.cuh
  // correct_window): positions strictly within ±2^29 keep every |Δ| and limit it compares below
  // 2^30.
  constexpr int64_t kWindowPositions = int64_t{1} << 29;
  if (spec_.score == ScoreKind::RopeWindow &&
      (q_offset <= -kWindowPositions || q_offset + Nq > kWindowPositions || Nk > kWindowPositions))
    throw Error(ErrorCode::Unsupported,
                fmt::format("rope_window on CUDA takes query and key positions within ±2^29 (q_offset {}, Nq {}, "
                            "Nk {}); run it on the CPU",
                            q_offset, Nq, Nk));
  if (spec_.modifiers.has(ModifierKind::Alibi) && scalars.alibi == AlibiSlopes::Custom)
    throw Error(ErrorCode::Unsupported, "custom ALiBi slopes on CUDA are not supported yet; use slopes=standard");
  const bool rope = spec_.score != ScoreKind::ScaledDot;
  const bool device_lengths = args.paged || args.cu_seqlens_k;  // lengths the host cannot read
  if (rope && device_lengths &&
      (scalars.rope.rope_type == RopeScaling::Dynamic || scalars.rope.rope_type == RopeScaling::Longrope))
    throw Error(ErrorCode::Unsupported,
                "dynamic and longrope scalings depend on the sequence length, which a CUDA call with a paged "
                "cache or documents keeps in device memory; run it on the CPU or use a static scaling");

  const LaunchPlan pl = plan(args, scalars, tuning);
  const LoadedModule& m = *pl.module;

  attnfuse_kernels::FwdParams p{};
  p.q = args.q.data;
  p.o = args.out.data;
  p.lse = args.lse ? args.lse->data : nullptr;
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = args.q.strides[i];
    p.o_stride[i] = args.out.strides[i];
  }
  if (args.paged) {
    const PagedKV& pk = *args.paged;
    p.k = pk.k_pages.data;
    p.v = pk.v_pages.data;
    const auto ks = pk.strides(pk.k_pages), vs = pk.strides(pk.v_pages);
    for (int i = 0; i < 3; ++i) p.page_stride_k[i] = ks[size_t(i)], p.page_stride_v[i] = vs[size_t(i)];
    p.page_indices = pk.page_indices.data();
    p.page_indptr = pk.page_indptr.data();
    p.last_page_len = pk.last_page_len.data();
    p.page_size = static_cast<int>(pk.page_size());
    const auto ps = static_cast<unsigned>(p.page_size);
    p.page_shift = std::has_single_bit(ps) ? std::countr_zero(ps) : -1;
    p.q_offset_given = args.q_offset.has_value();
    p.page_table_settled = pk.table_settled;
  } else {
    p.k = args.k.data;
    p.v = args.v.data;
    for (int i = 0; i < 3; ++i) p.k_stride[i] = args.k.strides[i], p.v_stride[i] = args.v.strides[i];
  }
  if (args.lse) {
    p.lse_stride[0] = args.lse->strides[0];
    p.lse_stride[1] = args.lse->strides[1];
  }
  if (spec_.needs_bias()) {
    const TensorView& bias = *args.bias;
    p.bias = static_cast<const float*>(bias.data);
    p.bias_stride[0] = bias.shape[0] == 1 ? 0 : bias.strides[0];
    p.bias_stride[1] = bias.shape[1] == 1 ? 0 : bias.strides[1];
    p.bias_stride[2] = bias.strides[2];
  }
  if (args.cu_seqlens_q) {
    const SeqOffsetsView &cq = *args.cu_seqlens_q, &ck = *args.cu_seqlens_k;
    if (cq.type != ck.type || cq.batch != ck.batch || cq.batch_stride != ck.batch_stride)
      throw Error(ErrorCode::Unsupported, "on CUDA cu_seqlens_q and cu_seqlens_k must share their integer type, "
                                          "batch rows and batch stride");
    p.cu_q = cq.data;
    p.cu_k = ck.data;
    p.cu_is_i64 = cq.type == SeqOffsetsView::Type::I64;
    p.num_docs = static_cast<int>(cq.length - 1);
    p.cu_batch_stride = cq.batch == 1 ? 0 : cq.batch_stride;
  }
  if (const BlockMask* given = args.block_mask) {
    const int bm = m.spec.tile.block_q, bn = m.spec.tile.block_k;
    // Prefill takes masks finer than its tile through their coarsening to it; the decode tile
    // needs one query block over all of its rows.
    const BlockMask* mask = pl.decode ? given : tile_block_mask(*given, bm, bn);
    const bool rows_fit = mask && (pl.decode ? mask->block_q() >= Nq && mask->block_q() % bm == 0 : mask->block_q() % bm == 0);
    if (!rows_fit || mask->block_k() % bn != 0)
      throw Error(ErrorCode::Unsupported,
                  fmt::format("the BlockMask's blocks ({} x {}) must be multiples or divisors of the CUDA "
                              "kernel's tile ({} x {}) for this program{}; build the mask with block sizes that "
                              "are (128 x 128 always works)", given->block_q(), given->block_k(), bm, bn,
                              pl.decode ? " (the decode tile: multiples, with one query block over every query)" : ""));
    const DeviceBlockMask& dm = upload_block_mask(*mask);
    p.bs_row_ptr = dm.row_ptr;
    p.bs_cols = dm.cols;
    p.bs_state = dm.state;
    p.bs_bits_ptr = reinterpret_cast<const af_i64*>(dm.bits_ptr);
    p.bs_bits = reinterpret_cast<const unsigned long long*>(dm.bits);
    p.bs_block_q = mask->block_q();
    p.bs_block_k = mask->block_k();
    p.bs_nqb = static_cast<int>(mask->num_q_blocks());
    p.bs_batch = static_cast<int>(mask->batch());
    p.bs_heads = static_cast<int>(mask->heads());
    p.bs_work = pl.sparse_work ? reinterpret_cast<const int*>(pl.sparse_work->items) : nullptr;
  }
  p.batch = static_cast<int>(B);
  p.heads_q = static_cast<int>(Hq);
  p.heads_kv = static_cast<int>(Hkv);
  p.len_q = static_cast<int>(Nq);
  p.len_k = static_cast<int>(args.paged ? 0 : Nk);
  p.head_ratio = static_cast<int>(Hq / Hkv);
  p.q_offset = q_offset;
  const double scale = scalars.scale ? *scalars.scale : 1.0 / std::sqrt(double(spec_.head_dim));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  p.softcap = static_cast<float>(scalars.softcap);
  p.inv_softcap = scalars.softcap > 0 ? static_cast<float>(1.0 / scalars.softcap) : 0.f;
  p.window = static_cast<int>(std::min<int64_t>(scalars.window, INT32_MAX));
  if (rope) {
    p.rope = rope_args(scalars.rope, spec_.score == ScoreKind::RopeWindow, spec_.head_dim,
                       device_lengths ? 0 : reference::rope_seq_len(args));
    if (const auto& t = args.rope_tables) {  // device memory, [positions, half]
      p.rope.cos_table = t->cos;
      p.rope.sin_table = t->sin;
      p.rope.table_positions = static_cast<int>(std::min<int64_t>(t->positions, INT32_MAX));
    }
  }

  if (rope && pl.rope_mode == RopeMode::Prerotate) {
    // Rotate Q and K once into contiguous copies, then run the plain kernel on them.
    const int64_t D = spec_.head_dim;
    const int64_t q_rows = B * Hq * Nq, k_rows = B * Hkv * Nk;
    const size_t q_bytes = static_cast<size_t>(q_rows * D * 2);
    char* ws = static_cast<char*>(
        stream_workspace(stream, kRopeWorkspace, q_bytes + static_cast<size_t>(k_rows * D * 2)));
    attnfuse_kernels::RotateParams r{};
    r.src[0] = args.q.data;
    r.src[1] = args.k.data;
    r.dst[0] = ws;
    r.dst[1] = ws + q_bytes;
    for (int i = 0; i < 3; ++i) {
      r.src_stride[0][i] = args.q.strides[i];
      r.src_stride[1][i] = args.k.strides[i];
    }
    r.heads[0] = static_cast<int>(Hq);
    r.heads[1] = static_cast<int>(Hkv);
    r.len[0] = static_cast<int>(Nq);
    r.len[1] = static_cast<int>(Nk);
    r.rows[0] = q_rows;
    r.rows[1] = k_rows;
    r.pos0[0] = q_offset;
    r.pos0[1] = 0;
    r.rope = p.rope;
    // The 16-byte path needs whole pairs in every 8-element chunk and aligned rows.
    const bool neox = spec_.scalars.rope.style == RopeStyle::Neox;
    const int half = r.rope.half;
    auto aligned = [](const TensorView& t) {
      return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.strides[0] % 8 == 0 && t.strides[1] % 8 == 0 &&
             t.strides[2] % 8 == 0;
    };
    r.vec = half % (neox ? 8 : 4) == 0 && (D - 2 * half) % 8 == 0 && aligned(args.q) && aligned(args.k);
    const int64_t units = r.vec ? (B * Nq + B * Nk) * D / 8 : (q_rows + k_rows) * D / 2;
    const int64_t max_blocks = int64_t{device_info().multiprocessors} * 16;
    const auto blocks = static_cast<unsigned>(
        std::clamp<int64_t>((units + codegen::cuda::kRotateThreads - 1) / codegen::cuda::kRotateThreads, 1, max_blocks));
    void* rparams[] = {&r};
    launch_kernel(m.rotate, {blocks, 1, 1}, codegen::cuda::kRotateThreads, 0, stream, rparams, pl.dependent_launch,
                  "cuLaunchKernel (rope rotation)");
    p.q = r.dst[0];
    p.k = r.dst[1];
    p.q_stride[0] = Hq * Nq * D, p.q_stride[1] = Nq * D, p.q_stride[2] = D;
    p.k_stride[0] = Hkv * Nk * D, p.k_stride[1] = Nk * D, p.k_stride[2] = D;
  }

  if (codegen::cuda::uses_tma(m.spec) && tma_enabled()) {
    const int bn = m.spec.tile.block_k;
    // The decode stream reads each K/V byte once, so the L2 fetching 256 bytes around a request
    // only adds fills where a D = 128 row's two 128-byte boxes arrive apart: with no promotion the
    // H200 decodes 1.2-3.7% faster (8B B1 / 32k 0.0397 -> 0.0389 ms, B32 / 32k 0.9965 -> 0.9614,
    // bench/results/2026-12-02-h200-session15/call1/). The wgmma prefill tile, which rereads K/V
    // across query tiles, keeps the 256 bytes it was tuned with.
    const auto l2 = static_cast<TmaL2Promotion>(tma_l2_promotion_override().value_or(
        static_cast<int>(m.spec.tile.wgmma ? TmaL2Promotion::Bytes256 : TmaL2Promotion::None)));
    if (args.paged) {
      // The page tensors as [pages, Hkv, page_size, D] (page_stride_* is page, head, row), read
      // in boxes that never straddle a page: gcd(page_size, block_k) rows, at least 8 so that
      // every box lands on a whole swizzle atom.
      const int64_t pages = args.paged->num_pages(), ps = args.paged->page_size();
      const int box = static_cast<int>(std::gcd(ps, int64_t{bn}));
      p.tma_box_rows = box;
      p.tma_kv = box % 8 == 0 &&
                 encode_tile_map(p.tma_k, p.k, spec_.dtype, pages, Hkv, ps, spec_.head_dim, p.page_stride_k, box, l2) &&
                 encode_tile_map(p.tma_v, p.v, spec_.dtype, pages, Hkv, ps, spec_.head_dim, p.page_stride_v, box, l2);
    } else {
      p.tma_kv = encode_tile_map(p.tma_k, p.k, spec_.dtype, B, Hkv, Nk, spec_.head_dim, p.k_stride, bn, l2) &&
                 encode_tile_map(p.tma_v, p.v, spec_.dtype, B, Hkv, Nk, spec_.head_dim, p.v_stride, bn, l2);
    }
  }
  p.num_splits = pl.num_splits;
  const int64_t rows = B * Hq * Nq;
  // Partial rows (O and LSE) and merge counters: split-KV's S x rows with a counter per tile when
  // the kernel merges, or the cut block-sparse rows' slots of block_q rows with one per slot.
  size_t part_rows = 0, counters = 0;
  if (pl.sparse_work && pl.sparse_work->slots > 0) {
    counters = static_cast<size_t>(pl.sparse_work->slots);
    part_rows = counters * static_cast<size_t>(m.spec.tile.block_q);
  } else if (pl.num_splits > 1) {
    part_rows = static_cast<size_t>(pl.num_splits * rows);
    if (pl.merge_in_kernel)
      counters = size_t{pl.grid[0] / static_cast<unsigned>(pl.num_splits)} * pl.grid[1] * pl.grid[2];
  }
  if (part_rows > 0) {
    const size_t o_floats = part_rows * static_cast<size_t>(spec_.head_dim);
    float* ws = static_cast<float*>(stream_workspace(stream, kSplitWorkspace, (o_floats + part_rows) * 4));
    p.part_o = ws;
    p.part_lse = ws + o_floats;
  }
  if (counters > 0) p.merge_count = static_cast<int*>(stream_workspace(stream, kMergeCounters, counters * sizeof(int)));
  void* params[] = {&p};
  launch_kernel(m.fwd, {pl.grid[0], pl.grid[1], pl.grid[2]}, static_cast<unsigned>(m.threads),
                static_cast<unsigned>(m.smem), stream, params, pl.dependent_launch, "cuLaunchKernel");
  if (pl.num_splits > 1 && !pl.merge_in_kernel) {
    attnfuse_kernels::CombineParams cp{};
    cp.part_o = p.part_o;
    cp.part_lse = p.part_lse;
    cp.o = p.o;
    cp.lse = p.lse;
    for (int i = 0; i < 3; ++i) cp.o_stride[i] = p.o_stride[i];
    cp.lse_stride[0] = p.lse_stride[0];
    cp.lse_stride[1] = p.lse_stride[1];
    cp.heads_q = p.heads_q;
    cp.len_q = p.len_q;
    cp.rows = rows;
    cp.num_splits = pl.num_splits;
    constexpr int kRowsPerBlock = codegen::cuda::kCombineThreads / 32;
    void* cparams[] = {&cp};
    launch_kernel(m.combine, {static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), 1, 1},
                  codegen::cuda::kCombineThreads, 0, stream, cparams, pl.dependent_launch,
                  "cuLaunchKernel (split-KV combine)");
  }
}

const LoadedModule& load_module(const KernelSpec& spec) {
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::unique_ptr<LoadedModule>> loaded;
  const DeviceInfo& dev = device_info();
  // The device's own arch: sm_90 builds as sm_90a (wgmma, TMA), whose cubins load on Hopper only.
  const int arch = dev.arch();
  const uint64_t key = structural_key(spec, arch);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) return *it->second;
  if (dev.arch() < 80)
    throw Error(ErrorCode::Unsupported,
                fmt::format("the CUDA backend needs sm_80 or newer; {} is sm_{}", dev.name, dev.arch()));
  const int smem = codegen::cuda::shared_memory_bytes(spec);
  if (smem > dev.max_shared_per_block)
    throw Error(ErrorCode::Unsupported, fmt::format("kernel needs {} B of shared memory; {} offers {}",
                                                    smem, dev.name, dev.max_shared_per_block));
  const CompiledBinary bin = compile_cuda(spec, arch);
  const DriverApi& d = driver();
  auto m = std::make_unique<LoadedModule>();
  m->spec = spec;
  m->threads = codegen::cuda::threads_per_block(spec);
  m->smem = smem;
  check(d.cuModuleLoadData(&m->module, bin.cubin.data()), "cuModuleLoadData");
  check(d.cuModuleGetFunction(&m->fwd, m->module, codegen::cuda::kEntryName), "cuModuleGetFunction");
  check(d.cuModuleGetFunction(&m->combine, m->module, codegen::cuda::kCombineEntryName),
        "cuModuleGetFunction (split-KV combine)");
  if (spec.score != ScoreKind::ScaledDot && spec.rope_mode == RopeMode::Prerotate)
    check(d.cuModuleGetFunction(&m->rotate, m->module, codegen::cuda::kRotateEntryName),
          "cuModuleGetFunction (rope rotation)");
  check(d.cuFuncSetAttribute(m->fwd, kFuncAttrMaxDynamicSharedBytes, smem), "cuFuncSetAttribute");
  d.cuFuncGetAttribute(&m->registers, kFuncAttrNumRegs, m->fwd);
  const LoadedModule& ref = *m;
  loaded.emplace(key, std::move(m));
  return ref;
}

const CudaKernel& cuda_kernel(const KernelSpec& requested) {
  KernelSpec tuned;
  const KernelSpec* chosen = &requested;
  if (const auto& t = tile_override()) {
    tuned = requested;
    tuned.tile = *t;
    chosen = &tuned;
  }
  const KernelSpec& spec = *chosen;
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::unique_ptr<CudaKernel>> kernels;
  const DeviceInfo& dev = device_info();
  const uint64_t key = structural_key(spec, dev.arch());
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = kernels.find(key); it != kernels.end()) return *it->second;
  auto kernel = std::make_unique<CudaKernel>(spec);
  kernel->module(kernel->default_mode(), 0, KvLayout::Contiguous);  // compile now: errors surface at the first lookup
  const CudaKernel& ref = *kernel;
  kernels.emplace(key, std::move(kernel));
  return ref;
}

void run_cuda(const KernelSpec& spec, const AttentionArgs& args, CUstream stream, bool sync,
              const LaunchTuning& tuning) {
  const CudaKernel& k = cuda_kernel(spec);
  k.launch(args, spec.scalars, stream, tuning);
  if (sync) check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

}  // namespace attnfuse::runtime
