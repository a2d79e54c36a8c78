// The CUDA kernel headers built for the host, so that CI (no GPU) can run kernel routines:
// - a routine whose threads work on disjoint items runs one emulated thread at a time (set
//   threadIdx.x, call it);
// - a whole kernel runs through launch_on_host() (launch_grid_on_host() for a 3-D grid with
//   dynamic shared memory): each block's threads as fibers of their own (host_fibers.hpp),
//   __syncthreads() a real barrier, each __shared__ array one per kernel (blocks run one after
//   another); every thread must reach each barrier, as on the GPU;
// - warp collectives (shuffles, ballots, __syncwarp) meet at a barrier of the warp's 32 threads.
// The CUDA keywords and the intrinsics those routines use are C++ here (sin, cos and exp in fp32
// libm, where the GPU's MUFU is within ~4e-7; the element conversions of common/dtype.hpp);
// the tensor-core, ldmatrix and cp.async instructions of the mma.sync kernels are emulated below
// (warp-collective, in the PTX ISA's fragment layouts), so the attention kernel itself runs too
// (tests/codegen/attention_kernel_host_test.cpp), and so do Hopper's (wgmma, mbarriers, TMA:
// kernel_host_hopper.hpp). Asynchronous copies and products complete at the wait that covers
// them (Deferred, below; cp.async may land at issue instead), some threads can be made to lag
// (Lag: they run only while no other thread can), and a block's shared memory can be poisoned
// before it runs.
// Include this header instead of a kernel header; its tests build with -Wno-unknown-pragmas (GCC
// does not know #pragma unroll) and -ffp-contract=off (tests/CMakeLists.txt says why).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "codegen/host_fibers.hpp"

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
// The emulated thread (each fiber's own, host_fibers.hpp): set threadIdx.x before each call of a
// per-thread routine; launch_on_host sets both.
inline thread_local attnfuse_host_cuda::Dim3 threadIdx, blockIdx;
inline attnfuse_host_cuda::Dim3 blockDim, gridDim;
namespace attnfuse_host_cuda {
// ThreadSanitizer (test_kernel_races, tests/CMakeLists.txt) sees each fiber as a thread and is
// told of no ordering between them but those the GPU has: the emulator's own bookkeeping runs
// inside Internal scopes (host_fibers.hpp), the block barriers and warp meetings order their
// participants (Meeting, below), and an mbarrier orders exactly what the GPU's does: an arrival
// or a copy's bytes on a phase release that phase (order_release), and a wait that sees the phase
// complete acquires it (order_acquire). Without TSan all of it is empty.
#if defined(__SANITIZE_THREAD__)
inline void order_release(const void* key) { __tsan_release(const_cast<void*>(key)); }
inline void order_acquire(const void* key) { __tsan_acquire(const_cast<void*>(key)); }
#else
inline void order_release(const void*) {}
inline void order_acquire(const void*) {}
#endif

// A barrier of the emulated block: a warp's meeting (its collectives), a warpgroup's (wgmma), the
// block barrier or a named one. Its arrivals are counted per episode; the last arrival of an
// episode releases every participant, itself last, to resume in the order they arrived ahead of
// the other ready threads (host_fibers.hpp's schedule). Under TSan each episode orders exactly its
// participants: every one releases the episode's key before it arrives and acquires it after the
// episode completes. The keys alternate by episode parity: a participant one episode ahead
// releases the other key, so one still to wake acquires nothing of the next episode's work, and
// none can be two ahead.
struct Meeting {
  explicit Meeting(int count) : expected(count) {}
  int expected;     // arrivals that complete an episode (fewer once threads exit)
  int arrived = 0;  // in the current episode
  unsigned episode = 0;
  std::vector<Fiber*> waiting;
  char keys[2] = {};  // (TSan) what the episodes of each parity are ordered by
};
inline void complete_episode(Meeting& m) {
  m.arrived = 0;
  ++m.episode;
  fiber_wake_first(m.waiting);
  m.waiting.clear();
}
inline void meet(Meeting& m) {
  // (Read outside an Internal scope: only Internal scopes write the episode count, and TSan has
  // a race only where one of two accesses is a write it saw.)
  const char* key = kThreadSanitizer ? &m.keys[m.episode % 2] : nullptr;
  order_release(key);
  {
    Internal internal;
    m.waiting.push_back(fiber_current());
    if (++m.arrived == m.expected) complete_episode(m);
    fiber_wait();
  }
  order_acquire(key);
}
// An exiting thread no longer counts at the barrier (PTX exit): it arrives at the current episode
// and at no later one. It orders nothing: a thread that exits takes part in no later episode.
inline void leave(Meeting& m) {
  Internal internal;
  if (--m.expected == m.arrived && m.arrived > 0) complete_episode(m);
}
// One warp of a block run by launch_on_host: its 32 lanes meet at `bar`, and exchange values
// through `slot` for the shuffles. A collective that posts operands (a shuffle, a ballot, an
// ldmatrix, an mma) takes the slots of its parity: every lane makes the same collectives in the
// same order, so all count the same parity (exchange_parity), and a lane reuses a parity's slots
// only after the next collective's meeting, which no lane leaves before every lane has read this
// one's. So each such collective meets once, not twice (before and after reading): every meeting
// costs each lane a fiber switch.
struct Warp {
  Meeting bar{32};
  unsigned slot[2][32] = {};
  unsigned frag[2][32][6] = {};  // mma.sync operands, one row per lane
};
// One warpgroup (4 warps) of a block run by launch_on_host: wgmma's 128 threads meet at `bar`,
// each posting where its A registers are, and stage the product's operands in `a_val` and
// `b_val` (kernel_host_hopper.hpp).
struct WarpGroup {
  Meeting bar{128};
  const unsigned* a[128] = {};
  float a_val[64][16] = {};
  float b_val[16][256] = {};
};
// The block's named barriers (bar.sync id, count; id 0 is the block barrier), each made by the
// first thread to reach it with the count it names; and what its mbarriers keep
// (kernel_host_hopper.hpp). All of it the emulator's: touched inside Internal scopes.
struct BlockSync {
  // Tensor copies issued and not yet landed, with their mbarriers (kernel_host_hopper.hpp's
  // late landing). Each on the heap: its address names its issue to ThreadSanitizer.
  std::vector<std::pair<unsigned, std::unique_ptr<std::function<void()>>>> copies_in_flight;
  // Per mbarrier (by address), kept only under ThreadSanitizer: the phases completed
  // since its init, and one byte per phase that names it to TSan (kernel_host_hopper.hpp's
  // phase_key; by parity alone, a producer two phases ahead of a lagging reader, as a stage
  // refilled without waiting for its release lets it run, would order the reader after the
  // refill).
  std::map<unsigned, unsigned long long> phases_done;
  std::map<std::pair<unsigned, unsigned long long>, std::unique_ptr<char>> phase_keys;
  std::unique_ptr<Meeting> bar[16];
  Meeting& get(int id, int count) {
    Internal internal;
    if (!bar[id]) bar[id] = std::make_unique<Meeting>(count);
    return *bar[id];
  }
};

// Asynchronous operations a thread has issued and not yet waited for, in commit groups
// (cp.async and wgmma): each runs at the wait that covers its group, the latest moment the PTX
// ISA lets it complete, so a kernel that reads a result before its wait, or overwrites an
// operand (a shared-memory tile, a register fragment) the operation may still read, sees the
// difference as it could on the GPU.
struct Deferred {
  std::vector<std::vector<std::function<void()>>> groups;  // committed, oldest first
  std::vector<std::function<void()>> open;                 // issued since the last commit
  void commit() {
    groups.push_back(std::move(open));
    open.clear();
  }
  // Completes every committed group but the `keep` most recent.
  void wait(size_t keep) {
    while (groups.size() > keep) {
      std::vector<std::function<void()>> g = std::move(groups.front());
      groups.erase(groups.begin());
      for (auto& op : g) op();
    }
  }
  bool idle() const { return groups.empty() && open.empty(); }
};
// What an emulated thread writes of its own besides its kernel's memory: a fiber's, reached
// through the thread_local `own` (every fiber shares the host thread's thread_locals, and TSan
// would take two fibers' writes to one of them for a race).
struct OwnState {
  Deferred cp_async_ops, wgmma_ops;
  // The warp collectives this thread has posted operands for (Warp's parity); each block's
  // threads start at 0.
  unsigned exchange_parity = 0;
};
// cp.async lands at the wait that covers its group (false: the latest moment, so a tile read
// before its wait shows) or at issue (true: the earliest, so a stage refilled before every warp
// is done with it shows).
inline bool cp_async_lands_early = false;
// ATTNFUSE_HOST_COPIES=flipped (ctest's second pass over the host kernels, tests/CMakeLists.txt):
// every block's threads start in descending index order instead of ascending (host_fibers.hpp),
// and the attention tests land every copy at the other end of its window
// (attention_kernel_host.hpp).
inline bool flipped_schedule() {
  const char* v = std::getenv("ATTNFUSE_HOST_COPIES");
  return v != nullptr && std::strcmp(v, "flipped") == 0;
}
// Threads [first, last) of every block lag: they run only while no other thread of the block can
// (host_fibers.hpp), and give way again after each block barrier and before each mbarrier wait
// (kernel_host_hopper.hpp), so the rest of the block runs as far ahead as its barriers let it.
// Otherwise the fibers take turns from one wait to the next, and a missing barrier between warps
// (a stage refilled before every warp has read it, read before its copy) may change no result;
// lagging one side makes the overwrite or the early read land.
struct Lag {
  unsigned first = 0, last = 0;
};
inline Lag lag;
// The block's shared memory as the kernels address it (smem_addr: 32-bit offsets from here),
// set by a launch that gives the kernel dynamic shared memory; null elsewhere, where
// __cvta_generic_to_shared is the pointer itself.
inline char* smem_base = nullptr;
// The emulated thread's own (the host thread's when no block runs): swapped in as its fiber runs
// (launch_grid_on_host).
inline thread_local Meeting* block_barrier = nullptr;
inline thread_local Warp* warp = nullptr;
inline thread_local WarpGroup* warpgroup = nullptr;
inline thread_local BlockSync* block_sync = nullptr;
inline OwnState host_own;  // a per-thread routine's, run on the host thread itself
inline thread_local OwnState* own = &host_own;
inline Deferred& cp_async_ops() { return own->cp_async_ops; }
inline Deferred& wgmma_ops() { return own->wgmma_ops; }
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
inline unsigned long long __cvta_generic_to_shared(const void* p) {
  return static_cast<unsigned long long>(static_cast<const char*>(p) - attnfuse_host_cuda::smem_base);
}
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}
inline float __expf(float x) { return std::exp(x); }
// Warp collectives, for kernels run by launch_on_host with whole warps (every lane of the warp
// takes part, as the kernels' full masks say).
namespace attnfuse_host_cuda {
// The parity of this thread's next collective that posts operands, and its shuffle slots (Warp).
inline unsigned next_parity() { return own->exchange_parity++ & 1; }
inline unsigned (&next_slots())[32] { return warp->slot[next_parity()]; }
inline unsigned lane_exchange(unsigned v, int from) {
  unsigned(&slot)[32] = next_slots();
  slot[threadIdx.x % 32] = v;
  meet(warp->bar);
  return slot[from & 31];
}
}  // namespace attnfuse_host_cuda
inline void __syncwarp(unsigned = 0xffffffffu) { attnfuse_host_cuda::meet(attnfuse_host_cuda::warp->bar); }
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int o) {
  return attnfuse_host_cuda::lane_exchange(v, static_cast<int>(threadIdx.x % 32) ^ o);
}
inline float __shfl_xor_sync(unsigned m, float v, int o) { return __uint_as_float(__shfl_xor_sync(m, __float_as_uint(v), o)); }
inline int __shfl_sync(unsigned, int v, int from) {
  return static_cast<int>(attnfuse_host_cuda::lane_exchange(static_cast<unsigned>(v), from));
}
inline unsigned __ballot_sync(unsigned, bool pred) {
  unsigned(&slot)[32] = attnfuse_host_cuda::next_slots();
  slot[threadIdx.x % 32] = pred ? 1u : 0u;
  meet(attnfuse_host_cuda::warp->bar);
  unsigned bits = 0;
  for (int o = 0; o < 32; ++o) bits |= (slot[o] & 1u) << o;
  return bits;
}
inline bool __any_sync(unsigned m, bool pred) { return __ballot_sync(m, pred) != 0; }
// Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes (b:a).
inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(b) << 32) | a;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
namespace attnfuse_host_cuda {
inline void lag_if_lagging() {
  if (fiber_current()->lagging) fiber_yield();  // (the flag launch_grid_on_host set from `lag`)
}
}  // namespace attnfuse_host_cuda
inline void __syncthreads() {
  attnfuse_host_cuda::meet(*attnfuse_host_cuda::block_barrier);
  attnfuse_host_cuda::lag_if_lagging();
}

namespace attnfuse_host_cuda {
// The thread_locals an emulated thread reads, each fiber's copy (host_fibers.hpp swaps it with
// the thread's as the fiber leaves and resumes).
struct ThreadLocals {
  Dim3 thread_idx, block_idx;
  Meeting* block_barrier;
  Warp* warp;
  WarpGroup* warpgroup;
  BlockSync* block_sync;
  OwnState* own;
  void swap_in_out() {
    std::swap(threadIdx, thread_idx);
    std::swap(blockIdx, block_idx);
    std::swap(attnfuse_host_cuda::block_barrier, block_barrier);
    std::swap(attnfuse_host_cuda::warp, warp);
    std::swap(attnfuse_host_cuda::warpgroup, warpgroup);
    std::swap(attnfuse_host_cuda::block_sync, block_sync);
    std::swap(attnfuse_host_cuda::own, own);
  }
};

// Runs kernel() over a 3-D grid of `threads`-thread blocks: one block at a time, each of its
// threads a fiber of its own (host_fibers.hpp), so __syncthreads() is a real barrier. `smem`:
// every block's dynamic shared memory, where the kernels' smem_addr offsets count from (null for
// kernels that take none); its first `poison_bytes` are set to 0xff before each block (NaN in
// 16-bit elements), so that a kernel that reads shared memory nothing wrote fails its test as
// garbage there would fail it on a GPU.
template <class Kernel>
void launch_grid_on_host(Dim3 grid, unsigned threads, char* smem, Kernel&& kernel, size_t poison_bytes = 0) {
  gridDim = grid;
  blockDim = {threads, 1, 1};
  smem_base = smem;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        if (poison_bytes > 0) std::memset(smem, 0xff, poison_bytes);
        Meeting bar(static_cast<int>(threads));
        std::vector<Warp> warps((threads + 31) / 32);  // (collectives need whole warps)
        std::vector<WarpGroup> groups((threads + 127) / 128);
        BlockSync sync;
        std::vector<OwnState> owns(threads);
        std::vector<ThreadLocals> locals(threads);
        for (unsigned t = 0; t < threads; ++t)
          locals[t] = {{t, 0, 0}, {x, y, z}, &bar, &warps[t / 32], &groups[t / 128], &sync, &owns[t]};
        run_fibers(
            threads, flipped_schedule(),
            [&](unsigned) {
              kernel();
              // A warpgroup MMA never waited for has no defined result; copies may be left in
              // flight (the block's shared memory goes with it).
              if (!wgmma_ops().idle()) emulation_fault("a thread exits with warpgroup MMAs not waited for");
              // An exited thread no longer counts at the block barrier (PTX exit): the producer
              // warps leave early, and the computing warps' __syncthreads() go on without them.
              leave(bar);
            },
            [&](unsigned t) { return t >= lag.first && t < lag.last; },
            [&](unsigned t) { locals[t].swap_in_out(); });
      }
  smem_base = nullptr;
}

// The same over a 1-D grid of `blocks`, with no dynamic shared memory.
template <class Kernel>
void launch_on_host(unsigned blocks, unsigned threads, Kernel&& kernel) {
  launch_grid_on_host({blocks, 1, 1}, threads, nullptr, kernel);
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

// The tensor-core, shared-memory and copy instructions of the mma.sync kernels, emulated with
// the layouts of the PTX ISA (mma.m16n8k16 and ldmatrix fragments). Each is warp-collective: the
// lanes post their operands in their parity's slots (Warp), meet, and compute from all of them.
// cp.async copies at the wait that covers its group (Deferred, above).
namespace attnfuse_kernels {
namespace host_detail {
template <class E>
float half_of(u32 word, int hi) {
  return ElementTraits<E>::to_float(static_cast<u16>(hi ? word >> 16 : word & 0xffffu));
}
// D(16x8) += A(16x16, row-major) B(16x8, column-major); lane l holds A rows l/4 and l/4 + 8, B
// column l/4, D row l/4 (+ 8) at columns 2 (l % 4) and 2 (l % 4) + 1.
template <class E>
void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  attnfuse_host_cuda::Warp& w = *attnfuse_host_cuda::warp;
  const unsigned lane = threadIdx.x % 32;
  unsigned(&frag)[32][6] = w.frag[attnfuse_host_cuda::next_parity()];
  for (int i = 0; i < 4; ++i) frag[lane][i] = a[i];
  frag[lane][4] = b0;
  frag[lane][5] = b1;
  meet(w.bar);
  // The lanes' posted registers, not the kernel's memory, and Warp's parity orders them: TSan
  // need not check these reads (its check of them was the top entry of the TSan tests' profile).
  attnfuse_host_cuda::Internal internal;
  const auto A = [&](int r, int k) {  // a[0]: rows 0-7, k 0-7; a[1]: rows 8-15; a[2], a[3]: k 8-15
    return half_of<E>(frag[(r % 8) * 4 + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
  };
  const auto B = [&](int k, int n) { return half_of<E>(frag[n * 4 + (k % 8) / 2][k >= 8 ? 5 : 4], k % 2); };
  const int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), n = 2 * t + i % 2;
    float acc = d[i];
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
    d[i] = acc;
  }
}
inline const char* smem_at(u32 addr) { return attnfuse_host_cuda::smem_base + addr; }
}  // namespace host_detail

template <>
inline void mma_16816<bf16_t>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  host_detail::mma<bf16_t>(d, a, b0, b1);
}
template <>
inline void mma_16816<f16_t>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  host_detail::mma<f16_t>(d, a, b0, b1);
}
// Four 8x8 matrices of 16-bit elements: lanes 8m .. 8m + 7 name matrix m's rows; lane l receives
// row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of each (transposed: column l / 4, rows
// 2 (l % 4) and 2 (l % 4) + 1).
inline void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  const unsigned lane = threadIdx.x % 32;
  unsigned(&slot)[32] = attnfuse_host_cuda::next_slots();
  slot[lane] = addr;
  meet(attnfuse_host_cuda::warp->bar);
  for (int m = 0; m < 4; ++m) std::memcpy(&r[m], host_detail::smem_at(slot[m * 8 + lane / 4] + (lane % 4) * 4), 4);
}
inline void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
  const unsigned lane = threadIdx.x % 32;
  unsigned(&slot)[32] = attnfuse_host_cuda::next_slots();
  slot[lane] = addr;
  meet(attnfuse_host_cuda::warp->bar);
  for (int m = 0; m < 4; ++m) {
    u16 lo, hi;
    std::memcpy(&lo, host_detail::smem_at(slot[m * 8 + 2 * (lane % 4)] + (lane / 4) * 2), 2);
    std::memcpy(&hi, host_detail::smem_at(slot[m * 8 + 2 * (lane % 4) + 1] + (lane / 4) * 2), 2);
    r[m] = lo | (u32{hi} << 16);
  }
}
// cp.async lands at the wait that covers its group (attnfuse_host_cuda::Deferred), or at issue
// (cp_async_lands_early).
inline void cp_async_16(u32 dst, const void* src, int src_bytes) {
  char* to = attnfuse_host_cuda::smem_base + dst;
  auto copy = [to, src, src_bytes] {
    if (src_bytes > 0) std::memcpy(to, src, static_cast<size_t>(src_bytes));
    std::memset(to + src_bytes, 0, static_cast<size_t>(16 - src_bytes));
  };
  if (attnfuse_host_cuda::cp_async_lands_early) copy();
  else attnfuse_host_cuda::cp_async_ops().open.push_back(copy);
}
inline void cp_async_commit() { attnfuse_host_cuda::cp_async_ops().commit(); }
template <int N>
inline void cp_async_wait() {
  attnfuse_host_cuda::cp_async_ops().wait(N);
}
inline float fast_exp2(float x) { return std::exp2(x); }
inline float fast_tanh(float x) { return std::tanh(x); }
// Hints on the GPU; here they read their byte, so a prefetch outside the tensor fails under ASan.
inline void prefetch_l2(const void* a) { (void)*static_cast<const volatile char*>(a); }
inline void prefetch_l1(const void* a) { (void)*static_cast<const volatile char*>(a); }
inline int ld_keep_in_l2(const int* a) { return *a; }
// Blocks run one after another, so the count needs no atomicity; its order is the program's.
inline int atomic_inc_acq_rel(int* count) { return (*count)++; }
template <int kId, int kCount>
inline void named_barrier_sync() {
  static_assert(kId > 0, "barrier 0 is the block's: block_barrier_sync");
  attnfuse_host_cuda::meet(attnfuse_host_cuda::block_sync->get(kId, kCount));
}
inline void block_barrier_sync() { __syncthreads(); }
}  // namespace attnfuse_kernels

#include "codegen/kernel_host_hopper.hpp"
#include "codegen/cuda/kernels/combine.cuh"
#include "codegen/cuda/kernels/merge_states.cuh"
#include "codegen/cuda/kernels/rope.cuh"
