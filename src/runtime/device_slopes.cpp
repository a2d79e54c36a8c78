// Custom ALiBi slopes on the device (device_slopes.hpp).
#include "runtime/device_slopes.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "attnfuse/error.hpp"
#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {

const float* device_alibi_slopes(const std::vector<float>& slopes) {
  // Keyed by context and by the fp32 values the kernel reads (double sets that round to the same
  // floats share a copy). The copies are never freed: a kernel may still be reading one on any
  // stream, and the cap bounds what they hold.
  static std::mutex mu;
  static std::map<CUcontext, std::map<std::vector<float>, CUdeviceptr>> contexts;
  const DriverApi& d = driver();
  CUcontext ctx = nullptr;
  check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  std::lock_guard<std::mutex> lock(mu);
  auto& sets = contexts[ctx];
  if (auto it = sets.find(slopes); it != sets.end()) return reinterpret_cast<const float*>(it->second);
  if (static_cast<int64_t>(sets.size()) >= kMaxDeviceSlopeSets)
    throw Error(ErrorCode::Unsupported,
                fmt::format("more than {} distinct custom ALiBi slope sets in one CUDA context: each set "
                            "stays on the device for the process, so reuse sets (the CPU takes any number)",
                            kMaxDeviceSlopeSets));
  std::vector<float> padded = slopes;
  padded.resize(slopes.size() + kSlopePadding, 0.f);
  const size_t bytes = padded.size() * sizeof(float);
  CUdeviceptr ptr = 0;
  check(d.cuMemAlloc(&ptr, bytes), "cuMemAlloc (ALiBi slopes)");
  // Synchronous: the copy has landed before any launch can read it.
  const CUresult r = d.cuMemcpyHtoD(ptr, padded.data(), bytes);
  if (r != 0) d.cuMemFree(ptr);
  check(r, "cuMemcpyHtoD (ALiBi slopes)");
  sets.emplace(slopes, ptr);
  return reinterpret_cast<const float*>(ptr);
}

}  // namespace attnfuse::runtime
