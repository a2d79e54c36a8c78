// What cuda_backend.cpp shares with cuda_plan.cpp and cuda_launch.cpp, the other two parts of
// CudaKernel: not part of the runtime's interface.
#pragma once

#include <cstdint>

#include "attnfuse/attention.hpp"
#include "runtime/cuda_backend.hpp"

namespace attnfuse::runtime {

// Shapes of a call whatever holds K and V.
struct CallShape {
  int64_t B, Hq, Nq, Hkv;
  int64_t mean_nk;  // keys per sequence (the mean over a paged batch or over documents)
  int64_t docs;     // documents (1 without)
  int64_t queries;  // queries per sequence (queries_per_sequence)
};
CallShape call_shape(const AttentionArgs& a);

// Resident blocks per SM of a loaded kernel (shared memory, registers and threads bound it).
int blocks_per_sm(const LoadedModule& m);

}  // namespace attnfuse::runtime
