// The CUDA driver API, loaded with dlopen on first use: the library and CLI start on machines
// without a GPU or driver and only say so, clearly, when CUDA is requested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace attnfuse::runtime {

// Opaque driver handles (ABI-identical to the driver's own typedefs).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

// Attribute numbers from cuda.h (stable across driver versions).
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrComputeCapabilityMajor = 75;
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr int kAttrMaxSharedPerBlockOptin = 97;
inline constexpr int kAttrMaxSharedPerMultiprocessor = 81;
inline constexpr int kAttrMaxRegistersPerMultiprocessor = 82;
inline constexpr int kAttrMaxThreadsPerMultiprocessor = 39;
inline constexpr int kAttrMaxBlocksPerMultiprocessor = 106;
inline constexpr int kFuncAttrLocalSizeBytes = 3;
inline constexpr int kFuncAttrNumRegs = 4;
inline constexpr int kFuncAttrMaxDynamicSharedBytes = 8;
inline constexpr int kLaunchAttrProgrammaticStreamSerialization = 6;

// cuLaunchKernelEx's configuration (cuda.h's CUlaunchAttribute and CUlaunchConfig, same layout).
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
  } value;
};
static_assert(sizeof(CUlaunchAttribute) == 72);
struct CUlaunchConfig {
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  CUstream stream;
  CUlaunchAttribute* attrs;
  unsigned num_attrs;
};

struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // Optional (null on drivers before CUDA 12): launches with attributes (launch_kernel below).
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  // Optional (null on drivers before CUDA 12): Hopper tensor maps (runtime/tma.hpp).
  CUresult (*cuTensorMapEncodeTiled)(void* map, int dtype, unsigned rank, void* base, const uint64_t* dims,
                                     const uint64_t* strides, const unsigned* box, const unsigned* element_strides,
                                     int interleave, int swizzle, int l2_promotion, int oob_fill) = nullptr;
};

// The loaded driver with device 0's primary context current on the calling thread.
// Throws Error(Device) with the reason (no libcuda, no device, init failure) when unavailable.
const DriverApi& driver();

// True when a CUDA device can be used (never throws): for --device auto and test skipping.
bool cuda_available(std::string* why_not = nullptr);

// Throws Error(Device) "<what>: <driver error string>" when r != 0.
void check(CUresult r, const char* what);

// Whether this driver and device can launch programmatic dependents (sm_90+, cuLaunchKernelEx).
bool dependent_launch_available();

// Launches f on `stream`. With `dependent` (where dependent_launch_available()), as a
// programmatic dependent launch: the grid may be scheduled while the previous kernel in the
// stream finishes, once that kernel allows it (griddepcontrol.launch_dependents). Only kernels
// that run griddepcontrol.wait before their first global memory access may be launched so
// (every attnfuse kernel does: primitives.cuh, grid_dependency_wait). Throws like check().
void launch_kernel(CUfunction f, const unsigned (&grid)[3], unsigned threads, unsigned shared_bytes,
                   CUstream stream, void** params, bool dependent, const char* what);

struct DeviceInfo {
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  int max_shared_per_block = 0;
  int max_shared_per_sm = 0;
  int registers_per_sm = 0;
  int max_threads_per_sm = 2048;  // 1536 on sm_86 / sm_89 / sm_120
  int max_blocks_per_sm = 32;
  int arch() const { return sm_major * 10 + sm_minor; }
};
const DeviceInfo& device_info();

}  // namespace attnfuse::runtime
