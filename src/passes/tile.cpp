// Pass 2, tile: the fused record plus the tile shape that tile_sizes() picks for the target.
#include "passes/tile.hpp"

#include <fmt/format.h>

#include "passes/tile_sizes.hpp"

namespace attnfuse::passes {

TiledAttention tile(const FusedAttention& fused, const CompileOptions& options) {
  const int d = options.head_dim;
  if (d < 0) throw Error(ErrorCode::Shape, fmt::format("head dim must be >= 0 (0: decided at run time), got {}", d));
  if (options.target == Target::Cuda) {
    if (d == 0)
      throw Error(ErrorCode::Shape,
                  "a CUDA kernel is compiled for one head dim: set CompileOptions::head_dim to D");
    if (d > kCudaMaxHeadDim)
      throw Error(ErrorCode::Unsupported,
                  fmt::format("head dim {} is above the CUDA kernel's maximum of {}; run it on the CPU",
                              d, kCudaMaxHeadDim));
  }
  TiledAttention t;
  t.fused = fused;
  t.target = options.target;
  t.dtype = options.dtype;
  t.head_dim = d;
  t.tile = tile_sizes(options.target, d, options.dtype, fused.masks, fused.score, fused.modifiers,
                      fused.norm, fused.scalars.rope.style == RopeStyle::Gptj);
  t.rope_mode = options.rope_mode;
  return t;
}

std::string tile_text(Target target, const TileConfig& t) {
  if (target == Target::Cpu) return fmt::format("block_q={} block_k={}", t.block_q, t.block_k);
  return fmt::format("block_q={} block_k={} num_warps={} stages={}{}", t.block_q, t.block_k, t.num_warps,
                     t.stages, t.wgmma ? " wgmma" : "");
}

std::string rope_mode_line(Target target, ScoreKind score, RopeMode mode) {
  if (target != Target::Cuda || score == ScoreKind::ScaledDot) return "";
  return fmt::format("  rope_mode  {}\n", rope_mode_name(mode));
}

std::string to_string(const TiledAttention& t) {
  const FusedAttention& f = t.fused;
  return fmt::format("tiled_attention\n{}  target     {}\n  dtype      {}\n  head_dim   {}\n  tile       {}\n",
                     role_lines(f.score, f.masks, f.modifiers, f.norm), target_name(t.target),
                     dtype_name(t.dtype), t.head_dim > 0 ? std::to_string(t.head_dim) : "any (run time)",
                     tile_text(t.target, t.tile)) +
         rope_mode_line(t.target, f.score, t.rope_mode) +
         "run-time scalars\n" + scalar_lines(f.scalars, f.score, f.masks, f.modifiers);
}

}  // namespace attnfuse::passes
