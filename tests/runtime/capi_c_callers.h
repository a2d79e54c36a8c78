/* C callers of the ABI (capi_c_callers.c): enum values from plain ints, as C allows. */
#ifndef ATTNFUSE_TESTS_CAPI_C_CALLERS_H
#define ATTNFUSE_TESTS_CAPI_C_CALLERS_H

#include "attnfuse/attnfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attnfuse_compile_rope with device, dtype and rope_mode given as ints. */
attnfuse_status capi_compile_raw(const char* program, int device, int dtype, int head_dim, int rope_mode,
                                 attnfuse_kernel** out);
/* paged->layout = layout, an int. */
void capi_set_paged_layout_raw(attnfuse_paged_kv* paged, int layout);
/* state->dtype = dtype, an int. */
void capi_set_state_dtype_raw(attnfuse_state* state, int dtype);
/* attnfuse_merge_states with the device given as an int. */
attnfuse_status capi_merge_states_raw(int device, const attnfuse_state* states, int64_t num_states,
                                      const attnfuse_state* out);

#ifdef __cplusplus
}
#endif

#endif
