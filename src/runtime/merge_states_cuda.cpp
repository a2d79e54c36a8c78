// merge_states on CUDA: validation, the module (compiled once per architecture, through the disk
// cache) and the launches of kernels/merge_states.cuh.
#include "runtime/merge_states_cuda.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "attnfuse/error.hpp"
#include "attnfuse/version.hpp"
#include "codegen/cuda/emit.hpp"
#include "codegen/cuda/kernels/params.cuh"
#include "common/merge_check.hpp"
#include "common/sha256.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/kernel_sources.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/stream_workspace.hpp"

namespace attnfuse::runtime {
namespace {

static_assert(kMergeStatesPerLaunch == attnfuse_kernels::kMergeMaxStates);

// The merge kernel of the current device, compiled (or read from the disk cache) and loaded once.
CUfunction merge_function() {
  static std::mutex mu;
  static std::unordered_map<int, CUfunction> loaded;  // by arch
  const int arch = device_info().arch();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(arch); it != loaded.end()) return it->second;
  if (arch < 80)
    throw Error(ErrorCode::Unsupported,
                fmt::format("the CUDA backend needs sm_80 or newer; {} is sm_{}", device_info().name, arch));
  const std::string source = codegen::cuda::emit_merge_states();
  std::string material = source;
  for (const auto& h : kernel_sources()) material += h.source;
  for (const auto& o : nvrtc_options(arch, NvrtcOutput::Cubin)) material += "\n" + o;
  material += "\nnvrtc " + nvrtc_version() + "\nattnfuse " ATTNFUSE_VERSION;
  const std::string key = sha256_hex(material);
  const DiskCache disk = DiskCache::from_environment();
  std::vector<char> cubin;
  if (auto hit = disk.load(key)) {
    cubin = std::move(*hit);
  } else {
    NvrtcResult r = nvrtc_compile(source, "attnfuse_merge_states_" + key.substr(0, 16), arch, NvrtcOutput::Cubin);
    std::cerr << fmt::format("attnfuse: compiled merge_states for sm_{} in {:.2f} s ({} registers, {} spill bytes)\n",
                             arch, r.seconds, r.registers, r.spill_bytes);
    cubin = std::move(r.binary);
    disk.store(key, cubin);
  }
  const DriverApi& d = driver();
  CUmodule module = nullptr;
  CUfunction f = nullptr;
  check(d.cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData (merge_states)");
  check(d.cuModuleGetFunction(&f, module, codegen::cuda::kMergeStatesEntryName), "cuModuleGetFunction (merge_states)");
  loaded.emplace(arch, f);
  return f;
}

int dtype_code(DType t) {
  return t == DType::BF16 ? attnfuse_kernels::kMergeBF16
                          : t == DType::F16 ? attnfuse_kernels::kMergeF16 : attnfuse_kernels::kMergeF32;
}

attnfuse_kernels::MergeState device_state(const AttentionState& s) {
  attnfuse_kernels::MergeState m{};
  m.o = s.o.data;
  m.lse = s.lse.data;
  for (int k = 0; k < 3; ++k) m.o_stride[k] = s.o.strides[k], m.lse_stride[k] = s.lse.strides[k];
  m.dtype = dtype_code(s.o.dtype);
  return m;
}

// Chunks of four elements are one aligned load or store when the row start and every outer stride
// keep them so (16 bytes for fp32, 8 for bf16 / fp16).
bool four_aligned(const AttentionState& s) {
  const int64_t bytes = 4 * (s.o.dtype == DType::F32 ? 4 : 2);
  return reinterpret_cast<uintptr_t>(s.o.data) % static_cast<uintptr_t>(bytes) == 0 && s.o.strides[0] % 4 == 0 &&
         s.o.strides[1] % 4 == 0 && s.o.strides[2] % 4 == 0;
}

// One launch: out = merge(states), at most kMergeStatesPerLaunch of them.
void launch_merge(std::span<const AttentionState> states, const AttentionState& out, CUstream stream) {
  const int64_t B = out.o.shape[0], H = out.o.shape[1], N = out.o.shape[2], D = out.o.shape[3];
  attnfuse_kernels::MergeStatesParams p{};
  bool vec = D % 4 == 0 && four_aligned(out);
  for (size_t k = 0; k < states.size(); ++k) {
    p.states[k] = device_state(states[k]);
    vec = vec && four_aligned(states[k]);
  }
  p.out = device_state(out);
  p.num_states = static_cast<int>(states.size());
  p.dim = static_cast<int>(D);
  p.heads = static_cast<int>(H);
  p.len = static_cast<int>(N);
  p.rows = static_cast<int>(B * H * N);
  p.vec = vec ? 1 : 0;
  const unsigned grid[3] = {attnfuse_kernels::merge_states_shape(p, codegen::cuda::kMergeStatesThreads), 1, 1};
  void* params[] = {&p};
  launch_kernel(merge_function(), grid, codegen::cuda::kMergeStatesThreads, 0, stream, params, false,
                "cuLaunchKernel (merge_states)");
}

}  // namespace

void merge_states_cuda(std::span<const AttentionState> states, const AttentionState& out, CUstream stream) {
  validate_merge(states, out);
  const int64_t B = out.o.shape[0], H = out.o.shape[1], N = out.o.shape[2], D = out.o.shape[3];
  const auto n = static_cast<int64_t>(states.size());
  if (n > kMergeStatesMax)
    throw Error(ErrorCode::Unsupported,
                fmt::format("merge_states: {} states; CUDA merges at most {} in one call (merge groups of them "
                            "first)",
                            n, kMergeStatesMax));
  if (D > INT32_MAX || B * H * N > INT32_MAX)
    throw Error(ErrorCode::Unsupported,
                fmt::format("merge_states: O [{}, {}, {}, {}] is too large for one CUDA launch", B, H, N, D));
  if (B * H * N == 0) return;  // no row to merge
  if (n <= kMergeStatesPerLaunch) return launch_merge(states, out, stream);

  // Two levels: each group of kMergeStatesPerLaunch states into an fp32 state of the workspace
  // (contiguous O [B, H, N, D] and LSE [B, H, N]), then the groups' states into out. Merging
  // merges is exact up to the fp32 rounding of the intermediate O.
  const int64_t groups = (n + kMergeStatesPerLaunch - 1) / kMergeStatesPerLaunch;
  const int64_t rows = B * H * N, o_floats = rows * D;
  auto* ws = static_cast<float*>(
      stream_workspace(stream, kMergeStatesWorkspace, static_cast<size_t>(groups * (o_floats + rows)) * sizeof(float)));
  std::vector<AttentionState> partial(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    AttentionState& s = partial[static_cast<size_t>(g)];
    s.o = TensorView::contiguous(ws + g * o_floats, DType::F32, {B, H, N, D});
    s.lse.data = ws + groups * o_floats + g * rows;
    s.lse.shape = {B, H, N};
    s.lse.strides = {H * N, N, 1};
    const int64_t first = g * kMergeStatesPerLaunch;
    launch_merge(states.subspan(static_cast<size_t>(first),
                                static_cast<size_t>(std::min<int64_t>(kMergeStatesPerLaunch, n - first))),
                 s, stream);
  }
  launch_merge(partial, out, stream);
}

}  // namespace attnfuse::runtime
