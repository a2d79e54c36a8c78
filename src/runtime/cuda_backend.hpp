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

struct DeviceSparseWork;  // runtime/device_block_mask.hpp

// A cubin built for one architecture (works without a GPU).
struct CompiledBinary {
  std::vector<char> cubin;
  int registers = -1;
  int spill_bytes = -1;
  bool from_disk = false;
  double compile_seconds = 0.0;
};

// The disk-cache key of a translation unit on arch: SHA-256 over it, the embedded kernel headers,
// the NVRTC options and version, and the attnfuse version (DESIGN §5).
std::string source_cache_key(const std::string& source, int arch);
// The disk-cache key of spec's generated source on arch.
std::string cache_key(const KernelSpec& spec, int arch);

// The in-memory module key of spec on arch: exactly the structure the generated source depends
// on (never the scalars, so changing a window size, a slope or a partial rotary span does not
// recompile), packed into one integer so that a warm lookup costs no allocation. Two specs with
// one key must emit one source (tests/runtime/cuda_backend_test.cpp checks it over every
// combinator's parameters).
uint64_t module_key(const KernelSpec& spec, int arch);

// Compiles a translation unit for arch (sm_80: 80, sm_90: 90) through the disk cache; a cold
// compile logs one line naming `what`.
CompiledBinary compile_cached(const std::string& source, const std::string& what, int arch);
// Emits and compiles spec for arch, through the disk cache.
CompiledBinary compile_cuda(const KernelSpec& spec, int arch);

// One compiled and loaded module: the forward kernel of a spec whose rope_mode is resolved
// (Fused or Prerotate for rope programs), plus the rotation kernel in prerotate mode.
struct LoadedModule {
  KernelSpec spec;
  CUmodule module = nullptr;
  CUfunction fwd = nullptr;
  CUfunction rotate = nullptr;   // prerotate mode only
  CUfunction combine = nullptr;  // split-KV merge
  int registers = 0;
  int threads = 0;
  int smem = 0;
};

// The module of a resolved spec on the current device, compiled on first use (thread-safe).
const LoadedModule& load_module(const KernelSpec& spec);

// The spec with a tile that fits `max_bytes` of shared memory per block (the device's opt-in
// limit). The tile pass sizes its tiles for Hopper's 227 KB: the mma.sync prefill tile at D = 128
// takes 174 KB, over the A100's 163 KB, and decode tiles reach 198 KB. Where a tile does not fit,
// it loses pipeline stages, then keys per tile, then key-split warps, then query rows (with
// their warps), in that order, instead of the call being refused. Unchanged where it fits, for
// the wgmma form (Hopper only, sized for it), and where nothing is left to shrink (load_module
// then names the shortfall).
KernelSpec fit_shared_memory(KernelSpec spec, int max_bytes);

// Per-call overrides of the launch plan, for tests and benchmarks (defaults: the runtime decides).
struct LaunchTuning {
  // Split-KV factor: 0 = chosen from the SM count and the lengths (passes/split_kv.hpp), 1 = no
  // split, n = the key tiles of every query tile cut into n parts merged by the combine kernel.
  int num_splits = 0;
  // Auto: the decode variant (GQA-packed 16- or 64-row tiles) when queries_per_sequence <=
  // kDecodeMaxQueries, else the prefill variant.
  enum class Variant { Auto, Prefill, Decode } variant = Variant::Auto;
  // Where a split decode call merges its splits: false = in the decode kernel (the last block of
  // each tile merges), true = in the separate combine kernel (as prefill splits always do).
  bool combine_kernel = false;
  // Programmatic dependent launch (sm_90+; ATTNFUSE_CUDA_PDL=0 turns it off everywhere): the
  // call's kernels may be scheduled while the kernel before each in the stream finishes, and wait
  // for it (griddepcontrol.wait) before touching memory. Auto: decode calls whose blocks stream at
  // most kDependentLaunchMaxKeys keys (LaunchPlan::dependent_launch); On / Off: every call / none.
  enum class DependentLaunch { Auto, On, Off } dependent_launch = DependentLaunch::Auto;
};

// How a paged call's decode tiles copy its pages (contiguous caches ignore it). On Hopper by TMA,
// in boxes of gcd(page_size, block_k) rows: page sizes that are multiples of 8 give boxes of 8-32
// rows, multiples of 64 boxes of 64 rows or more, which read Hopper's 128-key tile
// (passes::cuda_decode_wide_keys). cp.async into padded tiles: other page sizes (and unsplit
// calls under ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=0; CudaKernel::plan). TmaSmallBoxesProduced: the
// boxes of 8-32 rows issued by a producer warp into 128-key tiles, for split calls whose parts are
// short (kPagedProducerMaxKeys).
enum class PageCopy { TmaSmallBoxes, CpAsync, TmaLargeBoxes, TmaSmallBoxesProduced };

// Paged split calls whose pages come in boxes of 8-32 rows (page sizes that are multiples of 8
// but not of 64) and whose parts stream at most this many keys take the decode producer warp and
// 128-key tiles (PageCopy::TmaSmallBoxesProduced): a part's 16-32 boxes per tile are then issued
// off the computing warps. On the H200 (bench/results/2026-12-03-h200-session19/call3/, by knobs)
// Llama-3-70B B1 / 32k at pages of 16 (parts of 2048 keys) went 0.0467 -> 0.0439 ms, while
// Llama-3-8B B8 / 32k (parts of ~16k keys) went 0.2587 -> 0.2728, so long parts keep the
// computing warps' 64-key tiles. Measured as this rule against the tree without it, in one
// process (bench/results/2026-12-03-h200-session22/call1/): 70B B1 / 32k at pages of 16 0.0446
// -> 0.0432 ms (contiguous 0.0387), every other paged cell 0.998-1.002x.
inline constexpr int64_t kPagedProducerMaxKeys = 4096;

// Queries per sequence up to which the runtime picks the decode variant (speculative decoding
// drafts up to 16 tokens).
inline constexpr int64_t kDecodeMaxQueries = 16;

// The queries per sequence that choose the variant and size its tiles: Nq, or over packed
// documents the mean per document, rounded up. Their offsets are on the device, so the plan
// cannot read each length; a document with more queries than the mean takes more decode tiles
// (work.cuh gives every document its own), each as exact.
inline int64_t queries_per_sequence(int64_t nq, int64_t docs) { return docs > 1 ? (nq + docs - 1) / docs : nq; }

// Decode calls whose blocks each stream at most this many keys launch as programmatic dependents
// (LaunchTuning::DependentLaunch::Auto): back to back, the next call's blocks are scheduled while
// this one's finish its merge, which takes ~0.4 us of fixed cost off a call. On the H200, against
// the same build without (two calls, three interleaved rounds each, CUDA-graph timed,
// bench/results/2026-12-03-h200-session20/call2/, call3/): 8B B1 / 4k (parts of 256 keys)
// 0.0126-0.0127 -> 0.0121-0.0122 ms, B1 / 32k and B8 / 4k (2048 keys) 1.0-1.8% faster, 70B B1 /
// 32k level, B32 / 4k (4096, unsplit) level; but calls with longer blocks were 0.6-1.4% slower
// with it (B1 / 128k: 8192 keys, B8 / 32k and 128k: 16k-64k keys), so they launch in stream order.
inline constexpr int64_t kDependentLaunchMaxKeys = 4096;

// What one call runs: the resolved variant and its grid (CudaKernel::plan; printed by the CLI).
struct LaunchPlan {
  RopeMode rope_mode = RopeMode::Auto;
  KvLayout kv_layout = KvLayout::Contiguous;
  bool decode = false;  // GQA-packed decode variant
  int num_splits = 1;   // > 1: partial results in a workspace, merged by one of the two below
  bool merge_in_kernel = false;  // splits merged by the decode kernel's last block, not a combine kernel
  bool dependent_launch = false;  // the call's kernels launch as programmatic dependents (LaunchTuning)
  unsigned grid[3] = {1, 1, 1};
  const LoadedModule* module = nullptr;  // the compiled variant the call runs
  // Block-sparse prefill: the work list the one-dimensional grid runs (its cut rows merge in the
  // kernel, like split decode calls); null otherwise.
  const DeviceSparseWork* sparse_work = nullptr;
};

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
  // On CUDA the index arrays of a call are device memory, as in FlashAttention and FlashInfer:
  // paged.page_indices / page_indptr / last_page_len and cu_seqlens_q / _k point to the GPU
  // (their sizes are checked, their contents are not read on the host). A BlockMask is a host
  // object: its first CUDA launch uploads it (synchronously) and the upload lives with it.
  void launch(const AttentionArgs& args, const ScalarArgs& scalars, CUstream stream,
              const LaunchTuning& tuning = {}) const;
  // The plan launch() would follow for this call (validates nothing; compiles the variant it
  // picks if that is not loaded yet, since the split count depends on the kernel's occupancy,
  // and uploads a block-sparse call's mask, whose entry states pick the module).
  LaunchPlan plan(const AttentionArgs& args, const ScalarArgs& scalars, const LaunchTuning& tuning = {}) const;
  const KernelSpec& spec() const { return spec_; }
  // The placement this call would use (the spec's mode unless it is auto); `decode`: the call
  // takes the decode tile.
  RopeMode rope_mode_for(const AttentionArgs& args, const ScalarArgs& scalars, bool decode) const;
  // The module of one variant: rope placement x tile (prefill; decode, GQA-packed, for
  // decode_rows = group x Nq > 0: narrow up to 16 rows, wide beyond; `split`: the narrow tile of
  // a call that splits its key axis, passes::cuda_decode_tile) x K/V layout x, for paged K/V,
  // how the decode tiles copy the pages (PageCopy).
  const LoadedModule& module(RopeMode mode, int64_t decode_rows, KvLayout kv, bool split = false,
                             PageCopy pages = PageCopy::TmaSmallBoxes) const;
  // The wgmma prefill module whose warpgroups skip the block-sparse blocks that keep none of their
  // rows' cells (TileConfig::skip_row_groups), for calls whose mask has such blocks; the plain
  // prefill module elsewhere (the other tile forms do not skip).
  const LoadedModule& row_group_module(RopeMode mode) const;
  // The 64-row wgmma prefill module (passes::cuda_wgmma_64_rows) for block-sparse masks of
  // 64-row blocks at D = 64.
  const LoadedModule& rows64_module(RopeMode mode) const;
  RopeMode default_mode() const;
  int registers() const { return module(default_mode(), 0, KvLayout::Contiguous).registers; }
  CUfunction function() const { return module(default_mode(), 0, KvLayout::Contiguous).fwd; }

 private:
  KernelSpec resolved(RopeMode mode, int64_t decode_rows, KvLayout kv, bool split = false,
                      PageCopy pages = PageCopy::TmaSmallBoxes) const;
  // Whether the decode tiles of this placement and K/V layout copy K/V by TMA (no compile).
  bool decode_tma(RopeMode mode, KvLayout kv, PageCopy pages) const;
  KernelSpec spec_;
  // The prerotated prefill takes the wgmma form on this device (fixed per kernel: decided once
  // here rather than by resolving a spec copy on every auto-placement call).
  bool prerotate_wgmma_ = false;
  // Indexed by RopeMode + 3 * tile (prefill, narrow / wide decode, narrow split decode) +
  // 12 * K/V (contiguous, then paged by PageCopy); each compiled on first use. Specs that
  // resolve alike share one module.
  mutable std::atomic<const LoadedModule*> variants_[60];
  mutable std::atomic<const LoadedModule*> row_group_variants_[3];  // by RopeMode
  mutable std::atomic<const LoadedModule*> rows64_variants_[3];     // by RopeMode
};

// The loaded kernel for spec on the current device, compiled on first use (thread-safe).
const CudaKernel& cuda_kernel(const KernelSpec& spec);

// Convenience: look up (or compile) and launch; synchronizes only if `sync`.
void run_cuda(const KernelSpec& spec, const AttentionArgs& args, CUstream stream = nullptr,
              bool sync = false, const LaunchTuning& tuning = {});

}  // namespace attnfuse::runtime
