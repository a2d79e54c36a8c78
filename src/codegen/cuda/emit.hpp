// CUDA codegen: KernelSpec -> one translation unit that includes the real kernel templates
// (kernels/*.cuh) and adds only the generated Spec struct, the modifier hook body and the
// extern "C" entry point. No kernel is assembled from strings.
#pragma once

#include <string>
#include <vector>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::codegen::cuda {

inline constexpr const char* kEntryName = "attnfuse_fwd";
// rope_mode = prerotate: the rotation kernel in the same module, launched with kRotateThreads.
inline constexpr const char* kRotateEntryName = "attnfuse_rope_rotate";
inline constexpr int kRotateThreads = 256;
// Split-KV (FwdParams::num_splits > 1): the combine kernel in every module, one warp per row.
inline constexpr const char* kCombineEntryName = "attnfuse_combine";
inline constexpr int kCombineThreads = 128;

// merge_states on CUDA: a module of its own (emit_merge_states), blocks of whole rows, one entry
// per chunk width (merge_states_entry_name).
inline constexpr int kMergeStatesThreads = 256;
// Its entries: chunk codes 0-3 (MergeStatesParams::vec), and kMergeHalfEntry, chunks of 16 over
// 16-bit states only (MergeStatesKernel::run's kHalf).
inline constexpr int kMergeHalfEntry = 4;
inline constexpr int kMergeEntries = 5;

// One embedded header: the include name NVRTC sees and its text.
struct EmbeddedHeader {
  const char* name;
  const char* source;
};
// The kernel templates, embedded into the library at build time (see cmake/embed_kernels.cmake).
const std::vector<EmbeddedHeader>& kernel_headers();

// Contract: spec.target == Cuda, spec.head_dim in the supported set, dtype bf16 or fp16
// (check_supported throws Error(Unsupported) otherwise). Returns the translation unit. For rope
// programs the module follows spec.rope_mode: fused (and auto, whose per-call choice the runtime
// makes by compiling the resolved spec) rotates inside the kernel; prerotate emits the plain
// kernel plus the rotation kernel kRotateEntryName.
std::string emit_forward(const KernelSpec& spec);

// The translation unit of the merge_states module: the kernel of merge_states.cuh behind one entry
// per chunk width, so each path gets the registers it needs, not the widest one's (dtypes and
// sizes are run-time values: one module per arch).
std::string emit_merge_states();
// The entry of chunk code `entry` (MergeStatesParams::vec, 0-3: chunks of 1, 4, 8 or 16
// elements), or of kMergeHalfEntry.
std::string merge_states_entry_name(int entry);

// Throws Error(Unsupported) with a clear message when this kernel family cannot run `spec`.
void check_supported(const KernelSpec& spec);

// Threads per block and dynamic shared memory of the emitted kernel (host side of the launch).
int threads_per_block(const KernelSpec& spec);
// Whether the tile takes a producer warp for its TMA copies (TileConfig::producer_warp): decode
// tiles and the wgmma prefill tile, where they copy K/V by TMA.
bool producer_warp(const KernelSpec& spec);
int shared_memory_bytes(const KernelSpec& spec);
// Page ids a paged decode block stages in shared memory (Spec::kPageListSlots; 0: it looks them
// up in global memory): the GQA-packed tiles at D <= 128 that batch their lookups, BlockMask rows
// aside (their key tiles are not one range).
int page_list_slots(const KernelSpec& spec);
// True when the kernel can take K/V tiles by TMA: the wgmma form over contiguous K/V, or the
// decode tiles with TileConfig::tma_kv (contiguous or paged), never with documents. The host
// still encodes the tensor maps per call and falls back to cp.async where they fail.
bool uses_tma(const KernelSpec& spec);
// True when the forward kernel rotates Q and K itself (rope programs not in prerotate mode).
bool rotates_in_kernel(const KernelSpec& spec);
// The same for a score kind in a placement (no spec to build: the runtime asks on every call).
bool rotates_in_kernel(ScoreKind score, RopeMode mode);
// True when the rotation kernel writes neox pairs interleaved (pair r at dims 2r, 2r + 1) and the
// forward kernel reads them so: rope_window's wgmma form, which prunes whole 16-dim k steps and
// wants 8 whole pairs in each (rope.cuh, WindowCut).
bool interleaves_pairs(const KernelSpec& spec);
// The pairs the in-kernel rotation turns, compiled into the module (Spec::kRopeHalf, which lets
// each thread keep one pair unit: rope.cuh, rotate_rows_fixed_unit): rotary_dim / 2 for a whole
// head (D 64-256) and for partial spans whose 32-bit units of two pairs number a power of two up
// to 32 (32 or 64 of 128, say); else 0, and the kernel reads the span at run time. The
// runtime's in-memory module key holds which (rope_span_code).
int rope_half_in_kernel(const KernelSpec& spec);
// rope_half_in_kernel as 3 bits of structure (the head dim is structure already): 0 the run-time
// span (or no rotation), 1 the whole head, 2 + log2(units) a partial span of 1-32 units.
int rope_span_code(const KernelSpec& spec);

}  // namespace attnfuse::codegen::cuda
