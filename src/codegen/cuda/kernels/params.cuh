// The launch parameters of the fused forward kernel: one plain struct shared verbatim by the
// host runtime (C++) and the device code (NVRTC), so both sides agree on every offset.
#pragma once

#ifdef __CUDACC_RTC__
typedef long long af_i64;
#else
#include <cstdint>
typedef long long af_i64;
#endif

namespace attnfuse_kernels {

// Rotated pairs a RoPE kernel can hold: rotary_dim / 2 <= 256 / 2.
constexpr int kMaxRopePairs = 128;

// Block-sparse entry states (FwdParams::bs_state, made by runtime entry_states): bit kBsFull
// when the block keeps every cell; for a partial block's row group g of kBsGroupRows rows
// (g < kBsMaxGroups), bit kBsGroupEmpty << 2g when the group keeps none of its cells and
// bit kBsGroupFull << 2g when it keeps all of them (rows and keys past the lengths do not count).
constexpr unsigned kBsFull = 1u, kBsGroupEmpty = 2u, kBsGroupFull = 4u;
constexpr int kBsGroupRows = 64, kBsMaxGroups = 15;

// RoPE of one call (rope / rope_window programs only; zero otherwise).
struct RopeArgs {
  // θ_r / 2π as a 0.64 fixed-point fraction of a turn, per pair. The angle of position p is
  // p * turn[r] mod 2^64 in integer arithmetic: exact argument reduction at any 32-bit position
  // (fp32 p * θ_r loses ~3 digits at p = 128k), computed in the host's float64.
  unsigned long long turn[kMaxRopePairs];
  // rope_window: pair r keeps the cells with |Δ| <= limit[r] (rope::window_limits, clamped to
  // 2^31 - 1, which keeps every 32-bit Δ); unused for rope.
  int limit[kMaxRopePairs];
  float factor;  // Hugging Face attention factor: multiplies cos and sin
  int half;      // rotated pairs: rotary_dim / 2 (a multiple of 2 on CUDA)
  // The caller's tables (AttentionArgs::rope_tables, device memory), used as given in place of
  // the computed cos/sin: pair r at position p is cos_table[p * half + r]. Null: computed.
  const float* cos_table;
  const float* sin_table;
  int table_positions;  // rows of the tables; a position outside them rotates by NaN
};

// Length-dependent RoPE scalings (dynamic, longrope) in a call whose lengths are device memory
// (paged caches, documents), which the host cannot read (FwdParams::rope_len; zero otherwise):
// RopeArgs::turn and limit hold the frequencies of lengths <= orig, and a block whose call is
// longer (work.cuh rope_length_on_device, reference::rope_seq_len's rule) stages instead
//  - longrope: the long factors' set the host made, long_set (device memory: half turns, then
//    half limits as ints);
//  - dynamic: the frequencies of its length, computed in float64 from dyn_base and dyn_factor
//    (HF's rope_theta and factor), rope_window's limits from window_k.
struct RopeLengthRule {
  int rule;     // RopeLenRule
  af_i64 orig;  // original_max_position_embeddings
  const unsigned long long* long_set;
  double dyn_base, dyn_factor, window_k;
};
enum RopeLenRule { kRopeLenFixed = 0, kRopeLenLongrope = 1, kRopeLenDynamic = 2 };

// Strides are in elements; the last dimension of every tensor is contiguous.
struct FwdParams {
  const void* q;  // [B, Hq, Nq, D]
  const void* k;  // [B, Hkv, Nk, D]
  const void* v;  // [B, Hkv, Nk, Dv]
  void* o;        // [B, Hq, Nq, Dv]
  float* lse;     // [B, Hq, Nq] or null
  const void* bias;           // additive_bias: [1|B, 1|Hq, Nq, Nk] fp32 or the inputs' dtype, or null
  const float* alibi_slopes;  // custom ALiBi slopes per query head, or null (standard)

  af_i64 q_stride[3];  // batch, head, row
  af_i64 k_stride[3];
  af_i64 v_stride[3];
  af_i64 o_stride[3];
  af_i64 lse_stride[2];   // batch, head
  af_i64 bias_stride[3];  // batch, head, row (0 where broadcast)

  int batch, heads_q, heads_kv, len_q, len_k;
  int head_ratio;      // heads_q / heads_kv
  af_i64 q_offset;     // position of query 0 (bottom-right default: len_k - len_q)

  float scale;         // score scale (1/sqrt(D) unless the program says otherwise)
  float scale_log2;    // scale * log2(e): folded into exp2 when no modifier follows the dot
  float softcap;       // softcap c
  float inv_softcap;   // 1 / c
  int window;          // sliding_window w: keep |delta| < w
  int bias_16bit;      // additive_bias: 1 when the bias is in the inputs' 16-bit dtype, 0 when fp32

  RopeArgs rope;       // rope / rope_window only

  // Split-KV: the key tiles of every query tile are cut into num_splits parts; with more than
  // one, each part writes its normalised partial O and LSE here ([num_splits, B, Hq, Nq, Dv]
  // and [num_splits, B, Hq, Nq], fp32, contiguous) and combine.cuh merges them.
  int num_splits;
  float* part_o;
  float* part_lse;
  // Decode variant: one zeroed counter per (query-tile slot, head, batch entry); when set, the
  // block finishing a tile's splits last merges them (BlockMerge::parts, block_merge.cuh) and no combine
  // kernel runs. Null: the combine kernel merges.
  int* merge_count;

  // Paged KV (Spec::kPagedKV; FlashInfer conventions, attention.hpp PagedKV): k / v point to the
  // page tensors, page_stride_* are (page, head, row in page) element strides. Sequence b owns
  // pages page_indices[page_indptr[b] .. page_indptr[b+1]), the last holding last_page_len[b]
  // rows; its queries sit bottom-right unless q_offset_given.
  const int* page_indices;
  const int* page_indptr;
  const int* last_page_len;
  int page_size;
  int page_shift;      // log2(page_size) when it is a power of two, else -1
  int q_offset_given;
  int page_table_settled;  // PagedKV::table_settled: the table may be read before the grid dependency wait
  af_i64 page_stride_k[3];
  af_i64 page_stride_v[3];

  // Documents (Spec::kDocument): cu_seqlens of queries and keys, num_docs + 1 entries per row,
  // int32 or int64, one row shared by the batch (batch_stride 0) or one per batch entry.
  const void* cu_q;
  const void* cu_k;
  int cu_is_i64;
  int num_docs;
  af_i64 cu_batch_stride;

  // Block-sparse (Spec::kBlockSparse): the BlockMask's CSR as uploaded by the runtime. Row
  // ((b * bs_heads) + h) * bs_nqb + qb (b, h folded to 0 where the mask broadcasts) lists its
  // active key blocks bs_cols[bs_row_ptr[row] .. bs_row_ptr[row + 1]); entry e is full when
  // bit kBsFull of bs_state[e] is set, else its cells are bits bs_bits[bs_bits_ptr[e] ...]
  // (row-major in the block). A partial entry's state also says, per group of 64 rows of the
  // block (runtime/device_block_mask.hpp entry_states), whether the group keeps none of its cells
  // or all of them, so a warpgroup of the wgmma tile skips the block or reads it unmasked.
  const int* bs_row_ptr;
  const int* bs_cols;
  const unsigned* bs_state;
  const af_i64* bs_bits_ptr;
  const unsigned long long* bs_bits;
  int bs_block_q, bs_block_k, bs_nqb, bs_batch, bs_heads;
  // Prefill work list (runtime/sparse_work.hpp; null in decode and document launches): 8 ints
  // per entry, heaviest first: mask row, first and end CSR entry, part, parts, first partial
  // slot of the row (-1: not cut). The grid is one-dimensional, entries x (the batch entries and
  // heads the mask broadcasts over) x (query tiles per mask block) blocks (Work::from_work).
  // Parts of a cut row write normalised partial rows to slots of block_q rows in part_o /
  // part_lse and the last to finish merges them (merge_count: a counter per cut tile).
  const int* bs_work;

  // Hopper (Spec::kTmaKV, used when tma_kv != 0): tensor maps (CUtensorMap: 128 bytes, 64-byte
  // aligned) of K and V as 4-D [B, Hkv, Nk, D] tensors read in boxes of block_k rows x 64 dims,
  // 128-byte swizzled, rows past Nk zero-filled. The host encodes them per call; where the
  // tensors do not meet the copy engine's rules it leaves tma_kv = 0 and cp.async loads instead.
  // Paged decode tiles read the page tensors as [pages, Hkv, page_size, D] in boxes of
  // tma_box_rows rows (gcd(page_size, block_k), at least 8).
  int tma_kv;
  int tma_box_rows;
  // Decode tiles by TMA launched as programmatic dependents: ask L2 for this many of their first
  // K/V tiles (at most their stages) and for Q before the grid dependency wait where they know
  // them then (FwdKernel::kEarlyL2; ATTNFUSE_CUDA_EARLY_L2, 0: no hints). Nonzero only with tma_kv
  // (the hints name the tensor maps' boxes).
  int early_l2;
  alignas(64) unsigned char tma_k[128];
  alignas(64) unsigned char tma_v[128];

  // Last, so that it moves no offset above: with the fields in RopeArgs, ptxas allocated a
  // block-sparse module at its 128-register cap differently and spilled 4 bytes.
  RopeLengthRule rope_len;  // rope / rope_window with paged K/V or documents only
};

// The split-KV combine kernel (combine.cuh): one warp per output row (b, h, i).
struct CombineParams {
  const float* part_o;    // [num_splits, rows, Dv]
  const float* part_lse;  // [num_splits, rows]
  void* o;                // the call's O (Element), strided as in FwdParams
  float* lse;             // or null
  af_i64 o_stride[3];
  af_i64 lse_stride[2];
  int heads_q, len_q;     // rows = batch * heads_q * len_q
  af_i64 rows;
  int num_splits;
};

// The pre-rotation kernel of rope_mode = prerotate: rotates Q and K once into contiguous
// [B, H, N, D] copies that the plain forward kernel then reads.
struct RotateParams {
  const void* src[2];       // Q, K (strided as below)
  void* dst[2];             // contiguous [B, H, N, D]
  af_i64 src_stride[2][3];  // batch, head, row
  int heads[2];             // Hq, Hkv
  int len[2];               // Nq, Nk
  af_i64 rows[2];           // B * H * N of each tensor
  af_i64 pos0[2];           // position of row 0: q_offset for Q, 0 for K
  RopeArgs rope;
  // 1: every 8-element chunk of a row is 16-byte aligned in both tensors and holds whole pairs
  // (RotateKernel's vector path); 0: the 32-bit path.
  int vec;
};

// merge_states (merge_states.cuh): the states' descriptors travel as kernel parameters, so a
// launch takes at most 32 (2.3 KB of the 4 KB parameter space).
constexpr int kMergeMaxStates = 32;
enum MergeDType { kMergeF32 = 0, kMergeBF16 = 1, kMergeF16 = 2 };

struct MergeState {
  void* o;                // [B, H, N, D] of `dtype`, last axis contiguous
  float* lse;             // [B, H, N]
  af_i64 o_stride[3];     // batch, head, row (elements)
  af_i64 lse_stride[3];
  int dtype;              // MergeDType
};

// n / d for n < 2^31 by a multiply-high, an add and a shift (the divisor's magic number, made on
// the host by merge_div): the merge kernel splits its thread index by three run-time divisors, and
// a 32-bit division, which the GPU has no instruction for, costs ~20 in a kernel that does little else.
struct MergeDiv {
  unsigned mul, shift;
};

struct MergeStatesParams {
  MergeState states[kMergeMaxStates];
  MergeState out;
  int num_states;
  int dim;
  int heads, len;      // rows = batch * heads * len < 2^31
  int rows;
  int vec;             // chunks of 16 (3), 8 (2) or 4 (1) elements, where every O row (inputs and
                       // output) keeps them aligned and dim is a multiple; else 1 element (0)
  int chunks;          // threads per row: dim / chunk elements, at most the block's threads
  int rows_per_block;  // whole rows per block: block threads / chunks
  MergeDiv len_div, heads_div, chunks_div;  // of len, heads and chunks (merge_states_shape)
};

#ifndef __CUDACC_RTC__
// The elements of one thread's chunk for MergeStatesParams::vec (the kernel decodes it alike).
inline constexpr int merge_chunk_elems(int vec) { return vec == 3 ? 16 : vec == 2 ? 8 : vec == 1 ? 4 : 1; }

// The magic number of d (1 <= d < 2^31): with s = ceil(log2 d) and mul = floor(2^32 (2^s - d) / d) + 1,
// n / d = (mulhi(n, mul) + n) >> s for every n < 2^31 (Granlund and Montgomery; the sum fits 32 bits).
inline MergeDiv merge_div(int d) {
  unsigned shift = 0;
  while ((1ull << shift) < static_cast<unsigned long long>(d)) ++shift;
  const unsigned long long num = (1ull << 32) * ((1ull << shift) - static_cast<unsigned long long>(d));
  return MergeDiv{static_cast<unsigned>(num / static_cast<unsigned long long>(d) + 1), shift};
}

// The merge kernel's launch shape, set in p from its dim, rows and vec (host side): a thread per
// chunk of a row (several chunks each where a row has more than the block has threads), whole
// rows per block, and the magic numbers of its divisors. Returns the number of blocks.
inline unsigned merge_states_shape(MergeStatesParams& p, int threads) {
  const int chunks = p.dim / merge_chunk_elems(p.vec);
  p.chunks = chunks < 1 ? 1 : chunks > threads ? threads : chunks;
  p.rows_per_block = threads / p.chunks;
  p.len_div = merge_div(p.len < 1 ? 1 : p.len);
  p.heads_div = merge_div(p.heads < 1 ? 1 : p.heads);
  p.chunks_div = merge_div(p.chunks);
  return static_cast<unsigned>((static_cast<af_i64>(p.rows) + p.rows_per_block - 1) / p.rows_per_block);
}
#endif

}  // namespace attnfuse_kernels
