// Thin wrappers over the sm_80+ instructions the kernels are built from (mma.sync m16n8k16,
// ldmatrix, cp.async, packed conversions, ex2). Header-free so NVRTC needs no include path.
#pragma once

namespace attnfuse_kernels {

typedef unsigned int u32;
typedef unsigned short u16;

// ---- Element types: 16-bit storage, fp32 math --------------------------------------------

struct bf16_t { u16 bits; };
struct f16_t { u16 bits; };

template <class T> struct ElementTraits;
#ifndef ATTNFUSE_KERNELS_ON_HOST
template <> struct ElementTraits<bf16_t> {
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float to_float(u16 h) { return __uint_as_float(((u32)h) << 16); }
};
template <> struct ElementTraits<f16_t> {
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float to_float(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
};
#endif  // the host build of these headers (tests/codegen/kernel_host.hpp) defines its own

// D = A(16x16, row) * B(16x8, col) + D, fp32 accumulators.
template <class T> __device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1);
#ifndef ATTNFUSE_KERNELS_ON_HOST  // the host build (tests/codegen/kernel_host.hpp) emulates these
template <> __device__ __forceinline__ void mma_16816<bf16_t>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma_16816<f16_t>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

#ifndef ATTNFUSE_KERNELS_ON_HOST

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// 16-byte async copy global -> shared; src_bytes < 16 zero-fills the rest (0 = all zeros),
// which is how rows past the end of a sequence become zeros without a branch in the MMA loop.
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#endif

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

#ifndef ATTNFUSE_KERNELS_ON_HOST
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif

// Programmatic dependent launch (sm_90+; no-ops before, and when the grid was launched without
// the attribute: runtime launch_kernel). Every attnfuse kernel waits before any global memory
// access, until the kernel before it in the stream has finished and its writes are visible (that
// kernel may produce Q, K/V or page tables, or still read the split workspace this one is about
// to write). Each then lets the next kernel's blocks be scheduled (the forward kernel once its
// main loop's loads are done, the small kernels at once), so they sit resident, waiting in turn,
// while this grid runs its tail.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// A load from a small table that every call of a decode loop reads first (the paged cache's
// page_indptr, last_page_len and page ids), under an L2 evict_last policy: a decode call streams
// more K/V than the L2 holds, and at normal priority that stream can evict the table before the
// next call, whose prologue waits on it twice (indptr, then the page ids). On the H200 it was
// level alone, and worth 0.0421 -> 0.0414 ms at Llama-3-70B B1 / 32k, pages of 16, once the
// producer warp's first-tile rule (KvCopy::producer, kv_copy.cuh) put the staged page ids on the block
// barrier's path (bench/results/2026-12-03-h200-session26/call2/).
// Asks L2 for the line at `a` (and the TLB for its page): a hint, safe before the grid dependency
// wait since L2 is where the grid ahead's stores land.
#ifndef ATTNFUSE_KERNELS_ON_HOST
__device__ __forceinline__ void prefetch_l2(const void* a) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(a)); }
// Asks L1 for the line at `a`: for data the block reads itself a few hundred cycles later.
__device__ __forceinline__ void prefetch_l1(const void* a) { asm volatile("prefetch.global.L1 [%0];\n" ::"l"(a)); }

__device__ __forceinline__ int ld_keep_in_l2(const int* a) {
  int v;
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  asm volatile("ld.global.L2::cache_hint.b32 %0, [%1], %2;\n" : "=r"(v) : "l"(a), "l"(policy) : "memory");
  return v;
}

// Named barrier kId over kCount threads (bar.sync: whole warps, the same count at every use);
// warps outside the count never take part.
template <int kId, int kCount>
__device__ __forceinline__ void named_barrier_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
}
// Every thread of the block, in the non-aligned form (barrier.sync: its threads may reach it from
// different places in the code). Threads that have exited no longer count.
__device__ __forceinline__ void block_barrier_sync() { asm volatile("barrier.sync 0;\n" ::: "memory"); }

// Adds 1 to a global counter with acquire-release order at GPU scope; returns the old value.
__device__ __forceinline__ int atomic_inc_acq_rel(int* count) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(count) : "memory");
  return old;
}
#endif

// Row reductions over the 4 threads (a quad) that share one accumulator row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace attnfuse_kernels
