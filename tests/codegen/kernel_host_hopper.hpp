// Hopper's instructions for the host build of the kernel headers (included by kernel_host.hpp,
// after the mma.sync emulation): wgmma, mbarriers and the copy engine's tensor loads, so that the
// wgmma prefill tile, the TMA decode tiles and their producer warps run in CI without a GPU.
// - wgmma.mma_async m64nNk16 is warpgroup-collective: the 128 threads post where their A
//   registers are, meet, each computes its own accumulators (the m16n8 layout per warp,
//   wgmma.cuh) from all of them and from shared memory through the matrix descriptors, and they
//   meet again. It runs at the wait that covers its commit group (kernel_host.hpp's Deferred), the
//   latest moment it may complete, reading its operands then. Descriptors are read as the kernels
//   write them (128-byte swizzle, layout type 1; any other stops the test): K-major element
//   (mn, k) at start + (mn / 8) SBO + (mn % 8) 128 B + 2k, MN-major element (k, mn) at start +
//   (mn / 64) LBO + (k / 8) SBO + (k % 8) 128 B + 2 (mn % 64), both swizzled by address (16-byte
//   chunk bits [4,7) XOR bits [7,10)). The GPU suite pins that reading: the kernels pass on the
//   device with it, and here they fail with LBO and SBO swapped.
// - An mbarrier is its 8 bytes of shared memory: pending arrivals, the count they reset to, the
//   transaction bytes still owed and the phase bit. A phase completes when both reach zero;
//   try_wait.parity P holds once the phase bit differs from P (the phase of parity P is done), as
//   on the GPU, which also keeps only the current and the preceding phase. A waiter's fiber waits
//   for the block's next mbarrier update and looks again; a phase that never completes leaves
//   every thread waiting, which stops the test (host_fibers.hpp).
// - cp.async.bulk.tensor copies its box into the 128-byte swizzled layout (address bits, as
//   above), elements outside the tensor zero, and completes the box's bytes on the barrier. It
//   lands at issue (the earliest moment: a stage refilled while it is still read shows then) or,
//   with tma_lands_late, just before the next operation on its barrier (the latest: a stage read
//   without waiting for its copy shows then). The tensor map is a HostTensorMap (below) in the
//   CUtensorMap's 128 bytes, made from the geometry runtime::tile_map_geometry hands the driver.
// - Lagging threads give way before each mbarrier wait (kernel_host.hpp's Lag), so that the rest
//   of the block runs as far ahead as its barriers let it.
// - setmaxnreg, the proxy fences and the map prefetch are no-ops.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "codegen/cuda/kernels/wgmma.cuh"

namespace attnfuse_host_cuda {
// Tensor copies land at issue (false: the earliest moment, so a stage refilled while it is still
// read shows) or just before the next operation on their mbarrier (true: the latest, so a read
// of a stage that never waited for its copy sees the stage's previous contents).
inline bool tma_lands_late = false;
// The copy engine's view of a tensor: its base, dims innermost first, the byte strides of dims
// 1..3 and the box (cuTensorMapEncodeTiled's arguments, 16-bit elements, 128-byte swizzle).
struct HostTensorMap {
  const char* base;
  unsigned long long dims[4];
  unsigned long long byte_strides[3];
  unsigned box[4];
};
static_assert(sizeof(HostTensorMap) <= 128, "a tensor map is 128 bytes");
}  // namespace attnfuse_host_cuda

namespace attnfuse_kernels {
namespace host_detail {
inline u32 swizzle128(u32 addr) { return addr ^ (((addr >> 7) & 7u) << 4); }
inline u32 desc_field(u64 desc, int shift) { return static_cast<u32>((desc >> shift) & 0x3FFFu) << 4; }
inline void check_desc(u64 desc) {
  if ((desc >> 62) != 1) attnfuse_host_cuda::emulation_fault("a matrix descriptor without the 128-byte swizzle");
}
// Byte offsets (from the block's shared memory) of operand elements through a descriptor.
inline u32 k_major_addr(u64 desc, int mn, int k) {
  return swizzle128(desc_field(desc, 0) + (mn / 8) * desc_field(desc, 32) + (mn % 8) * 128 + k * 2);
}
inline u32 mn_major_addr(u64 desc, int k, int mn) {
  return swizzle128(desc_field(desc, 0) + (mn / 64) * desc_field(desc, 16) + (k / 8) * desc_field(desc, 32) +
                    (k % 8) * 128 + (mn % 64) * 2);
}
template <class E>
float smem_element(u32 addr) {
  u16 h;
  std::memcpy(&h, attnfuse_host_cuda::smem_base + addr, 2);
  return ElementTraits<E>::to_float(h);
}

// D(64 x N) = (accumulate ? D : 0) + A(64 x 16) B(16 x N): A from the warpgroup's registers
// (a_regs: each warp's 16 rows as an mma.sync A fragment) or, when null, K-major through
// desc_a; B through desc_b, MN-major when b_mn_major. The threads first stage the operands,
// then each computes its own accumulators from the staged copy. Under ThreadSanitizer the
// warpgroup's first thread reads every operand element (kOneReader): TSan remembers only four
// accesses per 8 bytes, and with each element read by many threads of both warpgroups a racing
// write could be pushed out of that record before a read is checked against it. Otherwise the
// 128 threads share the staging.
template <class E, int N>
void wgmma(float (&d)[N / 8][4], const u32* a_regs, u64 desc_a, u64 desc_b, bool b_mn_major, int accumulate) {
  static_assert(N <= 256, "wgmma's N is at most 256");
  attnfuse_host_cuda::WarpGroup& grp = *attnfuse_host_cuda::warpgroup;
  const int tid = static_cast<int>(threadIdx.x % 128), warp = tid / 32, lane = tid % 32;
  grp.a[tid] = a_regs;
  attnfuse_host_cuda::meet(grp.bar);
  if (a_regs == nullptr) check_desc(desc_a);
  check_desc(desc_b);
  constexpr bool kOneReader = attnfuse_host_cuda::kThreadSanitizer;
  const int first = kOneReader ? (tid == 0 ? 0 : 64 * N) : tid, step = kOneReader ? 1 : 128;
  for (int i = first; i < 64 * 16; i += step) {
    const int m = i / 16, k = i % 16;
    if (a_regs == nullptr) {
      grp.a_val[m][k] = smem_element<E>(k_major_addr(desc_a, m, k));
    } else {  // row m is in warp m / 16's fragment, lane (m % 8) * 4 + (k % 8) / 2
      const u32* src = grp.a[(m / 16) * 32 + (m % 8) * 4 + (k % 8) / 2];
      if (src == nullptr) attnfuse_host_cuda::emulation_fault("wgmma: A from registers in some threads only");
      grp.a_val[m][k] = half_of<E>(src[(m % 16 >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
    }
  }
  for (int i = first; i < 16 * N; i += step) {
    const int k = i / N, col = i % N;
    grp.b_val[k][col] = smem_element<E>(b_mn_major ? mn_major_addr(desc_b, k, col) : k_major_addr(desc_b, col, k));
  }
  // Past this meeting no thread reads an operand, so the next wgmma's staging (behind its own
  // first meeting, which every thread reaches only after computing this one) cannot overwrite
  // them early; the warpgroup's A registers may be reused at once.
  attnfuse_host_cuda::meet(grp.bar);
  attnfuse_host_cuda::Internal internal;  // the staged copy: the emulator's own reads
  for (int n8 = 0; n8 < N / 8; ++n8)
    for (int c = 0; c < 2; ++c) {
      const int col = 8 * n8 + 2 * (lane % 4) + c;
      for (int hf = 0; hf < 2; ++hf) {  // this thread's rows 16 warp + lane / 4 (+ 8)
        const float* a = grp.a_val[16 * warp + lane / 4 + 8 * hf];
        float acc = accumulate ? d[n8][2 * hf + c] : 0.f;
        for (int k = 0; k < 16; ++k) acc += a[k] * grp.b_val[k][col];
        d[n8][2 * hf + c] = acc;
      }
    }
}

// The mbarrier word: pending arrivals (bits 0-19), their reset count (20-39), transaction bytes
// owed (40-62, two's complement: a copy may complete before its bytes are announced) and the
// phase bit (63).
struct Mbar {
  u32 pending, count;
  long long tx;
  u32 phase;
  static Mbar decode(unsigned long long v) {
    long long tx = static_cast<long long>((v >> 40) & 0x7FFFFFull);
    if (tx & 0x400000) tx -= 0x800000;
    return {static_cast<u32>(v & 0xFFFFFu), static_cast<u32>((v >> 20) & 0xFFFFFu), tx, static_cast<u32>(v >> 63)};
  }
  unsigned long long encode() const {
    return pending | (static_cast<unsigned long long>(count) << 20) |
           (static_cast<unsigned long long>(tx & 0x7FFFFF) << 40) | (static_cast<unsigned long long>(phase) << 63);
  }
};
inline unsigned long long& mbar_word(u32 bar) {
  if (bar % 8 != 0) attnfuse_host_cuda::emulation_fault("a misaligned mbarrier");
  return *reinterpret_cast<unsigned long long*>(attnfuse_host_cuda::smem_base + bar);
}
// What ThreadSanitizer's orderings name phase n of an mbarrier by (n counted from its init;
// kernel_host.hpp's order_release): a byte of the block's own. Called inside an Internal scope.
inline const void* phase_key(u32 bar, unsigned long long n) {
  auto& key = attnfuse_host_cuda::block_sync->phase_keys[{bar, n}];
  if (!key) key = std::make_unique<char>();
  return key.get();
}
// Applies `arrivals` arrivals and `bytes` more owed (negative: bytes delivered), completing the
// phase when nothing is pending or owed; the block's mbarrier waiters then look again. The phase
// cannot complete without this update, so the one current at first is the one it counts
// towards: under TSan that phase is released before the update can complete it.
inline void mbar_update(u32 bar, u32 arrivals, long long bytes) {
  attnfuse_host_cuda::BlockSync& sync = *attnfuse_host_cuda::block_sync;
  if constexpr (attnfuse_host_cuda::kThreadSanitizer) {
    const void* key;
    {
      attnfuse_host_cuda::Internal internal;
      key = phase_key(bar, sync.phases_done[bar]);
    }
    attnfuse_host_cuda::order_release(key);
  }
  {
    attnfuse_host_cuda::Internal internal;
    Mbar m = Mbar::decode(mbar_word(bar));
    if (m.count == 0) attnfuse_host_cuda::emulation_fault("an mbarrier used before its init");
    if (arrivals > m.pending) attnfuse_host_cuda::emulation_fault("more arrivals than an mbarrier's phase expects");
    m.pending -= arrivals;
    m.tx += bytes;
    if (m.pending == 0 && m.tx == 0) {
      m.phase ^= 1u;
      m.pending = m.count;
      if constexpr (attnfuse_host_cuda::kThreadSanitizer) ++sync.phases_done[bar];
    }
    mbar_word(bar) = m.encode();
    attnfuse_host_cuda::fiber_wake_mbarrier_waiters();
  }
}
// Late landing (attnfuse_host_cuda::tma_lands_late): the copies in flight on `bar` land now,
// before any other operation on it (a wait, an arrival, the next phase's expected bytes), the
// latest moment the GPU could have landed them. Each lands ordered after its issue (for TSan: the
// copy is the issuing thread's work, whichever thread runs it).
inline void land_copies(u32 bar) {
  if (!attnfuse_host_cuda::tma_lands_late) return;  // copies landed at issue: none in flight
  attnfuse_host_cuda::BlockSync& sync = *attnfuse_host_cuda::block_sync;
  std::vector<std::unique_ptr<std::function<void()>>> landing;
  {
    attnfuse_host_cuda::Internal internal;
    auto& in_flight = sync.copies_in_flight;
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (it->first == bar) {
        landing.push_back(std::move(it->second));
        it = in_flight.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& copy : landing) {
    attnfuse_host_cuda::order_acquire(copy.get());
    (*copy)();
  }
}
}  // namespace host_detail

inline void wgmma_fence() {}
inline void wgmma_commit() { attnfuse_host_cuda::wgmma_ops().commit(); }
template <int N>
inline void wgmma_wait() {
  if (!attnfuse_host_cuda::wgmma_ops().open.empty())
    attnfuse_host_cuda::emulation_fault("wgmma.wait_group with products issued and not committed");
  attnfuse_host_cuda::wgmma_ops().wait(N);
}
inline void fence_proxy_async_smem() {}
template <int N>
inline void setmaxnreg_dec() {}
template <int N>
inline void setmaxnreg_inc() {}
template <int NT>
inline void fence_operands(float (&)[NT][4]) {}
inline void tma_prefetch_map(const void*) {}
// An L2 hint: nothing lands anywhere. The copy engine bounds a box by the map, but a hint for a
// box that starts outside the tensor's head, batch or rows is a kernel's wrong tile.
inline void tma_prefetch_l2_4d(const void* tensor_map, int c0, int c1, int c2, int c3) {
  const auto& m = *static_cast<const attnfuse_host_cuda::HostTensorMap*>(tensor_map);
  const long long c[4] = {c0, c1, c2, c3};
  for (int i = 0; i < 4; ++i)
    if (c[i] < 0 || static_cast<unsigned long long>(c[i]) >= m.dims[i])
      attnfuse_host_cuda::emulation_fault("an L2 hint for a box outside the tensor");
}

inline void mbar_init(u32 bar, int count) {
  attnfuse_host_cuda::Internal internal;  // (the kernels publish the init with a block barrier)
  host_detail::mbar_word(bar) = host_detail::Mbar{static_cast<u32>(count), static_cast<u32>(count), 0, 0}.encode();
  if constexpr (attnfuse_host_cuda::kThreadSanitizer) attnfuse_host_cuda::block_sync->phases_done[bar] = 0;
}
inline void mbar_init_fence() {}
inline void mbar_expect_tx(u32 bar, u32 bytes) {
  host_detail::land_copies(bar);
  host_detail::mbar_update(bar, 1, bytes);
}
inline void mbar_arrive(u32 bar) {
  host_detail::land_copies(bar);
  host_detail::mbar_update(bar, 1, 0);
}
// A phase that never completes would hang the GPU; here it leaves every thread of the block
// waiting, which stops the test (host_fibers.hpp). Each look at the barrier is an operation on
// it, so copies in flight on it land first. A lagging thread (attnfuse_host_cuda::lag) gives way
// before each wait.
inline void mbar_wait(u32 bar, u32 parity) {
  attnfuse_host_cuda::lag_if_lagging();
  attnfuse_host_cuda::BlockSync& sync = *attnfuse_host_cuda::block_sync;
  const void* key = nullptr;
  for (bool done = false; !done;) {
    host_detail::land_copies(bar);
    attnfuse_host_cuda::Internal internal;
    done = host_detail::Mbar::decode(host_detail::mbar_word(bar)).phase != parity;
    if (!done) attnfuse_host_cuda::fiber_wait_mbarrier();
    // (TSan) The phase the wait saw complete: the last one, of parity `parity` (the current one
    // has the other).
    else if (attnfuse_host_cuda::kThreadSanitizer) key = host_detail::phase_key(bar, sync.phases_done[bar] - 1);
  }
  attnfuse_host_cuda::order_acquire(key);
}

namespace host_detail {
// The box at (c0 .. c3) of tensor map m into shared memory at dst, completing its bytes on bar.
inline void tma_copy(u32 dst, const attnfuse_host_cuda::HostTensorMap& m, u32 bar, int c0, int c1, int c2, int c3) {
  if (dst % 128 != 0) attnfuse_host_cuda::emulation_fault("a swizzled tensor copy to a misaligned address");
  if (m.box[0] * 2 != 128) attnfuse_host_cuda::emulation_fault("a 128-byte swizzled box is 128 bytes wide");
  const long long c[4] = {c0, c1, c2, c3};
  u32 row = 0;  // the box's rows of 128 bytes, in order
  for (unsigned i3 = 0; i3 < m.box[3]; ++i3)
    for (unsigned i2 = 0; i2 < m.box[2]; ++i2)
      for (unsigned i1 = 0; i1 < m.box[1]; ++i1, ++row)
        for (unsigned i0 = 0; i0 < m.box[0]; ++i0) {
          const long long x[4] = {c[0] + i0, c[1] + i1, c[2] + i2, c[3] + i3};
          bool in = true;
          for (int i = 0; i < 4; ++i) in = in && x[i] >= 0 && static_cast<unsigned long long>(x[i]) < m.dims[i];
          u16 e = 0;
          if (in)
            std::memcpy(&e, m.base + x[0] * 2 + x[1] * m.byte_strides[0] + x[2] * m.byte_strides[1] + x[3] * m.byte_strides[2],
                        2);
          std::memcpy(attnfuse_host_cuda::smem_base + swizzle128(dst + row * 128 + i0 * 2), &e, 2);
        }
  mbar_update(bar, 0, -static_cast<long long>(row) * 128);
}
}  // namespace host_detail
inline void tma_load_4d(u32 dst, const void* tensor_map, u32 bar, int c0, int c1, int c2, int c3) {
  if (attnfuse_host_cuda::tma_lands_late) {
    attnfuse_host_cuda::BlockSync& sync = *attnfuse_host_cuda::block_sync;
    const auto m = *static_cast<const attnfuse_host_cuda::HostTensorMap*>(tensor_map);  // the map may be reused
    auto copy = std::make_unique<std::function<void()>>(
        [dst, m, bar, c0, c1, c2, c3] { host_detail::tma_copy(dst, m, bar, c0, c1, c2, c3); });
    attnfuse_host_cuda::order_release(copy.get());
    attnfuse_host_cuda::Internal internal;
    sync.copies_in_flight.emplace_back(bar, std::move(copy));
    attnfuse_host_cuda::fiber_wake_mbarrier_waiters();  // their next look lands it
    return;
  }
  host_detail::tma_copy(dst, *static_cast<const attnfuse_host_cuda::HostTensorMap*>(tensor_map), bar, c0, c1, c2, c3);
}

// Each product runs at the wait that covers its group (attnfuse_host_cuda::Deferred), reading its
// shared-memory operands and its A registers then, as the asynchronous product may.
template <class T, int N>
inline void wgmma_ss(float (&d)[N / 8][4], u64 desc_a, u64 desc_b, int accumulate) {
  float (*acc)[N / 8][4] = &d;
  attnfuse_host_cuda::wgmma_ops().open.push_back(
      [acc, desc_a, desc_b, accumulate] { host_detail::wgmma<T, N>(*acc, nullptr, desc_a, desc_b, false, accumulate); });
}
template <class T, int N, bool kTransB>
inline void wgmma_rs_t(float (&d)[N / 8][4], const u32 (&a)[4], u64 desc_b, int accumulate) {
  float (*acc)[N / 8][4] = &d;
  const u32* regs = a;
  attnfuse_host_cuda::wgmma_ops().open.push_back(
      [acc, regs, desc_b, accumulate] { host_detail::wgmma<T, N>(*acc, regs, 0, desc_b, kTransB, accumulate); });
}
}  // namespace attnfuse_kernels
