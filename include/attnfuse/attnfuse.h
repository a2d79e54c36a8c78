/* attnfuse C ABI: compile an attention program once, launch it on device (or host) pointers.
 * Every function returns a status; on error attnfuse_last_error() holds one readable line for
 * the calling thread and nothing was launched or written. */
#ifndef ATTNFUSE_ATTNFUSE_H
#define ATTNFUSE_ATTNFUSE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ATTNFUSE_OK = 0,
  ATTNFUSE_ERROR_PARSE = 1,
  ATTNFUSE_ERROR_VERIFY = 2,
  ATTNFUSE_ERROR_SHAPE = 3,
  ATTNFUSE_ERROR_DTYPE = 4,
  ATTNFUSE_ERROR_MISSING_TENSOR = 5,
  ATTNFUSE_ERROR_UNSUPPORTED = 6,
  ATTNFUSE_ERROR_IO = 7,
  ATTNFUSE_ERROR_DEVICE = 8,
  ATTNFUSE_ERROR_INTERNAL = 9,
  ATTNFUSE_ERROR_INVALID_ARGUMENT = 10
} attnfuse_status;

typedef enum { ATTNFUSE_FP32 = 0, ATTNFUSE_BF16 = 1, ATTNFUSE_FP16 = 2 } attnfuse_dtype;
typedef enum { ATTNFUSE_DEVICE_CPU = 0, ATTNFUSE_DEVICE_CUDA = 1 } attnfuse_device;

/* A 4-D strided view [B, H, S, D] (elements); strides[3] must be 1. */
typedef struct {
  void* data;
  int64_t shape[4];
  int64_t strides[4];
} attnfuse_tensor;

/* Offsets of packed documents for document() masks (FlashAttention's cu_seqlens): int32 or
 * int64, [num_docs + 1] shared by the batch (batch = 1) or one row per batch entry (batch = B),
 * starting at 0, non-decreasing, ending at Nq (queries) or Nk (keys). */
typedef struct {
  const void* data;
  int is_int64;          /* 0: int32, 1: int64 */
  int64_t batch;         /* 1 (shared by every batch entry) or B */
  int64_t length;        /* num_docs + 1 */
  int64_t batch_stride;  /* elements between the rows of two batch entries */
} attnfuse_offsets;

/* A paged KV cache (FlashInfer's conventions; the C form of attnfuse::PagedKV). K and V live in
 * pages of page_size rows, in the kernel's dtype, with a contiguous last dimension:
 *   NHD: k_pages [num_pages, page_size, Hkv, D], v_pages [num_pages, page_size, Hkv, Dv]
 *   HND: k_pages [num_pages, Hkv, page_size, D], v_pages [num_pages, Hkv, page_size, Dv]
 * (attnfuse_tensor's four dimensions are then read in that order, not as [B, H, S, D]).
 * Batch entry b owns the pages page_indices[page_indptr[b] .. page_indptr[b+1]), in order; the
 * last of them holds last_page_len[b] valid rows (1..page_size), so its KV length is
 * (pages_b - 1) * page_size + last_page_len[b] (0 without pages: its rows give O = 0, LSE = -inf).
 * page_indptr has B + 1 entries (B = args.q.shape[0]), starts at 0 and never decreases;
 * last_page_len has B entries; page_indices has num_page_indices >= page_indptr[B] entries, each in
 * [0, num_pages). Pages may be shared between sequences and need not be in order. Queries are
 * aligned bottom-right to each sequence's own length unless has_q_offset is set.
 * Where the three index arrays live: on ATTNFUSE_DEVICE_CUDA they are DEVICE pointers (as in
 * FlashAttention and FlashInfer; their sizes are checked, their contents are not read on the host),
 * on ATTNFUSE_DEVICE_CPU host pointers (checked entry by entry). additive_bias, block_sparse and
 * document programs need one key axis shared by the batch and are refused with a paged cache
 * (ATTNFUSE_ERROR_UNSUPPORTED). */
typedef enum { ATTNFUSE_PAGED_NHD = 0, ATTNFUSE_PAGED_HND = 1 } attnfuse_paged_layout;

typedef struct {
  attnfuse_tensor k_pages, v_pages;
  attnfuse_paged_layout layout;
  const int32_t* page_indices;
  int64_t num_page_indices;
  const int32_t* page_indptr;   /* B + 1 entries */
  const int32_t* last_page_len; /* B entries */
} attnfuse_paged_kv;

/* Which (query block, key block) pairs a block_sparse program keeps (attnfuse::BlockMask). A host
 * object on every device: the CUDA runtime uploads it on its first launch (synchronously) and keeps
 * the upload with the mask, so later launches with the same mask copy nothing. Immutable once
 * built; one mask may serve any number of kernels and launches (and threads). */
typedef struct attnfuse_block_mask attnfuse_block_mask;

/* Builds a block mask from a dense grid of active blocks: grid is [batch, heads, nqb, nkb] uint8
 * (C order, host memory, nonzero = active) with nqb = ceil(q_len / block_q) and
 * nkb = ceil(kv_len / block_k). Every cell of an active block is kept (full blocks). batch or
 * heads = 1 broadcasts over that axis of a call. The grid is copied: it may be freed on return.
 * Errors: ATTNFUSE_ERROR_INVALID_ARGUMENT (out is NULL), ATTNFUSE_ERROR_SHAPE (non-positive block
 * sizes, negative dimensions, a NULL grid with blocks to read); *out is NULL on error. */
attnfuse_status attnfuse_block_mask_from_dense(const uint8_t* grid, int64_t batch, int64_t heads, int64_t q_len,
                                               int64_t kv_len, int block_q, int block_k,
                                               attnfuse_block_mask** out);

/* Cell-exact masks, one callback per block of cells (attnfuse::BlockMask::from_block_cells).
 * fill(user, b, h, q0, q1, kv0, kv1, keep) sets keep[(q - q0) * (kv1 - kv0) + (kv - kv0)] nonzero
 * for each kept cell of the block [q0, q1) x [kv0, kv1) of (b, h) (cut by the lengths at the edges;
 * the bytes arrive zeroed) and returns 0; a nonzero return stops the build, which then fails with
 * ATTNFUSE_ERROR_INVALID_ARGUMENT and that value in attnfuse_last_error(). classify, when not
 * NULL, is asked about each block first and returns ATTNFUSE_BLOCK_INACTIVE or ATTNFUSE_BLOCK_FULL
 * where it is sure, so that only the blocks it calls ATTNFUSE_BLOCK_PARTIAL (or anything else) are
 * filled; it must never contradict fill. A block is stored by what its cells say: full blocks skip
 * the element mask in the kernels, blocks with no kept cell are skipped. Both callbacks are called
 * concurrently from several threads (one block row each) with the same `user`, so they must be
 * thread-safe. batch or heads = 1 broadcasts over that axis (only index 0 is asked).
 * Errors: ATTNFUSE_ERROR_INVALID_ARGUMENT (out is NULL, fill is NULL, fill returned nonzero),
 * ATTNFUSE_ERROR_SHAPE (as from_dense); *out is NULL on error. */
enum { ATTNFUSE_BLOCK_INACTIVE = 0, ATTNFUSE_BLOCK_FULL = 1, ATTNFUSE_BLOCK_PARTIAL = 2 };
typedef int (*attnfuse_block_classify_fn)(void* user, int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0,
                                          int64_t kv1);
typedef int (*attnfuse_block_fill_fn)(void* user, int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0,
                                      int64_t kv1, uint8_t* keep);
attnfuse_status attnfuse_block_mask_from_block_cells(attnfuse_block_classify_fn classify, attnfuse_block_fill_fn fill,
                                                     void* user, int64_t batch, int64_t heads, int64_t q_len,
                                                     int64_t kv_len, int block_q, int block_k,
                                                     attnfuse_block_mask** out);

/* The same from a grid of block kinds, the form an array library computes in one expression: kinds
 * is [batch, heads, nqb, nkb] uint8 (C order, host memory; nqb and nkb as in from_dense) holding
 * ATTNFUSE_BLOCK_INACTIVE, ATTNFUSE_BLOCK_FULL or ATTNFUSE_BLOCK_PARTIAL, and fill (as above) is
 * called for the PARTIAL blocks only, so a structured mask costs one call per block on its edges.
 * fill may be NULL when no block is PARTIAL. The grid is read during the call only.
 * Errors: ATTNFUSE_ERROR_INVALID_ARGUMENT (out is NULL, kinds is NULL with blocks to read, a kind
 * outside 0-2, a PARTIAL block with fill NULL, fill returned nonzero), ATTNFUSE_ERROR_SHAPE (as
 * from_dense); *out is NULL on error. */
attnfuse_status attnfuse_block_mask_from_block_kinds(const uint8_t* kinds, attnfuse_block_fill_fn fill, void* user,
                                                     int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                                                     int block_q, int block_k, attnfuse_block_mask** out);

/* The same from arrays alone, with no callback: kinds as in from_block_kinds, and cells the kept
 * cells of its PARTIAL blocks, [num_partial, block_q, block_k] uint8 (host memory, nonzero = kept),
 * one slab per PARTIAL entry of kinds in kinds' C order. The slab of a block cut by the lengths at
 * the edges holds its cells at the same offsets as a whole block's (row q - q0, column kv - kv0);
 * the bytes past the lengths are not read for kept cells and may hold anything. This is the form
 * for a caller that evaluates its mask over every partial block in one vectorized expression
 * (NumPy, torch: q = q0 + arange(block_q), kv = kv0 + arange(block_k)). num_partial must be the
 * number of PARTIAL entries of kinds; both arrays are read during the call only.
 * Errors: ATTNFUSE_ERROR_INVALID_ARGUMENT (out is NULL, kinds is NULL with blocks to read, a kind
 * outside 0-2, num_partial not kinds' count of PARTIAL entries, cells NULL with num_partial > 0),
 * ATTNFUSE_ERROR_SHAPE (as from_dense); *out is NULL on error. */
attnfuse_status attnfuse_block_mask_from_partial_cells(const uint8_t* kinds, const uint8_t* cells, int64_t num_partial,
                                                       int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                                                       int block_q, int block_k, attnfuse_block_mask** out);

/* Frees a mask and its device upload (NULL is a no-op). On CUDA, launches are asynchronous: free a
 * mask only after the launches that read it have completed (synchronize their stream first). */
void attnfuse_block_mask_free(attnfuse_block_mask* mask);

/* One call's tensors. Zero-initialize it ({0} / memset) and set what the program needs: fields
 * added in later versions are appended at the end, and zero means "not given" for every one. */
typedef struct {
  attnfuse_tensor q, k, v, out;  /* dtype = the kernel's dtype */
  float* lse;                    /* optional [B, Hq, Nq] fp32; NULL to skip */
  int64_t lse_strides[3];
  const attnfuse_tensor* bias;   /* additive_bias: [1|B, 1|Hq, Nq, Nk] in bias_dtype (below); NULL otherwise */
  int has_q_offset;              /* 0: bottom-right default (Nk - Nq) */
  int64_t q_offset;
  /* document(): both set; NULL otherwise. The offsets are DEVICE memory on ATTNFUSE_DEVICE_CUDA
   * (as FlashAttention's cu_seqlens), host memory on ATTNFUSE_DEVICE_CPU. */
  const attnfuse_offsets* cu_seqlens_q;
  const attnfuse_offsets* cu_seqlens_k;
  /* Appended fields: the offsets above are unchanged, but sizeof(attnfuse_args) grew and the
   * library reads these, so callers (and FFI mirrors such as bench/attnfuse_abi.py) must
   * declare them, zeroed when unused. */
  const attnfuse_paged_kv* paged;         /* a paged KV cache; then k and v are left zeroed (data
                                             NULL, every shape 0). NULL: contiguous k and v */
  const attnfuse_block_mask* block_mask;  /* block_sparse: required; must be NULL otherwise. Built
                                             for this call's (Nq, Nk), batch and heads 1 or B / Hq */
  /* rope / rope_window with the caller's cos/sin tables instead of computed ones (NULL: computed):
   * fp32 arrays [rope_positions, rope_pairs], row p rotating position p, rope_pairs =
   * rotary_dim / 2, used as given. Every rotated position must be in the table. Host memory on
   * the CPU device, device memory on CUDA. */
  const float* rope_cos;
  const float* rope_sin;
  int64_t rope_positions;
  int64_t rope_pairs;
  /* With paged: 1 promises that its page_indices, page_indptr and last_page_len were complete
   * before the kernel launched just ahead of this call on the stream began (they are not that
   * kernel's output), so a CUDA call may read them while that kernel finishes; 0: read after it
   * (attnfuse::PagedKV::table_settled). Ignored without paged and on the CPU. */
  int paged_table_settled;
  /* The element type of bias: ATTNFUSE_FP32 (0, the default) or the kernel's own dtype (a bf16
   * kernel reads a bf16 bias, as SDPA's attn_mask). Any other value is refused with
   * ATTNFUSE_ERROR_DTYPE. */
  attnfuse_dtype bias_dtype;
} attnfuse_args;

typedef struct attnfuse_kernel attnfuse_kernel;

/* Parses, verifies and compiles `program` (DSL text) for a device, dtype and head dim. CUDA
 * kernels are compiled (or fetched from the cache) here, so launches never compile. A device,
 * dtype (or rope_mode, below) that is none of its enum's values is refused with
 * ATTNFUSE_ERROR_INVALID_ARGUMENT, as is a paged cache's layout at launch. */
attnfuse_status attnfuse_compile(const char* program, attnfuse_device device, attnfuse_dtype dtype,
                                 int head_dim, attnfuse_kernel** out);

/* Where a CUDA rope / rope_window kernel rotates Q and K (the CPU always fuses): AUTO lets the
 * cost model choose per launch; FUSED rotates inside the attention kernel; PREROTATE runs a
 * rotation kernel first into a workspace the library owns (one per stream, grown on demand). */
typedef enum { ATTNFUSE_ROPE_AUTO = 0, ATTNFUSE_ROPE_FUSED = 1, ATTNFUSE_ROPE_PREROTATE = 2 } attnfuse_rope_mode;

/* attnfuse_compile with a rope placement (attnfuse_compile uses ATTNFUSE_ROPE_AUTO). */
attnfuse_status attnfuse_compile_rope(const char* program, attnfuse_device device, attnfuse_dtype dtype,
                                      int head_dim, attnfuse_rope_mode rope_mode, attnfuse_kernel** out);

/* Launches on `stream` (a CUstream / cudaStream_t; NULL = default stream). Asynchronous on CUDA. */
attnfuse_status attnfuse_launch(const attnfuse_kernel* kernel, const attnfuse_args* args, void* stream);

void attnfuse_kernel_free(attnfuse_kernel* kernel);

/* One partial attention result for attnfuse_merge_states: O [B, H, N, D] in `dtype` (strides in
 * elements, strides[3] = 1) and its LSE [B, H, N] (fp32, natural log, as attnfuse_args.lse
 * receives it; lse_strides in elements, e.g. {H*N, N, 1}, or {N*H, 1, H} for [B, N, H]). */
typedef struct {
  attnfuse_tensor o;
  attnfuse_dtype dtype;
  float* lse;
  int64_t lse_strides[3];
} attnfuse_state;

/* out = the log-sum-exp merge of states[0 .. num_states) (attnfuse::merge_states; FlashInfer's
 * merge_state / merge_states, the step that joins attention over disjoint key sets, e.g. a shared
 * prefix and each request's own suffix): row by row, in fp32,
 *   LSE = log Σ_k e^{LSE_k},   O = Σ_k e^{LSE_k - LSE} O_k.
 * A state whose row has LSE = -inf holds no key and contributes nothing (its O row does not count,
 * NaN there included); a row with no key in any state gets O = 0 and LSE = -inf; a NaN LSE makes the
 * row NaN. Each state
 * and out may have its own dtype and strides; out may be one of the states (the very same view:
 * an in-place merge) but must not otherwise overlap them.
 * ATTNFUSE_DEVICE_CPU: host memory, merged before the call returns. ATTNFUSE_DEVICE_CUDA: device
 * memory, launched on `stream` (a CUstream; NULL = the default stream) and asynchronous, at most
 * 1024 states (more than 32 merge in two levels through an fp32 workspace of the stream).
 * Errors, before anything is written: ATTNFUSE_ERROR_INVALID_ARGUMENT (states or out NULL,
 * num_states < 1, a device or dtype outside the enums), ATTNFUSE_ERROR_SHAPE / _MISSING_TENSOR
 * (as attnfuse::merge_states), ATTNFUSE_ERROR_UNSUPPORTED (over 1024 states on CUDA),
 * ATTNFUSE_ERROR_DEVICE (CUDA without a usable GPU). */
attnfuse_status attnfuse_merge_states(attnfuse_device device, const attnfuse_state* states, int64_t num_states,
                                      const attnfuse_state* out, void* stream);

/* The last error of the calling thread ("" if none). */
const char* attnfuse_last_error(void);

/* 1 when a CUDA device is usable. */
int attnfuse_cuda_available(void);

/* The instruction-set level the CPU backend runs in this process: "avx512", "avx2" or "baseline"
   (x86-64-v4, x86-64-v3, SSE2; "baseline" alone on other architectures). The best one the CPU
   supports, unless the environment variable ATTNFUSE_CPU_ISA names one; NULL when it names one
   that is unknown or that this CPU lacks (attnfuse_last_error says which). */
const char* attnfuse_cpu_kernel_isa(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTNFUSE_ATTNFUSE_H */
