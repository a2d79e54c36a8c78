// Per-call constants on the device (device_constants.hpp).
#include "runtime/device_constants.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "attnfuse/error.hpp"
#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {

namespace {

// The device copy of `values` in the current context, keyed by context and by the values the
// kernel reads (so slopes given as doubles that round to the same floats share a copy). The
// copies are never freed: a kernel may still be reading one on any stream, and the cap bounds
// what they hold. `padding` zero values follow the set on the device.
template <class T>
const T* upload_once(const std::vector<T>& values, size_t padding, int64_t cap, const char* what) {
  static std::mutex mu;
  static std::map<CUcontext, std::map<std::vector<T>, CUdeviceptr>> contexts;
  const DriverApi& d = driver();
  CUcontext ctx = nullptr;
  check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  std::lock_guard<std::mutex> lock(mu);
  auto& sets = contexts[ctx];
  if (auto it = sets.find(values); it != sets.end()) return reinterpret_cast<const T*>(it->second);
  if (static_cast<int64_t>(sets.size()) >= cap)
    throw Error(ErrorCode::Unsupported,
                fmt::format("more than {} distinct {} sets in one CUDA context: each set stays on the device for the "
                            "process, so reuse sets (the CPU takes any number)",
                            cap, what));
  std::vector<T> padded = values;
  padded.resize(values.size() + padding, T{});
  const size_t bytes = padded.size() * sizeof(T);
  CUdeviceptr ptr = 0;
  check(d.cuMemAlloc(&ptr, bytes), fmt::format("cuMemAlloc ({})", what).c_str());
  // Synchronous: the copy has landed before any launch can read it.
  const CUresult r = d.cuMemcpyHtoD(ptr, padded.data(), bytes);
  if (r != 0) d.cuMemFree(ptr);
  check(r, fmt::format("cuMemcpyHtoD ({})", what).c_str());
  sets.emplace(values, ptr);
  return reinterpret_cast<const T*>(ptr);
}

}  // namespace

const float* device_alibi_slopes(const std::vector<float>& slopes) {
  return upload_once(slopes, kSlopePadding, kMaxDeviceSlopeSets, "custom ALiBi slope");
}

const unsigned long long* device_rope_set(const std::vector<unsigned long long>& set) {
  return upload_once(set, 0, kMaxDeviceRopeSets, "longrope frequency");
}

}  // namespace attnfuse::runtime
