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

typedef struct {
  attnfuse_tensor q, k, v, out;  /* dtype = the kernel's dtype */
  float* lse;                    /* optional [B, Hq, Nq] fp32; NULL to skip */
  int64_t lse_strides[3];
  const attnfuse_tensor* bias;   /* additive_bias: fp32 [1|B, 1|Hq, Nq, Nk]; NULL otherwise */
  int has_q_offset;              /* 0: bottom-right default (Nk - Nq) */
  int64_t q_offset;
  const attnfuse_offsets* cu_seqlens_q;  /* document(): both set; NULL otherwise */
  const attnfuse_offsets* cu_seqlens_k;
} attnfuse_args;

typedef struct attnfuse_kernel attnfuse_kernel;

/* Parses, verifies and compiles `program` (DSL text) for a device, dtype and head dim. CUDA
 * kernels are compiled (or fetched from the cache) here, so launches never compile. */
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

/* The last error of the calling thread ("" if none). */
const char* attnfuse_last_error(void);

/* 1 when a CUDA device is usable. */
int attnfuse_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTNFUSE_ATTNFUSE_H */
