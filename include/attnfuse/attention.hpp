// Running a compiled program: the tensors of one call, their validation, and the backends.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"

namespace attnfuse {

// Document boundaries of sequences packed along the sequence axis (FlashAttention's varlen
// cu_seqlens): offsets [0, e_0, e_1, ..., N], num_docs + 1 of them, non-decreasing, the last one
// the sequence length. Document d holds rows [offsets[d], offsets[d+1]); empty documents are
// allowed. One row of offsets shared by every batch entry ([num_docs + 1]), or one row per batch
// entry ([B, num_docs + 1]); int32 or int64.
struct SeqOffsetsView {
  enum class Type { I32, I64 };
  const void* data = nullptr;
  Type type = Type::I32;
  int64_t batch = 1;         // 1: shared by every batch entry; else B
  int64_t length = 0;        // num_docs + 1
  int64_t batch_stride = 0;  // elements between the rows of two batch entries

  static SeqOffsetsView contiguous(const int32_t* data, int64_t length, int64_t batch = 1) {
    return {data, Type::I32, batch, length, length};
  }
  static SeqOffsetsView contiguous(const int64_t* data, int64_t length, int64_t batch = 1) {
    return {data, Type::I64, batch, length, length};
  }
  // Offset d of batch entry b (row 0 for every b when the offsets are shared).
  int64_t at(int64_t b, int64_t d) const {
    const int64_t i = (batch == 1 ? 0 : b) * batch_stride + d;
    return type == Type::I32 ? static_cast<const int32_t*>(data)[i] : static_cast<const int64_t*>(data)[i];
  }
};

// A paged KV cache (FlashInfer's conventions). K and V live in pages of page_size rows each:
//   NHD: k_pages [num_pages, page_size, Hkv, D], v_pages [num_pages, page_size, Hkv, Dv]
//   HND: k_pages [num_pages, Hkv, page_size, D], v_pages [num_pages, Hkv, page_size, Dv]
// any strides with a contiguous last dimension, one dtype with Q (fp32/bf16/fp16 on the CPU).
// Batch entry b owns the pages page_indices[page_indptr[b] .. page_indptr[b+1]), in order, and
// the last of them holds last_page_len[b] valid rows (1..page_size), so its KV length is
// (pages_b - 1) * page_size + last_page_len[b]; a sequence without pages has length 0 (its rows
// keep nothing: O = 0, LSE = -inf) and its last_page_len is not read. page_indptr has B + 1
// entries, starts at 0 and never decreases; every index read is in [0, num_pages). Pages may be
// shared between sequences (prefix sharing) and need not be in order.
// Positions follow each sequence's own length: key u of sequence b is at position u and, unless
// q_offset is given (then it applies to every sequence), query i at i + kv_len(b) - Nq
// (bottom-right per sequence: decode and chunked prefill alike).
struct PagedKV {
  enum class Layout { NHD, HND };
  TensorView k_pages, v_pages;
  Layout layout = Layout::NHD;
  std::span<const int32_t> page_indices;   // >= page_indptr[B] entries
  std::span<const int32_t> page_indptr;    // B + 1
  std::span<const int32_t> last_page_len;  // B
  // The caller's promise that the three index arrays above were complete before the kernel
  // launched just ahead of this call on its stream began: they are not that kernel's output.
  // This holds in the usual serving step, where the tables are written (by host copies or a
  // planning kernel) before the layers run, and the kernel ahead of attention is a projection, a
  // RoPE or a cache append, which write Q, K and V but not the table. A CUDA call may then read
  // the table while that kernel is still finishing (programmatic dependent launch) instead of
  // after it. false (the default): read after it has completed. K and V are always read after.
  // The CPU backend runs in program order and ignores it.
  bool table_settled = false;

  int64_t num_pages() const { return k_pages.shape[0]; }
  int64_t page_size() const { return layout == Layout::NHD ? k_pages.shape[1] : k_pages.shape[2]; }
  int64_t heads() const { return layout == Layout::NHD ? k_pages.shape[2] : k_pages.shape[1]; }
  int64_t batch() const { return static_cast<int64_t>(page_indptr.size()) - 1; }
  // KV length of batch entry b (unchecked: validate() first). The page count is formed in 64 bits,
  // so an unchecked table (any two int32 entries) gives a wrong length, never an overflow.
  int64_t kv_len(int64_t b) const {
    const int64_t pages = int64_t{page_indptr[size_t(b + 1)]} - int64_t{page_indptr[size_t(b)]};
    return pages == 0 ? 0 : (pages - 1) * page_size() + last_page_len[size_t(b)];
  }
  // Element strides of (page, head, row in page) of a page tensor, whatever the layout.
  std::array<int64_t, 3> strides(const TensorView& pages) const {
    return layout == Layout::NHD ? std::array<int64_t, 3>{pages.strides[0], pages.strides[2], pages.strides[1]}
                                 : std::array<int64_t, 3>{pages.strides[0], pages.strides[1], pages.strides[2]};
  }
};

// RoPE cos/sin tables supplied by the caller, used instead of the ones the program's RoPE
// parameters give (e.g. a model's own precomputed position embeddings): cos[p * pairs + r] and
// sin[p * pairs + r] rotate pair r at position p, fp32, [positions, pairs] contiguous, pairs =
// rotary_dim / 2, taken as given (include any attention factor). Every position the call rotates
// must be in [0, positions). rope_window still takes its wavelengths, hence its windows, from
// the program's parameters. The tensors' memory: host for the CPU backend, device for CUDA
// (where a position outside the tables, which the host cannot see for a document call with
// device offsets, rotates by NaN).
struct RopeTablesView {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t positions = 0;
  int64_t pairs = 0;
};

// One attention call. Q [B,Hq,Nq,D], K [B,Hkv,Nk,D], V [B,Hkv,Nk,Dv], out [B,Hq,Nq,Dv].
struct AttentionArgs {
  TensorView q, k, v, out;
  std::optional<LseView> lse;      // [B,Hq,Nq] fp32, natural log; -inf for fully masked rows
  std::optional<TensorView> bias;  // additive_bias: [1|B, 1|Hq, Nq, Nk] (shape 1 broadcasts)
  const BlockMask* block_mask = nullptr;  // block_sparse
  std::optional<int64_t> q_offset;  // position of query 0; default Nk - Nq (bottom-right)
  // document: the documents of the queries and of the keys, document d of one pairing with
  // document d of the other (so both hold num_docs + 1 offsets, ending at Nq resp. Nk).
  // Positions restart in each document, and each document is aligned bottom-right on its own
  // (FlashAttention varlen): query t of a document with Lq queries and Lk keys has position
  // t + Lk - Lq, key u has position u. Δ, causal, sliding_window, alibi, rope and rope_window
  // all read these positions; an explicit q_offset is refused (Error(Unsupported)).
  std::optional<SeqOffsetsView> cu_seqlens_q, cu_seqlens_k;
  // Paged KV cache: K and V come from `paged` and k / v must be left empty (no data pointer, all
  // dimensions 0; Error(Shape) otherwise, so a call never silently ignores a tensor). Every mask,
  // modifier and score op works per sequence, except three that need one key axis shared by the
  // batch: additive_bias ([.., Nq, Nk]), block_sparse (a BlockMask of one kv_len) and document
  // (offsets ending at Nk) are Error(Unsupported) with a paged cache. On CUDA the three index
  // arrays are device memory (IndexMemory::Device).
  std::optional<PagedKV> paged;
  // rope / rope_window: the caller's cos/sin tables instead of computed ones (see RopeTablesView).
  std::optional<RopeTablesView> rope_tables;

  // Without a paged cache: Nk - Nq unless given. With one, see PagedKV (per sequence).
  int64_t resolved_q_offset() const { return q_offset ? *q_offset : k.shape[2] - q.shape[2]; }
};

// Where a call's index arrays (paged.page_indices / page_indptr / last_page_len, cu_seqlens_q /
// _k) live: host memory (CPU calls) or device memory (CUDA calls, as in FlashAttention and
// FlashInfer; the host then checks their sizes but cannot read their entries).
enum class IndexMemory { Host, Device };

// Checks shapes, dtypes, strides and run-time tensors against the spec; throws Error
// (Shape / DType / MissingTensor / Unsupported) and never touches the outputs.
void validate(const KernelSpec& spec, const AttentionArgs& args, IndexMemory indices = IndexMemory::Host);
// The same with the call's scalars in place of spec.scalars: a compiled kernel serves every
// program of its structure, whose scalars (window, slopes, RoPE parameters) come per call.
void validate(const KernelSpec& spec, const ScalarArgs& scalars, const AttentionArgs& args, IndexMemory indices);

// The fused CPU backend (validates first).
void run_cpu(const KernelSpec& spec, const AttentionArgs& args);

// The instruction-set level the CPU backend runs in this process: "avx512", "avx2" or "baseline"
// (x86-64-v4, x86-64-v3, SSE2; "baseline" only on other architectures). The best one this CPU
// supports, unless the environment variable ATTNFUSE_CPU_ISA names one; Error(Unsupported) when it
// names one that is unknown, not compiled or not supported by this CPU.
const char* cpu_kernel_isa();

}  // namespace attnfuse
