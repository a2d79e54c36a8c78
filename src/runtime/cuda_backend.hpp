// The CUDA backend: KernelSpec -> generated source -> NVRTC cubin (memory + disk cache) ->
// loaded function; a warm launch is one hash lookup, a parameter fill and cuLaunchKernel.
#pragma once

#include <atomic>
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

// One compiled and loaded module: the forward kernel of a spec whose rope_mode is resolved
// (Fused or Prerotate for rope programs), plus the rotation kernel in prerotate mode.
struct LoadedModule {
  KernelSpec spec;
  CUmodule module = nullptr;
  CUfunction fwd = nullptr;
  CUfunction rotate = nullptr;  // prerotate mode only
  int registers = 0;
  int threads = 0;
  int smem = 0;
};

// The module of a resolved spec on the current device, compiled on first use (thread-safe).
const LoadedModule& load_module(const KernelSpec& spec);

// A program's kernel on the current device. For rope programs with rope_mode = auto it holds
// both placements and picks one per call (passes::choose_rope_mode); each is compiled on first
// use.
class CudaKernel {
 public:
  explicit CudaKernel(const KernelSpec& spec);
  // args hold device pointers; `scalars` are the run-time values of this call's program (the
  // cached kernel is shared by every program with the same structure, whatever its values).
  // Validates first; throws Error before launching anything. Prerotate mode writes rotated Q
  // and K to a per-stream workspace the runtime owns (grown on demand, never shrunk).
  void launch(const AttentionArgs& args, const ScalarArgs& scalars, CUstream stream) const;
  const KernelSpec& spec() const { return spec_; }
  // The placement this call would use (the spec's mode unless it is auto).
  RopeMode rope_mode_for(const AttentionArgs& args, const ScalarArgs& scalars) const;
  // The module of one placement (the spec's only module for programs without rope).
  const LoadedModule& module(RopeMode mode) const;
  RopeMode default_mode() const;
  int registers() const { return module(default_mode()).registers; }
  CUfunction function() const { return module(default_mode()).fwd; }

 private:
  KernelSpec spec_;
  mutable std::atomic<const LoadedModule*> variants_[3];  // indexed by RopeMode
};

// The loaded kernel for spec on the current device, compiled on first use (thread-safe).
const CudaKernel& cuda_kernel(const KernelSpec& spec);

// Convenience: look up (or compile) and launch; synchronizes only if `sync`.
void run_cuda(const KernelSpec& spec, const AttentionArgs& args, CUstream stream = nullptr,
              bool sync = false);

}  // namespace attnfuse::runtime
