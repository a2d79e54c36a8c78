// The CUDA kernel headers built for the host, so that CI (no GPU) can run kernel routines:
// - a routine whose threads work on disjoint items runs one emulated thread at a time (set
//   threadIdx.x, call it);
// - a whole kernel runs through launch_on_host(): each block's threads on their own std::threads,
//   __syncthreads() a barrier, __shared__ arrays one per kernel (blocks run one after another).
// The CUDA keywords and the intrinsics those routines use are C++ here (sin and cos in fp32 libm,
// where the GPU's MUFU is within ~4e-7). Warp collectives, tensor-core and copy instructions are
// only declared, not run. Include this header instead of a kernel header (its sources build with
// -Wno-unknown-pragmas: GCC does not know #pragma unroll; tests/CMakeLists.txt).
#pragma once

#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#define ATTNFUSE_KERNELS_ON_HOST 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

namespace attnfuse_host_cuda {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
}  // namespace attnfuse_host_cuda
// The emulated thread (its own on each std::thread): set threadIdx.x before each call of a
// per-thread routine; launch_on_host sets both.
inline thread_local attnfuse_host_cuda::Dim3 threadIdx, blockIdx;
inline attnfuse_host_cuda::Dim3 blockDim, gridDim;
namespace attnfuse_host_cuda {
inline thread_local std::barrier<>* block_barrier = nullptr;
}  // namespace attnfuse_host_cuda

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
void __syncwarp(unsigned mask = 0xffffffffu);
// Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes (b:a).
inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(b) << 32) | a;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
inline void __syncthreads() { attnfuse_host_cuda::block_barrier->arrive_and_wait(); }

namespace attnfuse_host_cuda {
// Runs kernel() as a grid of `blocks` x `threads`: one block at a time, each of its threads on a
// std::thread of its own, so __syncthreads() is a real barrier.
template <class Kernel>
void launch_on_host(unsigned blocks, unsigned threads, Kernel&& kernel) {
  gridDim = {blocks, 1, 1};
  blockDim = {threads, 1, 1};
  for (unsigned b = 0; b < blocks; ++b) {
    std::barrier<> bar(static_cast<std::ptrdiff_t>(threads));
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadIdx = {t, 0, 0};
        blockIdx = {b, 0, 0};
        block_barrier = &bar;
        kernel();
      });
    for (std::thread& th : pool) th.join();
  }
}
}  // namespace attnfuse_host_cuda

#include "codegen/cuda/kernels/rope.cuh"
