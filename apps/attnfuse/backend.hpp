// Which backend a CLI call runs on, and the one place that dispatches to it.
#pragma once

#include <string>
#include <memory>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "options.hpp"

namespace attnfuse::cli {

// Is there a CUDA device (and driver) to run on?
bool cuda_backend_available();

// cpu -> Cpu; cuda -> Cuda or Error(Device) when unavailable; auto -> Cuda when available,
// else Cpu.
Target resolve_target(DeviceChoice choice);

// Throws Error(Unsupported) when the CUDA kernel family cannot run this spec (dtype, head dim,
// combinators that have not reached the GPU yet).
void check_cuda_supported(const KernelSpec& spec);

// A problem's inputs copied to the GPU once; each launch() runs the kernel there and waits, so
// timing it measures the kernel, not the copies.
class CudaResident {
 public:
  CudaResident(const KernelSpec& spec, const AttentionArgs& host);
  ~CudaResident();
  CudaResident(const CudaResident&) = delete;
  CudaResident& operator=(const CudaResident&) = delete;
  void launch();
  // Copies out (and LSE) back into the host buffers of `host`.
  void download(const AttentionArgs& host) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// For a rope program on CUDA: "  rope placement: <fused|prerotate> (...)\n" saying where this
// call's Q and K are rotated (with rope_mode=auto, the cost model's choice); else "".
std::string cuda_rope_placement_line(Target target, const KernelSpec& spec, const AttentionArgs& args);
// "  cuda launch: ..." (variant, K/V layout, tile and stages, split-KV parts, grid) for CUDA
// runs, "" otherwise.
std::string cuda_launch_line(Target target, const KernelSpec& spec, const AttentionArgs& args);

// Runs the compiled program on `target` with host tensors (validates first, never touches
// outputs on error). On CUDA this uploads, launches, waits and downloads.
void run_attention(Target target, const KernelSpec& spec, const AttentionArgs& args);

}  // namespace attnfuse::cli
