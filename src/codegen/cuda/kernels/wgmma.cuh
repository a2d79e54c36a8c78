// Hopper (sm_90a) warpgroup MMA: wgmma.mma_async wrappers, shared-memory matrix descriptors and
// the 128-byte swizzled tile layout they read. Used by attention_fwd.cuh when Spec::kWgmma.
//
// Layout. A tile of R rows x D elements (16-bit) is stored as D/64 column blocks of R rows x 64
// elements (128 bytes per row); inside each 8-row x 128-byte atom, 16-byte chunk c of row r sits
// at chunk c ^ (r % 8) (the hardware's 128B swizzle: address bits [4,7) XOR bits [7,10)), so
// both cp.async writes and wgmma reads spread over all 32 banks. Atoms are 1024-byte aligned.
//  - Q and K are read K-major (the contraction runs along D, contiguous): stride between 8-row
//    groups (SBO) 1024 B; the leading offset is unused under swizzling. A 16-wide k step inside a
//    column block advances the start address by 32 B.
//  - V is read MN-major for O += P V (its N = D is contiguous, imm-trans-b = 1): 8-key groups are
//    1024 B apart (SBO) and 64-dim column blocks R * 128 B apart (LBO).
// Accumulators. For m64nNk16 each warp of the warpgroup holds 16 rows; register 4n + e of a
// thread is row 16w + lane/4 + 8(e/2), column 8n + 2(lane%4) + e%2: exactly the mma.sync m16n8
// accumulator layout per 8-column chunk, so the softmax and hooks of the mma.sync kernel apply
// unchanged, and the S accumulators convert to P's register A fragments as they do there.
#pragma once

#include "primitives.cuh"

namespace attnfuse_kernels {

typedef unsigned long long u64;

// Element offset of 8-element chunk `ch` of row `r` in a kRows-row swizzled tile.
template <int kRows>
__device__ __forceinline__ int sw128_offset(int r, int ch) {
  return (ch >> 3) * kRows * 64 + r * 64 + (((ch & 7) ^ (r & 7)) << 3);
}

// Shared-memory matrix descriptor with 128-byte swizzling (layout type 1 in bits 62-63).
__device__ __forceinline__ u64 sw128_desc(u32 smem_byte_addr, u32 lbo_bytes, u32 sbo_bytes) {
  return static_cast<u64>((smem_byte_addr & 0x3FFFFu) >> 4) | (static_cast<u64>(lbo_bytes >> 4) << 16) |
         (static_cast<u64>(sbo_bytes >> 4) << 32) | (1ull << 62);
}

// The wgmma instructions exist on sm_90a only; other targets see the declarations (the mma.sync
// kernel never calls them) and an empty body.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNFUSE_WGMMA 1
#endif
// The host build of these headers (tests/codegen/kernel_host_hopper.hpp) emulates everything
// from here to the matrix products, and the products themselves.
#ifndef ATTNFUSE_KERNELS_ON_HOST

__device__ __forceinline__ void wgmma_fence() {
#ifdef ATTNFUSE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef ATTNFUSE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef ATTNFUSE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Generic-proxy writes to shared memory (cp.async, st.shared) become visible to the async proxy
// that wgmma reads through; each writing thread fences before the barrier that publishes a tile.
__device__ __forceinline__ void fence_proxy_async_smem() {
#ifdef ATTNFUSE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Moves registers between the warpgroups of a block (sm_90a; every thread of the warpgroup runs
// it): a warpgroup that only issues copies gives its registers back (dec) and the computing ones
// take them (inc), so a 384-thread block allocated at 168 registers each computes at 240.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#ifdef ATTNFUSE_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#ifdef ATTNFUSE_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// Pins accumulator registers at this point of the program: wgmma writes them asynchronously, so
// the compiler must not move their reads or writes across the issue / wait (CUTLASS's
// warpgroup_fence_operand).
template <int NT>
__device__ __forceinline__ void fence_operands(float (&d)[NT][4]) {
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[n][e])::"memory");
}

// ---- Tensor-memory-access (TMA) loads completing on an mbarrier ------------------------------

__device__ __forceinline__ void mbar_init(u32 bar, int count) {
#ifdef ATTNFUSE_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the initialised barriers visible to the async proxy (before the barrier that publishes them).
__device__ __forceinline__ void mbar_init_fence() {
#ifdef ATTNFUSE_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// The issuing thread's arrival, announcing `bytes` of copies that complete on this barrier.
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
#ifdef ATTNFUSE_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// Waits until the barrier's phase `parity` has completed (its arrivals and its bytes).
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
#ifdef ATTNFUSE_WGMMA
  u32 done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#endif
}
// One plain arrival (the barrier counts them; no bytes announced).
__device__ __forceinline__ void mbar_arrive(u32 bar) {
#ifdef ATTNFUSE_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// Asks the copy engine to fetch a tensor map ahead of its first copy (CUTLASS does the same at
// kernel entry). A map in the kernel's parameters is no output of the grid ahead, so this may run
// before griddepcontrol.wait.
__device__ __forceinline__ void tma_prefetch_map(const void* tensor_map) {
#ifdef ATTNFUSE_WGMMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(tensor_map) : "memory");
#endif
}

// Asks L2 for one box of a 4-D tensor map (coordinates innermost first), with no shared memory
// and no barrier: a hint, so it may run before griddepcontrol.wait even where the grid ahead
// writes the box (its stores land in L2, over what the hint brought).
__device__ __forceinline__ void tma_prefetch_l2_4d(const void* tensor_map, int c0, int c1, int c2, int c3) {
#ifdef ATTNFUSE_WGMMA
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(tensor_map), "r"(c0),
               "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#endif
}

// One box of a 4-D tensor map (coordinates innermost first) into shared memory at `dst`.
__device__ __forceinline__ void tma_load_4d(u32 dst, const void* tensor_map, u32 bar, int c0, int c1, int c2,
                                            int c3) {
#ifdef ATTNFUSE_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#endif
}
#endif  // ATTNFUSE_KERNELS_ON_HOST

// D(64 x N) (+)= A(64 x 16, smem, K-major) * B(16 x N, smem, K-major); accumulate = 0 overwrites D.
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], u64 desc_a, u64 desc_b, int accumulate);
// D(64 x N) (+)= A(64 x 16, registers: the mma.sync m16n8k16 A fragment of each warp's 16 rows) *
// B(16 x N, smem), B MN-major (kTransB, the P V product) or K-major (rope_window's S = Q K^T,
// whose first k step takes masked Q registers); accumulate = 0 overwrites D.
template <class T, int N, bool kTransB>
__device__ __forceinline__ void wgmma_rs_t(float (&d)[N / 8][4], const u32 (&a)[4], u64 desc_b, int accumulate);
template <class T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const u32 (&a)[4], u64 desc_b) {
  wgmma_rs_t<T, N, true>(d, a, desc_b, 1);
}

#ifdef ATTNFUSE_WGMMA
// One explicit instance per shape and element type. An m64nN accumulator is N/8 chunks of four
// fp32 registers, all of them asm operands; the macros below spell the operand lists once per
// N and the instruction once per form.
#define ATTNFUSE_ACC4(n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define ATTNFUSE_ACC_N64                                                                              \
  ATTNFUSE_ACC4(0), ATTNFUSE_ACC4(1), ATTNFUSE_ACC4(2), ATTNFUSE_ACC4(3), ATTNFUSE_ACC4(4), ATTNFUSE_ACC4(5), \
      ATTNFUSE_ACC4(6), ATTNFUSE_ACC4(7)
#define ATTNFUSE_ACC_N128                                                                          \
  ATTNFUSE_ACC_N64, ATTNFUSE_ACC4(8), ATTNFUSE_ACC4(9), ATTNFUSE_ACC4(10), ATTNFUSE_ACC4(11),       \
      ATTNFUSE_ACC4(12), ATTNFUSE_ACC4(13), ATTNFUSE_ACC4(14), ATTNFUSE_ACC4(15)
#define ATTNFUSE_REGS_N64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define ATTNFUSE_REGS_N128 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"

// SS: operands after the accumulators are desc_a (%K), desc_b (%K+1), accumulate (%K+2), with K =
// N/2 given as the strings A, B, S.
#define ATTNFUSE_WGMMA_SS(T, PTX, N, A, B, S)                                                                \
  template <>                                                                                                \
  __device__ __forceinline__ void wgmma_ss<T, N>(float (&d)[N / 8][4], u64 desc_a, u64 desc_b, int accumulate) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" S ", 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " " ATTNFUSE_REGS_N##N         \
                 ", %" A ", %" B ", p, 1, 1, 0, 0;\n}\n"                                                       \
                 : ATTNFUSE_ACC_N##N                                                                         \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));                                              \
  }
// RS: then the four A registers (%K .. %K+3), desc_b (%K+4) and accumulate (%K+5); TB is B's
// transpose flag (1: MN-major).
#define ATTNFUSE_WGMMA_RS(T, PTX, N, TB, A0, A1, A2, A3, B, S)                                                  \
  template <>                                                                                                   \
  __device__ __forceinline__ void wgmma_rs_t<T, N, TB>(float (&d)[N / 8][4], const u32 (&a)[4], u64 desc_b,     \
                                                       int accumulate) {                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" S ", 0;\n"                                                 \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " " ATTNFUSE_REGS_N##N            \
                 ", {%" A0 ",%" A1 ",%" A2 ",%" A3 "}, %" B ", p, 1, 1, " #TB ";\n}\n"                            \
                 : ATTNFUSE_ACC_N##N                                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));                   \
  }
#define ATTNFUSE_WGMMA_RS_BOTH(T, PTX, N, A0, A1, A2, A3, B, S) \
  ATTNFUSE_WGMMA_RS(T, PTX, N, 1, A0, A1, A2, A3, B, S)         \
  ATTNFUSE_WGMMA_RS(T, PTX, N, 0, A0, A1, A2, A3, B, S)

ATTNFUSE_WGMMA_SS(bf16_t, "bf16", 64, "32", "33", "34")
ATTNFUSE_WGMMA_SS(f16_t, "f16", 64, "32", "33", "34")
ATTNFUSE_WGMMA_SS(bf16_t, "bf16", 128, "64", "65", "66")
ATTNFUSE_WGMMA_SS(f16_t, "f16", 128, "64", "65", "66")
ATTNFUSE_WGMMA_RS_BOTH(bf16_t, "bf16", 64, "32", "33", "34", "35", "36", "37")
ATTNFUSE_WGMMA_RS_BOTH(f16_t, "f16", 64, "32", "33", "34", "35", "36", "37")
ATTNFUSE_WGMMA_RS_BOTH(bf16_t, "bf16", 128, "64", "65", "66", "67", "68", "69")
ATTNFUSE_WGMMA_RS_BOTH(f16_t, "f16", 128, "64", "65", "66", "67", "68", "69")

#undef ATTNFUSE_WGMMA_RS_BOTH
#undef ATTNFUSE_WGMMA_RS
#undef ATTNFUSE_WGMMA_SS
#undef ATTNFUSE_REGS_N128
#undef ATTNFUSE_REGS_N64
#undef ATTNFUSE_ACC_N128
#undef ATTNFUSE_ACC_N64
#undef ATTNFUSE_ACC4
#elif !defined(ATTNFUSE_KERNELS_ON_HOST)
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&)[N / 8][4], u64, u64, int) {}
template <class T, int N, bool kTransB>
__device__ __forceinline__ void wgmma_rs_t(float (&)[N / 8][4], const u32 (&)[4], u64, int) {}
#endif

}  // namespace attnfuse_kernels
