// The Hopper loop over key tiles of the forward kernel (Spec::kWgmma, sm_90a). FwdKernel::run
// loads Q and the first tiles, then hands its accumulators here; the masks, modifier hooks,
// online softmax and epilogue are FwdKernel's own.
//
// Each warpgroup (4 warps, 64 query rows) overlaps its softmax with its tensor-core work:
// iteration j issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back (both asynchronous),
// waits for S_j only, turns it into probabilities while the P V product still runs, and waits for
// that product before rescaling O by the new row maxima (FlashAttention-3's intra-warpgroup
// overlap). V_{j-1} is still being read during iteration j, so of the kStages K/V stages one
// holds tile j - 1, one tile j, and kStages - 2 the tiles loading ahead.
//
// K/V tiles arrive by TMA (Spec::kTmaKV with FwdParams::tma_kv: one thread issues two boxes of
// 64 dims per 64-dim column block, landing already swizzled, and every thread waits on the
// stage's "full" mbarrier; packed documents too, zero_foreign_v_rows) or, where the host found
// no valid tensor map (paged caches, strides the copy engine cannot take), by cp.async from every
// thread as on sm_80.
//
// Two schedules:
//  - decoupled (every TMA call): no block-wide barrier in the loop. Each warp releases a stage
//    on the stage's "empty" mbarrier once its P V product has read it; one thread of
//    warpgroup 1 waits for that release before it reloads the stage. The warpgroups drift
//    apart freely, so one's softmax falls under the other's matrix products. With a producer
//    warpgroup (Spec::kProducerWarp, KvCopy::producer) one of its warps waits and issues
//    instead, so no computing warp ever waits on the other warpgroup's release.
//  - lockstep (cp.async calls): one __syncthreads per tile publishes the generic-proxy copies
//    and frees the stage the next load overwrites.
// Measured on the H200 (bench/results/2026-12-01-h200-decoupled/): against the lockstep loop
// with 3 stages, decoupled is 4-10% faster at D = 64 with 4 stages and 2-7% at D = 128 with 3
// (causal+alibi at block_k 64: 3% slower). Making the warpgroups also take turns issuing their
// products (FlashAttention-3's pingpong, two named barriers) was 13% slower than lockstep at
// D = 64, so they do not.
#pragma once

namespace attnfuse_kernels {

template <class Kernel>
struct WgmmaMainloop {
  using Element = typename Kernel::Element;
  using Traits = typename Kernel::Traits;
  using W = typename Kernel::W;
  using BlockCells = typename Kernel::BlockCells;
  static constexpr int kBM = Kernel::kBM, kBN = Kernel::kBN, kD = Kernel::kD;
  static constexpr int kNT = Kernel::kNT, kDT = Kernel::kDT, kKVTile = Kernel::kKVTile;
  static constexpr int kS = Kernel::kStages;
  static_assert(Kernel::kAtoms == 1 && (kS == 3 || kS == 4), "the wgmma loop runs one 16-row atom per warp, 3-4 stages");

  // Descriptors of k step kk (16 dims) of a warpgroup's Q rows (q_base) and of a K tile, both read
  // K-major from their swizzled tiles: column block kk / 4, 32 bytes per step inside it.
  static __device__ __forceinline__ u64 q_step(u32 q_base, int kk) {
    return sw128_desc(q_base + (kk >> 2) * kBM * 128 + (kk & 3) * 32, 16, 1024);
  }
  static __device__ __forceinline__ u64 k_step(u32 k_base, int kk) {
    return sw128_desc(k_base + (kk >> 2) * kBN * 128 + (kk & 3) * 32, 16, 1024);
  }

  // S = Q K^T for warpgroup wg's 64 rows: one m64nBNk16 wgmma per 16 dims, Q and K read K-major
  // from their swizzled tiles (the first k step overwrites S). Issued and committed, not waited.
  static __device__ __forceinline__ void issue_qk(const Element* sQ, const Element* k_tile, int wg,
                                                  float (&s)[kNT][4]) {
    const u32 q_base = smem_addr(sQ) + wg * 64 * 128, k_base = smem_addr(k_tile);
    fence_operands(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) wgmma_ss<Element, kBN>(s, q_step(q_base, kk), k_step(k_base, kk), kk > 0);
    wgmma_commit();
  }

  // rope_window (interleaved prerotated pairs, WindowCut): S = Q K^T from k step kLead on. That
  // step takes Q from registers (qa: the cut's dead pairs zeroed, window_qa); the later ones read
  // Q and K from shared memory as issue_qk does. One straight-line instance per lead, so that each
  // is one wgmma group in the SASS; with the skipped steps branched over instead, ptxas closes a
  // group at every step. (On the H200 both ran at the same speed, and the branched body compiled
  // 1.2 s faster at D = 128: bench/results/2026-12-01-h200-session6, calls 2 and 3.)
  // Issued and committed, not waited: the caller issues the previous tile's P V behind it and
  // waits for S alone, as the plain loop does, so that product runs under the softmax. (Until
  // the twenty-second session each instance waited for its S inside, which kept the P V product
  // out of the softmax's shadow: this form was 1.9-4% faster at 32k on the H200, level at 8k,
  // bench/results/2026-12-03-h200-session22/call2/. ptxas keeps the chain and the P V product
  // apart without serialising them; issuing the P V product inside each instance instead made
  // it serialise every wgmma of the kernel, C7514, and so did one body of guarded products.)
  template <int kLead>
  static __device__ __forceinline__ void issue_qk_cut(const Element* sQ, const Element* k_tile, int wg,
                                                      const u32 (&qa)[4], float (&s)[kNT][4]) {
    const u32 q_base = smem_addr(sQ) + wg * 64 * 128, k_base = smem_addr(k_tile);
    fence_operands(s);
    wgmma_fence();
    wgmma_rs_t<Element, kBN, false>(s, qa, k_step(k_base, kLead), 0);
#pragma unroll
    for (int kk = kLead + 1; kk < kD / 16; ++kk) wgmma_ss<Element, kBN>(s, q_step(q_base, kk), k_step(k_base, kk), 1);
    wgmma_commit();
  }

  // The A fragment of the cut's lead step (dims 16 lead ..), its dead pairs zeroed: thread t's
  // registers 0, 1 hold dims 2t, 2t + 1 (pair 8 lead + t), registers 2, 3 dims 2t + 8, 2t + 9
  // (pair 8 lead + 4 + t). Loaded once, outside the per-lead instances, so that all of them read
  // the same four registers: with a load in each instance ptxas gave every instance its own
  // (the wgmma reads them asynchronously), 32 registers held through the P V product.
  static __device__ __forceinline__ void window_qa(const Element* sQ, int warp, int lane, int t,
                                                   const WindowCut<kD>& cut, int half, u32 (&qa)[4]) {
    const int row = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    ldmatrix_x4(qa, smem_addr(sQ + Kernel::template chunk_offset<kBM>(row, 2 * cut.lead + (lane >> 4))));
    const u32 lo = lead_pair_kept(cut, 8 * cut.lead + t, half) ? 0xffffffffu : 0u;
    const u32 hi = lead_pair_kept(cut, 8 * cut.lead + 4 + t, half) ? 0xffffffffu : 0u;
    qa[0] &= lo;
    qa[1] &= lo;
    qa[2] &= hi;
    qa[3] &= hi;
  }

  // S = Q K^T of the cut (issued, not waited for): issue_qk_cut for its lead step, uniform over
  // the warpgroup.
  template <int kLead = 0>
  static __device__ __forceinline__ void issue_qk_window(const Element* sQ, const Element* k_tile, int wg,
                                                         const WindowCut<kD>& cut, const u32 (&qa)[4],
                                                         float (&s)[kNT][4]) {
    if constexpr (kLead + 1 < kD / 16) {
      if (cut.lead != kLead) {
        issue_qk_window<kLead + 1>(sQ, k_tile, wg, cut, qa, s);
        return;
      }
    }
    issue_qk_cut<kLead>(sQ, k_tile, wg, qa, s);
  }

  // rope_window: take back, from the cells of this warp's rows out of its window (|Δ| > limit),
  // the term q_a k_a + q_b k_b of every pair in cut.corr, read from the swizzled Q and K tiles.
  // The pair's dims are adjacent (interleaved), so one 32-bit load gives both; a thread's
  // columns 8n + 2t + e share their swizzle (row % 8), so its 16 loads per e sit at immediate
  // offsets from one address; the per-cell work is a compare and two predicated FMAs.
  static __device__ __forceinline__ void correct_window(const W& w, const RopeTables& rt, float (&s)[kNT][4],
                                                        const WindowCut<kD>& cut, const Element* sQ,
                                                        const Element* k_tile, int n0, int warp, int g, int t) {
    int d0[2];  // Δ of row hf, column 8n + 2t + e: d0[hf] - 8n - e
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      int i, h;
      w.row_of(Kernel::acc_row(w, warp, 0, g, hf), i, h);
      d0[hf] = i + w.q_offset - n0 - 2 * t;
    }
#pragma unroll
    for (int wd = 0; wd < WindowCut<kD>::kWords; ++wd) {
      for (u32 m = cut.corr[wd]; m; m &= m - 1u) {
        const int pair = 32 * wd + __ffs(m) - 1;
        const int lim = rt.limit[pair];
        // |Δ| > lim at column offset c = 8n + e: Δ = d0 - c > lim (c < above) or < -lim (c >
        // below), two compares with c an immediate; through abs() it took four instructions a
        // cell. (No overflow: the host keeps rope_window's positions within ±2^29, so |Δ| and
        // every limit it compares are below 2^30.)
        int above[2], below[2];
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          above[hf] = d0[hf] - lim;
          below[hf] = d0[hf] + lim;
        }
        const int ch = pair >> 2, in = (2 * pair) & 7;  // chunk of dims 2 pair, 2 pair + 1
        float qa[2], qb[2];
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int row = warp * 16 + g + 8 * hf;
          unpack2<Element>(*reinterpret_cast<const u32*>(sQ + sw128_offset<kBM>(row, ch) + in), qa[hf], qb[hf]);
        }
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const Element* kcol = k_tile + sw128_offset<kBN>(2 * t + e, ch) + in;
#pragma unroll
          for (int n = 0; n < kNT; ++n) {
            float ka, kb;
            unpack2<Element>(*reinterpret_cast<const u32*>(kcol + n * 8 * 64), ka, kb);
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int c = 8 * n + e;
              // Causal: cells with Δ < 0 are masked whatever their score, so only Δ > lim counts.
              if (c < above[hf] || (!Kernel::SpecType::kCausal && c > below[hf])) {
                float& x = s[n][2 * hf + e];
                x = fmaf(-qa[hf], ka, x);
                x = fmaf(-qb[hf], kb, x);
              }
            }
          }
        }
      }
    }
  }

  // O += P V: P from registers (A fragments), V read MN-major from its swizzled tile, one
  // m64nDk16 wgmma per 16 keys. Issued and committed, not waited.
  static __device__ __forceinline__ void issue_pv(const Element* v_tile, const u32 (&pa)[kBN / 16][4],
                                                  float (&o)[kDT][4]) {
    const u32 v_base = smem_addr(v_tile);
    fence_operands(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
      wgmma_rs<Element, kD>(o, pa[kk], sw128_desc(v_base + kk * 16 * 128, kBN * 128, 1024));
    wgmma_commit();
  }

  // Probabilities (fp32 accumulator layout) -> A fragments of the P V product.
  static __device__ __forceinline__ void pack_p(const float (&s)[kNT][4], u32 (&pa)[kBN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      pa[kk][0] = Traits::pack(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = Traits::pack(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = Traits::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = Traits::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
  }

  // The P fragments are read by the asynchronous P V product: keep their registers untouched
  // until its wait (the compiler sees the asm inputs as consumed at issue).
  static __device__ __forceinline__ void fence_p(u32 (&pa)[kBN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[kk][e])::"memory");
  }

  // Scores of key tile `it` (in s) -> probabilities, with per-cell checks only on tiles that
  // cross a mask edge; the O rescale factors go to alpha. `group_full`: the block-sparse block
  // keeps every cell of this warpgroup's rows (Work::group_state), so its bits are not read.
  static __device__ __forceinline__ void softmax(const FwdParams& p, const W& w, int it, float (&s)[1][kNT][4],
                                                 float (&acc_o)[1][kDT][4], float (&row_m)[1][2],
                                                 float (&row_l)[1][2], int warp, int g, int t, float slope,
                                                 bool group_full, float (&alpha)[2]) {
    const int nb = w.tile(p, it);
    const int n0 = nb * kBN;
    alpha[0] = alpha[1] = 1.f;  // ReLU normalisation never rescales
    bool inside = w.tile_inside(p, n0);
    BlockCells cells{nullptr, 0, 0};
    if constexpr (Kernel::SpecType::kBlockSparse) {
      cells = Kernel::cells_of(p, w, it, nb);
      inside = inside && (cells.bits == nullptr || group_full);
    }
    if (inside)
      Kernel::template scores_to_probs<false, true>(p, w, cells, s, acc_o, row_m, row_l, n0, warp, 0, g, t, slope,
                                                    alpha);
    else
      Kernel::template scores_to_probs<true, true>(p, w, cells, s, acc_o, row_m, row_l, n0, warp, 0, g, t, slope,
                                                   alpha);
  }

  // Additive bias: each thread asks L1 for one 128-byte line of each of its two rows' bias over
  // key tile n0 (a quad's four threads cover 128 keys of an fp32 bias, 256 of a 16-bit one), right
  // after the tile's products are issued, so that the softmax's per-cell bias loads (the modifier
  // hook) find their lines there instead of waiting on L2 or DRAM after S. Only real rows and
  // lines that start inside the sequence are asked for.
  static __device__ __forceinline__ void prefetch_bias(const FwdParams& p, const W& w, int warp, int g, int t,
                                                       int n0) {
    const int per_line = sizeof(Element) == 2 && p.bias_16bit ? 64 : 32;  // keys per 128-byte line
    const int j = n0 + per_line * t;
    if (per_line * t >= kBN || j >= w.len_k) return;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = Kernel::acc_row(w, warp, 0, g, hf);
      int i, h;
      w.row_of(r, i, h);
      if (per_line == 64) {
        if (const Element* row = Kernel::template bias_row_of<Element>(p, w, r, i, h)) prefetch_l1(row + j);
      } else if (const float* row = Kernel::template bias_row_of<float>(p, w, r, i, h)) {
        prefetch_l1(row + j);
      }
    }
  }

  static __device__ __forceinline__ void rescale(float (&o)[kDT][4], const float (&alpha)[2]) {
#pragma unroll
    for (int d = 0; d < kDT; ++d) {
      o[d][0] *= alpha[0];
      o[d][1] *= alpha[0];
      o[d][2] *= alpha[1];
      o[d][3] *= alpha[1];
    }
  }

  // Documents by TMA: the tile's rows at and past its document's end (len_k) hold the next
  // document's keys, or the copy engine's zeros past the tensor. Their scores are masked by
  // selection, but P = 0 times a non-finite V element is NaN, so their V rows are zeroed
  // (KvCopy::zero_tail_rows, the paged tiles' zeroing: same swizzled layout) before any P V
  // product reads the stage, and a barrier of the computing warps publishes them. Uniform over
  // the block, once per block at most (the document's last tile).
  static __device__ __forceinline__ void zero_foreign_v_rows(const W& w, Element* v_tile, int n0) {
    if (Kernel::KV::zero_tail_rows(w, v_tile, n0)) {
      if constexpr (Kernel::kProducer) Kernel::KV::compute_sync();
      else __syncthreads();
    }
  }

  // Loads key tile `it` into stage `stage`: by the copy engine (TMA, called by the loader thread
  // alone, completing on the stage's full barrier) or by every thread with cp.async (one commit
  // group).
  static __device__ __forceinline__ void load(const FwdParams& p, const W& w, bool tma, u32 full, Element* sK,
                                              Element* sV, int it, int stage) {
    Element* k_dst = sK + stage * kKVTile;
    Element* v_dst = sV + stage * kKVTile;
    if constexpr (Kernel::SpecType::kTmaKV) {
      if (tma) {
        Kernel::KV::tma_kv(p, w, k_dst, v_dst, full + stage * 8, w.tile(p, it));
        return;
      }
    }
    Kernel::KV::load_kv(p, w, k_dst, v_dst, w.tile(p, it), 0xffffffffu);
    cp_async_commit();
  }

  // rope_window: the cut of key tile `it` for this warp (its warpgroup's query positions
  // [gq_lo, gq_hi], its own [wq_lo, wq_hi], before q_offset).
  static __device__ __forceinline__ WindowCut<kD> cut_of(const FwdParams& p, const W& w, const RopeTables& rt,
                                                         int it, int gq_lo, int gq_hi, int wq_lo, int wq_hi) {
    const int n0 = w.tile(p, it) * kBN;
    int k_last = (n0 + kBN < w.len_k ? n0 + kBN : w.len_k) - 1;
    if (k_last < n0) k_last = n0;
    const int qo = w.q_offset;
    // Causal: keys past a range's last query position are masked in all its rows, so its Δ range
    // stops there (fewer corrected pairs on the diagonal tiles). Clamped to the tile's first key,
    // where every cell of the range is masked: a wider range only costs work, never exactness.
    int gk_last = k_last, wk_last = k_last;
    if constexpr (Kernel::SpecType::kCausal) {
      gk_last = max(n0, min(k_last, gq_hi + qo));
      wk_last = max(n0, min(k_last, wq_hi + qo));
    }
    return window_cut<kD>(rt, gq_lo + qo, gq_hi + qo, wq_lo + qo, wq_hi + qo, n0, gk_last, wk_last);
  }

  // On entry: Q is in flight as the only cp.async group (FwdKernel::run). On exit every wgmma and
  // copy has completed and acc_o / row_m / row_l hold the block's unnormalised state (row_l not
  // yet quad-summed).
  static __device__ void run(const FwdParams& p, const W& w, const RopeTables& rt, const Element* sQ, Element* sK,
                             Element* sV, int warp, int g, int t, float slope, float (&acc_o)[1][kDT][4],
                             float (&row_m)[1][2], float (&row_l)[1][2]) {
    if (w.it_begin >= w.it_end) return;
    const int wg = warp / 4, n = w.it_end - w.it_begin;
    const bool tma = Kernel::SpecType::kTmaKV && p.tma_kv != 0;
    const bool dec = tma;  // the decoupled schedule; uniform over the block
    const u32 full = Kernel::KV::stage_full(sV);    // kS barriers: the stage's tile has landed
    const u32 empty = Kernel::KV::stage_empty(sV);  // decoupled, kS more: every warp is done with it
    // With the producer warp it makes the barriers and issues every tile (KvCopy::producer).
    constexpr bool kProduced = Kernel::kProducer;
    if (tma) {
      if (threadIdx.x == 0 && !kProduced) {
        for (int st = 0; st < kS; ++st) mbar_init(full + st * 8, 1);
        if (dec)
          for (int st = 0; st < kS; ++st) mbar_init(empty + st * 8, Kernel::kWarps);
        mbar_init_fence();
      }
      if (kProduced) Kernel::KV::block_sync();  // the producer's barriers exist (it passes this one too)
      else __syncthreads();  // the barriers exist before anyone waits on them
    }
    // The thread that issues the TMA loads (none with the producer warp).
    // (The 64-row tile of 64-row block-sparse masks has one warpgroup: its thread 0.)
    const bool loader = threadIdx.x == (Kernel::kWarps > 4 ? 128 : 0) && !kProduced;
    float s[1][kNT][4];
    u32 pa[kBN / 16][4];
    float alpha[2];
    // rope_window: this warpgroup's query positions (the cut is per warpgroup: 64 rows span
    // fewer Δ than the block's 128).
    constexpr bool kWindow = Kernel::kPairWindow;
    const int gq_lo = w.i_lo + 64 * wg <= w.i_hi ? w.i_lo + 64 * wg : w.i_hi;
    const int gq_hi = gq_lo + 63 < w.i_hi ? gq_lo + 63 : w.i_hi;
    const int wq_lo = w.i_lo + 16 * warp <= w.i_hi ? w.i_lo + 16 * warp : w.i_hi;
    const int wq_hi = wq_lo + 15 < w.i_hi ? wq_lo + 15 : w.i_hi;
    // The first tile's cut; each later one is made at the end of the iteration before it.
    WindowCut<kD> cut{};
    if constexpr (kWindow) cut = cut_of(p, w, rt, w.it_begin, gq_lo, gq_hi, wq_lo, wq_hi);
    u32 qa[4];  // the lead step's A fragment (rope_window)
    // Block-sparse row groups (Spec::kSkipRowGroups, its own module, CudaKernel::plan): each
    // warpgroup skips the tiles whose mask block keeps none of its rows' cells, so pa holds the
    // previous tile's P (its P V product not yet issued) only where that tile was not skipped;
    // otherwise from the second tile on. (The skipping loop in every block-sparse module cost
    // full-block masks, which never skip, 7% on the H200: BigBird at 128-blocks,
    // bench/results/2026-12-04-h200-session29/call2/.)
    constexpr bool kGroups = Kernel::SpecType::kSkipRowGroups;
    static_assert(!kGroups || Kernel::SpecType::kBlockSparse, "row groups come with block-sparse masks");
    bool pending = false;

    // Tiles 0 .. kS - 2 start loading (one cp.async group each, empty ones past the end).
#pragma unroll
    for (int k = 0; k < kS - 1; ++k) {
      if (k < n) {
        if (!tma || loader) load(p, w, tma, full, sK, sV, w.it_begin + k, k);
      } else if (!tma) {
        cp_async_commit();  // keep one group per tile for the counts below
      }
    }

    // One loop body for every tile (the first has no P V to overlap): the softmax is
    // instantiated once per mask variant, which keeps the cold compile short.
    for (int it = w.it_begin; it < w.it_end; ++it) {
      const int rel = it - w.it_begin;
      // Tile it has landed (with Q, for the first).
      if (rel == 0) {
        if (tma) cp_async_wait<0>();  // Q, the only cp.async group
        else cp_async_wait<kS - 2>();  // Q and tile 0; tiles 1 .. kS - 2 may still fly
      } else if (!tma) {
        cp_async_wait<kS - 3>();  // tile rel; the kS - 3 after it may still fly
      }
      if (tma) mbar_wait(full + (rel % kS) * 8, (rel / kS) & 1);  // the stage's (rel / kS)-th use
      if (rel == 0 || !dec) {
        // cp.async copies (Q too) become visible to wgmma's async proxy; lockstep: every warp is
        // also done with tile rel - 2's stage, which the load below overwrites. The producer
        // warp, waiting on the stages, takes no part (named barrier 1 of the computing warps).
        fence_proxy_async_smem();
        if (kProduced && tma) Kernel::KV::compute_sync();
        else __syncthreads();
      }
      if constexpr (Kernel::SpecType::kDocument) {
        if (tma) zero_foreign_v_rows(w, sV + (rel % kS) * kKVTile, w.tile(p, it) * kBN);
      }
      // Tile rel + kS - 2 into the stage of tile rel - 2.
      if (rel > 0 && !(kProduced && tma)) {
        const int ahead = rel + kS - 2, st = ahead % kS;
        if (ahead < n) {
          if (!dec) {
            load(p, w, tma, full, sK, sV, w.it_begin + ahead, st);  // cp.async: every thread
          } else {
            if (loader) {
              if (rel >= 2) mbar_wait(empty + st * 8, ((rel - 2) / kS) & 1);  // tile rel - 2 released
              load(p, w, tma, full, sK, sV, w.it_begin + ahead, st);
            }
            __syncwarp();
          }
        } else if (!tma) {
          cp_async_commit();
        }
      }
      const Element* k_tile = sK + (rel % kS) * kKVTile;
      const int n0 = w.tile(p, it) * kBN;
      // Block sparse: a block that keeps none of this warpgroup's cells (a finer mask coarsened
      // to the tile lists it for the other rows) is skipped: no S, no softmax, no P V; the stage
      // is still released below like every other. A block that keeps all of them is unmasked.
      // (Read an iteration ahead, 64-blocks ran 4% slower in one call: bench/results/
      // 2026-12-04-h200-session29/call2/ against call1.)
      const unsigned gst = kGroups ? w.group_state(p, it, 64 * wg) : 0u;
      const bool skip = (gst & kBsGroupEmpty) != 0u;
      const bool group_full = (gst & kBsGroupFull) != 0u;
      if (!kGroups) pending = rel > 0;
      const Element* v_prev = sV + ((rel + kS - 1) % kS) * kKVTile;  // tile it - 1's V (when pending)
      // Each branch issues and waits for its own products: ptxas serialises every wgmma of the
      // kernel (C7514) when an issue and its wait sit under separate conditions it cannot pair.
      if (!skip) {
        if constexpr (kWindow) {
          // (Loaded at the end of the iteration before, with the cut, it was 5-7% slower on the
          // H200: bench/results/2026-12-03-h200-session24/call3/.)
          window_qa(sQ, warp, threadIdx.x & 31, t, cut, rt.half, qa);
          issue_qk_window(sQ, k_tile, wg, cut, qa, s[0]);  // S_it
        } else {
          issue_qk(sQ, k_tile, wg, s[0]);  // S_it
        }
        if (pending) {
          issue_pv(v_prev, pa, acc_o[0]);  // O += P_{it-1} V_{it-1}
          if constexpr (Kernel::SpecType::kBias) prefetch_bias(p, w, warp, g, t, n0);
          wgmma_wait<1>();                 // S_it is done
        } else {
          if constexpr (Kernel::SpecType::kBias) prefetch_bias(p, w, warp, g, t, n0);
          wgmma_wait<0>();
        }
        fence_operands(s[0]);
        if constexpr (kWindow) {
#pragma unroll
          for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(qa[e])::"memory");  // read by S_it until here
          bool any = false;
#pragma unroll
          for (int wd = 0; wd < WindowCut<kD>::kWords; ++wd) any |= cut.corr[wd] != 0u;
          if (any) correct_window(w, rt, s[0], cut, sQ, k_tile, n0, warp, g, t);
        }
        softmax(p, w, it, s, acc_o, row_m, row_l, warp, g, t, slope, group_full, alpha);
      } else if (pending) {
        issue_pv(v_prev, pa, acc_o[0]);
      }
      wgmma_wait<0>();  // the P V product is done: O may be rescaled, P overwritten
      fence_operands(acc_o[0]);
      fence_p(pa);
      if (dec && rel > 0) {  // this warp no longer reads tile rel - 1's stage
        __syncwarp();
        if ((threadIdx.x & 31) == 0) mbar_arrive(empty + ((rel - 1) % kS) * 8);
      }
      pending = !skip;  // pa holds P_it for the next iteration's P V
      if (!skip) {
        // Most tiles keep every row's maximum (lazy rescaling, scores_to_probs): skip the 64
        // multiplies unless some row of the warp moved it.
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) rescale(acc_o[0], alpha);
        pack_p(s[0], pa);
      }
      // The next tile's cut, made here, off the path between its stage's arrival and its QK
      // issue: made there, its chain of loads, ballots and compares held every tile's QK chain
      // back. (Unconditional: past the end it makes the last tile's again. Made between the QK
      // and P V issues it was spill-free only in the rope_window kernel's TMA path; between the
      // P V issue and the wait for S, ptxas serialised every wgmma, C7514.)
      if constexpr (kWindow) cut = cut_of(p, w, rt, it + 1 < w.it_end ? it + 1 : it, gq_lo, gq_hi, wq_lo, wq_hi);
    }
    // The last tile's P V.
    if (pending) issue_pv(sV + ((n - 1) % kS) * kKVTile, pa, acc_o[0]);
    wgmma_wait<0>();
    fence_operands(acc_o[0]);
    fence_p(pa);
  }
};

}  // namespace attnfuse_kernels
