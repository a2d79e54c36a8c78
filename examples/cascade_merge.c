/* Cascade attention from C: decode queries attend to a shared prefix and to their own suffix as two
 * calls that each return O and its LSE, and attnfuse_merge_states joins them into the attention
 * over both (FlashInfer's cascade step). Checked against one call over the whole cache, on the CPU;
 * on a GPU the same calls take ATTNFUSE_DEVICE_CUDA and device pointers. The README's merge_states
 * C example; ctest runs it (example_cascade_merge_c). Exit 0 when the merged result matches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnfuse/attnfuse.h"

enum { H = 4, NQ = 3, PREFIX = 700, SUFFIX = 301, NK = PREFIX + SUFFIX, D = 64 };

static attnfuse_tensor view(float* data, int64_t h, int64_t n, int64_t d, int64_t head_stride) {
  attnfuse_tensor t = {data, {1, h, n, d}, {h * head_stride, head_stride, d, 1}};
  return t;
}

/* softmax(Q K^T / sqrt(D)) V over keys [k0, k0 + nk) of the cache, with its LSE. */
static int attend(attnfuse_kernel* kernel, float* q, float* k, float* v, int64_t k0, int64_t nk, float* o,
                  float* lse) {
  attnfuse_args a;
  memset(&a, 0, sizeof a);
  a.q = view(q, H, NQ, D, NQ * D);
  a.k = view(k + k0 * D, H, nk, D, NK * D); /* a window of the cache: its heads stay NK rows apart */
  a.v = view(v + k0 * D, H, nk, D, NK * D);
  a.out = view(o, H, NQ, D, NQ * D);
  a.lse = lse;
  a.lse_strides[0] = H * NQ, a.lse_strides[1] = NQ, a.lse_strides[2] = 1;
  return attnfuse_launch(kernel, &a, NULL);
}

static attnfuse_state state(float* o, float* lse) {
  attnfuse_state s;
  memset(&s, 0, sizeof s);
  s.o = view(o, H, NQ, D, NQ * D);
  s.dtype = ATTNFUSE_FP32;
  s.lse = lse;
  s.lse_strides[0] = H * NQ, s.lse_strides[1] = NQ, s.lse_strides[2] = 1;
  return s;
}

int main(void) {
  static float q[H * NQ * D], k[H * NK * D], v[H * NK * D];
  static float o_prefix[H * NQ * D], o_suffix[H * NQ * D], o_merged[H * NQ * D], o_whole[H * NQ * D];
  float lse_prefix[H * NQ], lse_suffix[H * NQ], lse_merged[H * NQ], lse_whole[H * NQ];
  srand(53);
  for (size_t i = 0; i < sizeof q / sizeof *q; ++i) q[i] = (float)rand() / RAND_MAX * 2 - 1;
  for (size_t i = 0; i < sizeof k / sizeof *k; ++i) k[i] = (float)rand() / RAND_MAX * 2 - 1;
  for (size_t i = 0; i < sizeof v / sizeof *v; ++i) v[i] = (float)rand() / RAND_MAX * 2 - 1;

  attnfuse_kernel* kernel = NULL;
  if (attnfuse_compile("softmax(scaled_dot_product(Q, K)) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, D, &kernel) !=
          ATTNFUSE_OK ||
      attend(kernel, q, k, v, 0, PREFIX, o_prefix, lse_prefix) != ATTNFUSE_OK ||
      attend(kernel, q, k, v, PREFIX, SUFFIX, o_suffix, lse_suffix) != ATTNFUSE_OK ||
      attend(kernel, q, k, v, 0, NK, o_whole, lse_whole) != ATTNFUSE_OK) {
    fprintf(stderr, "attention failed: %s\n", attnfuse_last_error());
    return 1;
  }
  attnfuse_kernel_free(kernel);

  const attnfuse_state parts[2] = {state(o_prefix, lse_prefix), state(o_suffix, lse_suffix)};
  const attnfuse_state merged = state(o_merged, lse_merged);
  if (attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, parts, 2, &merged, NULL) != ATTNFUSE_OK) {
    fprintf(stderr, "attnfuse_merge_states: %s\n", attnfuse_last_error());
    return 1;
  }
  double err = 0, lse_err = 0;
  for (int i = 0; i < H * NQ * D; ++i) err = fmax(err, fabs(o_merged[i] - o_whole[i]));
  for (int i = 0; i < H * NQ; ++i) lse_err = fmax(lse_err, fabs(lse_merged[i] - lse_whole[i]));
  printf("prefix %d + suffix %d keys merged: max |O - whole| = %.1e, max |LSE - whole| = %.1e\n", PREFIX, SUFFIX,
         err, lse_err);
  return err < 1e-5 && lse_err < 1e-5 ? 0 : 1;
}
