// Compile, cache and load the generated CUDA kernels (the launch plan: cuda_plan.cpp; the launch:
// cuda_launch.cpp).
#include "runtime/cuda_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <unordered_map>

#include "attnfuse/error.hpp"
#include "attnfuse/version.hpp"
#include "codegen/cuda/emit.hpp"
#include "common/sha256.hpp"
#include "passes/rope_placement.hpp"
#include "passes/split_kv.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/cuda_backend_internal.hpp"
#include "runtime/cuda_knobs.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/kernel_sources.hpp"
#include "runtime/nvrtc.hpp"

namespace attnfuse::runtime {
namespace {

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
  return fmt::format("{}{} {} [{}] [{}] {} D={} tile {}x{}{}{}{}{}{}", score_kind_name(s.score), rope,
                     norm_kind_name(s.norm), masks.empty() ? "full" : masks, mods,
                     dtype_name(s.dtype), s.head_dim, s.tile.block_q, s.tile.block_k,
                     s.tile.wgmma ? (s.tile.producer_warp ? " wgmma producer" : " wgmma") : "",
                     s.tile.min_blocks > 1 ? fmt::format(" x{}/SM", s.tile.min_blocks) : "",
                     s.tile.pack_gqa ? (s.tile.tma_kv ? (s.tile.producer_warp ? " decode tma producer" : " decode tma") : " decode") : "", s.kv_layout == KvLayout::Paged ? " paged" : "",
                     s.tile.skip_row_groups ? " row-group skips" : "");
}

}  // namespace

uint64_t module_key(const KernelSpec& s, int arch) {
  uint64_t k = 0;
  auto put = [&k](uint64_t value, int bits) { k = (k << bits) | (value & ((1ull << bits) - 1)); };
  put(static_cast<uint64_t>(s.score), 2);
  put(s.masks.bits(), 4);
  put(s.modifiers.code(), 6);
  put(static_cast<uint64_t>(s.norm), 1);
  put(static_cast<uint64_t>(s.tile.block_q / 16), 5);  // multiples of 16, <= 496
  put(static_cast<uint64_t>(s.tile.block_k / 16), 5);
  put(static_cast<uint64_t>(s.tile.num_warps), 4);
  put(static_cast<uint64_t>(s.tile.key_warps > 1), 1);  // the narrow decode tile
  put(static_cast<uint64_t>(s.tile.stages), 3);
  put(static_cast<uint64_t>(s.dtype), 2);
  put(static_cast<uint64_t>(s.head_dim), 9);            // <= 256
  put(static_cast<uint64_t>(s.tile.wgmma), 1);          // the Hopper form
  put(static_cast<uint64_t>(s.tile.min_blocks), 2);     // 1-3 resident blocks per SM
  put(static_cast<uint64_t>(arch), 8);
  put(static_cast<uint64_t>(s.rope_mode), 2);         // the module of a resolved mode
  put(static_cast<uint64_t>(s.scalars.rope.style), 1);  // neox/gptj pairing is compiled in
  put(static_cast<uint64_t>(s.kv_layout), 1);           // paged K/V addressing
  put(static_cast<uint64_t>(s.tile.pack_gqa), 1);       // the decode variant
  put(static_cast<uint64_t>(s.tile.tma_kv), 1);         // ... with K/V by TMA
  put(static_cast<uint64_t>(s.tile.producer_warp), 1);  // ... issued by a producer warp
  put(static_cast<uint64_t>(s.tile.skip_row_groups), 1);  // block-sparse row groups skip
  put(static_cast<uint64_t>(codegen::cuda::rope_span_code(s)), 3);  // the fixed-unit rotation's pairs
  return k;  // 64 bits
}

std::string source_cache_key(const std::string& source, int arch) {
  std::string material = source;
  for (const auto& h : kernel_sources()) material += h.source;
  for (const auto& o : nvrtc_options(arch, NvrtcOutput::Cubin)) material += "\n" + o;
  material += "\nnvrtc " + nvrtc_version() + "\nattnfuse " ATTNFUSE_VERSION;
  return sha256_hex(material);
}

std::string cache_key(const KernelSpec& spec, int arch) {
  return source_cache_key(codegen::cuda::emit_forward(spec), arch);
}

CompiledBinary compile_cached(const std::string& source, const std::string& what, int arch) {
  const std::string key = source_cache_key(source, arch);
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
  std::cerr << fmt::format("attnfuse: compiled {} for sm_{} in {:.2f} s ({} registers, {} spill bytes)\n", what,
                           arch, r.seconds, r.registers, r.spill_bytes);
  disk.store(key, out.cubin);
  return out;
}

CompiledBinary compile_cuda(const KernelSpec& spec, int arch) {
  return compile_cached(codegen::cuda::emit_forward(spec), describe(spec), arch);
}

int blocks_per_sm(const LoadedModule& m) {
  const DeviceInfo& dev = device_info();
  int n = std::max(1, std::min(dev.max_blocks_per_sm, dev.max_threads_per_sm / std::max(m.threads, 32)));
  if (dev.max_shared_per_sm > 0) n = std::min(n, dev.max_shared_per_sm / (m.smem + 1024));
  if (dev.registers_per_sm > 0 && m.registers > 0) {
    const int regs_per_warp = (m.registers * 32 + 255) / 256 * 256;  // allocation unit: 256 per warp
    n = std::min(n, dev.registers_per_sm / (regs_per_warp * (m.threads / 32)));
  }
  return std::max(n, 1);
}

CudaKernel::CudaKernel(const KernelSpec& spec) : spec_(spec) {
  for (auto& v : variants_) v.store(nullptr);
  for (auto& v : row_group_variants_) v.store(nullptr);
  for (auto& v : rows64_variants_) v.store(nullptr);
  prerotate_wgmma_ = spec_.score != ScoreKind::ScaledDot && resolved(RopeMode::Prerotate, 0, KvLayout::Contiguous).tile.wgmma;
}

RopeMode CudaKernel::default_mode() const {
  if (spec_.score == ScoreKind::ScaledDot) return spec_.rope_mode;
  return spec_.rope_mode == RopeMode::Auto ? RopeMode::Fused : spec_.rope_mode;
}

bool CudaKernel::decode_tma(RopeMode mode, KvLayout kv, PageCopy pages) const {
  // Hopper: K/V by TMA where the tiles' columns are whole 64-dim blocks and no pair is pruned
  // from the copies (rope_window's tiles load only live pairs' chunks); packed documents and
  // fused RoPE included (the rotation runs in place on the landed, swizzled stage: 1.06-1.12x the
  // cp.async tile on an H100, bench/results/2026-12-06-h100-session43/), and for paged caches only
  // where the page size is a multiple of 8 rows: the cp.async fallback inside a TMA module reads
  // pages slower than the padded module does (70B B1 / 32k 0.0568 against 0.0508 ms,
  // bench/results/2026-12-02-h200-session13/call4/).
  // sm_90 only: the copy-engine and mbarrier primitives are compiled for sm_90a alone
  // (wgmma.cuh, ATTNFUSE_WGMMA), so on newer GPUs they would be empty and the tile never filled.
  return device_info().arch() == 90 && decode_tma_enabled() &&
         (kv == KvLayout::Contiguous || pages != PageCopy::CpAsync) &&
         spec_.score != ScoreKind::RopeWindow &&
         spec_.head_dim % 64 == 0 && spec_.head_dim <= 128 && (spec_.dtype == DType::BF16 || spec_.dtype == DType::F16);
}

KernelSpec CudaKernel::resolved(RopeMode mode, int64_t decode_rows, KvLayout kv, bool split, PageCopy pages) const {
  KernelSpec r = spec_;
  r.rope_mode = mode;
  r.kv_layout = kv;
  if (decode_rows > 0) {
    const bool tma = decode_tma(mode, kv, pages);
    r.tile = decode_tile_override().value_or(
        passes::cuda_decode_tile(
            {.head_dim = spec_.head_dim,
             .rows = decode_rows,
             .split = split,
             .wide_keys = passes::cuda_decode_wide_keys(
                 tma, kv == KvLayout::Paged,
                 pages == PageCopy::TmaLargeBoxes || pages == PageCopy::TmaSmallBoxesProduced),
             .paged = kv == KvLayout::Paged,
             .rotates = codegen::cuda::rotates_in_kernel(spec_.score, mode)}));
    if (spec_.score == ScoreKind::RopeWindow) r.tile.stages = 2;  // its pair plan runs one tile ahead
    r.tile.tma_kv = tma;
    r.tile.producer_warp =
        tma && (decode_producer_enabled() || (kv == KvLayout::Paged && pages == PageCopy::TmaSmallBoxesProduced));
  }
  else if (spec_.score != ScoreKind::ScaledDot && !tile_override()) r.tile = passes::cuda_tile_for_rope_mode(spec_, mode);
  if (decode_rows <= 0 && !tile_override() && wgmma_enabled()) r.tile = passes::cuda_arch_tile(r, device_info().arch());
  if (decode_rows <= 0 && r.tile.wgmma && !wgmma_producer_enabled()) r.tile.producer_warp = false;
  if (const auto& w = wgmma_tile_override(); w && r.tile.wgmma) {
    r.tile.block_k = w->block_k;
    r.tile.min_blocks = w->min_blocks;
    if (w->stages) r.tile.stages = w->stages;
    if (w->block_q && r.head_dim == 64 && !r.masks.has(MaskKind::BlockSparse)) {
      r.tile.block_q = w->block_q;
      r.tile.num_warps = w->block_q / 16;
    }
  }
  // The tile overrides are taken as given (a sweep must time what it names).
  const bool overridden = decode_rows > 0 ? decode_tile_override().has_value() : tile_override().has_value();
  if (!overridden) r = fit_shared_memory(r, device_info().max_shared_per_block);
  return r;
}

KernelSpec fit_shared_memory(KernelSpec spec, int max_bytes) {
  TileConfig& t = spec.tile;
  if (t.wgmma) return spec;
  while (codegen::cuda::shared_memory_bytes(spec) > max_bytes) {
    if (t.stages > 2) {
      --t.stages;
    } else if (t.block_k > 16 * t.key_warps) {  // each key-split warp keeps 16 keys at least
      t.block_k /= 2;
    } else if (t.key_warps > 1) {  // the same rows over half the warps, each with 16 keys
      t.key_warps /= 2;
      t.num_warps /= 2;
      t.block_k /= 2;
    } else if (t.num_warps > 1 && t.block_q > 16) {  // half the rows, the same rows per warp
      t.block_q /= 2;
      t.num_warps /= 2;
    } else {
      break;
    }
  }
  return spec;
}

namespace {

// The module in `slot`: compiled from make_spec() and stored there on first use. Thread-safe:
// callers that race both get load_module's one cached module.
template <class MakeSpec>
const LoadedModule& load_once(std::atomic<const LoadedModule*>& slot, MakeSpec&& make_spec) {
  if (const LoadedModule* m = slot.load(std::memory_order_acquire)) return *m;
  const LoadedModule& m = load_module(make_spec());
  slot.store(&m, std::memory_order_release);
  return m;
}

}  // namespace

const LoadedModule& CudaKernel::module(RopeMode mode, int64_t decode_rows, KvLayout kv, bool split,
                                       PageCopy pages) const {
  // prefill, narrow or wide decode tile, narrow decode tile of a split call
  const int shape = decode_rows <= 0 ? 0 : (decode_rows > 16 ? 2 : (split ? 3 : 1));
  const int kv_slot = kv == KvLayout::Contiguous ? 0 : 1 + static_cast<int>(pages);
  return load_once(variants_[static_cast<int>(mode) + 3 * shape + 12 * kv_slot], [&] {
    return resolved(mode, shape == 2 ? 64 : (shape == 0 ? 0 : 16), kv, shape == 3, pages);
  });
}

const LoadedModule& CudaKernel::row_group_module(RopeMode mode) const {
  return load_once(row_group_variants_[static_cast<int>(mode)], [&] {
    KernelSpec r = resolved(mode, 0, KvLayout::Contiguous);
    r.tile.skip_row_groups = r.tile.wgmma && r.masks.has(MaskKind::BlockSparse);
    return r;
  });
}

const LoadedModule& CudaKernel::rows64_module(RopeMode mode) const {
  return load_once(rows64_variants_[static_cast<int>(mode)], [&] {
    KernelSpec r = resolved(mode, 0, KvLayout::Contiguous);
    r.tile = passes::cuda_wgmma_64_rows(r.tile);
    return r;
  });
}

RopeMode CudaKernel::rope_mode_for(const AttentionArgs& args, const ScalarArgs& scalars, bool decode) const {
  if (spec_.score == ScoreKind::ScaledDot) return spec_.rope_mode;
  // Documents and paged caches rotate in the kernel: positions restart per document / follow
  // each sequence, which the rotation kernel's flat rows do not know.
  if (args.paged || args.cu_seqlens_k) {
    if (spec_.rope_mode == RopeMode::Prerotate)
      throw Error(ErrorCode::Unsupported, "rope_mode=prerotate is not supported with paged KV caches or "
                                          "document masks on CUDA; use fused or auto");
    return RopeMode::Fused;
  }
  if (spec_.rope_mode != RopeMode::Auto) return spec_.rope_mode;
  passes::RopeCallShape shape{args.q.shape[0], args.q.shape[1], args.k.shape[1], args.q.shape[2],
                              args.k.shape[2], spec_.head_dim, args.resolved_q_offset(),
                              spec_.masks.has(MaskKind::Causal),
                              spec_.masks.has(MaskKind::SlidingWindow) ? scalars.window : 0, decode};
  // On Hopper the prerotated prefill runs the wgmma form while the fused rotation stays on
  // mma.sync: the model of that pairing (the decode tiles are mma.sync in both placements).
  return passes::choose_rope_mode(shape, passes::rope_cost_model_h200(!decode && prerotate_wgmma_));
}

CallShape call_shape(const AttentionArgs& a) {
  CallShape c{a.q.shape[0], a.q.shape[1], a.q.shape[2], a.k.shape[1], a.k.shape[2], 1, 0};
  if (a.paged) {
    const PagedKV& pk = *a.paged;
    c.Hkv = pk.heads();
    c.mean_nk = c.B > 0 ? static_cast<int64_t>(pk.page_indices.size()) * pk.page_size() / c.B : 0;
  }
  if (a.cu_seqlens_k) {
    c.docs = std::max<int64_t>(a.cu_seqlens_k->length - 1, 1);
    c.mean_nk = c.mean_nk / c.docs;
  }
  c.queries = queries_per_sequence(c.Nq, c.docs);
  return c;
}

const LoadedModule& load_module(const KernelSpec& spec) {
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::unique_ptr<LoadedModule>> loaded;
  const DeviceInfo& dev = device_info();
  // The device's own arch: sm_90 builds as sm_90a (wgmma, TMA), whose cubins load on Hopper only.
  const int arch = dev.arch();
  const uint64_t key = module_key(spec, arch);
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
  check(d.cuModuleGetFunction(&m->combine, m->module, codegen::cuda::kCombineEntryName),
        "cuModuleGetFunction (split-KV combine)");
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
  const uint64_t key = module_key(spec, dev.arch());
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = kernels.find(key); it != kernels.end()) return *it->second;
  auto kernel = std::make_unique<CudaKernel>(spec);
  kernel->module(kernel->default_mode(), 0, KvLayout::Contiguous);  // compile now: errors surface at the first lookup
  const CudaKernel& ref = *kernel;
  kernels.emplace(key, std::move(kernel));
  return ref;
}

void run_cuda(const KernelSpec& spec, const AttentionArgs& args, CUstream stream, bool sync,
              const LaunchTuning& tuning) {
  const CudaKernel& k = cuda_kernel(spec);
  k.launch(args, spec.scalars, stream, tuning);
  if (sync) check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

}  // namespace attnfuse::runtime
