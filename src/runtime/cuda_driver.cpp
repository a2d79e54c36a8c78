// Loads libcuda with dlopen and resolves the driver entry points attnfuse uses.
#include "runtime/cuda_driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <utility>

#include "attnfuse/error.hpp"

namespace attnfuse::runtime {
namespace {

struct Loaded {
  DriverApi api{};
  std::string error;  // empty when usable
  DeviceInfo info;
  CUcontext ctx = nullptr;
};

template <class F>
bool resolve(void* lib, F& fn, std::initializer_list<const char*> names, std::string& error) {
  for (const char* n : names) {
    if (void* p = dlsym(lib, n)) {
      fn = reinterpret_cast<F>(p);
      return true;
    }
  }
  error = fmt::format("the CUDA driver lacks {}", *names.begin());
  return false;
}

Loaded load() {
  Loaded L;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    L.error = "no CUDA driver (libcuda.so.1 not found)";
    return L;
  }
  auto& a = L.api;
  std::string& e = L.error;
  bool ok = resolve(lib, a.cuInit, {"cuInit"}, e) &&
            resolve(lib, a.cuDriverGetVersion, {"cuDriverGetVersion"}, e) &&
            resolve(lib, a.cuDeviceGetCount, {"cuDeviceGetCount"}, e) &&
            resolve(lib, a.cuDeviceGet, {"cuDeviceGet"}, e) &&
            resolve(lib, a.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, e) &&
            resolve(lib, a.cuDeviceGetName, {"cuDeviceGetName"}, e) &&
            resolve(lib, a.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, e) &&
            resolve(lib, a.cuCtxSetCurrent, {"cuCtxSetCurrent"}, e) &&
            resolve(lib, a.cuCtxGetCurrent, {"cuCtxGetCurrent"}, e) &&
            resolve(lib, a.cuCtxSynchronize, {"cuCtxSynchronize"}, e) &&
            resolve(lib, a.cuModuleLoadData, {"cuModuleLoadData"}, e) &&
            resolve(lib, a.cuModuleGetFunction, {"cuModuleGetFunction"}, e) &&
            resolve(lib, a.cuFuncSetAttribute, {"cuFuncSetAttribute"}, e) &&
            resolve(lib, a.cuFuncGetAttribute, {"cuFuncGetAttribute"}, e) &&
            resolve(lib, a.cuLaunchKernel, {"cuLaunchKernel"}, e) &&
            resolve(lib, a.cuMemAlloc, {"cuMemAlloc_v2"}, e) &&
            resolve(lib, a.cuMemFree, {"cuMemFree_v2"}, e) &&
            resolve(lib, a.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"}, e) &&
            resolve(lib, a.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"}, e) &&
            resolve(lib, a.cuMemsetD8, {"cuMemsetD8_v2"}, e) &&
            resolve(lib, a.cuStreamSynchronize, {"cuStreamSynchronize"}, e) &&
            resolve(lib, a.cuEventCreate, {"cuEventCreate"}, e) &&
            resolve(lib, a.cuEventRecord, {"cuEventRecord"}, e) &&
            resolve(lib, a.cuEventSynchronize, {"cuEventSynchronize"}, e) &&
            resolve(lib, a.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, e) &&
            resolve(lib, a.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}, e) &&
            resolve(lib, a.cuGetErrorString, {"cuGetErrorString"}, e);
  if (!ok) return L;
  std::string optional_missing;
  resolve(lib, a.cuTensorMapEncodeTiled, {"cuTensorMapEncodeTiled"}, optional_missing);
  resolve(lib, a.cuLaunchKernelEx, {"cuLaunchKernelEx"}, optional_missing);
  if (a.cuInit(0) != 0) {
    e = "cuInit failed (driver present but no usable GPU)";
    return L;
  }
  int count = 0;
  if (a.cuDeviceGetCount(&count) != 0 || count == 0) {
    e = "no CUDA device found";
    return L;
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (a.cuDeviceGet(&dev, 0) != 0 || a.cuDevicePrimaryCtxRetain(&ctx, dev) != 0) {
    e = "could not create a context on CUDA device 0";
    return L;
  }
  char name[256] = {};
  a.cuDeviceGetName(name, sizeof name, dev);
  L.info.name = name;
  a.cuDeviceGetAttribute(&L.info.sm_major, kAttrComputeCapabilityMajor, dev);
  a.cuDeviceGetAttribute(&L.info.sm_minor, kAttrComputeCapabilityMinor, dev);
  a.cuDeviceGetAttribute(&L.info.multiprocessors, kAttrMultiprocessorCount, dev);
  a.cuDeviceGetAttribute(&L.info.max_shared_per_block, kAttrMaxSharedPerBlockOptin, dev);
  a.cuDeviceGetAttribute(&L.info.max_shared_per_sm, kAttrMaxSharedPerMultiprocessor, dev);
  a.cuDeviceGetAttribute(&L.info.registers_per_sm, kAttrMaxRegistersPerMultiprocessor, dev);
  // Occupancy limits (the split-KV choice counts resident blocks); the defaults stay if a driver
  // does not answer.
  for (auto [attr, field] : {std::pair{kAttrMaxThreadsPerMultiprocessor, &L.info.max_threads_per_sm},
                             std::pair{kAttrMaxBlocksPerMultiprocessor, &L.info.max_blocks_per_sm}}) {
    int v = 0;
    if (a.cuDeviceGetAttribute(&v, attr, dev) == 0 && v > 0) *field = v;
  }
  L.ctx = ctx;
  return L;
}

const Loaded& loaded() {
  static const Loaded L = load();  // thread-safe one-time initialisation
  return L;
}

}  // namespace

bool cuda_available(std::string* why_not) {
  const Loaded& L = loaded();
  if (why_not) *why_not = L.error;
  return L.error.empty();
}

const DriverApi& driver() {
  const Loaded& L = loaded();
  if (!L.error.empty())
    throw Error(ErrorCode::Device, fmt::format("CUDA backend not available: {}", L.error));
  // The primary context must be current on every thread that launches.
  thread_local bool current = false;
  if (!current) {
    check(L.api.cuCtxSetCurrent(L.ctx), "cuCtxSetCurrent");
    current = true;
  }
  return L.api;
}

const DeviceInfo& device_info() {
  driver();
  return loaded().info;
}

bool dependent_launch_available() {
  return driver().cuLaunchKernelEx != nullptr && device_info().arch() >= 90;
}

void launch_kernel(CUfunction f, const unsigned (&grid)[3], unsigned threads, unsigned shared_bytes,
                   CUstream stream, void** params, bool dependent, const char* what) {
  const DriverApi& d = driver();
  if (dependent && dependent_launch_available()) {
    CUlaunchAttribute attr{};
    attr.id = kLaunchAttrProgrammaticStreamSerialization;
    attr.value.programmatic_stream_serialization_allowed = 1;
    const CUlaunchConfig config{grid[0], grid[1], grid[2], threads, 1, 1, shared_bytes, stream, &attr, 1};
    check(d.cuLaunchKernelEx(&config, f, params, nullptr), what);
    return;
  }
  check(d.cuLaunchKernel(f, grid[0], grid[1], grid[2], threads, 1, 1, shared_bytes, stream, params, nullptr), what);
}

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* msg = nullptr;
  const Loaded& L = loaded();
  if (L.api.cuGetErrorString) L.api.cuGetErrorString(r, &msg);
  throw Error(ErrorCode::Device, fmt::format("{} failed: {} (CUDA error {})", what,
                                             msg ? msg : "unknown error", r));
}

}  // namespace attnfuse::runtime
