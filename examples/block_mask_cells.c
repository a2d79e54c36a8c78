/* A cell-exact BlockMask from C (attnfuse_block_mask_from_block_cells): a causal sliding window
 * given as callbacks, one call per block of cells, run as a block_sparse program on the CPU and
 * checked against the built-in sliding_window(causal(...)) program. The README's C BlockMask
 * example; ctest runs it (example_block_mask_cells_c). Exit 0 when the two outputs agree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attnfuse/attnfuse.h"

typedef struct {
  int64_t window; /* keep key kv for query q when 0 <= q - kv < window */
} window_mask;

/* Blocks wholly inside or outside the window need no cells. */
static int classify(void* user, int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1) {
  const int64_t w = ((const window_mask*)user)->window;
  (void)b, (void)h;
  if (kv0 > q1 - 1 || q0 - (kv1 - 1) >= w) return ATTNFUSE_BLOCK_INACTIVE; /* every q - kv < 0 or >= w */
  if (kv1 - 1 <= q0 && (q1 - 1) - kv0 < w) return ATTNFUSE_BLOCK_FULL;     /* every 0 <= q - kv < w */
  return ATTNFUSE_BLOCK_PARTIAL;
}

/* The cells of a block on the window's edges, row by row. */
static int fill(void* user, int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1, uint8_t* keep) {
  const int64_t w = ((const window_mask*)user)->window;
  (void)b, (void)h;
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t kv = kv0; kv < kv1; ++kv) keep[(q - q0) * (kv1 - kv0) + (kv - kv0)] = q - kv >= 0 && q - kv < w;
  return 0;
}

static attnfuse_tensor view(float* data, int64_t b, int64_t h, int64_t n, int64_t d) {
  attnfuse_tensor t = {data, {b, h, n, d}, {h * n * d, n * d, d, 1}};
  return t;
}

static int run(const char* program, const attnfuse_block_mask* mask, float* q, float* k, float* v, float* out,
               int64_t hq, int64_t hkv, int64_t n, int64_t d) {
  attnfuse_kernel* kernel = NULL;
  attnfuse_args a = {0};
  if (attnfuse_compile(program, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &kernel) != ATTNFUSE_OK) return 1;
  a.q = view(q, 1, hq, n, d), a.k = view(k, 1, hkv, n, d), a.v = view(v, 1, hkv, n, d), a.out = view(out, 1, hq, n, d);
  a.block_mask = mask;
  const attnfuse_status st = attnfuse_launch(kernel, &a, NULL);
  attnfuse_kernel_free(kernel);
  return st != ATTNFUSE_OK;
}

int main(void) {
  const int64_t hq = 4, hkv = 2, n = 333, d = 64;
  window_mask window = {48};
  attnfuse_block_mask* mask = NULL;
  /* heads = 1: one mask for every head; 64 x 64 blocks */
  if (attnfuse_block_mask_from_block_cells(classify, fill, &window, 1, 1, n, n, 64, 64, &mask) != ATTNFUSE_OK) {
    fprintf(stderr, "mask: %s\n", attnfuse_last_error());
    return 1;
  }
  float* q = malloc(sizeof(float) * hq * n * d);
  float* k = malloc(sizeof(float) * hkv * n * d);
  float* v = malloc(sizeof(float) * hkv * n * d);
  float* o_mask = malloc(sizeof(float) * hq * n * d);
  float* o_window = malloc(sizeof(float) * hq * n * d);
  unsigned s = 12345;
  for (int64_t i = 0; i < hq * n * d; ++i) q[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.f - .5f;
  for (int64_t i = 0; i < hkv * n * d; ++i) {
    k[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.f - .5f;
    v[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.f - .5f;
  }
  if (run("softmax(block_sparse(scaled_dot_product(Q, K))) @ V", mask, q, k, v, o_mask, hq, hkv, n, d) ||
      run("softmax(sliding_window(causal(scaled_dot_product(Q, K)), 48)) @ V", NULL, q, k, v, o_window, hq, hkv, n,
          d)) {
    fprintf(stderr, "run: %s\n", attnfuse_last_error());
    return 1;
  }
  double worst = 0;
  for (int64_t i = 0; i < hq * n * d; ++i) worst = fmax(worst, fabs((double)o_mask[i] - o_window[i]));
  printf("block_sparse with the callbacks' mask vs sliding_window(causal): max |diff| %.2e\n", worst);
  attnfuse_block_mask_free(mask);
  free(q), free(k), free(v), free(o_mask), free(o_window);
  return worst < 1e-5 ? 0 : 1;
}
