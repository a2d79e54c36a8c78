// The fused CPU attention kernel: one tiled online-softmax loop per (batch, query head, query tile)
// that never materializes the score matrix (only a block_k x block_q tile, thread-local), with
// the norm, the ordered modifier chain and the presence of masks fixed at compile time. Compiled
// once per instruction-set level (cpu/isa.hpp).
#include <omp.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "attnfuse/merge_states.hpp"
#include "cpu/fused_kernel.hpp"
#include "cpu/isa.hpp"
#include "cpu/rope_apply.hpp"
#include "cpu/qk_rows.hpp"
#include "cpu/simd.hpp"

namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS {
namespace {

using namespace simd;
constexpr int kBQ = kStride;     // row stride of the Q^T and S^T tiles (a tile may use fewer rows)
constexpr int kBK = kMaxBlockK;  // key capacity of the chunk buffers
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Split-KV parts have at least this many keys: a part repeats its tile's Q load and setup and
// adds a merge, which 512 keys of QK and P V amortize.
constexpr int64_t kMinPartKeys = 512;

using i128 = __int128;

// ---- Per-thread scratch -----------------------------------------------------------------------

struct Workspace {
  explicit Workspace(const KernelParams& p)
      : dvp((p.Dv + kLanes - 1) / kLanes * kLanes),
        qt(alloc_floats(p.D * kBQ)),
        st(alloc_floats(int64_t{kBK} * kBQ)),
        o(alloc_floats(kBQ * dvp)),
        kbuf(p.dtype == DType::F32 && !p.rope ? nullptr : alloc_floats(kBK * p.D)),
        vbuf(p.dtype == DType::F32 && p.Dv == dvp ? nullptr : alloc_floats(kBK * dvp)),
        qrow(p.D % kNativeLanes == 0 ? alloc_floats(kQkRowsMax * p.D) : nullptr) {
    if (vbuf) std::fill(vbuf.get(), vbuf.get() + kBK * dvp, 0.0f);  // the Dv..dvp tail stays 0
    if (p.rope) {
      rc.resize(static_cast<size_t>(p.rope->half));
      rs.resize(static_cast<size_t>(p.rope->half));
    }
  }
  int64_t dvp;  // Dv rounded up to whole vectors
  AlignedFloats qt;    // [D][kBQ]   scaled Q of the tile, transposed; padding columns are 0
  AlignedFloats st;    // [kBK][kBQ] S^T, then P^T, of one key chunk
  AlignedFloats o;     // [kBQ][dvp] unnormalized output rows
  AlignedFloats kbuf;  // [kBK][D]   fp32 copy of a K chunk (16-bit, or rotated for RoPE)
  AlignedFloats vbuf;  // [kBK][dvp] fp32 copy of a V chunk (16-bit, or Dv not whole vectors)
  // Tiles of few rows (qk_few_rows, where D is whole vectors): Q row-major, [qk_rows_block(m)][D],
  // and the chunk's K rows as stored (where RoPE rotates K, the product reads krow's copies).
  AlignedFloats qrow;
  const void* kraw[kBK];
  const void* vraw[kBK];  // a chunk's 16-bit V rows as stored (P V widens them itself)
  // RoPE: angles of one position; rope_window: the chunk's kept dims and boundary pairs.
  std::vector<float> rc, rs;
  WindowSplit split;
  const float* krow[kBK];
  const float* vrow[kBK];
  alignas(64) float m[kBQ];      // running max (raw: -inf while nothing kept)
  alignas(64) float l[kBQ];      // running sum of exp (softmax)
  alignas(64) float cnt[kBQ];    // kept keys so far (relu_attention)
  alignas(64) float alpha[kBQ];  // rescale of the running state by the current chunk
  alignas(64) float row[kBQ];    // one converted Q row piece
  // Per query column of the tile (a packed GQA tile holds several heads' rows, Tile::heads): the
  // offset of its query from the tile's first query position, and its head's ALiBi slope.
  alignas(64) int colq[kBQ];
  alignas(64) float colslope[kBQ];
};

// Rows [i0, i0 + m) of the queries, cut so that they share one BlockMask query block (qb) and
// one document, and where their keys live: [k_lo, k_hi) (every key, or the document's), Δ of
// (query i, key j) = i + q_offset - j, and the position of key j is j - origin (0 without
// documents; the document's first key with them, so positions restart in each document).
struct QueryTile {
  int64_t i0;
  int m;
  int64_t qb;
  int64_t k_lo, k_hi, q_offset, origin;
};

// One query tile of one (b, hq), or of `heads` query heads of one KV group (GQA packing, for
// calls with few queries: each K/V chunk is then loaded and converted once for the group, and the
// group's rows fill the SIMD lanes a single decode row would leave empty). Rows are head-major:
// row r is query i0 + r % mq of head hq + r / mq. Fixed while its key chunks stream by.
struct Tile {
  int64_t b, hq, hkv, i0;  // hq: the first (or only) query head
  int heads;  // query heads in the tile
  int mq;     // query positions per head
  int m;      // query rows: heads * mq
  int qv;    // 16-lane vectors covering m
  int mpad;  // 16 * qv
  int rows;  // m rounded up to the PV micro-kernel's rows
  i128 pq_lo, pq_hi;  // positions of the first and last query, in the keys' frame (Δ = pq - key)
  int64_t origin;     // RoPE rotates key j at j - origin and query i at pq(i) - origin
  // Per column (Workspace::colq / colslope): query offset from pq_lo, and ALiBi slope.
  const int* colq;
  const float* colslope;
  const void* bias_rows;  // bias at (b', hq', i0, 0)
};

// The query tiles of batch entry b (any entry when they are shared): [0, Nq) against the entry's
// keys (its own with a paged cache), or each document's queries, in pieces of at most
// block_q rows that never cross a BlockMask query block (block_sparse) or a document boundary.
std::vector<QueryTile> query_tiles(const KernelParams& p, const Documents* docs, int64_t b) {
  std::vector<QueryTile> tiles;
  const int64_t bq = p.masks.has(MaskKind::BlockSparse) ? p.block_mask->block_q() : 0;
  auto cut = [&](int64_t lo, int64_t hi, QueryTile keys) {
    for (int64_t i0 = lo, i1; i0 < hi; i0 = i1) {
      i1 = std::min(i0 + p.block_q, hi);
      if (bq > 0) i1 = std::min(i1, (i0 / bq + 1) * bq);
      keys.i0 = i0, keys.m = static_cast<int>(i1 - i0), keys.qb = bq > 0 ? i0 / bq : 0;
      tiles.push_back(keys);
    }
  };
  if (!docs) {
    if (p.kv_len)
      cut(0, p.Nq, QueryTile{0, 0, 0, 0, p.kv_len[b], p.q_offsets[b], 0});
    else
      cut(0, p.Nq, QueryTile{0, 0, 0, 0, p.Nk, p.q_offset, 0});
    return tiles;
  }
  for (int64_t d = 0; d < docs->count(); ++d) {
    const int64_t k0 = docs->k[size_t(d)];
    cut(docs->q[size_t(d)], docs->q[size_t(d + 1)], QueryTile{0, 0, 0, k0, docs->k[size_t(d + 1)], docs->shift(d), k0});
  }
  return tiles;
}

// Split-KV (flash decoding on the CPU): where a call has fewer tiles than threads, each tile's
// key range is cut into `count` parts run as separate items. Each part writes its rows'
// normalized fp32 O and LSE here, and merge_splits() combines them.
struct Splits {
  int count = 1;
  int64_t B = 0, Hq = 0, Nq = 0, Dv = 0;
  std::vector<float> o, lse;  // [count][B][Hq][Nq][Dv], [count][B][Hq][Nq]
  int64_t row(int s, int64_t b, int64_t h, int64_t i) const { return ((s * B + b) * Hq + h) * Nq + i; }
};

// The parts merged into the call's O (and LSE) by merge_states (every row of the call belongs to
// some tile, so every part has written every row). Its log-sum-exp rule merges relu_attention's
// parts too: their LSE is the log of the kept-key count, so the weights e^{LSE_s} are the parts'
// normalizers there as they are for softmax.
void merge_splits(const KernelParams& p, Splits& parts) {
  const std::array<int64_t, 4> shape = {p.B, p.Hq, p.Nq, p.Dv};
  const int64_t rows = p.B * p.Hq * p.Nq;
  std::vector<AttentionState> states;
  for (int s = 0; s < parts.count; ++s)
    states.push_back({TensorView::contiguous(parts.o.data() + s * rows * p.Dv, DType::F32, shape),
                      LseView::contiguous(parts.lse.data() + s * rows, {p.B, p.Hq, p.Nq})});
  AttentionState out;
  out.o.data = p.out, out.o.dtype = p.dtype, out.o.shape = shape;
  out.o.strides = {p.out_strides[0], p.out_strides[1], p.out_strides[2], 1};
  std::vector<float> no_lse;  // the merge writes an LSE; the call asked for none
  if (p.lse) {
    out.lse.data = p.lse, out.lse.shape = {p.B, p.Hq, p.Nq}, out.lse.strides = p.lse_strides;
  } else {
    no_lse.resize(static_cast<size_t>(rows));
    out.lse = LseView::contiguous(no_lse.data(), {p.B, p.Hq, p.Nq});
  }
  merge_states(states, out);
}

// How a key chunk is masked: nothing to check, or per-element (positions and/or a bitmap).
struct ChunkMask {
  bool check = false;
  const uint64_t* bits = nullptr;  // partial BlockMask block: cell bitmap
  int64_t bits_q0 = 0, bits_k0 = 0;  // first query / key of that block
  int block_k = 0;
};

// Calls f(a, n) for consecutive chunks of [lo, hi) of at most bk keys; the short chunk comes
// first so that the last one ends exactly at hi (for causal tiles that is the diagonal).
template <class F>
void for_each_chunk(int64_t lo, int64_t hi, int bk, F&& f) {
  if (lo >= hi) return;
  int64_t n = (hi - lo) % bk;
  if (n == 0) n = bk;
  for (int64_t a = lo; a < hi; a += n, n = bk) f(a, static_cast<int>(n));
}

// Does the modifier chain code hold this kind?
constexpr bool chain_has(unsigned code, ModifierKind k) {
  for (; code != 0; code /= 4)
    if (code % 4 == static_cast<unsigned>(k) + 1) return true;
  return false;
}

template <NormKind kNorm, unsigned kMods, bool kMasked>
struct Kernel {
  static void run(const KernelParams& p);

  // Applies the modifier chain (base-4 digits, innermost first) to the chunk's scores.
  template <unsigned kChain>
  static void modify(const KernelParams& p, const Tile& t, int64_t a, int n, float* st) {
    if constexpr (kChain != 0) {
      constexpr auto kind = static_cast<ModifierKind>(kChain % 4 - 1);
      if constexpr (kind == ModifierKind::Alibi) {
        for (int j = 0; j < n; ++j) {
          // delta of column i = (pq_lo - key) + colq[i], exact in float below 2^24
          const float base = static_cast<float>(static_cast<double>(t.pq_lo - (a + j)));
          float* s = st + j * kBQ;
          for (int i = 0; i < t.mpad; ++i) s[i] -= t.colslope[i] * std::fabs(base + static_cast<float>(t.colq[i]));
        }
      } else if constexpr (kind == ModifierKind::AdditiveBias) {
        add_bias(p, t, a, n, st);
      } else {
        const float c = p.softcap, inv_c = 1.0f / p.softcap;
        for (int j = 0; j < n; ++j) {
          float* s = st + j * kBQ;
          for (int i = 0; i < t.mpad; ++i) s[i] = c * fastmath::tanh(s[i] * inv_c);
        }
      }
      modify<kChain / 4>(p, t, a, n, st);
    }
  }

  static void add_bias(const KernelParams& p, const Tile& t, int64_t a, int n, float* st) {
    const int64_t rs = p.bias_strides[2], hs = p.bias_strides[1];
    for (int i = 0; i < t.m; ++i) {
      const int g = i / t.mq;
      const int64_t off = g * hs + (i - g * t.mq) * rs + a;
      if (p.bias_dtype == DType::F32) {
        const float* br = static_cast<const float*>(t.bias_rows) + off;
        for (int j = 0; j < n; ++j) st[j * kBQ + i] += br[j];
      } else {
        for (int j = 0; j < n; ++j) st[j * kBQ + i] += load_elem(t.bias_rows, p.bias_dtype, off + j);
      }
    }
  }

  // Sets masked cells of a boundary chunk to -inf (and counts kept keys for relu_attention).
  static void apply_mask(const KernelParams& p, Workspace& w, const Tile& t, int64_t a, int n,
                         const ChunkMask& cm) {
    const bool causal = p.masks.has(MaskKind::Causal);
    const bool sliding = p.masks.has(MaskKind::SlidingWindow);
    for (int j = 0; j < n; ++j) {
      float* s = w.st.get() + j * kBQ;
      // Kept query offsets of key a+j form an interval [lo, hi) (delta = pq_lo + colq[i] - key).
      const i128 base = i128(a + j) - t.pq_lo;  // the column whose delta is 0
      i128 lo = 0, hi = t.mpad;
      if (causal) lo = std::max(lo, base);
      if (sliding) lo = std::max(lo, base - p.window + 1), hi = std::min(hi, base + p.window);
      const int ilo = static_cast<int>(std::clamp<i128>(lo, 0, t.mpad));
      const int ihi = static_cast<int>(std::clamp<i128>(hi, ilo, t.mpad));
      if (!cm.bits) {
        for (int i = 0; i < t.mpad; ++i) {
          const bool keep = t.colq[i] >= ilo && t.colq[i] < ihi;
          s[i] = keep ? s[i] : kNegInf;
          if constexpr (kNorm == NormKind::ReluAttention) w.cnt[i] += keep ? 1.0f : 0.0f;
        }
        continue;
      }
      // Partial BlockMask block: bit (query - block's first query) * block_k + (key - first key).
      // (Block-sparse tiles hold one head: column i is query i0 + i.)
      const int64_t col = a + j - cm.bits_k0;
      for (int i = 0; i < t.mpad; ++i) {
        const int64_t bit = (t.i0 + i - cm.bits_q0) * cm.block_k + col;
        const bool keep = i >= ilo && i < ihi && i < t.m && ((cm.bits[bit >> 6] >> (bit & 63)) & 1u);
        s[i] = keep ? s[i] : kNegInf;
        if constexpr (kNorm == NormKind::ReluAttention) w.cnt[i] += keep ? 1.0f : 0.0f;
      }
    }
  }

  // Does the tile take the few-rows product (qk_rows.hpp)? Where D is whole vectors and a packed
  // tile of the call would hold at most kQkRowsMax rows (its query positions times the GQA group:
  // decoding, or two drafts at group 4). Judged on the group, not the tile's own rows, so a
  // packed tile and the same rows run per head take the same product and give the same bits.
  // (With 16 rows the blocked product's lanes are full and it is the faster one: Llama-3-70B
  // heads, two queries, 17.8 against 16.9 ms on one thread of the build machine.)
  static bool few_rows(const KernelParams& p, const Tile& t) {
    return int64_t{t.mq} * (p.Hq / p.Hkv) <= kQkRowsMax && p.D % kNativeLanes == 0;
  }
  // S^T of the chunk by the few-rows product, over K as stored (raw: w.kraw) or over its rotated
  // fp32 copies (w.krow); its padding columns zeroed (the product writes qk_rows_block(m) of
  // them; the rest must stay finite, as the blocked product leaves them).
  static void scores_few_rows(const KernelParams& p, Workspace& w, const Tile& t, bool raw, int n, float* st) {
    if (raw) qk_few_rows(t.m, p.dtype, w.qrow.get(), w.kraw, n, p.D, st);
    else qk_few_rows(t.m, w.qrow.get(), w.krow, n, p.D, st);
    const int r = qk_rows_block(t.m);
    for (int j = 0; j < n; ++j) std::fill(st + j * kBQ + r, st + j * kBQ + t.mpad, 0.0f);
  }

  // One key chunk [a, a+n): scores, modifiers, masks, online normalization, P V.
  static void chunk(const KernelParams& p, Workspace& w, const Tile& t, int64_t a, int n,
                    const ChunkMask& cm) {
    float* st = w.st.get();
    // K and V rows: in place for fp32 (any strides), else converted once per chunk; RoPE
    // copies K always and rotates it on load.
    const int64_t kofs = t.b * p.k_strides[0] + t.hkv * p.k_strides[1];
    const int64_t vofs = t.b * p.v_strides[0] + t.hkv * p.v_strides[1];
    // Paged: the entry's pages; a row's page and slot are found per row (one division against a
    // row copy of D elements). Contiguous calls take the unchanged (b, h) offset path.
    const int32_t* pages = p.page_table ? p.page_table + p.page_start[t.b] : nullptr;
    auto row_offset = [&](const std::array<int64_t, 3>& s, int64_t base, int64_t key) {
      if (!pages) return base + key * s[2];
      return pages[key / p.page_size] * s[0] + t.hkv * s[1] + (key % p.page_size) * s[2];
    };
    // rope_window: which pairs this chunk reads at all; the others are not rotated.
    const bool windowed = p.rope && p.rope->windowed();
    const int64_t delta0 = static_cast<int64_t>(t.pq_lo - a);  // Δ of (row 0, key a)
    if (windowed) split_window(*p.rope, p.D, delta0 - (n - 1), delta0 + (t.mq - 1), w.split);
    const bool pruned = windowed && !w.split.all;
    const int first_pair = pruned ? w.split.first_pair : 0;
    // Few rows: K rows read as stored by the product (unless RoPE rotates a copy).
    const bool few = few_rows(p, t) && !pruned, raw = few && !p.rope;
    // A zero weight selects nothing (as in the reference), so NaN/Inf in V must not leak through
    // 0 * NaN where weights can be exactly 0 for other reasons than underflow: masked cells of a
    // boundary chunk, -inf biases, relu's negative scores. Only then is V scanned (below).
    const bool checked = kMasked && cm.check;
    constexpr bool kZeroWeights =
        kNorm == NormKind::ReluAttention || chain_has(kMods, ModifierKind::AdditiveBias);
    // 16-bit V rows of whole vectors are read as stored by the P V product where it reads them
    // once (the tile's rows fit one block of its rows; with more, each block would widen them
    // again: Llama-3-8B heads with 4 drafts ran 7% slower so), unless the chunk needs that scan,
    // which reads an fp32 copy. Both give the same bits.
    const bool raw_v = p.dtype != DType::F32 && p.Dv == w.dvp && t.rows <= kPvRows && !(checked || kZeroWeights);
    for (int j = 0; j < n; ++j) {
      const int64_t kj = row_offset(p.k_strides, kofs, a + j);
      if (raw) {
        w.kraw[j] = static_cast<const char*>(p.k) + kj * dtype_size(p.dtype);
      } else if (w.kbuf) {
        float* kr = w.kbuf.get() + j * p.D;
        // Copied whole (a bulk copy of the row beats a fused read-rotate-write, measured), then
        // rotated in place: only the pairs some cell of the chunk reads.
        load_row(p.k, p.dtype, kj, p.D, kr);
        if (p.rope) rotate_row(*p.rope, p.rope->keys, a + j - t.origin, kr, first_pair);
        w.krow[j] = kr;
      } else {
        w.krow[j] = static_cast<const float*>(p.k) + kj;
      }
      const int64_t vj = row_offset(p.v_strides, vofs, a + j);
      if (raw_v) {
        w.vraw[j] = static_cast<const char*>(p.v) + vj * dtype_size(p.dtype);
      } else if (w.vbuf) {
        load_row(p.v, p.dtype, vj, p.Dv, w.vbuf.get() + j * w.dvp);
        w.vrow[j] = w.vbuf.get() + j * w.dvp;
      } else {
        w.vrow[j] = static_cast<const float*>(p.v) + vj;
      }
    }

    if (pruned)
      windowed_scores(*p.rope, w.split, w.qt.get(), w.kbuf.get(), p.D, n, delta0, t.qv, t.mpad,
                      t.heads > 1 ? t.mq : t.mpad, w.krow, st);
    else if (few)
      scores_few_rows(p, w, t, raw, n, st);
    else
      qk(t.qv, w.krow, n, w.qt.get(), p.D, st);
    modify<kMods>(p, t, a, n, st);
    if constexpr (kMasked) {
      if (checked) apply_mask(p, w, t, a, n, cm);
    }
    if constexpr (kNorm == NormKind::ReluAttention) {
      if (!checked)
        for (int i = 0; i < t.mpad; ++i) w.cnt[i] += float(n);
      for (int j = 0; j < n; ++j) {
        float* s = st + j * kBQ;
        for (int i = 0; i < t.mpad; ++i) s[i] = s[i] < 0.0f ? 0.0f : s[i];  // NaN stays NaN
      }
    } else {
      online_softmax(w, t, n);
    }
    if ((checked || kZeroWeights) && !finite_rows(w.vrow, n, p.Dv))
      pv_skipping_zeros(st, w.vrow, n, t.m, p.Dv, w.dvp, w.o.get());
    else if (raw_v)
      pv_stored(p.dtype, st, w.vraw, n, t.rows, w.dvp, w.o.get());
    else
      pv(st, w.vrow, n, t.rows, w.dvp, w.o.get());
  }

  // Online softmax of the chunk (P^T in place), then O rescaled to the new running max.
  static void online_softmax(Workspace& w, const Tile& t, int n) {
    softmax_chunk(t.qv, w.st.get(), n, w.m, w.l, w.alpha);
    float* o = w.o.get();
    for (int i = 0; i < t.rows; ++i) {
      const float al = w.alpha[i];
      float* oi = o + i * w.dvp;
      for (int64_t x = 0; x < w.dvp; ++x) oi[x] *= al;
    }
  }

  static void tile(const KernelParams& p, Workspace& w, int64_t b, int64_t hq, int heads, const QueryTile& qt,
                   Splits* parts, int part);
};

template <NormKind kNorm, unsigned kMods, bool kMasked>
void Kernel<kNorm, kMods, kMasked>::tile(const KernelParams& p, Workspace& w, int64_t b, int64_t hq,
                                         int heads, const QueryTile& q, Splits* parts, int part) {
  const int64_t i0 = q.i0, qb = q.qb;
  const int mq = q.m, m = heads * mq;
  Tile t;
  t.b = b, t.hq = hq, t.hkv = hq / (p.Hq / p.Hkv), t.i0 = i0;
  t.heads = heads, t.mq = mq, t.m = m;
  t.qv = (m + kLanes - 1) / kLanes;
  t.mpad = t.qv * kLanes;
  t.rows = (m + kPvRows - 1) / kPvRows * kPvRows;
  t.pq_lo = i128(i0) + q.q_offset;
  t.pq_hi = t.pq_lo + (mq - 1);
  t.origin = q.origin;
  // Padding columns continue the last head's segment (their results are never stored).
  for (int i = 0; i < t.mpad; ++i) {
    const int g = std::min(i / mq, heads - 1);
    w.colq[i] = i - g * mq;
    w.colslope[i] = p.alibi_slopes ? p.alibi_slopes[hq + g] : 0.0f;
  }
  t.colq = w.colq, t.colslope = w.colslope;
  t.bias_rows = nullptr;
  if (p.bias) {
    const int64_t off = b * p.bias_strides[0] + hq * p.bias_strides[1] + i0 * p.bias_strides[2];
    t.bias_rows = static_cast<const char*>(p.bias) + off * dtype_size(p.bias_dtype);
  }

  // Q^T, pre-scaled; the padding columns are zero so their (ignored) scores stay finite.
  float* qt = w.qt.get();
  float* row = w.row;  // D may exceed kBQ: convert one row in pieces
  for (int i = 0; i < t.mpad; ++i) {
    if (i >= m) {
      for (int64_t d = 0; d < p.D; ++d) qt[d * kBQ + i] = 0.0f;
      continue;
    }
    const int64_t qofs = b * p.q_strides[0] + (hq + i / mq) * p.q_strides[1] + (i0 + w.colq[i]) * p.q_strides[2];
    if (p.dtype == DType::F32) {
      const float* src = static_cast<const float*>(p.q) + qofs;
      for (int64_t d = 0; d < p.D; ++d) qt[d * kBQ + i] = p.scale * src[d];
      continue;
    }
    for (int64_t d0 = 0; d0 < p.D; d0 += kBQ) {
      const int64_t nd = std::min<int64_t>(kBQ, p.D - d0);
      load_row(p.q, p.dtype, qofs + d0, nd, row);
      for (int64_t d = 0; d < nd; ++d) qt[(d0 + d) * kBQ + i] = p.scale * row[d];
    }
  }
  // RoPE: each row rotated at its position pq(i) - origin (scale commutes with it).
  if (p.rope) {
    for (int i = 0; i < m; ++i) {
      p.rope->angles(p.rope->queries, static_cast<int64_t>(t.pq_lo - t.origin) + w.colq[i], w.rc.data(),
                     w.rs.data());
      p.rope->rotate(w.rc.data(), w.rs.data(), qt + i, kBQ);
    }
  }
  if (few_rows(p, t)) {  // qt's columns from m on are zero, so are these rows
    assert(m <= kQkRowsMax);  // a packed tile holds one group's heads
    for (int i = 0; i < qk_rows_block(m); ++i)
      for (int64_t d = 0; d < p.D; ++d) w.qrow[i * p.D + d] = qt[d * kBQ + i];
  }
  for (int i = 0; i < kBQ; ++i) w.m[i] = kNegInf, w.l[i] = 0.0f, w.cnt[i] = 0.0f;
  std::fill(w.o.get(), w.o.get() + int64_t{t.rows} * w.dvp, 0.0f);

  // Keys any row of the tile can keep under causal / sliding_window: [lo, hi), within the tile's
  // document (so key chunks of other documents are never visited, and a chunk inside the
  // document needs no per-cell document check).
  const bool causal = p.masks.has(MaskKind::Causal);
  const bool sliding = p.masks.has(MaskKind::SlidingWindow);
  i128 lo = q.k_lo, hi = q.k_hi;
  if (causal) hi = std::min(hi, t.pq_hi + 1);
  if (sliding) lo = std::max(lo, t.pq_lo - p.window + 1), hi = std::min(hi, t.pq_hi + p.window);
  // Does every (row, key) pair of [a, a+n) pass the positional masks?
  auto inside = [&](int64_t a, int n) {
    const i128 last = i128(a) + n - 1;
    if (causal && last > t.pq_lo) return false;
    if (sliding && (t.pq_hi - a >= p.window || last - t.pq_lo >= p.window)) return false;
    return true;
  };

  if (parts && lo < hi) {  // this part's share of the keys
    const i128 len = hi - lo;
    hi = lo + len * (part + 1) / parts->count;
    lo = lo + len * part / parts->count;
  }
  if (lo < hi) {
    const int64_t klo = static_cast<int64_t>(lo), khi = static_cast<int64_t>(hi);
    if (p.masks.has(MaskKind::BlockSparse)) {  // one head per tile (run() never packs these)
      const BlockMask& bm = *p.block_mask;
      const auto cols = bm.kv_blocks(b, hq, qb);
      const auto full = bm.full_flags(b, hq, qb);
      for (size_t e = 0; e < cols.size(); ++e) {
        const int64_t k0 = int64_t{cols[e]} * bm.block_k();
        ChunkMask cm;
        cm.bits = full[e] ? nullptr : bm.cell_bits(b, hq, qb, e);
        cm.bits_q0 = qb * bm.block_q(), cm.bits_k0 = k0, cm.block_k = bm.block_k();
        for_each_chunk(std::max(k0, klo), std::min({k0 + bm.block_k(), p.Nk, khi}), p.block_k,
                       [&](int64_t a, int n) {
                         cm.check = cm.bits != nullptr || !inside(a, n);
                         chunk(p, w, t, a, n, cm);
                       });
      }
    } else {
      for_each_chunk(klo, khi, p.block_k, [&](int64_t a, int n) {
        ChunkMask cm;
        cm.check = !inside(a, n);
        chunk(p, w, t, a, n, cm);
      });
    }
  }

  // Normalize and store: O = acc / l (softmax) or acc / L (relu); rows with nothing kept get 0.
  // relu_attention's LSE is log L_i, the log of its normalizer (what the reference reports).
  for (int i = 0; i < m; ++i) {
    const int64_t h = hq + i / mq, qi = i0 + w.colq[i];
    const float denom = kNorm == NormKind::ReluAttention ? w.cnt[i] : w.l[i];
    const float shift = kNorm == NormKind::ReluAttention || w.m[i] == kNegInf ? 0.0f : w.m[i];
    const float lse = denom == 0.0f ? kNegInf : shift + std::log(denom);
    float* oi = w.o.get() + i * w.dvp;
    const float inv = 1.0f / denom;
    if (parts) {  // a part of the keys: fp32 O and LSE, for merge_splits
      const int64_t r = parts->row(part, b, h, qi);
      float* dst = parts->o.data() + r * p.Dv;
      for (int64_t x = 0; x < p.Dv; ++x) dst[x] = denom == 0.0f ? 0.0f : oi[x] * inv;
      parts->lse[static_cast<size_t>(r)] = lse;
      continue;
    }
    const int64_t dst = b * p.out_strides[0] + h * p.out_strides[1] + qi * p.out_strides[2];
    float* out = p.dtype == DType::F32 ? static_cast<float*>(p.out) + dst : oi;  // fp32: in place
    for (int64_t x = 0; x < p.Dv; ++x) out[x] = denom == 0.0f ? 0.0f : oi[x] * inv;
    if (p.dtype != DType::F32) store_row(p.out, p.dtype, dst, p.Dv, oi);
    if (p.lse) p.lse[b * p.lse_strides[0] + h * p.lse_strides[1] + qi * p.lse_strides[2]] = lse;
  }
}

template <NormKind kNorm, unsigned kMods, bool kMasked>
void Kernel<kNorm, kMods, kMasked>::run(const KernelParams& p) {
  if (p.B * p.Hq == 0 || p.Nq == 0) return;
  // The work: (batch entry, query tile) pairs, each run for every query head. Latest query tiles
  // first: under causal masks they see the most keys, and handing out the big items first
  // balances the dynamic schedule.
  struct Work {
    int64_t b;
    QueryTile tile;
  };
  std::vector<Work> work;
  if (p.document_rows > 1 || p.kv_len) {  // per-batch documents or lengths: each entry its own tiles
    for (int64_t b = 0; b < p.B; ++b) {
      const std::vector<QueryTile> tiles = query_tiles(p, p.documents ? &p.documents[b] : nullptr, b);
      for (auto t = tiles.rbegin(); t != tiles.rend(); ++t) work.push_back({b, *t});
    }
  } else {
    const std::vector<QueryTile> tiles = query_tiles(p, p.documents, 0);
    for (auto t = tiles.rbegin(); t != tiles.rend(); ++t)
      for (int64_t b = 0; b < p.B; ++b) work.push_back({b, *t});
  }
  if (p.masks.has(MaskKind::BlockSparse)) {
    // Block-sparse tiles cost their active blocks (over the heads that run them): the heaviest go
    // first, so a dense row such as BigBird's global row is not the last item the team takes up
    // (it would run alone at the end). Ties keep the order above. Modelled on the BigBird 4k
    // point (bench/cpu_sparse_schedule_model.py): 1.09x / 1.42x the ideal makespan at 16 / 64
    // threads in the latest-first order, 1.00x / 1.005x in this one.
    const BlockMask& bm = *p.block_mask;
    std::vector<std::pair<int64_t, size_t>> cost(work.size());
    for (size_t i = 0; i < work.size(); ++i) {
      int64_t blocks = 0;
      for (int64_t h = 0; h < p.Hq; ++h) blocks += static_cast<int64_t>(bm.kv_blocks(work[i].b, h, work[i].tile.qb).size());
      cost[i] = {blocks, i};
    }
    std::stable_sort(cost.begin(), cost.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<Work> sorted;
    sorted.reserve(work.size());
    for (const auto& c : cost) sorted.push_back(work[c.second]);
    work = std::move(sorted);
  }
  // GQA packing: one tile runs the query heads of a KV group together where all their rows fit one
  // tile (few queries: decoding, speculative drafts), so each K/V chunk is loaded, converted and
  // rotated once per group, and a decode row's 15 empty lanes hold the group's other heads. Not
  // for block-sparse masks, which may differ per head, and not where that would leave threads
  // idle with keys too few to split (each head's own tile then keeps them busy).
  const int team = omp_get_max_threads();
  int64_t longest = 0, keys = p.Nk;
  for (const Work& job : work) longest = std::max<int64_t>(longest, job.tile.m);
  if (p.kv_len) keys = *std::max_element(p.kv_len, p.kv_len + p.B);
  const int64_t max_parts = keys / kMinPartKeys;
  const int64_t group = p.Hq / p.Hkv;
  const bool pack = group > 1 && !p.masks.has(MaskKind::BlockSparse) && longest * group <= p.block_q &&
                    (static_cast<int64_t>(work.size()) * p.Hkv >= team || max_parts >= 2);
  const int heads = pack ? static_cast<int>(group) : 1;
  const int64_t per_tile = p.Hq / heads;  // items per query tile
  const int64_t tiles = static_cast<int64_t>(work.size()) * per_tile;
  if (tiles == 0) return;
  // Split-KV where there are fewer tiles than threads (a long decode of one sequence, few KV
  // heads): each tile's keys in parts of at least kMinPartKeys, merged after (merge_splits).
  Splits parts;
  if (tiles < team && max_parts >= 2) {
    parts.count = static_cast<int>(std::min<int64_t>((team + tiles - 1) / tiles, max_parts));
    parts.B = p.B, parts.Hq = p.Hq, parts.Nq = p.Nq, parts.Dv = p.Dv;
    parts.o.resize(static_cast<size_t>(parts.count * p.B * p.Hq * p.Nq * p.Dv));
    parts.lse.resize(static_cast<size_t>(parts.count * p.B * p.Hq * p.Nq));
  }
  Splits* split = parts.count > 1 ? &parts : nullptr;
  const int64_t items = tiles * parts.count;
  // Scratch for every thread, allocated up front so a failure throws here, not inside the team.
  const int threads = static_cast<int>(std::clamp<int64_t>(team, 1, items));
  std::vector<std::unique_ptr<Workspace>> scratch;
  for (int i = 0; i < threads; ++i) scratch.push_back(std::make_unique<Workspace>(p));
#pragma omp parallel num_threads(threads)
  {
    Workspace& w = *scratch[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t t = it / parts.count;
      const Work& job = work[static_cast<size_t>(t / per_tile)];
      tile(p, w, job.b, (t % per_tile) * heads, heads, job.tile, split, static_cast<int>(it % parts.count));
    }
  }
  if (split) merge_splits(p, parts);
}

// ---- The specialization table ---------------------------------------------------------------

// Chains of distinct modifiers are base-4 codes with nonzero, distinct digits (ModifierChain::code).
constexpr bool valid_chain(unsigned code) {
  unsigned seen = 0;
  for (; code != 0; code /= 4) {
    const unsigned d = code % 4;
    if (d == 0 || (seen >> d) & 1u) return false;
    seen |= 1u << d;
  }
  return true;
}

constexpr unsigned kCodes = 64;  // 4^ModifierChain::kMax

template <NormKind kNorm, bool kMasked, unsigned kCode>
constexpr KernelFn entry() {
  if constexpr (valid_chain(kCode))
    return &Kernel<kNorm, kCode, kMasked>::run;
  else
    return nullptr;
}

template <NormKind kNorm, bool kMasked, unsigned... kCode>
constexpr std::array<KernelFn, kCodes> table(std::integer_sequence<unsigned, kCode...>) {
  return {entry<kNorm, kMasked, kCode>()...};
}

constexpr auto kSeq = std::make_integer_sequence<unsigned, kCodes>{};
constexpr std::array<KernelFn, kCodes> kTables[2][2] = {
    {table<NormKind::Softmax, false>(kSeq), table<NormKind::Softmax, true>(kSeq)},
    {table<NormKind::ReluAttention, false>(kSeq), table<NormKind::ReluAttention, true>(kSeq)}};

}  // namespace

KernelFn select_kernel(NormKind norm, const ModifierChain& modifiers, bool masked) {
  const unsigned code = modifiers.code();
  if (code >= kCodes) return nullptr;
  return kTables[norm == NormKind::ReluAttention ? 1 : 0][masked ? 1 : 0][code];
}

// The level these sources are compiled for (ATTNFUSE_CPU_ISA_LEVEL), checked against the
// compiler's flags: a level built without its instructions would be chosen for CPUs it
// underuses, and a baseline built with AVX would fault on the CPUs it exists for.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
constexpr CpuIsa kFlags = CpuIsa::Avx512;
#elif defined(__AVX2__) && defined(__FMA__)
constexpr CpuIsa kFlags = CpuIsa::Avx2;
#else
constexpr CpuIsa kFlags = CpuIsa::Baseline;
#endif
#if defined(__x86_64__) && defined(__AVX__)
constexpr bool kX86WithAvx = true;
#else
constexpr bool kX86WithAvx = false;
#endif
constexpr CpuIsa kLevel = CpuIsa::ATTNFUSE_CPU_ISA_LEVEL;
static_assert(kLevel == kFlags || (kLevel == CpuIsa::Baseline && !kX86WithAvx),
              "the CPU kernel level's compiler flags do not match its name (CMakeLists.txt)");

const IsaKernels& kernels() {
  static constexpr IsaKernels k{kLevel, &select_kernel, &run_unfused, &run_scores_softmax_fused};
  return k;
}

}  // namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS
