// The CUDA backend: KernelSpec -> generated source -> NVRTC cubin (memory + disk cache) ->
// loaded function; a warm launch is one hash lookup, a parameter fill and cuLaunchKernel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {

// A cubin built for one architecture (works without a GPU).
struct CompiledBinary {
  std::vector<char> cubin;
  int registers = -1;
  int spill_bytes = -1;
  bool from_disk = false;
  double compile_seconds = 0.0;
};

// The disk-cache key of spec on arch: SHA-256 over the generated source, the embedded kernel
// headers, the NVRTC options and version, and the attnfuse version (DESIGN §5).
std::string cache_key(const KernelSpec& spec, int arch);

// Emits and compiles spec for arch (sm_80: 80, sm_90: 90), through the disk cache.
CompiledBinary compile_cuda(const KernelSpec& spec, int arch);

class CudaKernel {
 public:
  CudaKernel(const KernelSpec& spec, CUmodule module, CUfunction fn, int registers);
  // args hold device pointers; `scalars` are the run-time values of this call's program (the
  // cached kernel is shared by every program with the same structure, whatever its values).
  // Validates first; throws Error before launching anything.
  void launch(const AttentionArgs& args, const ScalarArgs& scalars, CUstream stream) const;
  const KernelSpec& spec() const { return spec_; }
  int registers() const { return registers_; }
  CUfunction function() const { return fn_; }

 private:
  KernelSpec spec_;
  CUmodule module_;
  CUfunction fn_;
  int registers_;
  int threads_;
  int smem_;
};

// The loaded kernel for spec on the current device, compiled on first use (thread-safe).
const CudaKernel& cuda_kernel(const KernelSpec& spec);

// Convenience: look up (or compile) and launch; synchronizes only if `sync`.
void run_cuda(const KernelSpec& spec, const AttentionArgs& args, CUstream stream = nullptr,
              bool sync = false);

}  // namespace attnfuse::runtime
