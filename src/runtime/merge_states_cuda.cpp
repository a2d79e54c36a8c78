// merge_states on CUDA: validation, the module (compiled once per architecture, through the disk
// cache) and the launches of kernels/merge_states.cuh.
#include "runtime/merge_states_cuda.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "attnfuse/error.hpp"
#include "codegen/cuda/emit.hpp"
#include "common/merge_check.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_knobs.hpp"
#include "runtime/stream_workspace.hpp"

namespace attnfuse::runtime {
namespace {

static_assert(kMergeStatesPerLaunch == attnfuse_kernels::kMergeMaxStates);

// The merge kernels of the current device (one per entry: chunk codes 0-3 and the 16-bit one),
// compiled (or read from the disk cache) and loaded once.
CUfunction merge_function(int entry) {
  using Entries = std::array<CUfunction, codegen::cuda::kMergeEntries>;
  static std::mutex mu;
  static std::unordered_map<int, Entries> loaded;  // by arch
  const int arch = device_info().arch();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(arch); it != loaded.end()) return it->second[static_cast<size_t>(entry)];
  if (arch < 80)
    throw Error(ErrorCode::Unsupported,
                fmt::format("the CUDA backend needs sm_80 or newer; {} is sm_{}", device_info().name, arch));
  const CompiledBinary bin = compile_cached(codegen::cuda::emit_merge_states(), "merge_states", arch);
  const DriverApi& d = driver();
  CUmodule module = nullptr;
  check(d.cuModuleLoadData(&module, bin.cubin.data()), "cuModuleLoadData (merge_states)");
  Entries f{};
  for (int e = 0; e < codegen::cuda::kMergeEntries; ++e)
    check(d.cuModuleGetFunction(&f[static_cast<size_t>(e)], module, codegen::cuda::merge_states_entry_name(e).c_str()),
          "cuModuleGetFunction (merge_states)");
  return loaded.emplace(arch, f).first->second[static_cast<size_t>(entry)];
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

// Chunks of `elems` (4, 8 or 16) elements are aligned loads and stores when the row start and
// every outer stride keep them so: 8 or 16 bytes (16-bit elements, 4 or more), 16 bytes (fp32).
bool chunks_aligned(const AttentionState& s, int elems) {
  const int64_t bytes = s.o.dtype == DType::F32 ? 16 : elems == 4 ? 8 : 16;
  const int64_t step = bytes / dtype_size(s.o.dtype);  // elements per aligned unit
  return reinterpret_cast<uintptr_t>(s.o.data) % static_cast<uintptr_t>(bytes) == 0 && s.o.strides[0] % step == 0 &&
         s.o.strides[1] % step == 0 && s.o.strides[2] % step == 0;
}

// ATTNFUSE_CUDA_MERGE_CHUNK=16, 8, 4 or 1 (for A/B runs): the widest chunk the kernel may take,
// taken whenever the rows allow it (no SM rule); 0 when unset.
int forced_chunk() {
  static const int value = [] {
    const char* text = std::getenv("ATTNFUSE_CUDA_MERGE_CHUNK");
    const int v = text ? std::atoi(text) : 0;
    return v == 1 || v == 4 || v == 8 || v == 16 ? v : 0;
  }();
  return value;
}

// One launch: out = merge(states), at most kMergeStatesPerLaunch of them. It launches as a
// programmatic dependent (sm_90+, unless ATTNFUSE_CUDA_PDL=0): the kernel waits for the kernel
// before it in the stream (griddepcontrol.wait) before its first load, so its blocks may be
// scheduled while that kernel's last blocks finish, and the second level of a two-level merge
// while the first level's do.
void launch_merge(std::span<const AttentionState> states, const AttentionState& out, CUstream stream) {
  attnfuse_kernels::MergeStatesParams p = merge_states_params(states, out, device_info().multiprocessors);
  const unsigned grid[3] = {attnfuse_kernels::merge_states_shape(p, codegen::cuda::kMergeStatesThreads), 1, 1};
  void* params[] = {&p};
  const CUfunction f = merge_function(merge_states_entry(p, merge_half_entry_enabled()));
  launch_kernel(f, grid, codegen::cuda::kMergeStatesThreads, 0, stream, params, dependent_launch_enabled(),
                "cuLaunchKernel (merge_states)");
}

}  // namespace

attnfuse_kernels::MergeStatesParams merge_states_params(std::span<const AttentionState> states,
                                                        const AttentionState& out, int multiprocessors) {
  const int64_t B = out.o.shape[0], H = out.o.shape[1], N = out.o.shape[2], D = out.o.shape[3];
  attnfuse_kernels::MergeStatesParams p{};
  for (size_t k = 0; k < states.size(); ++k) p.states[k] = device_state(states[k]);
  p.out = device_state(out);
  p.num_states = static_cast<int>(states.size());
  p.dim = static_cast<int>(D);
  p.heads = static_cast<int>(H);
  p.len = static_cast<int>(N);
  p.rows = static_cast<int>(B * H * N);
  if (forced_chunk() != 0) multiprocessors = 0;
  auto allowed = [&](int elems) {
    bool ok = elems <= (forced_chunk() != 0 ? forced_chunk() : 16) && D % elems == 0 && chunks_aligned(out, elems);
    for (const AttentionState& s : states) ok = ok && chunks_aligned(s, elems);
    return ok;
  };
  // Chunk codes 3, 2, 1 (16, 8, 4 elements), widest first, each launch's blocks from the kernel's
  // launch shape; p keeps the narrowest allowed so far.
  p.vec = 0;
  for (int vec = 3; vec >= 1; --vec) {
    if (!allowed(attnfuse_kernels::merge_chunk_elems(vec))) continue;
    p.vec = vec;
    if (attnfuse_kernels::merge_states_shape(p, codegen::cuda::kMergeStatesThreads) >=
        static_cast<unsigned>(multiprocessors))
      break;
  }
  return p;
}

int merge_states_entry(const attnfuse_kernels::MergeStatesParams& p, bool half) {
  if (!half || p.vec != 3) return p.vec;
  for (int k = 0; k < p.num_states; ++k)
    if (p.states[k].dtype == attnfuse_kernels::kMergeF32) return p.vec;
  return codegen::cuda::kMergeHalfEntry;
}

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
