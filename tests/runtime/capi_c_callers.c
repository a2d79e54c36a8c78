/* C callers of the ABI, for tests/runtime/capi_test.cpp. C lets an enum argument or field hold
   any int; C++ cannot form such a value without undefined behaviour, so the tests of the ABI's
   enum checks pass their out-of-range values through here, as a C program would. */
#include "capi_c_callers.h"

attnfuse_status capi_compile_raw(const char* program, int device, int dtype, int head_dim, int rope_mode,
                                 attnfuse_kernel** out) {
  return attnfuse_compile_rope(program, (attnfuse_device)device, (attnfuse_dtype)dtype, head_dim,
                               (attnfuse_rope_mode)rope_mode, out);
}

void capi_set_paged_layout_raw(attnfuse_paged_kv* paged, int layout) { paged->layout = (attnfuse_paged_layout)layout; }

void capi_set_state_dtype_raw(attnfuse_state* state, int dtype) { state->dtype = (attnfuse_dtype)dtype; }

attnfuse_status capi_merge_states_raw(int device, const attnfuse_state* states, int64_t num_states,
                                      const attnfuse_state* out) {
  return attnfuse_merge_states((attnfuse_device)device, states, num_states, out, 0);
}
