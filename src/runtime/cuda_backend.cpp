// Compile, cache, load and launch the generated CUDA kernels.
#include "runtime/cuda_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <unordered_map>

#include "attnfuse/error.hpp"
#include "attnfuse/version.hpp"
#include "codegen/cuda/emit.hpp"
#include "codegen/cuda/kernels/params.cuh"
#include "common/sha256.hpp"
#include "passes/rope_placement.hpp"
#include "passes/tile_sizes.hpp"
#include "reference/reference.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/rope_args.hpp"

namespace attnfuse::runtime {
namespace {

// The in-memory key: exactly the structure the generated source depends on (never the scalars,
// so changing a window size or a slope does not recompile), packed into one integer so a warm
// lookup costs no allocation.
uint64_t structural_key(const KernelSpec& s, int arch) {
  uint64_t k = 0;
  auto put = [&k](uint64_t value, int bits) { k = (k << bits) | (value & ((1ull << bits) - 1)); };
  put(static_cast<uint64_t>(s.score), 2);
  put(s.masks.bits(), 4);
  put(s.modifiers.code(), 6);
  put(static_cast<uint64_t>(s.norm), 1);
  put(static_cast<uint64_t>(s.tile.block_q), 9);
  put(static_cast<uint64_t>(s.tile.block_k), 9);
  put(static_cast<uint64_t>(s.tile.num_warps), 5);
  put(static_cast<uint64_t>(s.tile.stages), 3);
  put(static_cast<uint64_t>(s.dtype), 2);
  put(static_cast<uint64_t>(s.head_dim), 10);
  put(static_cast<uint64_t>(arch), 8);
  put(static_cast<uint64_t>(s.rope_mode), 2);         // the module of a resolved mode
  put(static_cast<uint64_t>(s.scalars.rope.style), 1);  // neox/gptj pairing is compiled in
  return k;  // 62 bits
}

std::string describe(const KernelSpec& s) {
  std::string masks;
  for (MaskKind k : {MaskKind::Causal, MaskKind::SlidingWindow, MaskKind::BlockSparse, MaskKind::Document})
    if (s.masks.has(k)) masks += std::string(masks.empty() ? "" : "+") + mask_kind_name(k);
  std::string mods;
  for (int i = 0; i < s.modifiers.size(); ++i)
    mods += std::string(mods.empty() ? "" : "+") + modifier_kind_name(s.modifiers[i]);
  const std::string rope = s.score == ScoreKind::ScaledDot
                               ? ""
                               : fmt::format(" ({} {})", rope_style_name(s.scalars.rope.style),
                                             rope_mode_name(s.rope_mode));
  return fmt::format("{}{} {} [{}] [{}] {} D={} tile {}x{}", score_kind_name(s.score), rope,
                     norm_kind_name(s.norm), masks.empty() ? "full" : masks, mods,
                     dtype_name(s.dtype), s.head_dim, s.tile.block_q, s.tile.block_k);
}

}  // namespace

std::string cache_key(const KernelSpec& spec, int arch) {
  std::string material = codegen::cuda::emit_forward(spec);
  for (const auto& h : codegen::cuda::kernel_headers()) material += h.source;
  for (const auto& o : nvrtc_options(arch, NvrtcOutput::Cubin)) material += "\n" + o;
  material += "\nnvrtc " + nvrtc_version() + "\nattnfuse " ATTNFUSE_VERSION;
  return sha256_hex(material);
}

CompiledBinary compile_cuda(const KernelSpec& spec, int arch) {
  const std::string source = codegen::cuda::emit_forward(spec);
  const std::string key = cache_key(spec, arch);
  const DiskCache disk = DiskCache::from_environment();
  CompiledBinary out;
  if (auto hit = disk.load(key)) {
    out.cubin = std::move(*hit);
    out.from_disk = true;
    return out;
  }
  NvrtcResult r = nvrtc_compile(source, "attnfuse_" + key.substr(0, 16), arch, NvrtcOutput::Cubin);
  out.cubin = std::move(r.binary);
  out.registers = r.registers;
  out.spill_bytes = r.spill_bytes;
  out.compile_seconds = r.seconds;
  std::cerr << fmt::format("attnfuse: compiled {} for sm_{} in {:.2f} s ({} registers, {} spill bytes)\n",
                           describe(spec), arch, r.seconds, r.registers, r.spill_bytes);
  disk.store(key, out.cubin);
  return out;
}

namespace {

// ATTNFUSE_CUDA_TILE=block_q,block_k,num_warps replaces the tile pass's choice: a tuning knob for
// sweeps (bench/), read once per process.
const std::optional<TileConfig>& tile_override() {
  static const std::optional<TileConfig> t = []() -> std::optional<TileConfig> {
    const char* env = std::getenv("ATTNFUSE_CUDA_TILE");
    if (!env || !*env) return std::nullopt;
    TileConfig c;
    c.stages = 2;
    if (std::sscanf(env, "%d,%d,%d", &c.block_q, &c.block_k, &c.num_warps) != 3 || c.num_warps <= 0 ||
        c.block_q % (16 * c.num_warps) != 0 || c.block_k % 16 != 0)
      throw Error(ErrorCode::Unsupported,
                  fmt::format("ATTNFUSE_CUDA_TILE='{}' is not block_q,block_k,num_warps with block_q a "
                              "multiple of 16*num_warps and block_k a multiple of 16", env));
    return c;
  }();
  return t;
}

// Prerotate mode's rotated copies of Q and K: one grow-only device buffer per stream (launches
// on one stream are ordered, so reuse is safe; two streams never share one). Growing syncs the
// stream first, since its earlier kernels may still read the old buffer.
void* stream_workspace(CUstream stream, size_t bytes) {
  struct Buffer {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
  };
  static std::mutex mu;
  static std::unordered_map<CUstream, Buffer> buffers;
  std::lock_guard<std::mutex> lock(mu);
  Buffer& b = buffers[stream];
  if (b.bytes < bytes) {
    const DriverApi& d = driver();
    if (b.ptr) {
      check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
      check(d.cuMemFree(b.ptr), "cuMemFree");
      b = Buffer{};
    }
    check(d.cuMemAlloc(&b.ptr, bytes), "cuMemAlloc (rope prerotate workspace)");
    b.bytes = bytes;
  }
  return reinterpret_cast<void*>(b.ptr);
}

}  // namespace

CudaKernel::CudaKernel(const KernelSpec& spec) : spec_(spec) {
  for (auto& v : variants_) v.store(nullptr);
}

RopeMode CudaKernel::default_mode() const {
  if (spec_.score == ScoreKind::ScaledDot) return spec_.rope_mode;
  return spec_.rope_mode == RopeMode::Auto ? RopeMode::Fused : spec_.rope_mode;
}

const LoadedModule& CudaKernel::module(RopeMode mode) const {
  auto& slot = variants_[static_cast<int>(mode)];
  if (const LoadedModule* m = slot.load(std::memory_order_acquire)) return *m;
  KernelSpec resolved = spec_;
  resolved.rope_mode = mode;
  if (spec_.score != ScoreKind::ScaledDot && !tile_override())
    resolved.tile = passes::cuda_tile_for_rope_mode(spec_, mode);
  const LoadedModule& m = load_module(resolved);
  slot.store(&m, std::memory_order_release);
  return m;
}

RopeMode CudaKernel::rope_mode_for(const AttentionArgs& args, const ScalarArgs& scalars) const {
  if (spec_.score == ScoreKind::ScaledDot) return spec_.rope_mode;
  if (spec_.rope_mode != RopeMode::Auto) return spec_.rope_mode;
  passes::RopeCallShape shape{args.q.shape[0], args.q.shape[1], args.k.shape[1], args.q.shape[2],
                              args.k.shape[2], spec_.head_dim, args.resolved_q_offset(),
                              spec_.masks.has(MaskKind::Causal),
                              spec_.masks.has(MaskKind::SlidingWindow) ? scalars.window : 0};
  return passes::choose_rope_mode(shape, passes::rope_cost_model_h200());
}

void CudaKernel::launch(const AttentionArgs& args, const ScalarArgs& scalars, CUstream stream) const {
  if (args.paged)  // the CUDA kernels read contiguous K/V only (the paged path is CPU-only for now)
    throw Error(ErrorCode::Unsupported, "the CUDA backend does not support paged KV caches yet; run "
                                        "paged calls on the CPU (run_cpu) or pass contiguous K/V");
  validate(spec_, args);
  if (args.q.dtype != spec_.dtype)
    throw Error(ErrorCode::DType, fmt::format("kernel compiled for {} but Q is {}", dtype_name(spec_.dtype),
                                              dtype_name(args.q.dtype)));
  if (args.q.shape[3] != spec_.head_dim || args.v.shape[3] != spec_.head_dim)
    throw Error(ErrorCode::Shape, fmt::format("kernel compiled for head dim {} but Q has {} and V has {}",
                                              spec_.head_dim, args.q.shape[3], args.v.shape[3]));
  const int64_t B = args.q.shape[0], Hq = args.q.shape[1], Nq = args.q.shape[2];
  const int64_t Hkv = args.k.shape[1], Nk = args.k.shape[2];
  if (B == 0 || Hq == 0 || Nq == 0) return;
  if (Nq > INT32_MAX || Nk > INT32_MAX || Hq > 65535 || B > 65535)
    throw Error(ErrorCode::Shape, "the CUDA backend takes up to 2^31-1 rows and 65535 heads/batches");
  // Tiles move with 16-byte cp.async copies: every row of Q, K and V must start 16-byte aligned.
  for (const auto* t : {&args.q, &args.k, &args.v}) {
    const char* name = t == &args.q ? "Q" : (t == &args.k ? "K" : "V");
    if (reinterpret_cast<uintptr_t>(t->data) % 16 != 0 || t->strides[0] % 8 || t->strides[1] % 8 || t->strides[2] % 8)
      throw Error(ErrorCode::Shape,
                  fmt::format("{} must be 16-byte aligned with batch/head/row strides that are multiples of 8 "
                              "elements on CUDA (strides {}, {}, {})",
                              name, t->strides[0], t->strides[1], t->strides[2]));
  }
  if (args.out.strides[2] % 2 || reinterpret_cast<uintptr_t>(args.out.data) % 4 != 0)
    throw Error(ErrorCode::Shape, "O must be 4-byte aligned with an even row stride on CUDA");
  // The kernel computes positions in 32 bits (one register per cell): every query position
  // i + q_offset and every key position must fit.
  const int64_t q_offset = args.resolved_q_offset();
  if (q_offset + Nq > INT32_MAX || q_offset < -int64_t{INT32_MAX} + Nk)
    throw Error(ErrorCode::Shape, fmt::format("q_offset {} puts query positions outside the 32-bit range "
                                              "the CUDA kernel uses", q_offset));
  if (spec_.modifiers.has(ModifierKind::Alibi) && scalars.alibi == AlibiSlopes::Custom)
    throw Error(ErrorCode::Unsupported, "custom ALiBi slopes on CUDA are not supported yet; use slopes=standard");

  attnfuse_kernels::FwdParams p{};
  p.q = args.q.data;
  p.k = args.k.data;
  p.v = args.v.data;
  p.o = args.out.data;
  p.lse = args.lse ? args.lse->data : nullptr;
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = args.q.strides[i];
    p.k_stride[i] = args.k.strides[i];
    p.v_stride[i] = args.v.strides[i];
    p.o_stride[i] = args.out.strides[i];
  }
  if (args.lse) {
    p.lse_stride[0] = args.lse->strides[0];
    p.lse_stride[1] = args.lse->strides[1];
  }
  if (spec_.needs_bias()) {
    const TensorView& bias = *args.bias;
    p.bias = static_cast<const float*>(bias.data);
    p.bias_stride[0] = bias.shape[0] == 1 ? 0 : bias.strides[0];
    p.bias_stride[1] = bias.shape[1] == 1 ? 0 : bias.strides[1];
    p.bias_stride[2] = bias.strides[2];
  }
  p.batch = static_cast<int>(B);
  p.heads_q = static_cast<int>(Hq);
  p.heads_kv = static_cast<int>(Hkv);
  p.len_q = static_cast<int>(Nq);
  p.len_k = static_cast<int>(Nk);
  p.head_ratio = static_cast<int>(Hq / Hkv);
  p.q_offset = q_offset;
  const double scale = scalars.scale ? *scalars.scale : 1.0 / std::sqrt(double(spec_.head_dim));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  p.softcap = static_cast<float>(scalars.softcap);
  p.inv_softcap = scalars.softcap > 0 ? static_cast<float>(1.0 / scalars.softcap) : 0.f;
  p.window = static_cast<int>(std::min<int64_t>(scalars.window, INT32_MAX));

  const bool rope = spec_.score != ScoreKind::ScaledDot;
  RopeMode mode = spec_.rope_mode;
  if (rope) {
    p.rope = rope_args(scalars.rope, spec_.score == ScoreKind::RopeWindow, spec_.head_dim,
                       reference::rope_seq_len(args));
    mode = rope_mode_for(args, scalars);
  }
  const LoadedModule& m = module(mode);
  const DriverApi& d = driver();

  if (rope && mode == RopeMode::Prerotate) {
    // Rotate Q and K once into contiguous copies, then run the plain kernel on them.
    const int64_t D = spec_.head_dim;
    const int64_t q_rows = B * Hq * Nq, k_rows = B * Hkv * Nk;
    const size_t q_bytes = static_cast<size_t>(q_rows * D * 2);
    char* ws = static_cast<char*>(stream_workspace(stream, q_bytes + static_cast<size_t>(k_rows * D * 2)));
    attnfuse_kernels::RotateParams r{};
    r.src[0] = args.q.data;
    r.src[1] = args.k.data;
    r.dst[0] = ws;
    r.dst[1] = ws + q_bytes;
    for (int i = 0; i < 3; ++i) {
      r.src_stride[0][i] = args.q.strides[i];
      r.src_stride[1][i] = args.k.strides[i];
    }
    r.heads[0] = static_cast<int>(Hq);
    r.heads[1] = static_cast<int>(Hkv);
    r.len[0] = static_cast<int>(Nq);
    r.len[1] = static_cast<int>(Nk);
    r.rows[0] = q_rows;
    r.rows[1] = k_rows;
    r.pos0[0] = q_offset;
    r.pos0[1] = 0;
    r.rope = p.rope;
    const int64_t units = (q_rows + k_rows) * D / 2;
    const int64_t max_blocks = int64_t{device_info().multiprocessors} * 16;
    const auto blocks = static_cast<unsigned>(
        std::clamp<int64_t>((units + codegen::cuda::kRotateThreads - 1) / codegen::cuda::kRotateThreads, 1, max_blocks));
    void* rparams[] = {&r};
    check(d.cuLaunchKernel(m.rotate, blocks, 1, 1, codegen::cuda::kRotateThreads, 1, 1, 0, stream, rparams, nullptr),
          "cuLaunchKernel (rope rotation)");
    p.q = r.dst[0];
    p.k = r.dst[1];
    p.q_stride[0] = Hq * Nq * D, p.q_stride[1] = Nq * D, p.q_stride[2] = D;
    p.k_stride[0] = Hkv * Nk * D, p.k_stride[1] = Nk * D, p.k_stride[2] = D;
  }

  void* params[] = {&p};
  const unsigned grid_x = static_cast<unsigned>((Nq + m.spec.tile.block_q - 1) / m.spec.tile.block_q);
  check(d.cuLaunchKernel(m.fwd, grid_x, static_cast<unsigned>(Hq), static_cast<unsigned>(B),
                         static_cast<unsigned>(m.threads), 1, 1, static_cast<unsigned>(m.smem), stream,
                         params, nullptr),
        "cuLaunchKernel");
}

const LoadedModule& load_module(const KernelSpec& spec) {
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::unique_ptr<LoadedModule>> loaded;
  const DeviceInfo& dev = device_info();
  const int arch = dev.arch() >= 90 ? 90 : dev.arch();
  const uint64_t key = structural_key(spec, arch);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) return *it->second;
  if (dev.arch() < 80)
    throw Error(ErrorCode::Unsupported,
                fmt::format("the CUDA backend needs sm_80 or newer; {} is sm_{}", dev.name, dev.arch()));
  const int smem = codegen::cuda::shared_memory_bytes(spec);
  if (smem > dev.max_shared_per_block)
    throw Error(ErrorCode::Unsupported, fmt::format("kernel needs {} B of shared memory; {} offers {}",
                                                    smem, dev.name, dev.max_shared_per_block));
  const CompiledBinary bin = compile_cuda(spec, arch);
  const DriverApi& d = driver();
  auto m = std::make_unique<LoadedModule>();
  m->spec = spec;
  m->threads = codegen::cuda::threads_per_block(spec);
  m->smem = smem;
  check(d.cuModuleLoadData(&m->module, bin.cubin.data()), "cuModuleLoadData");
  check(d.cuModuleGetFunction(&m->fwd, m->module, codegen::cuda::kEntryName), "cuModuleGetFunction");
  if (spec.score != ScoreKind::ScaledDot && spec.rope_mode == RopeMode::Prerotate)
    check(d.cuModuleGetFunction(&m->rotate, m->module, codegen::cuda::kRotateEntryName),
          "cuModuleGetFunction (rope rotation)");
  check(d.cuFuncSetAttribute(m->fwd, kFuncAttrMaxDynamicSharedBytes, smem), "cuFuncSetAttribute");
  d.cuFuncGetAttribute(&m->registers, kFuncAttrNumRegs, m->fwd);
  const LoadedModule& ref = *m;
  loaded.emplace(key, std::move(m));
  return ref;
}

const CudaKernel& cuda_kernel(const KernelSpec& requested) {
  KernelSpec tuned;
  const KernelSpec* chosen = &requested;
  if (const auto& t = tile_override()) {
    tuned = requested;
    tuned.tile = *t;
    chosen = &tuned;
  }
  const KernelSpec& spec = *chosen;
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::unique_ptr<CudaKernel>> kernels;
  const DeviceInfo& dev = device_info();
  const uint64_t key = structural_key(spec, dev.arch() >= 90 ? 90 : dev.arch());
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = kernels.find(key); it != kernels.end()) return *it->second;
  auto kernel = std::make_unique<CudaKernel>(spec);
  kernel->module(kernel->default_mode());  // compile now: errors surface at the first lookup
  const CudaKernel& ref = *kernel;
  kernels.emplace(key, std::move(kernel));
  return ref;
}

void run_cuda(const KernelSpec& spec, const AttentionArgs& args, CUstream stream, bool sync) {
  const CudaKernel& k = cuda_kernel(spec);
  k.launch(args, spec.scalars, stream);
  if (sync) check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

}  // namespace attnfuse::runtime
