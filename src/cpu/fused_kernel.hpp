// The fused CPU attention kernel's interface: one resolved call (KernelParams) and the table of
// compile-time specializations. Its building blocks (fast math, the SIMD micro-kernels) are
// cpu/simd.hpp, compiled per instruction-set level (cpu/isa.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"
#include "common/documents.hpp"
#include "common/dtype.hpp"
#include "cpu/rope_plan.hpp"

namespace attnfuse::cpu {

// 64-byte aligned fp32 scratch (the SIMD blocks load aligned rows), for the fused kernel's
// per-thread workspace and the unfused ablation's materialized S/P.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], FreeDeleter>;

inline AlignedFloats alloc_floats(int64_t n) {
  const size_t bytes = (size_t(std::max<int64_t>(n, 1)) * 4 + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  return AlignedFloats(p);
}

// ---- Tile limits ------------------------------------------------------------------------------

// The tile shape itself is the tile pass's choice (passes::tile_sizes, carried in
// KernelSpec::tile); block_sparse programs cut the BlockMask's blocks to at most that size. The
// kernel's layout bounds it: scores live transposed, S^T[key][query], one query row per SIMD lane,
// and the QK micro-kernel holds 4 keys x 64 queries in 16 accumulators, so a tile has at most 64
// query rows; the thread-local score tile holds at most 256 keys. Measured on the 2-core AVX-512
// Zen 4 build machine (causal fp32, B=1, H=8, N=2048, D=64, 2 threads): block_q 64 beats 32 by
// ~10% (each K/V chunk serves more rows); block_k 64, 128 and 256 are within noise of each other,
// 32 is ~10% slower (twice the online-softmax rescales and O reloads).
constexpr int kMaxBlockQ = 64;
constexpr int kMaxBlockK = 256;

// ---- One call, resolved ---------------------------------------------------------------------

// Everything the kernel reads, after validation: raw pointers, element strides of the (b, h, s)
// axes (the last axis is contiguous), and the program's scalars.
struct KernelParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  DType dtype = DType::F32;  // of q, k, v and out
  int block_q = kMaxBlockQ;  // query rows per tile, 1..kMaxBlockQ
  int block_k = 64;          // keys per chunk, 1..kMaxBlockK
  int64_t B = 0, Hq = 0, Hkv = 0, Nq = 0, Nk = 0, D = 0, Dv = 0;
  std::array<int64_t, 3> q_strides{}, k_strides{}, v_strides{}, out_strides{};
  float* lse = nullptr;  // optional
  std::array<int64_t, 3> lse_strides{};

  float scale = 1.0f;
  int64_t q_offset = 0;  // position of query 0
  MaskSet masks;
  int64_t window = 0;                   // sliding_window
  const BlockMask* block_mask = nullptr;  // block_sparse
  const float* alibi_slopes = nullptr;  // [Hq], alibi
  float softcap = 0.0f;                 // softcap
  const void* bias = nullptr;           // additive_bias; broadcast axes have stride 0
  DType bias_dtype = DType::F32;
  std::array<int64_t, 3> bias_strides{};
  // rope / rope_window: Q rotated once per query tile, K per chunk on load (so K is always
  // copied, fp32 too); null for scaled_dot_product.
  const RopePlan* rope = nullptr;
  // document: the documents of each batch entry (one entry shared by all when the offsets are,
  // else B); null without document masks. Query tiles never straddle a document, and a tile
  // visits only its document's keys, with that document's positions (common/documents.hpp).
  const Documents* documents = nullptr;
  int64_t document_rows = 0;
  // Paged KV cache (null page_table: contiguous K/V). k / v then point at the pages and
  // k_strides / v_strides are the strides of (page, head, row in page); key j of batch entry b
  // is row j % page_size of page page_table[page_start[b] + j / page_size]. Each entry has its own
  // key count kv_len[b] and query 0 position q_offsets[b]; Nk is the longest (RoPE's key table).
  // Rows are gathered into the same chunk buffers as contiguous ones (in place for fp32), so a
  // paged call computes exactly what the contiguous one does.
  const int32_t* page_table = nullptr;  // page_indices
  const int32_t* page_start = nullptr;  // page_indptr [B + 1]
  int64_t page_size = 0;
  const int64_t* kv_len = nullptr;     // [B]
  const int64_t* q_offsets = nullptr;  // [B]
};

// One compile-time specialization of the kernel. Never called with an unvalidated call.
using KernelFn = void (*)(const KernelParams&);

// The specialization for a norm, an ordered modifier chain and whether any mask that checks
// cells is present (causal, sliding_window, block_sparse: per-element checks exist at all; a
// document mask only bounds the tiles), at the process's instruction-set level. Every chain of
// distinct modifiers has one.
KernelFn select_kernel(NormKind norm, const ModifierChain& modifiers, bool masked);

}  // namespace attnfuse::cpu
