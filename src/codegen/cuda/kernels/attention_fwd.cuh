// The fused forward attention kernel for sm_80 and newer (mma.sync m16n8k16, ldmatrix,
// a cp.async K/V pipeline of Spec::kStages stages, online softmax in the exp2 domain). On Hopper
// (Spec::kWgmma, sm_90a) the same template runs its two matrix products as warpgroup MMAs
// (wgmma.cuh) on 128-byte swizzled tiles; everything between them is shared. It is a template over a Spec
// that codegen emits: the Spec carries the structure (element type, head dim, tile shape, which
// masks, which normalization) as constants and the score modifiers as one small hook body.
// RoPE (rope.cuh) enters at three points: Q and K tiles rotated in shared memory (fused
// placement), rope_window's per-tile pair plan masking the Q fragments of the QK product (or,
// in the wgmma form, skipping its leading k steps: WindowCut), and its boundary pairs corrected
// per cell before the softmax. What a block works on (sequence,
// query rows, key tiles, split) comes from work.cuh: batch entries, documents, paged sequences,
// GQA-packed decode tiles and BlockMask rows all reduce to one Work record.
#pragma once

#include "combine.cuh"
#include "block_merge.cuh"
#include "kv_copy.cuh"
#include "params.cuh"
#include "primitives.cuh"
#include "rope.cuh"
#include "wgmma.cuh"
#include "work.cuh"

namespace attnfuse_kernels {

// What a modifier hook may read about the cell it modifies.
// Positions are 32-bit here: the host refuses calls whose positions do not fit (see
// CudaKernel::launch), which keeps the per-cell arithmetic in single registers.
struct CellCtx {
  int b, h;               // batch, query head
  int i, j;               // query row, key index (within the document / paged sequence)
  int len_k;              // keys of the sequence (a hook reads key j only when j < len_k)
  int delta;              // position of query i minus position of key j
  float slope;            // ALiBi slope of head h (0 when the program has no alibi)
  float bias;             // additive_bias: the bias of cell (i, j), 0 past the keys or the queries
};

template <class Kernel>
struct WgmmaMainloop;  // fwd_wgmma.cuh: the Hopper loop over key tiles

// additive_bias: a chunk of four keys of a bias row (FwdKernel::bias_values reads it from an
// address aligned to its size), its two key pairs (keys 0-1 and 2-3), the swap of a pair with the
// other thread of a quad's pair, and one key read alone. A 16-bit bias is the kernel's Element:
// 8-byte chunks, a pair per 32-bit word.
template <class B, class Element>
struct BiasQuad {
  using Chunk = uint2;
  using Pair = u32;
  static __device__ __forceinline__ Pair lo(const Chunk& c) { return c.x; }
  static __device__ __forceinline__ Pair hi(const Chunk& c) { return c.y; }
  static __device__ __forceinline__ Pair swap(Pair p) { return __shfl_xor_sync(0xffffffffu, p, 1); }
  static __device__ __forceinline__ void put(Pair p, float (&v)[2]) { unpack2<Element>(p, v[0], v[1]); }
  static __device__ __forceinline__ float at(const B* row, int j) {
    return ElementTraits<Element>::to_float(row[j].bits);
  }
};
// An fp32 bias: 16-byte chunks, a pair per two floats.
template <class Element>
struct BiasQuad<float, Element> {
  using Chunk = float4;
  using Pair = float2;
  static __device__ __forceinline__ Pair lo(const Chunk& c) { return make_float2(c.x, c.y); }
  static __device__ __forceinline__ Pair hi(const Chunk& c) { return make_float2(c.z, c.w); }
  static __device__ __forceinline__ Pair swap(Pair p) {
    return make_float2(__shfl_xor_sync(0xffffffffu, p.x, 1), __shfl_xor_sync(0xffffffffu, p.y, 1));
  }
  static __device__ __forceinline__ void put(Pair p, float (&v)[2]) { v[0] = p.x, v[1] = p.y; }
  static __device__ __forceinline__ float at(const float* row, int j) { return row[j]; }
};

template <class Spec>
struct FwdKernel {
  using SpecType = Spec;
  using Element = typename Spec::Element;
  using Traits = ElementTraits<Element>;
  using W = Work<Spec>;
  using KV = KvCopy<FwdKernel>;  // kv_copy.cuh: the K/V copies, stage barriers and producer warp
  using Merge = BlockMerge<FwdKernel>;  // block_merge.cuh: key-warp and split-part merges
  static constexpr int kD = Spec::kHeadDim;
  static constexpr int kBM = Spec::kBlockM;
  static constexpr int kBN = Spec::kBlockN;
  static constexpr int kWarps = Spec::kWarps;
  static constexpr int kThreads = kWarps * 32;
  // Warps split the tile's rows (kRowWarps of them) and, in the narrow decode tile, its keys too:
  // kKeyWarps warps share the same 16 rows, each taking a kBN / kKeyWarps slice of every key
  // tile with its own softmax state, merged through shared memory at the end (a decode tile has
  // a handful of real rows, so without the key split one warp would do all the math).
  static constexpr int kKeyWarps = Spec::kKeyWarps;
  static constexpr int kRowWarps = kWarps / kKeyWarps;
  static constexpr int kBNW = kBN / kKeyWarps;  // keys per warp per tile
  static constexpr int kAtoms = kBM / (16 * kRowWarps);  // 16-row MMA atoms per warp
  static constexpr int kStride = kD + 8;  // smem row pitch (elements): +16 B spreads ldmatrix rows over banks
  // Hopper: each warpgroup (4 warps, 64 rows) issues S = Q K^T and O += P V as wgmma; tiles are
  // stored swizzled instead of padded (wgmma.cuh). The mma.sync-only features (in-kernel RoPE
  // tables, decode tiles) read the padded layout, so the tile pass never pairs them with kWgmma.
  static constexpr bool kWgmma = Spec::kWgmma;
  static constexpr int kPitch = kWgmma ? kD : kStride;  // elements per Q row in smem
  // Hopper decode tiles take K/V by TMA (Spec::kTmaKV without kWgmma): the copy engine writes
  // 128-byte swizzled stages, which ldmatrix reads as it reads the padded ones (each lane names
  // its row's 16-byte chunk), so only the K/V offsets change; Q stays padded.
  static constexpr bool kTmaDecode = Spec::kTmaKV && !kWgmma;
  // ... and, with Spec::kProducerWarp, one more warp (threads kThreads .. kThreads + 31) issues
  // the TMA copies of the decode tiles or of the wgmma prefill while the kWarps computing warps
  // only compute: they wait for a stage's "full" barrier and release it on its "empty" one, with
  // no block barrier per tile (KvCopy::producer, kv_copy.cuh).
  static constexpr bool kProducer = Spec::kProducerWarp;
  static_assert(!kProducer || Spec::kTmaKV, "the producer warp issues TMA copies");
  // The wgmma tile's producer is a whole warpgroup (warps kWarps .. kWarps + 3), because
  // setmaxnreg moves registers per warpgroup: it keeps kProducerRegs, the computing warpgroups
  // take what is left of the 64K file, in setmaxnreg's steps of 8: two computing warpgroups
  // (384 threads launch at 168 each) get 240, three (the 192-row tile, 512 at 128) get 160.
  // One of its warps issues; the other three leave after the block barrier. (The host sizes the
  // block: codegen::cuda::threads_per_block.)
  static constexpr int kProducerRegs = 24;
  static constexpr int kRegsLeft = (65536 - 128 * kProducerRegs) / kThreads / 8 * 8;
  static constexpr int kComputeRegs = kRegsLeft < 240 ? kRegsLeft : 240;
  static constexpr bool kSwizzledKV = kWgmma || kTmaDecode;
  static constexpr int kKVPitch = kSwizzledKV ? kD : kStride;
  static constexpr int kQTile = kBM * kPitch, kKVTile = kBN * kKVPitch;
  static constexpr int kDT = kD / 8;      // 8-wide tiles along D
  static constexpr int kNT = kBNW / 8;    // 8-wide tiles along the warp's keys
  static_assert(kWarps % kKeyWarps == 0 && kBM % (16 * kRowWarps) == 0, "block_m must be a multiple of 16 * row warps");
  static_assert(kBNW % 16 == 0, "each warp's key slice must be a multiple of 16");
  static_assert(kD % 16 == 0 && kBN % 16 == 0, "head dim and block_n must be multiples of 16");

  // Plain softmax programs keep raw q.k in the score tile and fold the scale into exp2's FFMA.
  static constexpr bool kRawScores = !Spec::kHasModifiers && !Spec::kRelu;

  // RoPE: kRotate rotates Q once per query tile and each K tile on arrival (fused mode; in
  // prerotate mode Q and K arrive rotated). kPairWindow is rope_window's per-pair pruning.
  static constexpr bool kRotate = Spec::kRotate;
  static constexpr bool kPairWindow = Spec::kPairWindow;
  static constexpr bool kNeox = Spec::kNeox;
  // Per-pair RoPE tables staged in smem (the wgmma form's rope_window stages its limits alone).
  static constexpr bool kTables = kRotate || (kPairWindow && !kWgmma);
  using Plan = PairPlan<kD>;
  // rope_window's compile-time pruning level for tiles far from the diagonal: the 32
  // highest-frequency pairs dead (PairPlan::level >= 2). Every level costs one more instance of
  // the step in the cold compile (about 0.8 s each at D = 128), and the others pay little:
  // level 1 holds for a band of a few dozen tiles per row (|Δ| between ~λ_15 and ~λ_31), level
  // 3 needs |Δ| beyond λ_47 (~10^5-10^6 positions for Llama-3 and Qwen2.5 RoPE). Tiles below
  // level 2 mask their dead pairs instead of skipping them.
  static constexpr int kPruneLevel = kPairWindow && kD / 32 >= 2 ? 2 : 0;

  // Is 16-dim chunk kk made only of pairs below 16 * level (full rotation)? neox: pair group j
  // is chunks j (a dims) and j + D/32 (b dims); gptj: chunks 2j and 2j + 1.
  static constexpr bool chunk_pruned(int kk, int level) {
    if (kNeox) return (kk < kD / 32 ? kk : kk - kD / 32) < level;
    return kk / 2 < level;
  }

  static constexpr int kTableBytes = kTables ? RopeTableBytes<kD / 2>::value : 0;
  // rope_window's wgmma form stages only the window limits, behind the 64 B of mbarriers.
  static constexpr int kWgmmaLimitsOffset = 64;

  // K/V pipeline depth: tile it is computed while tiles it+1 .. it+kStages-1 load. rope_window
  // carries each tile's pair plan from the step that loads it to the step that uses it, which
  // holds one plan ahead: two stages.
  static constexpr int kStages = Spec::kStages;
  static_assert(kStages >= 2 && (!kPairWindow || kStages == 2 || kWgmma), "rope_window pipelines two K/V stages");

  // rope_window in the wgmma form reads Q and K prerotated with interleaved pairs (WindowCut), and
  // plans each tile when it computes it, so any pipeline depth serves.
  // Two warpgroups of 64 rows, or three at D = 64 (FlashAttention-3's 192-row tile: the 128-float
  // S and P V state of D = 64 fits the 160 registers each of three warpgroups gets).
  static_assert(!kWgmma || (kD % 64 == 0 && kD <= 128 && kWarps == kBM / 16 &&
                             (kBM == 128 || (kBM == 64 && Spec::kBlockSparse) || (kBM == 192 && kD == 64)) &&
                             kKeyWarps == 1 && !kRotate &&
                             !(kPairWindow && kNeox) && !W::kPack && (kBN == 64 || kBN == 128) &&
                             (kStages == 3 || kStages == 4)),
                "the wgmma form covers the 128-row prefill tile (192 rows at D = 64), D 64 or 128, with "
                "prerotated RoPE");
  // Shared memory: Q tile, kStages K and V tiles (kPitch elements per row), then the RoPE tables
  // or, in the wgmma form, its mbarriers (64 B: two per stage at most); the wgmma form's swizzle
  // atoms need 1024-byte alignment, which run() makes from 1 KB of slack. Paged decode tiles add
  // their staged page ids (KvCopy::kPageList ints) after the tables. The launch sizes it with
  // codegen::cuda::shared_memory_bytes.

  // Element offset of 8-element chunk ch of row r in a kRows-row tile.
  template <int kRows>
  static __device__ __forceinline__ int chunk_offset(int r, int ch) {
    if constexpr (kWgmma) return sw128_offset<kRows>(r, ch);
    else return r * kStride + ch * 8;
  }
  // ... of a K or V tile.
  static __device__ __forceinline__ int kv_offset(int r, int ch) {
    if constexpr (kSwizzledKV) return sw128_offset<kBN>(r, ch);
    else return r * kStride + ch * 8;
  }
  static_assert(!kTmaDecode || (kD % 64 == 0 && kD <= 128 && !kPairWindow),
                "TMA decode tiles copy whole 64-dim column blocks of K/V (fused RoPE rotates them in place)");
  // Where the RoPE tables sit: after the V stages, behind the TMA decode tiles' stage barriers.
  static __device__ __forceinline__ char* tables_smem(Element* sV) {
    return reinterpret_cast<char*>(sV + kStages * kKVTile) + (kTmaDecode ? KV::kStageBarrierBytes : 0);
  }

  // Per-cell state of the block-sparse mask for one key tile: the mask block's cell bitmap (null
  // when the block is full) and the block's origin.
  struct BlockCells {
    const unsigned long long* bits;
    int q0, k0;
  };

  // Copy rows [0, kRows) of a tile into smem: row r from row_ptr(r), or zeros where that is null
  // (cp.async with 0 source bytes reads nothing but still takes a valid address: `base`).
  // Chunk c of 8 dims is read only where bit c of `need8` is set (rope_window's dead pairs).
  template <int kRows, bool kKV = false, class RowPtr>
  static __device__ __forceinline__ void load_tile(Element* smem, const void* base, RowPtr&& row_ptr,
                                                   u32 need8 = 0xffffffffu) {
    constexpr int kChunks = kD / 8;  // 16-byte chunks per row
    for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      const Element* row = row_ptr(r);
      const bool ok = row != nullptr && ((need8 >> ch) & 1u);
      const int off = kKV ? kv_offset(r, ch) : chunk_offset<kRows>(r, ch);
      cp_async_16(smem_addr(smem + off), ok ? static_cast<const void*>(row + ch * 8) : base, ok ? 16 : 0);
    }
  }


  // The block-sparse cells of key tile nb (iteration it): its bitmap (null for a full block) and
  // the origin of the mask block holding it.
  static __device__ __forceinline__ BlockCells cells_of(const FwdParams& p, const W& w, int it, int nb) {
    return {w.cell_bits(p, it), w.bs_q0, (nb / w.bs_sub) * p.bs_block_k};
  }

  // The keys a query at position qpos keeps under the program's sequence masks: j in [lo, hi)
  // (lo is 0 without a window). One range per row, so that a cell's test is two compares of a
  // per-row bound with the cell's compile-time column offset, FlashAttention-3's form: the
  // per-cell position arithmetic held registers the 192-row tile's 160 cannot spare.
  //   key j is kept iff j < len_k, and causal: j <= qpos, and window w: |qpos - j| < w.
  static __device__ __forceinline__ void key_range(const FwdParams& p, const W& w, int qpos, int& lo, int& hi) {
    long long h = w.len_k, l = 0;
    if constexpr (Spec::kCausal) h = h < (long long)qpos + 1 ? h : (long long)qpos + 1;
    if constexpr (Spec::kSlidingWindow) {
      const long long up = (long long)qpos + p.window, down = (long long)qpos - p.window + 1;
      h = h < up ? h : up;
      l = down > 0 ? down : 0;
    }
    hi = (int)(h > l ? h : l);  // an empty range stays empty
    lo = (int)l;
  }

  // rope_window's pair plan of the tile's queries x key tile nb.
  static __device__ __forceinline__ Plan plan_of(const W& w, const RopeTables& rt, int nb) {
    const int n0 = nb * kBN;
    int k_last = (n0 + kBN < w.len_k ? n0 + kBN : w.len_k) - 1;
    if (k_last < n0) k_last = n0;
    return pair_plan<kD, kNeox>(rt, w.i_lo + w.q_offset, w.i_hi + w.q_offset, n0, k_last);
  }

  // Fused placement: rotate a K tile that has landed in smem to key positions n0, n0 + 1, ...
  // (TMA decode tiles: in the swizzled layout the copy engine landed it in.)
  static __device__ __forceinline__ void rotate_k_tile(const RopeTables& rt, Element* k_tile, int n0) {
    rotate_tile<Element, kNeox, kBN, kSwizzledKV ? kSwizzled128 : kStride, kThreads, Spec::kRopeHalf>(k_tile, n0, rt);
  }

  // rope_window: the Q fragment registers of 16-dim chunk kk with every dim that is not live in
  // this tile zeroed, so the MMA adds live pairs and unrotated dims only (dead pairs' K dims may
  // not even be loaded; boundary pairs are added per cell afterwards). Thread t holds dims
  // 2t, 2t+1 (registers 0, 1) and 2t+8, 2t+9 (registers 2, 3) of the chunk.
  static __device__ __forceinline__ void mask_q_fragment(u32 (&qa)[4], const Plan& plan, int kk, int t) {
    const u32 word = plan.live_dims[kk >> 1] >> ((kk & 1) * 16);
    const u32 lo = (word >> (2 * t)) & 3u, hi = (word >> (2 * t + 8)) & 3u;
    const u32 mlo = ((lo & 1u) ? 0x0000ffffu : 0u) | ((lo & 2u) ? 0xffff0000u : 0u);
    const u32 mhi = ((hi & 1u) ? 0x0000ffffu : 0u) | ((hi & 2u) ? 0xffff0000u : 0u);
    qa[0] &= mlo;
    qa[1] &= mlo;
    qa[2] &= mhi;
    qa[3] &= mhi;
  }

  // Virtual row of this thread's accumulator row (atom a, half hf).
  static __device__ __forceinline__ int acc_row(const W& w, int warp, int a, int g, int hf) {
    return w.m0 + warp * 16 * kAtoms + a * 16 + g + hf * 8;
  }

  // additive_bias: the bias row of virtual row r (query i of head h, W::row_of) from the block's
  // first key on, or null past the queries. Padding rows of a GQA-packed decode tile map to heads
  // past the group (row_of): only real rows (r < w.rows) may form a bias pointer. B is the bias's
  // element: float, or the kernel's Element where FwdParams::bias_16bit says so.
  template <class B>
  static __device__ __forceinline__ const B* bias_row_of(const FwdParams& p, const W& w, int r, int i, int h) {
    return i < w.len_q && r < w.rows ? static_cast<const B*>(p.bias) + w.b * p.bias_stride[0] + h * p.bias_stride[1] +
                                           (w.q_row0 + i) * p.bias_stride[2] + w.k_row0
                                     : nullptr;
  }

  // additive_bias: row `row`'s bias at this thread's cells of the warp's key slice (column
  // n * 8 + e from key j0 = n0 + kn + 2t), 0 past len_k (kBounded: the slice may reach past it)
  // or where the row is null; B is float or the kernel's 16-bit Element (BiasQuad). A warp's bias
  // load touches eight rows' lines (its accumulator layout), so the loads' L1 wavefronts, not the
  // tensor cores, bound a bias tile. Where the row is aligned to a chunk of four keys at the slice
  // (16 bytes of fp32, 8 of a 16-bit bias: bias strides that are multiples of 4, as torch's
  // contiguous tensors of such lengths have) and the slice lies before len_k, the two threads of
  // each pair in a quad read two chunks each per 16 keys and swap halves: thread t holds keys 2t,
  // 2t + 1 of each 8-key group, so thread t loads keys 4(t/2) + 8(t&1) .. + 3 and keeps the half
  // that is its own: a quarter of the one-key form's loads and L1 wavefronts. Other rows take
  // one-key loads. The choice is made per row, so no load waits behind a branch (a test per key
  // pair serialised them: 3.61 against 1.37-1.39 ms on an H100). Every lane runs the shuffles
  // (the quad's rows are one row, so both take the same path). A 16-bit bias costs the same loads
  // for half the bytes: 4% faster than fp32 on an H100 (GPT-2 4k). Its 16-byte loads of whole
  // 8-key groups, transposed in the quad by two shuffle rounds (half the loads per key), timed
  // level and were not kept (bench/experiments/bias16_quad_transpose.patch).
  template <bool kBounded, class B>
  static __device__ __forceinline__ void bias_values(const B* row, int j0, int len_k, int t, float (&v)[kNT][2]) {
    using Q = BiasQuad<B, Element>;
    const int k0 = j0 - 2 * t;
    const bool quad = row && (!kBounded || k0 + kBNW <= len_k) &&
                      (reinterpret_cast<unsigned long long>(row + k0) & (sizeof(typename Q::Chunk) - 1)) == 0;
    const bool odd = t & 1;
    const B* src = quad ? row + k0 + 4 * (t >> 1) + 8 * (t & 1) : nullptr;
#pragma unroll
    for (int s = 0; s < kNT / 2; ++s) {
      typename Q::Chunk x = {};
      if (quad) x = *reinterpret_cast<const typename Q::Chunk*>(src + 16 * s);
      const typename Q::Pair r = Q::swap(odd ? Q::lo(x) : Q::hi(x));  // keys 2t, 2t + 1 of the other group
      Q::put(odd ? r : Q::lo(x), v[2 * s]);
      Q::put(odd ? Q::hi(x) : r, v[2 * s + 1]);
    }
    if (!quad) {
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = j0 + 8 * n + e;
          v[n][e] = row && (!kBounded || j < len_k) ? Q::at(row, j) : 0.f;
        }
    }
  }

  // additive_bias: the values of row r (bias_row_of) at this thread's cells, in whichever dtype
  // the call's bias has (the choice is one uniform branch per row).
  template <bool kBounded>
  static __device__ __forceinline__ void row_bias(const FwdParams& p, const W& w, int r, int i, int h, int j0,
                                                  int t, float (&v)[kNT][2]) {
    if constexpr (sizeof(Element) == 2) {
      if (p.bias_16bit) {
        bias_values<kBounded>(bias_row_of<Element>(p, w, r, i, h), j0, w.len_k, t, v);
        return;
      }
    }
    bias_values<kBounded>(bias_row_of<float>(p, w, r, i, h), j0, w.len_k, t, v);
  }

  // rope_window (mma.sync): add each boundary pair's term q_a k_a + q_b k_b to the raw scores of
  // the cells within its window (|Δ| <= limit), reading the pair's rotated dims straight from the
  // Q and K tiles. Boundary pairs are few per tile (their limits must fall inside the tile's range
  // of |Δ|), so this per-cell work stays small next to the MMA. (The wgmma form takes terms back
  // instead: WgmmaMainloop::correct_window.)
  static __device__ __forceinline__ void add_boundary_terms(const W& w, const RopeTables& rt,
                                                            float (&acc_s)[kAtoms][kNT][4],
                                                            const Plan& plan, const Element* sQ,
                                                            const Element* k_tile, int n0, int warp, int kn,
                                                            int g, int t) {
    // Δ of accumulator row (a, hf), column n*8 + 2t + e is d0[a][hf] - 8n - e.
    int d0[kAtoms][2];
#pragma unroll
    for (int a = 0; a < kAtoms; ++a)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        int i, h;
        w.row_of(acc_row(w, warp, a, g, hf), i, h);
        d0[a][hf] = i + w.q_offset - n0 - kn - 2 * t;
      }
#pragma unroll
    for (int wd = 0; wd < (kD / 2 + 31) / 32; ++wd) {
      for (u32 m = plan.boundary[wd]; m; m &= m - 1u) {
        const int pair = 32 * wd + __ffs(m) - 1;
        const int lim = rt.limit[pair];
        const int da = kNeox ? pair : 2 * pair;
        const int db = kNeox ? pair + rt.half : 2 * pair + 1;
        float qa[kAtoms][2], qb[kAtoms][2];
#pragma unroll
        for (int a = 0; a < kAtoms; ++a)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            const int rl = warp * 16 * kAtoms + a * 16 + g + hf * 8;
            qa[a][hf] = Traits::to_float(sQ[rl * kStride + da].bits);
            qb[a][hf] = Traits::to_float(sQ[rl * kStride + db].bits);
          }
#pragma unroll
        for (int n = 0; n < kNT; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const Element* krow = k_tile + (kn + n * 8 + 2 * t + e) * kStride;
            const float ka = Traits::to_float(krow[da].bits), kb = Traits::to_float(krow[db].bits);
#pragma unroll
            for (int a = 0; a < kAtoms; ++a)
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) {
                const int d = d0[a][hf] - 8 * n - e;
                if (abs(d) <= lim) acc_s[a][n][2 * hf + e] += qa[a][hf] * ka + qb[a][hf] * kb;
              }
          }
      }
    }
  }

  // Scores -> probabilities for one key tile: online softmax (exp2 domain) or ReLU. kMask is
  // false for tiles wholly inside every mask, which then run without a per-cell check.
  // kDeferRescale (the wgmma mainloop, whose O is still being accumulated asynchronously): the
  // factors that rescale O go to `alpha_out` (atom a, half hf at a * 2 + hf) instead.
  template <bool kMask, bool kDeferRescale = false>
  static __device__ __forceinline__ void scores_to_probs(const FwdParams& p, const W& w, const BlockCells& cells,
                                                         float (&acc_s)[kAtoms][kNT][4],
                                                         float (&acc_o)[kAtoms][kDT][4], float (&row_m)[kAtoms][2],
                                                         float (&row_l)[kAtoms][2], int n0, int warp,
                                                         int kn, int g, int t, float slope,
                                                         float* alpha_out = nullptr) {
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        int i, h;
        w.row_of(acc_row(w, warp, a, g, hf), i, h);
        const int qpos = i + w.q_offset;
        if constexpr (Spec::kAlibi && W::kPack)
          slope = p.alibi_slopes ? p.alibi_slopes[h] : standard_alibi_slope(h, p.heads_q);
        float bias[kNT][2];
        if constexpr (Spec::kBias)
          row_bias<kMask>(p, w, acc_row(w, warp, a, g, hf), i, h, n0 + kn + 2 * t, t, bias);
        float tile_max = neg_inf();
        // This row keeps the cells of column offset n * 8 + e (from column n0 + kn + 2t)
        // in [lo_c, hi_c) (key_range).
        int lo_c = 0, hi_c = 0;
        if constexpr (kMask) {
          key_range(p, w, qpos, lo_c, hi_c);
          const int base = n0 + kn + 2 * t;
          lo_c -= base;
          hi_c -= base;
        }
        // Block-sparse partial block: the bits of this row's kBNW keys (the warp's part of the
        // tile, which lies inside one mask block) go to registers once per row, and each cell
        // tests its bit there. (One global load per cell cost the 64-block BigBird at 4k 0.640
        // against 0.533 ms on the H200, bench/results/2026-12-01-h200-session7, and its fallback
        // held 27 registers at D = 64 even where no block is partial.) With kBNW a multiple of 64
        // the row's bits start on a word: the mask's block_k is a multiple of the tile's (the
        // runtime checks) and the warp's keys start kBNW into it. Narrower slices (decode's
        // key-split warps, 32-key tiles) funnel-shift them out of the two words they straddle,
        // reading the second only when it holds some. The bitmap holds block_q x block_k bits per
        // block and the tile lies inside its block, so padding rows read inside it too.
        constexpr int kRowWords = (kBNW + 63) / 64;
        unsigned long long row_bits[kRowWords];
        if constexpr (Spec::kBlockSparse && kMask) {
          if (cells.bits) {
            const int b0 = (i - cells.q0) * p.bs_block_k + (n0 + kn - cells.k0);
            const unsigned long long* src = cells.bits + (b0 >> 6);
            if constexpr (kBNW % 64 == 0) {
#pragma unroll
              for (int k = 0; k < kRowWords; ++k) row_bits[k] = src[k];
            } else {
              const int sh = b0 & 63;
              const unsigned long long lo = src[0], hi = sh + kBNW > 64 ? src[1] : 0ull;
              row_bits[0] = sh == 0 ? lo : (lo >> sh) | (hi << (64 - sh));
            }
          }
        }
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = n0 + kn + n * 8 + 2 * t + e;
            float s = acc_s[a][n][2 * hf + e];
            if constexpr (Spec::kHasModifiers || Spec::kRelu) {
              CellCtx c{w.b, h, i, j, w.len_k, qpos - j, slope, Spec::kBias ? bias[n][e] : 0.f};
              s = Spec::modify(s * p.scale, p, c);
              if constexpr (!Spec::kRelu) s *= kLog2e;
            }  // else: raw q.k; the scale is folded into the exp2 argument below (one FFMA)
            if (kMask) {
              const int col = n * 8 + e;
              bool kept = col < hi_c && (!Spec::kSlidingWindow || col >= lo_c);
              if (Spec::kBlockSparse && cells.bits && kept)
                kept = (row_bits[(n * 8) / 64] >> (((n * 8) & 63) + 2 * t + e)) & 1ull;
              if (!kept) s = neg_inf();
            }
            acc_s[a][n][2 * hf + e] = s;
            tile_max = fmaxf(tile_max, s);
          }
        }
        if constexpr (Spec::kRelu) {
          // p = max(s, 0); the row's normaliser is its number of kept keys (counted in row_l).
          float kept = 0.f;
#pragma unroll
          for (int n = 0; n < kNT; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float s = acc_s[a][n][2 * hf + e];
              kept += (s != neg_inf()) ? 1.f : 0.f;
              acc_s[a][n][2 * hf + e] = fmaxf(s, 0.f);
            }
          row_l[a][hf] += kept;
        } else {
          tile_max = quad_max(tile_max);
          if constexpr (kRawScores) tile_max *= p.scale_log2;  // scale > 0 keeps the argmax
          // Lazy rescaling: the row keeps its running maximum unless this tile's exceeds it by
          // more than 8 (exp2 domain), so probabilities stay at most 2^8 and O and l need no
          // rescale on most tiles (alpha = 1). O / l and the LSE are the same in exact arithmetic
          // for any reference value. (A row with no kept key yet has m = -inf: -inf - -inf is
          // NaN, which fails the test and takes the tile's maximum.) Not in rounding, though: P V
          // reads p rounded to the element type while l sums it unrounded, and a peaked row's
          // largest p, exactly 1 under the running maximum, lands anywhere up to 2^8 and takes a
          // rounding error the reference's does not. On the H200 an alibi decode row (bf16 D 64,
          // 2049 keys, p = 0.74 on one key) came out 2.34375 for 2.32927, 0.0145 against a 0.0107
          // bound (bench/results/2026-12-03-h200-session28/). The decode tiles, memory-bound,
          // rescale eagerly: 0.6-1.3% faster than lazily there (same record, call3/).
          constexpr float kLazyMargin = W::kPack ? 0.f : 8.f;
          const float m_new =
              tile_max - row_m[a][hf] <= kLazyMargin ? row_m[a][hf] : fmaxf(row_m[a][hf], tile_max);
          // A row that has seen no kept key yet keeps m = -inf; use 0 so exp2 never sees inf - inf.
          const float m_use = m_new == neg_inf() ? 0.f : m_new;
          // Exactly 1 where the maximum is kept (ex2.approx is not specified exact at 0).
          const float alpha = m_new == row_m[a][hf] ? 1.f : fast_exp2(row_m[a][hf] - m_use);
          row_m[a][hf] = m_new;
          float sum = 0.f;
#pragma unroll
          for (int n = 0; n < kNT; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float x = acc_s[a][n][2 * hf + e];
              const float pr = fast_exp2(kRawScores ? fmaf(x, p.scale_log2, -m_use) : x - m_use);
              acc_s[a][n][2 * hf + e] = pr;
              sum += pr;
            }
          row_l[a][hf] = row_l[a][hf] * alpha + sum;
          if constexpr (kDeferRescale) {
            alpha_out[a * 2 + hf] = alpha;
          } else {
#pragma unroll
            for (int d = 0; d < kDT; ++d) {
              acc_o[a][d][2 * hf] *= alpha;
              acc_o[a][d][2 * hf + 1] *= alpha;
            }
          }
        }
      }
    }
  }

  // S = Q K^T for this warp's rows with mma.sync: Q and K fragments through ldmatrix from the
  // padded tiles; rope_window masks the Q fragments of dead pairs and kLevel skips pruned chunks.
  template <int kLevel>
  static __device__ __forceinline__ void qk_mma(const Element* sQ, const Element* k_tile, int warp, int kn, int lane,
                                                int t, const Plan& plan, float (&acc_s)[kAtoms][kNT][4]) {
#pragma unroll
    for (int a = 0; a < kAtoms; ++a)
#pragma unroll
      for (int n = 0; n < kNT; ++n) acc_s[a][n][0] = acc_s[a][n][1] = acc_s[a][n][2] = acc_s[a][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      if (kLevel > 0 && chunk_pruned(kk, kLevel)) continue;  // folded after unrolling: no branch
      u32 qa[kAtoms][4];
#pragma unroll
      for (int a = 0; a < kAtoms; ++a) {
        const int row = warp * 16 * kAtoms + a * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(qa[a], smem_addr(sQ + row * kStride + kk * 16 + (lane >> 4) * 8));
        if constexpr (kPairWindow) mask_q_fragment(qa[a], plan, kk, t);
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        u32 kb[4];
        const int row = kn + np * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(kb, smem_addr(k_tile + kv_offset(row, 2 * kk + ((lane >> 3) & 1))));
#pragma unroll
        for (int a = 0; a < kAtoms; ++a) {
          mma_16816<Element>(acc_s[a][2 * np], qa[a], kb[0], kb[1]);
          mma_16816<Element>(acc_s[a][2 * np + 1], qa[a], kb[2], kb[3]);
        }
      }
    }
  }

  // O += P V with mma.sync: the S accumulators are already laid out as the A operand.
  static __device__ __forceinline__ void pv_mma(const Element* v_tile, int kn, int lane,
                                                const float (&acc_s)[kAtoms][kNT][4], float (&acc_o)[kAtoms][kDT][4]) {
#pragma unroll
    for (int kk = 0; kk < kBNW / 16; ++kk) {
      u32 pa[kAtoms][4];
#pragma unroll
      for (int a = 0; a < kAtoms; ++a) {
        pa[a][0] = Traits::pack(acc_s[a][2 * kk][0], acc_s[a][2 * kk][1]);
        pa[a][1] = Traits::pack(acc_s[a][2 * kk][2], acc_s[a][2 * kk][3]);
        pa[a][2] = Traits::pack(acc_s[a][2 * kk + 1][0], acc_s[a][2 * kk + 1][1]);
        pa[a][3] = Traits::pack(acc_s[a][2 * kk + 1][2], acc_s[a][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        u32 vb[4];
        const int row = kn + kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4_trans(vb, smem_addr(v_tile + kv_offset(row, 2 * dp + (lane >> 4))));
#pragma unroll
        for (int a = 0; a < kAtoms; ++a) {
          mma_16816<Element>(acc_o[a][2 * dp], pa[a], vb[0], vb[1]);
          mma_16816<Element>(acc_o[a][2 * dp + 1], pa[a], vb[2], vb[3]);
        }
      }
    }
  }

  // One key tile (iteration it of the block's list): wait for it, prefetch the tile kStages - 1
  // ahead into the stage computed last, S = Q K^T, scores -> probabilities, O += P V. A template on kMask so that the
  // steps over tiles wholly inside the masks are straight-line code with no per-cell check (the
  // scheduler can then hoist the V fragment loads over the softmax).
  template <bool kMask, int kLevel>
  static __device__ __forceinline__ void step(const FwdParams& p, const W& w, const RopeTables& rt, int it,
                                              const Element* sQ, Element* sK, Element* sV, bool warp_active,
                                              int warp, int kn, int lane, int g, int t, float slope,
                                              Plan& plan, float (&acc_o)[kAtoms][kDT][4],
                                              float (&row_m)[kAtoms][2], float (&row_l)[kAtoms][2]) {
    const int rel = it - w.it_begin;
    const int stage = rel % kStages;
    const int nb = w.tile(p, it);
    const bool tma = kTmaDecode && p.tma_kv != 0;  // uniform over the block
    const bool produced = kProducer && tma;       // the producer warp loads the tiles
    if (produced) {
      if (rel == 0) cp_async_wait<0>();  // Q, the only cp.async group
      mbar_wait(KV::stage_full(sV) + stage * 8, (rel / kStages) & 1);
      // compute-sanitizer racecheck reports these stores against other warps' reads of the
      // stage's previous tile (bench/results/2026-12-02-h200-session17/). Those reads come before
      // the readers' arrivals on the empty barrier, which the producer waits for before its
      // arrival on this full barrier: ordered, through a third warp that racecheck does not
      // follow. The producer cannot zero the rows itself: the last box's rows past the length
      // land after it issues (tried; the paged tests failed).
      bool zeroed = false;
      if constexpr (KV::kZeroTailRows) zeroed = KV::zero_tail_rows(w, sV + stage * kKVTile, nb * kBN);
      if (rel == 0 || zeroed) KV::compute_sync();  // Q, or the zeroed V rows, seen by every computing warp
    } else if (tma) {
      cp_async_wait<0>();  // Q, the only cp.async group
      mbar_wait(KV::stage_full(sV) + stage * 8, (rel / kStages) & 1);  // the stage's (rel / kStages)-th use
      if constexpr (KV::kZeroTailRows) KV::zero_tail_rows(w, sV + stage * kKVTile, nb * kBN);
    } else {
      cp_async_wait<kStages - 2>();
    }
    if (!produced) __syncthreads();  // tile nb is in smem, and every warp is done with the stage loaded next
    Plan next = plan;
    if (!produced && it + kStages - 1 < w.it_end) {
      const int nb_next = w.tile(p, it + kStages - 1);
      const int to = (rel + kStages - 1) % kStages;
      if constexpr (kPairWindow) next = plan_of(w, rt, nb_next);
      KV::issue_kv(p, w, sK, sV, to, nb_next, kPairWindow ? next.need8 : 0xffffffffu, tma);
    }
    cp_async_commit();  // one group per step, empty or not, so the wait count above holds
    Element* k_tile = sK + stage * kKVTile;
    const Element* v_tile = sV + stage * kKVTile;
    const int n0 = nb * kBN;
    if constexpr (kRotate) {
      rotate_k_tile(rt, k_tile, n0);
      // The copy engine refills this stage later: generic-proxy writes before async-proxy ones
      // take the proxy fence. The producer warp takes part in no barrier of the computing warps.
      if (tma) fence_proxy_async_smem();
      if (produced) KV::compute_sync();  // the rotated K tile is visible to every computing warp
      else __syncthreads();
    }
    if (!warp_active) {  // decode tiles: warps whose rows are all padding only help load
      if constexpr (kPairWindow) plan = next;
      if (produced) KV::release_stage(sV, stage);
      return;
    }

    // S = Q K^T for this warp's rows.
    float acc_s[kAtoms][kNT][4];
    qk_mma<kLevel>(sQ, k_tile, warp, kn, lane, t, plan, acc_s);

    if constexpr (kPairWindow) {
      if (plan.boundary[0] | plan.boundary[1] | plan.boundary[2] | plan.boundary[3])
        add_boundary_terms(w, rt, acc_s, plan, sQ, k_tile, n0, warp, kn, g, t);
      plan = next;
    }

    // Scores -> probabilities (per-cell mask checks only in kMask steps).
    BlockCells cells{nullptr, 0, 0};
    if constexpr (Spec::kBlockSparse && kMask) cells = cells_of(p, w, it, nb);
    scores_to_probs<kMask>(p, w, cells, acc_s, acc_o, row_m, row_l, n0, warp, kn, g, t, slope);

    // O += P V.
    pv_mma(v_tile, kn, lane, acc_s, acc_o);
    if (produced) KV::release_stage(sV, stage);
  }

  // Epilogue: normalise and write O (and LSE) of this thread's rows (row_l already summed over
  // the quad); rows with no kept key give O = 0, LSE = -inf. With split-KV the rows go to the
  // fp32 partial buffers instead (always with their LSE) for the combine kernel.
  // With kKeyWarps > 1 each warp writes the dims slice `kw` it merged (BlockMerge::key_warps), and the
  // first slice's warp the LSE.
  static __device__ __forceinline__ void write_rows(const FwdParams& p, const W& w, int warp, int g, int t,
                                                    float (&acc_o)[kAtoms][kDT][4], float (&row_m)[kAtoms][2],
                                                    float (&row_l)[kAtoms][2], int kw = 0) {
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = acc_row(w, warp, a, g, hf);
        const float l = row_l[a][hf];
        const float inv = l > 0.f ? 1.f / l : 0.f;
        if (r >= w.rows) continue;
        int i, h;
        w.row_of(r, i, h);
        float lse;
        if constexpr (Spec::kRelu) lse = l > 0.f ? logf(l) : neg_inf();
        else lse = l > 0.f ? row_m[a][hf] * kLn2 + logf(l) : neg_inf();
        const af_i64 qi = w.q_row0 + i;
        // Partial rows: split-KV's [split][B * Hq * Nq] layout, or a cut block-sparse tile's
        // slots of kBM rows (Work::part_slot0).
        af_i64 prow = -1;
        if (Spec::kBlockSparse && w.parts > 1) prow = (af_i64)(w.part_slot0 + w.part) * kBM + (r - w.m0);
        else if (p.num_splits > 1)
          prow = w.split * ((af_i64)p.batch * p.heads_q * p.len_q) + ((af_i64)w.b * p.heads_q + h) * p.len_q + qi;
        if (prow >= 0) {
          float2* orow = reinterpret_cast<float2*>(p.part_o + prow * kD);
#pragma unroll
          for (int d = 0; d < kDT; ++d)
            if (in_slice(d, kw)) orow[d * 4 + t] = make_float2(acc_o[a][d][2 * hf] * inv, acc_o[a][d][2 * hf + 1] * inv);
          if (t == 0 && kw == 0) p.part_lse[prow] = lse;
          continue;
        }
        u32* orow = reinterpret_cast<u32*>(static_cast<Element*>(p.o) + w.b * p.o_stride[0] + h * p.o_stride[1] +
                                           qi * p.o_stride[2]);
#pragma unroll
        for (int d = 0; d < kDT; ++d)
          if (in_slice(d, kw)) orow[d * 4 + t] = Traits::pack(acc_o[a][d][2 * hf] * inv, acc_o[a][d][2 * hf + 1] * inv);
        if (p.lse && t == 0 && kw == 0) p.lse[w.b * p.lse_stride[0] + h * p.lse_stride[1] + qi] = lse;
      }
    }
  }

  // Narrow decode tile (kKeyWarps > 1): each warp merges, and writes, one slice of D
  // (BlockMerge::key_warps).
  static constexpr int kDSlice = (kDT + kKeyWarps - 1) / kKeyWarps;  // dims tiles each warp merges
  // Is dims tile d in key slice kw's share? (Always, with one key warp.)
  static __device__ __forceinline__ constexpr bool in_slice(int d, int kw) { return d / kDSlice == kw; }

  // A paged call whose caller says its page table is settled (FwdParams::page_table_settled)
  // reads the table, and stages its page list, before it waits for the kernel ahead of it in the
  // stream (programmatic dependent launch), so those dependent loads overlap that kernel's tail
  // instead of sitting between the wait and the first copy; the producer warp also looks up its
  // first tile's pages before its wait (KvCopy::producer(): Llama-3-70B B1 / 32k settled at pages of 16,
  // the call that takes the producer warp, 0.0408 -> 0.0403 ms,
  // bench/results/2026-12-04-h200-session32/call1/).
  // Nothing else is read early: K, V and Q may be that kernel's output (a cache append). Paged
  // calls take no documents or block masks, whose offsets init() would also read.
  static constexpr bool kSettledTable = Spec::kPagedKV && !Spec::kDocument && !Spec::kBlockSparse;
  // A decode tile by TMA whose launch is a programmatic dependent (FwdParams::early_l2) asks L2
  // for its first K/V tiles (up to kStages) and its Q rows before it waits for the kernel ahead, so its
  // first copies find them there instead of one DRAM latency after the wait. Hints are safe there
  // even where that kernel writes what they name (a cache append, a RoPE): its stores land in L2.
  // The block must know its tiles that early: contiguous K/V, whose init() reads no device
  // memory, and paged K/V with a settled table, whose init() runs early anyway. (A paged block
  // with an unsettled table that guessed its pages from the table as it stood, then read it again
  // after the wait, was 1-4% slower at Llama-3-70B B1 / 32k on an H100: the guess's two dependent
  // loads outlasted the wait. bench/results/2026-12-07-h100-session56/call1/.)
  static constexpr bool kEarlyL2 = kTmaDecode && !Spec::kDocument && !Spec::kBlockSparse;

  // kEarlyL2's hints for the block's first p.early_l2 K/V tiles, at most kStages (contiguous:
  // thread 0; paged: a thread per box), and the lines of its Q rows.
  static __device__ __forceinline__ void early_l2(const FwdParams& p, const W& w) {
    const int tiles = p.early_l2 < kStages ? p.early_l2 : kStages;
    if constexpr (Spec::kPagedKV) {
      const int boxes = kBN / p.tma_box_rows;  // per tile (the box divides the tile)
      for (int c = threadIdx.x; c < tiles * boxes; c += blockDim.x) {
        const int it = w.it_begin + c / boxes;
        if (it < w.it_end) KV::prefetch_box_l2(p, w, w.tile(p, it) * kBN + c % boxes * p.tma_box_rows);
      }
    } else if (threadIdx.x == 0) {
      for (int it = w.it_begin; it < w.it_begin + tiles && it < w.it_end; ++it)
        KV::prefetch_kv_l2(p, w, w.tile(p, it));
    }
    constexpr int kLines = kD * (int)sizeof(Element) / 128;  // 128-byte lines of a Q row
    const int rows = w.rows - w.m0 < kBM ? w.rows - w.m0 : kBM;
    for (int c = threadIdx.x; c < rows * kLines; c += blockDim.x)
      prefetch_l2(w.q_row(p, w.m0 + c / kLines) + (c % kLines) * (128 / (int)sizeof(Element)));
  }

  static __device__ void run(const FwdParams& p, char* smem_raw) {
    // The K/V tensor maps are fetched while the block waits for the grid ahead, not by its first
    // copy.
    if constexpr (Spec::kTmaKV)
      if (threadIdx.x == 0 && p.tma_kv != 0) tma_prefetch_map(p.tma_k), tma_prefetch_map(p.tma_v);
    bool settled = false;
    if constexpr (kSettledTable) settled = p.page_table_settled != 0;
    // init() runs before the wait where it reads no table the grid ahead may write: a settled one,
    // or none (contiguous K/V, where the hints want the block's tiles before the wait).
    constexpr bool kContiguousEarly = kEarlyL2 && !Spec::kPagedKV;
    const bool init_early = settled || kContiguousEarly;
    if (!init_early) grid_dependency_wait();  // (the next grid is let in after the main loop, below)
    if constexpr (kWgmma) smem_raw += (1024 - smem_addr(smem_raw) % 1024) % 1024;  // swizzle atoms
    Element* sQ = reinterpret_cast<Element*>(smem_raw);
    Element* sK = sQ + kQTile;  // kStages stages
    if constexpr (kTmaDecode) sK += (1024 - smem_addr(sK) % 1024) % 1024 / sizeof(Element);  // swizzle atoms
    Element* sV = sK + kStages * kKVTile;
    W w;
    if (!w.init(p)) return;  // uniform over the block: a document slot with no rows
    if (kEarlyL2 && init_early && p.early_l2 != 0) early_l2(p, w);
    if constexpr (kContiguousEarly) grid_dependency_wait();
    // The computing warps copy the block's page ids (the producer warp points at them later).
    bool staged = false;
    if constexpr (KV::kPageList > 0)
      if (!kProducer || threadIdx.x < kThreads) staged = KV::stage_page_list(p, w, KV::page_list(sV), true, settled);
    if constexpr (kProducer) {
      if (threadIdx.x >= kThreads) {
        if constexpr (kWgmma) setmaxnreg_dec<kProducerRegs>();
        KV::producer(p, w, sK, sV, settled);  // (it waits for the grid ahead itself)
        return;
      }
      if constexpr (kWgmma) setmaxnreg_inc<kComputeRegs>();
    }
    if (settled) grid_dependency_wait();
    RopeTables rt{};
    if constexpr (kTables) {
      // A length-dependent scaling over device lengths: every warp finds the call's RoPE length.
      int rope_len = 0;
      if constexpr (Spec::kPagedKV || Spec::kDocument)
        if (p.rope_len.rule != kRopeLenFixed) rope_len = rope_length_on_device<Spec::kPagedKV, Spec::kDocument>(p);
      rt = stage_rope_tables<kD / 2>(p.rope, tables_smem(sV), p.rope_len, rope_len);
      // The pair plan and the rotations read the staged tables. (The producer warp has gone to
      // its own loop: the computing warps' named barrier.)
      if constexpr (kProducer) KV::compute_sync();
      else __syncthreads();
    } else if constexpr (kPairWindow) {
      // The wgmma form: the limits only, published by the loop's first barrier. (It reads Q and K
      // prerotated, which calls with device lengths, and so FwdParams::rope_len, never take.)
      int* limit = reinterpret_cast<int*>(reinterpret_cast<char*>(sV + kStages * kKVTile) + kWgmmaLimitsOffset);
      for (int i = threadIdx.x; i < p.rope.half; i += kThreads) limit[i] = p.rope.limit[i];
      rt.limit = limit;
      rt.half = p.rope.half;
    }
    const int warp_id = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;
    const int warp = warp_id % kRowWarps;         // the warp's rows: warp * 16 * kAtoms ...
    const int kn = (warp_id / kRowWarps) * kBNW;  // its keys in each tile: kn .. kn + kBNW - 1
    // Decode tiles hold few real rows (a GQA group x Nq): warps past them skip the math.
    const bool warp_active = !W::kPack || w.m0 + warp * 16 * kAtoms < w.rows;

    const float slope = Spec::kAlibi && !W::kPack
                            ? (p.alibi_slopes ? p.alibi_slopes[w.h0] : standard_alibi_slope(w.h0, p.heads_q))
                            : 0.f;

    float acc_o[kAtoms][kDT][4];
    float row_m[kAtoms][2], row_l[kAtoms][2];
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) {
#pragma unroll
      for (int d = 0; d < kDT; ++d) acc_o[a][d][0] = acc_o[a][d][1] = acc_o[a][d][2] = acc_o[a][d][3] = 0.f;
      row_m[a][0] = row_m[a][1] = neg_inf();
      row_l[a][0] = row_l[a][1] = 0.f;
    }

    Plan plan{};
    const bool any = w.it_begin < w.it_end;
    const bool tma = kTmaDecode && p.tma_kv != 0;
    if (tma) {
      // The barriers are the issuing thread's alone until the block barrier below, so a
      // contiguous block's first copies go out before it (decode's fixed cost per call: 8B B1 /
      // 32k 0.0381 -> 0.0377 ms, 70B B1 / 32k 0.0402 -> 0.0398 on the H200,
      // bench/results/2026-12-02-h200-session16/). A paged block first stages its page list and
      // issues after the one barrier that publishes both: issuing first, its lanes' lookups in the
      // global table, was 0.5-1% slower at 70B B1.
      if (threadIdx.x == 0 && !kProducer) {  // (the producer warp makes its own)
        for (int st = 0; st < kStages; ++st) mbar_init(KV::stage_full(sV) + st * 8, 1);
        mbar_init_fence();
      }
      if constexpr (!Spec::kPagedKV && !kProducer) {
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s)
          if (w.it_begin + s < w.it_end) KV::issue_kv(p, w, sK, sV, s, w.tile(p, w.it_begin + s), 0xffffffffu, true);
      }
    }
    const bool issued = tma && (kProducer || !Spec::kPagedKV);  // above, or by the producer warp
    const auto load_q = [&] {
      load_tile<kBM>(sQ, p.q, [&](int r) { return w.m0 + r < w.rows ? w.q_row(p, w.m0 + r) : nullptr; });
    };
    if (issued) load_q();  // ahead of the barrier too (the order measured)
    // The staged page ids (read by the first K/V copies below), and the stage barriers every warp
    // waits on, are visible block-wide.
    if (kProducer && tma) KV::block_sync();  // with the producer warp (KvCopy::producer())
    else if (staged || tma) __syncthreads();
    if (kPairWindow && !kWgmma && any) plan = plan_of(w, rt, w.tile(p, w.it_begin));
    if (!issued) load_q();
    if (any && !kWgmma && !issued)
      KV::issue_kv(p, w, sK, sV, 0, w.tile(p, w.it_begin), kPairWindow ? plan.need8 : 0xffffffffu, tma);
    cp_async_commit();  // the wgmma loop loads its own K/V tiles (by TMA where it can)
#pragma unroll
    for (int s = 1; s < kStages - 1 && !kWgmma; ++s) {  // the rest of the pipeline's first tiles, a group each
      if (w.it_begin + s < w.it_end && !issued) KV::issue_kv(p, w, sK, sV, s, w.tile(p, w.it_begin + s), 0xffffffffu, tma);
      cp_async_commit();
    }
    if constexpr (kRotate) {
      // Q is rotated once per query tile, each row to its query's position (the first step's
      // barrier publishes it).
      cp_async_wait<0>();
      if (kProducer && tma) KV::compute_sync();
      else __syncthreads();
      rotate_tile_at<Element, kNeox, kBM, kStride, kThreads, Spec::kRopeHalf>(
          sQ,
          [&](int row) {
            int i, h;
            w.row_of(w.m0 + row, i, h);
            return i + w.q_offset;
          },
          rt);
    }

    if constexpr (kWgmma) WgmmaMainloop<FwdKernel>::run(p, w, rt, sQ, sK, sV, warp, g, t, slope, acc_o, row_m, row_l);
    else for (int it = w.it_begin; it < w.it_end; ++it) {
      const int n0 = w.tile(p, it) * kBN;
      bool inside = w.tile_inside(p, n0);
      if constexpr (Spec::kBlockSparse) inside = inside && w.cell_bits(p, it) == nullptr;
      if (inside) {
        // rope_window: tiles far from the diagonal drop whole groups of high-frequency pairs;
        // each level is its own straight-line instantiation of the step.
        auto interior = [&](auto level) {
          step<false, decltype(level)::value>(p, w, rt, it, sQ, sK, sV, warp_active, warp, kn, lane, g, t, slope, plan,
                                              acc_o, row_m, row_l);
        };
        if (kPruneLevel > 0 && plan.level >= kPruneLevel) interior(Level<kPruneLevel>{});
        else interior(Level<0>{});
      } else {
        step<true, 0>(p, w, rt, it, sQ, sK, sV, warp_active, warp, kn, lane, g, t, slope, plan, acc_o, row_m, row_l);
      }
    }
    cp_async_wait<0>();
    // Every load of this block is done: the next grid's blocks may take the SMs' free room now
    // and wait there through this grid's epilogue and split merge.
    allow_dependent_launch();
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) row_l[a][0] = quad_sum(row_l[a][0]), row_l[a][1] = quad_sum(row_l[a][1]);
    if constexpr (kKeyWarps > 1) {
      static_assert(Merge::kMergeBytes <= 2 * kStages * kKVTile * 2, "the key-warp merge must fit the K/V stages");
      __syncthreads();  // every warp is done with the K/V stages the merge reuses
      Merge::key_warps(reinterpret_cast<char*>(sK), w, warp_id, g, t, acc_o, row_m, row_l);
    }
    if (warp_active) write_rows(p, w, warp, g, t, acc_o, row_m, row_l, warp_id / kRowWarps);
    if constexpr (W::kPack) {
      if (p.num_splits > 1 && p.merge_count) {
        const int S = p.num_splits;
        int* count = p.merge_count + ((af_i64)blockIdx.z * gridDim.y + blockIdx.y) * (gridDim.x / S) + blockIdx.x / S;
        const af_i64 rows = (af_i64)p.batch * p.heads_q * p.len_q;
        Merge::parts(p, w, reinterpret_cast<float*>(sK), count, S, p.part_o, p.part_lse, rows,
                    [&](int, int i, int h) { return ((af_i64)w.b * p.heads_q + h) * p.len_q + w.q_row0 + i; });
      }
    } else if constexpr (Spec::kBlockSparse) {
      if (w.parts > 1) {
        const af_i64 first = (af_i64)w.part_slot0 * kBM;
        Merge::parts(p, w, reinterpret_cast<float*>(sK), p.merge_count + w.part_slot0, w.parts, p.part_o + first * kD,
                    p.part_lse + first, kBM, [&](int r, int, int) { return (af_i64)(r - w.m0); });
      }
    }
  }
};

}  // namespace attnfuse_kernels

#include "fwd_wgmma.cuh"
