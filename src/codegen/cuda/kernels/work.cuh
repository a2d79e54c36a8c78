// What one block of the forward kernel works on, decoded once from its block index: the
// sequence (a batch entry, a document of packed sequences, or a paged sequence) with its lengths
// and positions, the query rows of its tile, where K and V rows live, and the key tiles it visits
// (a range, or the active blocks of one BlockMask row) cut to its split of the key axis.
//
// Grid: x = query-tile slot * num_splits + split, y = query head (or KV head when the decode
// variant packs a GQA group into the rows), z = batch entry.
// Rows: a tile holds kBlockM "virtual rows"; virtual row r of a sequence with Lq queries is query
// r % Lq of head h0 + r / Lq (the group's heads one after the other), so without packing
// (group 1) r is simply the query index.
#pragma once

#include "params.cuh"
#include "primitives.cuh"

namespace attnfuse_kernels {

// ALiBi slopes of the ALiBi paper: 2^(-8k/n) for the closest power of two n <= H, then for the
// remaining heads every other slope of the sequence for 2n.
__device__ __forceinline__ float standard_alibi_slope(int h, int num_heads) {
  int n = 1;
  while (n * 2 <= num_heads) n *= 2;
  if (h < n) return exp2f(-8.0f * (float)(h + 1) / (float)n);
  return exp2f(-8.0f * (float)(2 * (h - n) + 1) / (float)(2 * n));
}

__device__ __forceinline__ af_i64 cu_seqlen_at(const void* cu, int is_i64, af_i64 idx) {
  return is_i64 ? static_cast<const long long*>(cu)[idx] : (af_i64) static_cast<const int*>(cu)[idx];
}

// Rows of paged sequence b, whose pages are num_pages entries of the table: every page full but
// the last, which holds last_page_len[b] (FlashInfer's convention; read as the table is, L2
// evict_last).
__device__ __forceinline__ int paged_seq_len(const FwdParams& p, int b, int num_pages) {
  return num_pages > 0 ? (num_pages - 1) * p.page_size + ld_keep_in_l2(p.last_page_len + b) : 0;
}

// The RoPE length of a call whose lengths are device memory (FwdParams::rope_len), by
// reference::rope_seq_len's rule: the longest paged sequence, or its last query's position + 1
// where q_offset is given and puts that further; the longest key document. Each warp reduces it
// whole, so no block barrier is needed; all 32 lanes of the calling warp take part. Lengths and
// positions fit 32 bits on CUDA (the host checks them).
template <bool kPaged, bool kDocument>
__device__ __forceinline__ int rope_length_on_device(const FwdParams& p) {
  const int lane = threadIdx.x & 31;
  int len = 0;
  if constexpr (kPaged) {
    for (int b = lane; b < p.batch; b += 32) {
      const int nk = paged_seq_len(p, b, ld_keep_in_l2(p.page_indptr + b + 1) - ld_keep_in_l2(p.page_indptr + b));
      const int q_end = p.len_q == 0 ? 0 : p.q_offset_given ? (int)p.q_offset + p.len_q : nk;
      len = len > nk ? len : nk;
      len = len > q_end ? len : q_end;
    }
  } else if constexpr (kDocument) {
    const int rows = p.cu_batch_stride != 0 ? p.batch : 1, n = rows * p.num_docs;
    for (int i = lane; i < n; i += 32) {
      const af_i64 at = (af_i64)(i / p.num_docs) * p.cu_batch_stride + i % p.num_docs;
      const int doc = (int)(cu_seqlen_at(p.cu_k, p.cu_is_i64, at + 1) - cu_seqlen_at(p.cu_k, p.cu_is_i64, at));
      len = len > doc ? len : doc;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const int other = (int)__shfl_xor_sync(0xffffffffu, (unsigned)len, o);
    len = len > other ? len : other;
  }
  return len;
}

template <class Spec>
struct Work {
  using Element = typename Spec::Element;
  static constexpr int kBM = Spec::kBlockM;
  static constexpr int kBN = Spec::kBlockN;
  static constexpr bool kPack = Spec::kPackGqa;

  int b, hk, h0;        // batch entry, KV head, query head of virtual row 0 of the sequence
  int len_q, len_k;     // queries and keys of the sequence
  int q_offset;         // position of its query 0 (key u sits at position u)
  af_i64 q_row0;        // row of Q / O (and of the bias) where the sequence starts: documents
  af_i64 k_row0;        // row of K / V where it starts: documents
  int rows;             // virtual rows: group * len_q
  int m0;               // first virtual row of this block's tile
  int i_lo, i_hi;       // query indices the tile's rows cover (inclusive)
  int split;
  // Key tiles: iterations [it_begin, it_end) of the block's tile list.
  int it_begin, it_end;
  int n_first;          // dense list: tile of iteration 0
  int bs_entry0;        // block sparse: CSR entry of the row's first active block
  int bs_sub;           // kernel key tiles per mask block
  int bs_q0;            // first query of the mask block
  const int* pages;     // paged: this sequence's entries of page_indices
  // Block-sparse work list (FwdParams::bs_work): the tile's CSR entries [bs_entry0, bs_entry_end)
  // are part `part` of `parts`; a cut tile (parts > 1) owns partial slots part_slot0 ..
  // part_slot0 + parts - 1 and its merge counter merge_count[part_slot0].
  int bs_entry_end;
  int part, parts, part_slot0;

  __device__ __forceinline__ int group(const FwdParams& p) const { return kPack ? p.head_ratio : 1; }

  // Query index and head of virtual row r.
  __device__ __forceinline__ void row_of(int r, int& i, int& h) const {
    if constexpr (kPack) {
      const int hh = r / len_q;
      i = r - hh * len_q;
      h = h0 + hh;
    } else {
      i = r;
      h = h0;
    }
  }

  // Key tile of iteration it.
  __device__ __forceinline__ int tile(const FwdParams& p, int it) const {
    if constexpr (Spec::kBlockSparse) return p.bs_cols[bs_entry0 + it / bs_sub] * bs_sub + it % bs_sub;
    return n_first + it;
  }

  // Block sparse: the cell bitmap of iteration it's mask block, or null when the block is full.
  __device__ __forceinline__ const unsigned long long* cell_bits(const FwdParams& p, int it) const {
    if constexpr (Spec::kBlockSparse) {
      const int e = bs_entry0 + it / bs_sub;
      return (p.bs_state[e] & kBsFull) ? nullptr : p.bs_bits + p.bs_bits_ptr[e];
    }
    return nullptr;
  }

  // Block sparse, prefill: the state bits (kBsGroupEmpty | kBsGroupFull) of iteration it's mask
  // block for the kBsGroupRows query rows from tile row r0 on (a warpgroup's rows; r0 a multiple
  // of kBsGroupRows). A full block reads as a full group; 0 where nothing is known.
  __device__ __forceinline__ unsigned group_state(const FwdParams& p, int it, int r0) const {
    if constexpr (Spec::kBlockSparse && !kPack) {
      const unsigned st = p.bs_state[bs_entry0 + it / bs_sub];
      if (st & kBsFull) return kBsGroupFull;
      const int gi = (i_lo - bs_q0 + r0) / kBsGroupRows;
      return gi < kBsMaxGroups ? (st >> (2 * gi)) & (kBsGroupEmpty | kBsGroupFull) : 0u;
    }
    return 0u;
  }

  // Key range [lo, hi) that can hold kept cells for the tile's query positions.
  __device__ __forceinline__ void key_range(const FwdParams& p, int& lo, int& hi) const {
    af_i64 l = 0, h = len_k;
    const af_i64 first = (af_i64)i_lo + q_offset, last = (af_i64)i_hi + q_offset;
    if (Spec::kCausal) h = h < last + 1 ? h : last + 1;
    if (Spec::kSlidingWindow) {
      const af_i64 wl = first - p.window + 1, wh = last + p.window;
      l = l > wl ? l : wl;
      h = h < wh ? h : wh;
    }
    lo = (int)(l < 0 ? 0 : l);
    hi = (int)(h < lo ? lo : h);
  }

  // Every cell of key tile [n0, n0 + kBN) x the tile's queries kept by causal / sliding_window
  // and the lengths?
  __device__ __forceinline__ bool tile_inside(const FwdParams& p, int n0) const {
    if (n0 + kBN > len_k) return false;
    const af_i64 first = (af_i64)i_lo + q_offset, last = (af_i64)i_hi + q_offset;
    if (Spec::kCausal && first - (n0 + kBN - 1) < 0) return false;
    if (Spec::kSlidingWindow) {
      if (last - n0 >= p.window) return false;
      if ((af_i64)(n0 + kBN - 1) - first >= p.window) return false;
    }
    return true;
  }

  // Block sparse prefill with a work list: block L (a 1-D grid) runs entry L / per_row, for the
  // (batch entry, head, query tile of the mask block) numbered L % per_row; per_row = rb x rh x
  // sq (rb, rh: the batch entries and heads the mask broadcasts over; sq: query tiles per mask
  // block). Sets b, h0, hk, the tile slot and the entry's range and part.
  __device__ __forceinline__ void from_work(const FwdParams& p, int& slot) {
    const int sq = p.bs_block_q / kBM;
    const int rb = p.bs_batch == 1 ? p.batch : 1, rh = p.bs_heads == 1 ? p.heads_q : 1;
    const af_i64 per_row = (af_i64)rb * rh * sq;
    const af_i64 L = blockIdx.x;
    const int* e = p.bs_work + 8 * (L / per_row);
    const int r = e[0];
    bs_entry0 = e[1];
    bs_entry_end = e[2];
    part = e[3];
    parts = e[4];
    const int inst = (int)(L % per_row);
    part_slot0 = parts > 1 ? e[5] + inst * parts : -1;
    const int sub = inst % sq, hr = (inst / sq) % rh, br = inst / sq / rh;
    const int qb = r % p.bs_nqb, hm = (r / p.bs_nqb) % p.bs_heads, bm = r / p.bs_nqb / p.bs_heads;
    b = p.bs_batch == 1 ? br : bm;
    h0 = p.bs_heads == 1 ? hr : hm;
    hk = h0 / p.head_ratio;
    slot = qb * sq + sub;
  }

  // Decodes the block index; false when the block has no rows (a document slot past its
  // document's last tile). Uniform over the block.
  __device__ __forceinline__ bool init(const FwdParams& p) {
    const int S = p.num_splits;  // 1 with a work list (its parts replace splits)
    part = 0;
    parts = 1;
    part_slot0 = -1;
    split = (int)(blockIdx.x % S);
    int slot = (int)(blockIdx.x / S);
    int slots = (int)(gridDim.x / S);
    b = blockIdx.z;
    if constexpr (Spec::kBias) {
      // Bias programs launch each query tile's batch entries side by side (x = (slot x B + b) x
      // S + split, a grid of one z; CudaKernel::plan): a bias broadcast over the batch is then
      // read from DRAM once per tile while L2 serves the same rows to the other entries' blocks.
      b = slot % p.batch;
      slot /= p.batch;
      slots /= p.batch;
    }
    if constexpr (kPack) {
      hk = blockIdx.y;
      h0 = hk * p.head_ratio;
    } else {
      h0 = blockIdx.y;
      hk = h0 / p.head_ratio;
    }
    const int G = group(p);
    len_q = p.len_q;
    len_k = p.len_k;
    q_offset = (int)p.q_offset;
    q_row0 = 0;
    k_row0 = 0;
    if constexpr (Spec::kDocument) {
      // Slot of document d's first tile: floor(G * cu_q[d] / kBM) + d. It never decreases and
      // leaves each document at least its ceil(G * Lq / kBM) tiles, so the grid needs
      // floor(G * Nq / kBM) + num_docs slots and a binary search finds a slot's document.
      const void* cq = p.cu_q;
      const void* ck = p.cu_k;
      const af_i64 row = (af_i64)b * p.cu_batch_stride;
      int lo = 0, hi = p.num_docs - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        const af_i64 start = (af_i64)G * cu_seqlen_at(cq, p.cu_is_i64, row + mid) / kBM + mid;
        if (start <= slot) lo = mid;
        else hi = mid - 1;
      }
      const int d = lo;
      q_row0 = cu_seqlen_at(cq, p.cu_is_i64, row + d);
      k_row0 = cu_seqlen_at(ck, p.cu_is_i64, row + d);
      len_q = (int)(cu_seqlen_at(cq, p.cu_is_i64, row + d + 1) - q_row0);
      len_k = (int)(cu_seqlen_at(ck, p.cu_is_i64, row + d + 1) - k_row0);
      q_offset = len_k - len_q;
      slot -= (int)((af_i64)G * q_row0 / kBM) + d;
    } else if (Spec::kBlockSparse && !kPack && p.bs_work) {
      from_work(p, slot);
    } else if (Spec::kCausal) {
      // Causal rows near the end see the most keys: schedule those tiles first so the short ones
      // fill the tail of the grid instead of leaving SMs idle behind one long block.
      slot = slots - 1 - slot;
    }
    if constexpr (Spec::kPagedKV) {
      const int first_page = ld_keep_in_l2(p.page_indptr + b);
      const int num_pages = ld_keep_in_l2(p.page_indptr + b + 1) - first_page;
      pages = p.page_indices + first_page;
      len_k = paged_seq_len(p, b, num_pages);
      q_offset = p.q_offset_given ? (int)p.q_offset : len_k - len_q;
    }
    rows = G * len_q;
    m0 = slot * kBM;
    if (m0 >= rows) return false;
    const int last = (m0 + kBM < rows ? m0 + kBM : rows) - 1;
    if (kPack && m0 / len_q != last / len_q) {
      i_lo = 0;
      i_hi = len_q - 1;
    } else {
      i_lo = kPack ? m0 % len_q : m0;
      i_hi = kPack ? last % len_q : last;
    }

    // The key tiles: a range from the masks, or the row's active blocks.
    int count;
    if constexpr (Spec::kBlockSparse) {
      const int bm = p.bs_batch == 1 ? 0 : b, hm = p.bs_heads == 1 ? 0 : h0;
      const int qb = i_lo / p.bs_block_q;
      const int r = (bm * p.bs_heads + hm) * p.bs_nqb + qb;
      if (kPack || !p.bs_work) {  // else from_work set the entry's range
        bs_entry0 = p.bs_row_ptr[r];
        bs_entry_end = p.bs_row_ptr[r + 1];
      }
      bs_sub = p.bs_block_k / kBN;
      bs_q0 = qb * p.bs_block_q;
      count = (bs_entry_end - bs_entry0) * bs_sub;
      n_first = 0;
    } else {
      int lo, hi;
      key_range(p, lo, hi);
      n_first = lo / kBN;
      count = (hi + kBN - 1) / kBN - n_first;
      if (count < 0) count = 0;
    }
    const int per = (count + S - 1) / S;
    it_begin = split * per < count ? split * per : count;
    it_end = it_begin + per < count ? it_begin + per : count;
    return true;
  }

  // Row pointers of the sequence's tensors (K and V: contiguous rows, or looked up in the pages).
  __device__ __forceinline__ const Element* q_row(const FwdParams& p, int r) const {
    int i, h;
    row_of(r, i, h);
    return static_cast<const Element*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1] + (q_row0 + i) * p.q_stride[2];
  }
  // Paged: key j's slot in the sequence's page list and its row in that page. Page sizes that are
  // powers of two (the usual 1, 16, 32, 64...) divide by a shift.
  __device__ __forceinline__ void page_pos(const FwdParams& p, int j, int& slot, int& row) const {
    if (p.page_shift >= 0) {
      slot = j >> p.page_shift;
      row = j & (p.page_size - 1);
    } else {
      slot = j / p.page_size;
      row = j - slot * p.page_size;
    }
  }
  // Key j's page (a page-table load) and its row in it.
  __device__ __forceinline__ int page_of(const FwdParams& p, int j, int& row) const {
    int slot;
    page_pos(p, j, slot, row);
    return pages[slot];
  }
  // Element offsets of key j's K and V rows in the page tensors (the lookup included).
  __device__ __forceinline__ void page_offsets(const FwdParams& p, int j, af_i64& k_off, af_i64& v_off) const {
    int row;
    const int page = page_of(p, j, row);
    page_offsets(p, page, row, k_off, v_off);
  }
  // Element offsets of a key's K and V rows in the page tensors, from its page and row.
  __device__ __forceinline__ void page_offsets(const FwdParams& p, af_i64 page, int row, af_i64& k_off,
                                               af_i64& v_off) const {
    k_off = page * p.page_stride_k[0] + hk * p.page_stride_k[1] + (af_i64)row * p.page_stride_k[2];
    v_off = page * p.page_stride_v[0] + hk * p.page_stride_v[1] + (af_i64)row * p.page_stride_v[2];
  }

  // Contiguous K / V rows (paged caches go through page_offsets in KvCopy::load_kv).
  __device__ __forceinline__ const Element* k_row(const FwdParams& p, int j) const {
    return static_cast<const Element*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1] + (k_row0 + j) * p.k_stride[2];
  }
  __device__ __forceinline__ const Element* v_row(const FwdParams& p, int j) const {
    return static_cast<const Element*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1] + (k_row0 + j) * p.v_stride[2];
  }
};

}  // namespace attnfuse_kernels
