// The CUDA kernel headers built for the host, so that CI (no GPU) can run kernel routines that
// threads execute independently, one emulated thread at a time: the CUDA keywords and the few
// intrinsics those routines use, in C++ (sin and cos in fp32 libm, where the GPU's MUFU is within
// ~4e-7). Routines that synchronise threads or issue tensor-core or copy instructions are only
// declared here, not run. Include this header instead of a kernel header (its sources build with
// -Wno-unknown-pragmas: GCC does not know #pragma unroll; tests/CMakeLists.txt).
#pragma once

#include <cmath>
#include <cstring>

#define ATTNFUSE_KERNELS_ON_HOST 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n)
#define __grid_constant__

namespace attnfuse_host_cuda {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
}  // namespace attnfuse_host_cuda
// The emulated thread: set threadIdx.x before each call of a per-thread routine.
inline attnfuse_host_cuda::Dim3 threadIdx, blockIdx, blockDim, gridDim;

struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline void __sincosf(float x, float* s, float* c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline unsigned long long __cvta_generic_to_shared(const void* p) { return reinterpret_cast<unsigned long long>(p); }
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
// Warp and block collectives: declared for the headers' other routines, never called on the host.
unsigned __ballot_sync(unsigned mask, bool pred);
unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane);
float __shfl_xor_sync(unsigned mask, float v, int lane);
int __shfl_sync(unsigned mask, int v, int lane);
unsigned __byte_perm(unsigned a, unsigned b, unsigned s);
void __syncwarp(unsigned mask = 0xffffffffu);
void __syncthreads();

#include "codegen/cuda/kernels/rope.cuh"
