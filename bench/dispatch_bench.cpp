// Measures the CUDA backend's host-side costs (DESIGN §5 targets): cold NVRTC compile per
// variant (< 2 s), disk-cache load, and warm dispatch (lookup + parameter fill + launch) against
// a bare cuLaunchKernel of the same function; the difference is attnfuse's overhead (< 1 us).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <unistd.h>

#include "attnfuse/program.hpp"
#include "codegen/cuda/emit.hpp"
#include "codegen/cuda/kernels/params.cuh"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/nvrtc.hpp"

using namespace attnfuse;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int main(int argc, char** argv) {
  const char* programs[] = {
      "softmax(causal(scaled_dot_product(Q, K))) @ V",
      "softmax(scaled_dot_product(Q, K)) @ V",
      "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V",
      "softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V",
      "softmax(softcap(additive_bias(scaled_dot_product(Q, K)), 30)) @ V",
      "relu_attention(causal(scaled_dot_product(Q, K))) @ V",
  };
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("attnfuse-dispatch-bench-{}", static_cast<long>(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("ATTNFUSE_CACHE_DIR", dir.c_str(), 1);
  const int arch = runtime::cuda_available() ? std::min(runtime::device_info().arch(), 90) : 90;

  fmt::print("cold compile (NVRTC, sm_{}), then load from the disk cache:\n", arch);
  for (const char* p : programs)
    for (int d : {64, 128}) {
      const KernelSpec spec = Program::parse(p).compile({Target::Cuda, DType::BF16, d});
      auto t0 = Clock::now();
      const auto cold = runtime::compile_cuda(spec, arch);
      const double cold_s = seconds_since(t0);
      t0 = Clock::now();
      const auto warm = runtime::compile_cuda(spec, arch);
      const double disk_s = seconds_since(t0);
      fmt::print("  D={:<3} cold {:6.3f} s  disk {:8.5f} s  regs {:3}  {}{}{}\n", d, cold_s, disk_s,
                 cold.registers, p, cold.from_disk ? "  (cold call was a disk hit!)" : "",
                 warm.from_disk ? "" : "  (disk cache MISSED)");
    }
  if (!runtime::cuda_available()) {
    fmt::print("no CUDA device: dispatch timing skipped\n");
    return 0;
  }

  // Warm dispatch on a tiny problem, so the GPU keeps up with the host.
  const auto& drv = runtime::driver();
  const KernelSpec spec = Program::parse(programs[0]).compile({Target::Cuda, DType::BF16, 64});
  const int64_t B = 1, H = 1, N = 16, D = 64;
  const size_t bytes = B * H * N * D * 2;
  runtime::CUdeviceptr q, k, v, o;
  for (auto* p : {&q, &k, &v, &o}) {
    runtime::check(drv.cuMemAlloc(p, bytes), "cuMemAlloc");
    runtime::check(drv.cuMemsetD8(*p, 0x3c, bytes), "cuMemsetD8");
  }
  AttentionArgs args;
  args.q = TensorView::contiguous(reinterpret_cast<void*>(q), DType::BF16, {B, H, N, D});
  args.k = TensorView::contiguous(reinterpret_cast<void*>(k), DType::BF16, {B, H, N, D});
  args.v = TensorView::contiguous(reinterpret_cast<void*>(v), DType::BF16, {B, H, N, D});
  args.out = TensorView::contiguous(reinterpret_cast<void*>(o), DType::BF16, {B, H, N, D});
  const runtime::CudaKernel& kernel = runtime::cuda_kernel(spec);
  kernel.launch(args, spec.scalars, nullptr);
  runtime::check(drv.cuCtxSynchronize(), "sync");

  const int batches = 200, per_batch = 200;
  auto measure = [&](auto&& one_call) {
    std::vector<double> per_call;
    for (int b = 0; b < batches; ++b) {
      const auto t0 = Clock::now();
      for (int i = 0; i < per_batch; ++i) one_call();
      per_call.push_back(seconds_since(t0) * 1e9 / per_batch);
      drv.cuCtxSynchronize();
    }
    std::sort(per_call.begin(), per_call.end());
    return per_call[per_call.size() / 2];
  };
  // What attnfuse does per call: cache lookup by spec, validation, parameter fill, launch.
  const double ours = measure([&] { runtime::cuda_kernel(spec).launch(args, spec.scalars, nullptr); });
  // The handle path of the C ABI: no lookup (resolved at compile time).
  const double handle = measure([&] { kernel.launch(args, spec.scalars, nullptr); });
  // The floor: the same launch with its parameters prepared once.
  attnfuse_kernels::FwdParams p{};
  p.q = args.q.data, p.k = args.k.data, p.v = args.v.data, p.o = args.out.data;
  p.batch = 1, p.heads_q = 1, p.heads_kv = 1, p.len_q = N, p.len_k = N, p.head_ratio = 1;
  p.scale = 0.125f, p.scale_log2 = 0.125f * 1.4427f;
  for (int i = 0; i < 3; ++i) p.q_stride[i] = p.k_stride[i] = p.v_stride[i] = p.o_stride[i] = args.q.strides[i];
  void* params[] = {&p};
  const int smem = codegen::cuda::shared_memory_bytes(spec), threads = codegen::cuda::threads_per_block(spec);
  const double bare = measure([&] {
    drv.cuLaunchKernel(kernel.function(), 1, 1, 1, threads, 1, 1, smem, nullptr, params, nullptr);
  });
  fmt::print("warm dispatch, host ns per call (median of {} batches of {}):\n", batches, per_batch);
  fmt::print("  lookup+launch {:7.0f}  handle launch {:7.0f}  bare cuLaunchKernel {:7.0f}\n", ours, handle, bare);
  fmt::print("  attnfuse overhead over the bare launch: lookup path {:.0f} ns, handle path {:.0f} ns\n",
             ours - bare, handle - bare);
  (void)argc;
  (void)argv;
  return 0;
}
