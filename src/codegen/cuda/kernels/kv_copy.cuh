// The forward kernel's K/V copies (FwdKernel<Spec>::KV): one K and one V tile per pipeline stage,
// by cp.async from every thread (contiguous rows, or rows looked up in a paged cache's table) or,
// on Hopper (Spec::kTmaKV), by the copy engine in 128-byte swizzled boxes, issued by one thread,
// by warp 0 for paged caches, or by a producer warp (Spec::kProducerWarp) that owns the stages'
// barriers. Also the stage barriers themselves and the zeroing of V rows past a sequence's end.
// Everything here reads FwdKernel's tile constants; the tiles' layout (kv_offset, load_tile)
// stays with the kernel, which lays Q out the same way.
#pragma once

#include "params.cuh"
#include "primitives.cuh"
#include "wgmma.cuh"
#include "work.cuh"

namespace attnfuse_kernels {

template <class Kernel>
struct KvCopy {
  using Spec = typename Kernel::SpecType;
  using Element = typename Kernel::Element;
  using W = typename Kernel::W;
  static constexpr int kD = Kernel::kD, kBN = Kernel::kBN, kThreads = Kernel::kThreads, kWarps = Kernel::kWarps;
  static constexpr int kStages = Kernel::kStages, kKVTile = Kernel::kKVTile, kTableBytes = Kernel::kTableBytes;
  static constexpr bool kWgmma = Kernel::kWgmma, kTmaDecode = Kernel::kTmaDecode;
  static constexpr bool kSettledTable = Kernel::kSettledTable;

  // Paged K/V: a thread copies chunk column threadIdx.x % kChunks of kPagedRows rows of every
  // tile, each at a page looked up in the page table (a dependent global load: the copies cannot
  // issue before it returns). The decode tiles issue a thread's lookups in batches of up to 8
  // before their copies, so a tile waits for one lookup latency, not one per row: that took the
  // paged decode from 5-10% to ~1% over contiguous K/V at B8 and B32 / 32k on the H200. (Looking
  // the ids up one tile ahead instead, in registers carried across steps, measured slower: 0.059
  // against 0.055 ms at 70B B1 / 32k.) The 128-row prefill tile and D = 256 keep one lookup per
  // row: they have no registers for a batch (rope at D = 128 prefill and rope_window at D = 256
  // decode would spill).
  static constexpr int kChunks = kD / 8, kPagedRows = (kBN * kChunks + kThreads - 1) / kThreads;
  static constexpr int kPageBatch = kPagedRows < 8 ? kPagedRows : 8;
  static constexpr bool kBatchPages = W::kPack && kD <= 128;
  // Those lookups still sit between a stage's release and its copies. A split decode block
  // streams few tiles (~16 at 70B B1 / 32k), so it also stages its parts' page ids in shared
  // memory once (stage_page_list) and each tile's lookups become shared-memory loads.
  static constexpr int kPageList = Spec::kPageListSlots;
  static_assert(kPageList == 0 || (Spec::kPagedKV && kBatchPages && !Spec::kBlockSparse),
                "the staged page list serves the batched lookups of dense paged decode tiles");

  // Copies the page ids of the block's key tiles into `list` and points w.pages at it, when they
  // fit; otherwise w keeps the global table. Returns whether it copied (uniform over the block):
  // the caller then syncs before the first lookup. warm: also ask L2 for the first line of the
  // block's head in each page, K and V (a settled table stages its list before the grid
  // dependency wait, so the pages' translations and first lines arrive while the block waits).
  static __device__ __forceinline__ bool stage_page_list(const FwdParams& p, W& w, int* list, bool copy = true,
                                                         bool warm = false) {
    if (w.it_begin >= w.it_end) return false;
    const int k_lo = w.tile(p, w.it_begin) * kBN;
    const int k_end = (w.tile(p, w.it_end - 1) + 1) * kBN;
    if (k_lo >= w.len_k) return false;
    int s0, s1, row;
    w.page_pos(p, k_lo, s0, row);
    w.page_pos(p, (k_end < w.len_k ? k_end : w.len_k) - 1, s1, row);
    if (s1 - s0 >= kPageList) return false;
    // Only blocks of few pages warm them: their prologue is a large share of their time (Llama-3-70B
    // B1 / 32k over 16 splits: 128 pages of 16), while blocks of hundreds of pages (8B B8 / B32)
    // lost 2% to the prefetches (bench/results/2026-12-05-h200-session36/call4/).
    warm = warm && s1 - s0 < 256;
    if (copy)  // (the producer warp only points at the ids the computing warps copy)
      for (int i = threadIdx.x; i <= s1 - s0; i += kThreads) {
        const int id = ld_keep_in_l2(w.pages + s0 + i);
        list[i] = id;
        if (warm) {
          af_i64 ko, vo;
          w.page_offsets(p, id, 0, ko, vo);
          prefetch_l2(static_cast<const Element*>(p.k) + ko);
          prefetch_l2(static_cast<const Element*>(p.v) + vo);
        }
      }
    w.pages = list - s0;  // slot s of the sequence at list[s - s0]
    return true;
  }

  // Row r's chunk ch of a paged K/V tile, from element offsets ko / vo (zeros where !in; K's
  // chunks outside need8 too).
  static __device__ __forceinline__ void copy_paged_chunk(const FwdParams& p, Element* k_dst, Element* v_dst, int r,
                                                          int ch, bool in, af_i64 ko, af_i64 vo, u32 need8) {
    const bool kin = in && ((need8 >> ch) & 1u);
    cp_async_16(smem_addr(k_dst + Kernel::kv_offset(r, ch)),
                kin ? static_cast<const void*>(static_cast<const Element*>(p.k) + ko + ch * 8) : p.k, kin ? 16 : 0);
    cp_async_16(smem_addr(v_dst + Kernel::kv_offset(r, ch)),
                in ? static_cast<const void*>(static_cast<const Element*>(p.v) + vo + ch * 8) : p.v, in ? 16 : 0);
  }

  // K/V tile nb into k_dst / v_dst (cp.async; the caller commits).
  static __device__ __forceinline__ void load_kv(const FwdParams& p, const W& w, Element* k_dst, Element* v_dst,
                                                 int nb, u32 need8) {
    const int n0 = nb * kBN;
    if constexpr (Spec::kPagedKV) {
      // One page-table lookup per row serves its K and V chunks (the lookup and the in-page row
      // are the costly part of paged addressing, the copies are the same as contiguous ones).
      if constexpr (!kBatchPages) {
        for (int c = threadIdx.x; c < kBN * kChunks; c += kThreads) {
          const int r = c / kChunks, ch = c % kChunks;
          af_i64 ko = 0, vo = 0;
          const bool in = n0 + r < w.len_k;
          if (in) w.page_offsets(p, n0 + r, ko, vo);
          copy_paged_chunk(p, k_dst, v_dst, r, ch, in, ko, vo, need8);
        }
        return;
      }
      constexpr int kTotal = kBN * kChunks;
      for (int c0 = threadIdx.x; c0 < kTotal; c0 += kPageBatch * kThreads) {
        int page[kPageBatch], row[kPageBatch];  // page -1: past the sequence's end
#pragma unroll
        for (int u = 0; u < kPageBatch; ++u) {
          const int c = c0 + u * kThreads, j = n0 + c / kChunks;
          page[u] = c < kTotal && j < w.len_k ? w.page_of(p, j, row[u]) : -1;
        }
#pragma unroll
        for (int u = 0; u < kPageBatch; ++u) {
          const int c = c0 + u * kThreads;
          if (c >= kTotal) break;
          af_i64 ko = 0, vo = 0;
          const bool in = page[u] >= 0;
          if (in) w.page_offsets(p, page[u], row[u], ko, vo);
          copy_paged_chunk(p, k_dst, v_dst, c / kChunks, c % kChunks, in, ko, vo, need8);
        }
      }
      return;
    }
    Kernel::template load_tile<kBN, true>(
        k_dst, p.k, [&](int r) { return n0 + r < w.len_k ? w.k_row(p, n0 + r) : nullptr; }, need8);
    Kernel::template load_tile<kBN, true>(
        v_dst, p.v, [&](int r) { return n0 + r < w.len_k ? w.v_row(p, n0 + r) : nullptr; });
  }

  // K/V tile nb by the copy engine (Spec::kTmaKV; the caller is thread 0, or warp 0 for paged
  // K/V): per 64-dim column block one box of kBN rows of K and one of V, landing swizzled,
  // completing on `bar`. Rows past the tensor's end arrive as zeros, as cp.async's do.
  //
  // Paged K/V: the maps see the page tensors as [pages, Hkv, page_size, D] and a box is
  // p.tma_box_rows rows (gcd of page_size and kBN, at least 8, so every box starts a page-aligned
  // run of rows and lands on a 1024-byte swizzle atom). A tile is kBN / box boxes x kD / 64
  // column blocks x K and V copies (32 for 64 keys at pages of 16, 64 at most at D <= 128): lane u of warp 0
  // looks up the pages of copies u, u + 32 (in the staged list where the block has one) and
  // issues them, so the lookups overlap as the cp.async path's batched ones do. Boxes past the
  // sequence's end are not issued; the rows they leave, and those of the last page past its
  // length, are zeroed in V by zero_tail_rows, since P = 0 times stale bits can still be NaN.
  static constexpr int kColBlocks = kD / 64;  // 64-dim column blocks of a row: one box each
  static constexpr int kPagedCopiesPerLane = ((kBN / 8) * kColBlocks * 2 + 31) / 32;
  // Lane u's page ids and in-page rows of a paged tile's copies u, u + 32, ... (the lookups
  // alone, so that producer() can make a settled table's first ones before the grid wait).
  struct TilePages {
    int page[kPagedCopiesPerLane], row[kPagedCopiesPerLane];
  };
  static __device__ __forceinline__ int paged_boxes(const FwdParams& p, const W& w, int n0) {
    const int live = w.len_k - n0 < kBN ? w.len_k - n0 : kBN;
    return live > 0 ? (live + p.tma_box_rows - 1) / p.tma_box_rows : 0;
  }
  static __device__ __forceinline__ TilePages lookup_tile_pages(const FwdParams& p, const W& w, int nb) {
    const int n0 = nb * kBN, copies = paged_boxes(p, w, n0) * kColBlocks * 2, lane = threadIdx.x & 31;
    TilePages t;
#pragma unroll
    for (int u = 0; u < kPagedCopiesPerLane; ++u) {
      const int c = lane + 32 * u;
      t.row[u] = 0;
      t.page[u] = c < copies ? w.page_of(p, n0 + c / (2 * kColBlocks) * p.tma_box_rows, t.row[u]) : 0;
    }
    return t;
  }
  static __device__ __forceinline__ void tma_kv_pages(const FwdParams& p, const W& w, Element* k_dst, Element* v_dst,
                                                      u32 bar, int nb, const TilePages& t) {
    const int n0 = nb * kBN, box = p.tma_box_rows, lane = threadIdx.x & 31;
    const int boxes = paged_boxes(p, w, n0), copies = boxes * kColBlocks * 2;
    if (lane == 0) mbar_expect_tx(bar, boxes * box * kD * 2 * 2);
    __syncwarp();  // the expected bytes are posted before any copy can complete
#pragma unroll
    for (int u = 0; u < kPagedCopiesPerLane; ++u) {
      const int c = lane + 32 * u;
      if (c >= copies) break;
      const int i = c / (2 * kColBlocks), cb = (c / 2) % kColBlocks;
      const u32 off = cb * kBN * 128 + i * box * 128;
      if (c & 1) tma_load_4d(smem_addr(v_dst) + off, p.tma_v, bar, cb * 64, t.row[u], w.hk, t.page[u]);
      else tma_load_4d(smem_addr(k_dst) + off, p.tma_k, bar, cb * 64, t.row[u], w.hk, t.page[u]);
    }
  }
  static __device__ __forceinline__ void tma_kv(const FwdParams& p, const W& w, Element* k_dst, Element* v_dst,
                                                u32 bar, int nb) {
    if constexpr (Spec::kPagedKV) {
      tma_kv_pages(p, w, k_dst, v_dst, bar, nb, lookup_tile_pages(p, w, nb));
      return;
    }
    // A document's tiles start at its first row (k_row0: 0 without documents).
    const int row = (int)w.k_row0 + nb * kBN;
    mbar_expect_tx(bar, 2 * kBN * kD * 2);
#pragma unroll
    for (int cb = 0; cb < kColBlocks; ++cb) {
      tma_load_4d(smem_addr(k_dst) + cb * kBN * 128, p.tma_k, bar, cb * 64, row, w.hk, w.b);
      tma_load_4d(smem_addr(v_dst) + cb * kBN * 128, p.tma_v, bar, cb * 64, row, w.hk, w.b);
    }
  }

  // Asks L2 for contiguous K/V tile nb, the boxes tma_kv copies (before the grid dependency wait:
  // Kernel::run's kEarlyL2).
  static __device__ __forceinline__ void prefetch_kv_l2(const FwdParams& p, const W& w, int nb) {
    const int row = (int)w.k_row0 + nb * kBN;
#pragma unroll
    for (int cb = 0; cb < kColBlocks; ++cb) {
      tma_prefetch_l2_4d(p.tma_k, cb * 64, row, w.hk, w.b);
      tma_prefetch_l2_4d(p.tma_v, cb * 64, row, w.hk, w.b);
    }
  }

  // Asks L2 for the paged box of key j (its K and V, every column block) before the grid
  // dependency wait (a settled table: Kernel::run's kEarlyL2).
  static __device__ __forceinline__ void prefetch_box_l2(const FwdParams& p, const W& w, int j) {
    if (j >= w.len_k) return;
    int row;
    const int page = w.page_of(p, j, row);
#pragma unroll
    for (int cb = 0; cb < kColBlocks; ++cb) {
      tma_prefetch_l2_4d(p.tma_k, cb * 64, row, w.hk, page);
      tma_prefetch_l2_4d(p.tma_v, cb * 64, row, w.hk, page);
    }
  }

  // TMA tiles of pages or documents: zeroes the V rows of tile n0 at and past the sequence's end
  // (stale stage bits, the last page's rows past its length, or the next document's rows), after
  // the stage's barrier and before the step's block barrier publishes them. K's rows there need
  // nothing: their scores are masked by selection. The proxy fence orders these generic stores
  // before any later copy-engine write to the stage.
  // The tiles whose copies can leave foreign or stale V rows past the sequence's end.
  static constexpr bool kZeroTailRows = Spec::kPagedKV || Spec::kDocument;
  static __device__ __forceinline__ bool zero_tail_rows(const W& w, Element* v_tile, int n0) {
    const int live = w.len_k - n0;
    if (live >= kBN) return false;  // uniform over the block
    for (int c = threadIdx.x; c < (kBN - live) * kChunks; c += kThreads)
      *reinterpret_cast<uint4*>(v_tile + Kernel::kv_offset(live + c / kChunks, c % kChunks)) = make_uint4(0, 0, 0, 0);
    fence_proxy_async_smem();
    return true;
  }

  // The decode tiles' stage barriers (kTmaDecode): one per stage, after the V stages (64 bytes
  // reserved; a staged page list follows them).
  static constexpr int kStageBarrierBytes = 64;
  static_assert(kStages * 8 <= kStageBarrierBytes / 2, "one 8-byte full and one empty mbarrier per stage");
  static __device__ __forceinline__ u32 stage_full(const Element* sV) { return smem_addr(sV + kStages * kKVTile); }
  // With the producer warp: the stages' "empty" barriers (one arrival per computing warp).
  static __device__ __forceinline__ u32 stage_empty(const Element* sV) { return stage_full(sV) + kStageBarrierBytes / 2; }
  // The computing warps alone (named barrier 1), where the producer warp does not take part.
  static __device__ __forceinline__ void compute_sync() { named_barrier_sync<1, kThreads>(); }
  // Every thread of the block, the producer warp included (the computing warps reach it from
  // another place in the code, hence the non-aligned form).
  static __device__ __forceinline__ void block_sync() { block_barrier_sync(); }
  // The computing warp's release of a stage it has read (with the producer warp).
  static __device__ __forceinline__ void release_stage(const Element* sV, int stage) {
    __syncwarp();  // every lane's reads of the stage are done (their registers are in use)
    if ((threadIdx.x & 31) == 0) mbar_arrive(stage_empty(sV) + stage * 8);
  }
  static __device__ __forceinline__ int* page_list(Element* sV) {
    return reinterpret_cast<int*>(reinterpret_cast<char*>(sV + kStages * kKVTile) + kTableBytes +
                                  (kTmaDecode ? kStageBarrierBytes : 0));
  }

  // The producer warp (Spec::kProducerWarp, K/V by TMA): it issues every key tile of the block
  // into its stage as soon as the computing warps have released the stage's previous tile, so
  // the page lookups and copy issues sit on no computing warp's path. It owns the stage barriers
  // (nobody else touches them before the block barrier), so a contiguous block's first kStages
  // tiles go out at once. A paged block issues only its first tile there, looked up in the global
  // table while the computing warps stage the page list, and the rest after the barrier, from the
  // list: each paged tile is up to 32 lookups and copies (pages of 16), and the computing warps
  // waited at the barrier for all kStages of them. On the H200, Llama-3-70B B1 / 32k at pages of
  // 16 (the paged calls that take this warp) went 0.0431 -> 0.0414 ms with the page table kept in
  // L2 (ld_keep_in_l2), 0.0421 without it, against contiguous 0.0386; the other paged and
  // contiguous cells level (bench/results/2026-12-03-h200-session26/call2/; call4 again: 0.0430
  // -> 0.0413, contiguous 0.0379). Calls without tensor maps (the module's cp.async fallback)
  // leave it nothing to do: it exits, which releases the block barriers it would otherwise hold
  // (PTX `exit`).
  //
  // With a settled table (run(), kSettledTable) the warp reaches here before the grid dependency
  // wait and looks up its first tile's pages before it, so its first copies go out right after the
  // wait instead of one table load later.
  static __device__ void producer(const FwdParams& p, W& w, Element* sK, Element* sV, bool settled) {
    const auto wait_if_settled = [&] {
      if (settled) grid_dependency_wait();
    };
    if (p.tma_kv == 0) return wait_if_settled();
    // The wgmma loop returns before its first barrier when the block has no key tile (the decode
    // tile's computing warps pass the block barrier whatever their tiles).
    if (kWgmma && w.it_begin >= w.it_end) return wait_if_settled();
    if (threadIdx.x >= kThreads + 32) {  // the wgmma producer warpgroup's idle warps
      wait_if_settled();
      block_sync();
      return;
    }
    const bool issuer = Spec::kPagedKV || (threadIdx.x & 31) == 0;  // paged: the warp's lanes share a tile's copies
    if ((threadIdx.x & 31) == 0) {
      for (int st = 0; st < kStages; ++st) {
        mbar_init(stage_full(sV) + st * 8, 1);
        mbar_init(stage_empty(sV) + st * 8, kWarps);
      }
      mbar_init_fence();
    }
    __syncwarp();  // the lanes issue on the barriers lane 0 made
    const auto issue = [&](int it) {
      const int stage = (it - w.it_begin) % kStages;
      if (issuer) tma_kv(p, w, sK + stage * kKVTile, sV + stage * kKVTile, stage_full(sV) + stage * 8, w.tile(p, it));
    };
    int it = w.it_begin;
    constexpr int kFirst = Spec::kPagedKV ? 1 : kStages;  // tiles issued before the block barrier
    if constexpr (kSettledTable) {
      if (settled) {
        if (it < w.it_end) {
          const TilePages first = lookup_tile_pages(p, w, w.tile(p, it));
          grid_dependency_wait();
          tma_kv_pages(p, w, sK, sV, stage_full(sV), w.tile(p, it), first);  // stage 0
          ++it;
        } else {
          grid_dependency_wait();
        }
      }
    }
    for (; it < w.it_end && it - w.it_begin < kFirst; ++it) issue(it);
    if constexpr (kPageList > 0) stage_page_list(p, w, page_list(sV), /*copy=*/false);
    block_sync();  // the barriers are seen block-wide; the computing warps have staged the page ids
    for (; it < w.it_end; ++it) {
      const int rel = it - w.it_begin;
      mbar_wait(stage_empty(sV) + (rel % kStages) * 8, (rel / kStages - 1) & 1);  // tile rel - kStages released
      issue(it);
    }
  }

  // K/V tile nb into stage `stage`: by TMA from thread 0 (warp 0 for paged K/V) where the call has
  // tensor maps (tma), else by cp.async from every thread (the caller commits either way).
  static __device__ __forceinline__ void issue_kv(const FwdParams& p, const W& w, Element* sK, Element* sV,
                                                  int stage, int nb, u32 need8, bool tma) {
    if constexpr (kTmaDecode) {
      if (tma) {
        if (threadIdx.x < (Spec::kPagedKV ? 32 : 1))
          tma_kv(p, w, sK + stage * kKVTile, sV + stage * kKVTile, stage_full(sV) + stage * 8, nb);
        return;
      }
    }
    load_kv(p, w, sK + stage * kKVTile, sV + stage * kKVTile, nb, need8);
  }
};

}  // namespace attnfuse_kernels
