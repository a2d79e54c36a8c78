// Emits the generated part of a CUDA translation unit: the Spec constants and the modifier hook.
#include "codegen/cuda/emit.hpp"

#include <fmt/format.h>

#include <bit>

#include "attnfuse/error.hpp"
#include "codegen/cuda/kernels/params.cuh"
#include "passes/tile_sizes.hpp"

namespace attnfuse::codegen::cuda {
namespace {

// One line of the modifier hook per score modifier, applied in program order. `s` is the scaled
// score in natural units; out-of-range cells (padding rows/keys of edge tiles) never read memory.
const char* modifier_line(ModifierKind k) {
  switch (k) {
    case ModifierKind::Alibi:
      return "    s -= c.slope * (float)abs(c.delta);  // alibi\n";
    case ModifierKind::AdditiveBias:
      return "    s += c.bias;  // additive_bias\n";
    case ModifierKind::Softcap:
      return "    s = p.softcap * fast_tanh(s * p.inv_softcap);  // softcap\n";
  }
  return "";
}

}  // namespace

void check_supported(const KernelSpec& spec) {
  if (spec.target != Target::Cuda)
    throw Error(ErrorCode::Internal, "CUDA codegen called for a non-CUDA spec");
  if (spec.dtype == DType::F32)
    throw Error(ErrorCode::Unsupported,
                "the CUDA backend computes on bf16 or fp16 tensor cores; use --dtype bf16|fp16 "
                "(fp32 inputs run on the CPU backend)");
  const int d = spec.head_dim;
  if (d != 64 && d != 96 && d != 128 && d != 256)
    throw Error(ErrorCode::Unsupported,
                fmt::format("the CUDA backend supports head dims 64, 96, 128 and 256, not {}", d));
  if (spec.masks.has(MaskKind::BlockSparse) && spec.masks.has(MaskKind::Document))
    throw Error(ErrorCode::Unsupported,
                "block_sparse together with document masks is not supported on CUDA: the BlockMask "
                "indexes the packed sequence, so fold the documents into it (BlockMask::"
                "from_block_classifier) and drop document(), or run it on the CPU");
}

int threads_per_block(const KernelSpec& spec) {
  // The wgmma tile's producer is a warpgroup (setmaxnreg moves registers per warpgroup), the
  // decode tile's one warp (KvCopy::producer, kv_copy.cuh).
  return (spec.tile.num_warps + (producer_warp(spec) ? (spec.tile.wgmma ? 4 : 1) : 0)) * 32;
}

bool producer_warp(const KernelSpec& spec) {
  // The wgmma tile's producer warpgroup holds a 384-thread block to one per SM.
  return spec.tile.producer_warp && uses_tma(spec) && !(spec.tile.wgmma && spec.tile.min_blocks > 1);
}

int shared_memory_bytes(const KernelSpec& spec) {
  // attention_fwd.cuh stages the RoPE tables when it rotates (kRotate) or prunes (kPairWindow).
  const bool tables = rotates_in_kernel(spec) || spec.score == ScoreKind::RopeWindow;
  if (spec.tile.tma_kv && !spec.tile.wgmma) {
    // Decode tiles by TMA: padded Q, swizzled K/V stages from a 1024-byte boundary (1 KB of
    // slack), then one mbarrier per stage (kv_copy.cuh), fused RoPE's tables and the staged
    // page ids.
    const TileConfig& t = spec.tile;
    return (t.block_q * (spec.head_dim + 8) + 2 * t.stages * t.block_k * spec.head_dim) * 2 + 1024 + 64 +
           (tables ? passes::cuda_rope_table_bytes(spec.head_dim) : 0) + page_list_slots(spec) * 4;
  }
  return passes::cuda_smem_bytes(spec.tile, spec.head_dim, tables) + page_list_slots(spec) * 4;
}

int page_list_slots(const KernelSpec& spec) {
  const bool staged = spec.kv_layout == KvLayout::Paged && spec.tile.pack_gqa && spec.head_dim <= 128 &&
                      !spec.masks.has(MaskKind::BlockSparse);
  return !staged ? 0 : spec.tile.tma_kv ? passes::kCudaPageListSlotsTma : passes::kCudaPageListSlots;
}

bool uses_tma(const KernelSpec& spec) {
  // The wgmma prefill form takes contiguous K/V, packed documents included: a tile is the
  // document's rows k_row0 + n0 .., and those past its end (the next document's, or the copy
  // engine's zeros past the tensor) are masked in S and zeroed in V (zero_tail_rows). The
  // decode tiles take documents the same way, and pages too.
  if (spec.tile.wgmma) return spec.kv_layout == KvLayout::Contiguous;
  return spec.tile.tma_kv;
}

bool rotates_in_kernel(const KernelSpec& spec) { return rotates_in_kernel(spec.score, spec.rope_mode); }

bool rotates_in_kernel(ScoreKind score, RopeMode mode) {
  return score != ScoreKind::ScaledDot && mode != RopeMode::Prerotate;
}

bool interleaves_pairs(const KernelSpec& spec) {
  return spec.score == ScoreKind::RopeWindow && spec.rope_mode == RopeMode::Prerotate && spec.tile.wgmma &&
         spec.scalars.rope.style == RopeStyle::Neox;
}

int rope_half_in_kernel(const KernelSpec& spec) {
  if (!rotates_in_kernel(spec)) return 0;
  const int rotary_dim = spec.scalars.rope.rotary_dim > 0 ? spec.scalars.rope.rotary_dim : spec.head_dim;
  const int units = rotary_dim / 4;  // 32-bit units of two pairs (CUDA takes rotary_dim % 4 == 0)
  if (rotary_dim % 4 != 0 || units == 0) return 0;
  // The whole head (its dim is in the module key already), or a partial span of 1-32 units, a
  // power of two (their log2 is).
  const bool whole = rotary_dim == spec.head_dim;
  return whole || (units <= 32 && std::has_single_bit(static_cast<unsigned>(units))) ? rotary_dim / 2 : 0;
}

int rope_span_code(const KernelSpec& spec) {
  const int half = rope_half_in_kernel(spec);
  if (half == 0) return 0;
  if (2 * half == spec.head_dim) return 1;
  return 1 + std::bit_width(static_cast<unsigned>(half / 2));  // 2 + log2(units)
}

std::string merge_states_entry_name(int entry) {
  if (entry == kMergeHalfEntry) return "attnfuse_merge_states_w16_half";
  return fmt::format("attnfuse_merge_states_w{}", attnfuse_kernels::merge_chunk_elems(entry));
}

std::string emit_merge_states() {
  std::string source = "// Generated by attnfuse: the merge_states kernels (merge_states.cuh).\n"
                       "#include \"merge_states.cuh\"\n";
  for (int entry = 0; entry < kMergeEntries; ++entry) {
    const bool half = entry == kMergeHalfEntry;
    source += fmt::format(
        R"(
extern "C" __global__ void __launch_bounds__({threads}, attnfuse_kernels::MergeStatesKernel<{threads}>::kMinBlocks)
{entry}(const __grid_constant__ attnfuse_kernels::MergeStatesParams p) {{
  attnfuse_kernels::MergeStatesKernel<{threads}>::run<{width}, {half}>(p);
}}
)",
        fmt::arg("threads", kMergeStatesThreads), fmt::arg("entry", merge_states_entry_name(entry)),
        fmt::arg("width", half ? 16 : attnfuse_kernels::merge_chunk_elems(entry)), fmt::arg("half", half));
  }
  return source;
}

std::string emit_forward(const KernelSpec& spec) {
  check_supported(spec);
  const auto& mods = spec.modifiers;
  const bool relu = spec.norm == NormKind::ReluAttention;
  std::string hook;
  for (int i = 0; i < mods.size(); ++i) hook += modifier_line(mods[i]);
  const char* element = spec.dtype == DType::BF16 ? "bf16_t" : "f16_t";
  const bool neox = spec.scalars.rope.style == RopeStyle::Neox;
  const bool interleave = interleaves_pairs(spec);  // the forward kernel then sees gptj pairs
  // Every module holds the split-KV combine kernel (a few hundred bytes of code).
  std::string combine_entry = fmt::format(
      R"(
extern "C" __global__ void __launch_bounds__({threads})
{entry}(const __grid_constant__ attnfuse_kernels::CombineParams p) {{
  attnfuse_kernels::CombineKernel<attnfuse_kernels::{element}, {d}>::run(p);
}}
)",
      fmt::arg("threads", kCombineThreads), fmt::arg("entry", kCombineEntryName), fmt::arg("element", element),
      fmt::arg("d", spec.head_dim));
  // prerotate mode: the module also holds the kernel that rotates Q and K before attention.
  std::string rotate_entry;
  if (spec.score != ScoreKind::ScaledDot && spec.rope_mode == RopeMode::Prerotate)
    rotate_entry = fmt::format(
        R"(
extern "C" __global__ void __launch_bounds__({threads})
{entry}(const __grid_constant__ attnfuse_kernels::RotateParams p) {{
  attnfuse_kernels::RotateKernel<attnfuse_kernels::{element}, {d}, {neox}, {interleave}>::run(p);
}}
)",
        fmt::arg("threads", kRotateThreads), fmt::arg("entry", kRotateEntryName),
        fmt::arg("element", element), fmt::arg("d", spec.head_dim), fmt::arg("neox", neox),
        fmt::arg("interleave", interleave));

  return fmt::format(
      R"(// Generated by attnfuse: the Spec of one fused forward kernel. The kernel itself is the
// template in attention_fwd.cuh; only these constants and the modifier hook vary.
#include "attention_fwd.cuh"
#include "combine.cuh"

namespace attnfuse_kernels {{

struct Spec {{
  using Element = {element};
  static constexpr int kHeadDim = {d};
  static constexpr int kBlockM = {bm};
  static constexpr int kBlockN = {bn};
  static constexpr int kWarps = {warps};
  static constexpr int kStages = {stages};
  static constexpr int kKeyWarps = {key_warps};
  static constexpr bool kCausal = {causal};
  static constexpr bool kSlidingWindow = {window};
  static constexpr bool kAlibi = {alibi};
  static constexpr bool kBias = {bias};
  static constexpr bool kHasModifiers = {has_mods};
  static constexpr bool kRelu = {relu};
  // RoPE: rotate Q and K tiles in the kernel (fused placement); rope_window's per-pair windows;
  // neox pairs (r, r + rotary_dim/2), else gptj (2r, 2r+1) (also neox Q and K prerotated
  // interleaved, as rope_window's wgmma form reads them).
  static constexpr bool kRotate = {rotate};
  static constexpr bool kPairWindow = {pair_window};
  static constexpr bool kNeox = {neox};
  // Pairs the in-kernel rotation turns (rotary_dim / 2) for a whole head or a partial span of a
  // power-of-two unit count, else 0 (the span read at run time), and 0 without a rotation:
  // compile-time, so each thread of a tile's rotation keeps one pair unit (rope.cuh,
  // rotate_rows_fixed_unit).
  static constexpr int kRopeHalf = {rope_half};
  // Sequences: documents (cu_seqlens), a paged K/V cache, BlockMask rows; the decode variant
  // packs a GQA group's query heads into the tile rows.
  static constexpr bool kDocument = {document};
  static constexpr bool kPagedKV = {paged};
  static constexpr bool kBlockSparse = {block_sparse};
  static constexpr bool kPackGqa = {pack_gqa};
  // Paged decode: page ids staged in shared memory per block (0: looked up in global memory).
  static constexpr int kPageListSlots = {page_list};
  // Hopper: the two matrix products as warpgroup MMAs on swizzled tiles.
  static constexpr bool kWgmma = {wgmma};
  // ... with K/V tiles loaded by the copy engine (TMA) when the call's tensor maps are valid.
  static constexpr bool kTmaKV = {tma};
  // ... issued by warps of their own (one more warp for decode tiles, a warpgroup for wgmma).
  static constexpr bool kProducerWarp = {producer};
  // ... block-sparse: warpgroups skip the mask blocks that keep none of their rows' cells.
  static constexpr bool kSkipRowGroups = {skip_groups};

  // Score modifiers in program order.
  static __device__ __forceinline__ float modify(float s, const FwdParams& p, const CellCtx& c) {{
{hook}    return s;
  }}
}};

}}  // namespace attnfuse_kernels

extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
{entry}(const __grid_constant__ attnfuse_kernels::FwdParams p) {{
  extern __shared__ __align__(16) char smem[];
  attnfuse_kernels::FwdKernel<attnfuse_kernels::Spec>::run(p, smem);
}}
{combine_entry}{rotate_entry})",
      fmt::arg("element", element), fmt::arg("rotate", rotates_in_kernel(spec)),
      fmt::arg("pair_window", spec.score == ScoreKind::RopeWindow), fmt::arg("neox", neox && !interleave),
      fmt::arg("rope_half", rope_half_in_kernel(spec)),
      fmt::arg("rotate_entry", rotate_entry), fmt::arg("combine_entry", combine_entry),
      fmt::arg("document", spec.masks.has(MaskKind::Document)),
      fmt::arg("paged", spec.kv_layout == KvLayout::Paged),
      fmt::arg("block_sparse", spec.masks.has(MaskKind::BlockSparse)), fmt::arg("pack_gqa", spec.tile.pack_gqa),
      fmt::arg("page_list", page_list_slots(spec)),
      fmt::arg("wgmma", spec.tile.wgmma), fmt::arg("tma", uses_tma(spec)),
      fmt::arg("producer", producer_warp(spec)),
      fmt::arg("skip_groups", spec.tile.skip_row_groups && spec.tile.wgmma && spec.masks.has(MaskKind::BlockSparse)),
      fmt::arg("d", spec.head_dim), fmt::arg("bm", spec.tile.block_q),
      fmt::arg("bn", spec.tile.block_k), fmt::arg("warps", spec.tile.num_warps), fmt::arg("stages", spec.tile.stages),
      fmt::arg("key_warps", spec.tile.key_warps),
      fmt::arg("causal", spec.masks.has(MaskKind::Causal)),
      fmt::arg("window", spec.masks.has(MaskKind::SlidingWindow)),
      fmt::arg("alibi", mods.has(ModifierKind::Alibi)), fmt::arg("bias", mods.has(ModifierKind::AdditiveBias)), fmt::arg("has_mods", mods.size() > 0),
      fmt::arg("relu", relu), fmt::arg("hook", hook), fmt::arg("threads", threads_per_block(spec)),
      fmt::arg("min_blocks", spec.tile.min_blocks), fmt::arg("entry", kEntryName));
}

}  // namespace attnfuse::codegen::cuda
