// Per-stream scratch of CUDA launches (stream_workspace.hpp).
#include "runtime/stream_workspace.hpp"

#include <map>
#include <mutex>
#include <utility>

namespace attnfuse::runtime {

void* stream_workspace(CUstream stream, WorkspaceSlot slot, size_t bytes) {
  struct Buffer {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
  };
  static std::mutex mu;
  static std::map<std::pair<CUstream, int>, Buffer> buffers;
  std::lock_guard<std::mutex> lock(mu);
  Buffer& b = buffers[{stream, static_cast<int>(slot)}];
  if (b.bytes < bytes) {
    const DriverApi& d = driver();
    if (b.ptr) {
      check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
      check(d.cuMemFree(b.ptr), "cuMemFree");
      b = Buffer{};
    }
    static constexpr const char* kWhat[] = {"cuMemAlloc (rope prerotate workspace)", "cuMemAlloc (split-KV workspace)",
                                            "cuMemAlloc (split-KV merge counters)",
                                            "cuMemAlloc (merge_states workspace)"};
    check(d.cuMemAlloc(&b.ptr, bytes), kWhat[slot]);
    b.bytes = bytes;
    if (slot == kMergeCounters) {
      // The counters start at zero. cuMemsetD8 runs on the legacy stream, which a non-blocking
      // `stream` does not wait for: finish it before any launch can read them.
      check(d.cuMemsetD8(b.ptr, 0, bytes), "cuMemsetD8 (split-KV merge counters)");
      check(d.cuCtxSynchronize(), "cuCtxSynchronize");
    }
  }
  return reinterpret_cast<void*>(b.ptr);
}

}  // namespace attnfuse::runtime
