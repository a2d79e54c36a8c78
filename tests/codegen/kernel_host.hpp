// The CUDA kernel headers built for the host, so that CI (no GPU) can run kernel routines:
// - a routine whose threads work on disjoint items runs one emulated thread at a time (set
//   threadIdx.x, call it);
// - a whole kernel runs through launch_on_host(): each block's threads on their own std::threads,
//   __syncthreads() a real barrier, each __shared__ array one per kernel (blocks run one after
//   another); every thread must reach each barrier, as on the GPU;
// - warp collectives (shuffles, ballots, __syncwarp) meet at a barrier of the warp's 32 threads.
// The CUDA keywords and the intrinsics those routines use are C++ here (sin, cos and exp in fp32
// libm, where the GPU's MUFU is within ~4e-7; the element conversions of common/dtype.hpp);
// tensor-core and copy instructions are not run.
// Include this header instead of a kernel header; its tests build with -Wno-unknown-pragmas (GCC
// does not know #pragma unroll) and -ffp-contract=off (tests/CMakeLists.txt says why).
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
// One warp of a block run by launch_on_host: its 32 lanes meet at `bar`, and exchange values
// through `slot` for the shuffles.
struct Warp {
  std::barrier<> bar{32};
  unsigned slot[32] = {};
};
inline thread_local std::barrier<>* block_barrier = nullptr;
inline thread_local Warp* warp = nullptr;
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
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}
inline float __expf(float x) { return std::exp(x); }
// Warp collectives, for kernels run by launch_on_host with whole warps (every lane of the warp
// takes part, as the kernels' full masks say).
namespace attnfuse_host_cuda {
inline unsigned lane_exchange(unsigned v, int from) {
  Warp& w = *warp;
  const unsigned lane = threadIdx.x % 32;
  w.slot[lane] = v;
  w.bar.arrive_and_wait();
  const unsigned r = w.slot[from & 31];
  w.bar.arrive_and_wait();
  return r;
}
}  // namespace attnfuse_host_cuda
inline void __syncwarp(unsigned = 0xffffffffu) { attnfuse_host_cuda::warp->bar.arrive_and_wait(); }
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int o) {
  return attnfuse_host_cuda::lane_exchange(v, static_cast<int>(threadIdx.x % 32) ^ o);
}
inline float __shfl_xor_sync(unsigned m, float v, int o) { return __uint_as_float(__shfl_xor_sync(m, __float_as_uint(v), o)); }
inline int __shfl_sync(unsigned, int v, int from) {
  return static_cast<int>(attnfuse_host_cuda::lane_exchange(static_cast<unsigned>(v), from));
}
inline unsigned __ballot_sync(unsigned, bool pred) {
  attnfuse_host_cuda::Warp& w = *attnfuse_host_cuda::warp;
  w.slot[threadIdx.x % 32] = pred ? 1u : 0u;
  w.bar.arrive_and_wait();
  unsigned bits = 0;
  for (int o = 0; o < 32; ++o) bits |= (w.slot[o] & 1u) << o;
  w.bar.arrive_and_wait();
  return bits;
}
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
    std::vector<Warp> warps((threads + 31) / 32);  // (collectives need whole warps)
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadIdx = {t, 0, 0};
        blockIdx = {b, 0, 0};
        block_barrier = &bar;
        warp = &warps[t / 32];
        kernel();
      });
    for (std::thread& th : pool) th.join();
  }
}
}  // namespace attnfuse_host_cuda

#include "codegen/cuda/kernels/primitives.cuh"
#include "common/dtype.hpp"

// The element conversions: primitives.cuh's are PTX, so the host takes the project's own
// (round to nearest even, as cvt.rn does).
namespace attnfuse_kernels {
template <>
struct ElementTraits<bf16_t> {
  static u32 pack(float lo, float hi) { return attnfuse::f32_to_bf16(lo) | (u32{attnfuse::f32_to_bf16(hi)} << 16); }
  static float to_float(u16 h) { return attnfuse::bf16_to_f32(h); }
};
template <>
struct ElementTraits<f16_t> {
  static u32 pack(float lo, float hi) { return attnfuse::f32_to_f16(lo) | (u32{attnfuse::f32_to_f16(hi)} << 16); }
  static float to_float(u16 h) { return attnfuse::f16_to_f32(h); }
};
}  // namespace attnfuse_kernels

#include "codegen/cuda/kernels/combine.cuh"
#include "codegen/cuda/kernels/rope.cuh"
