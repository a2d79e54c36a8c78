// Pass 2, tile: choose the tile shape of the fused kernel for a target, dtype and head dim.
#pragma once

#include <string>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/program.hpp"
#include "passes/fuse.hpp"

namespace attnfuse::passes {

// The fused record placed on a target: what the kernel computes plus how it is cut into tiles.
struct TiledAttention {
  FusedAttention fused;
  Target target = Target::Cpu;
  DType dtype = DType::F32;
  int head_dim = 0;  // 0: any (the CPU kernel takes D at run time)
  TileConfig tile;
  RopeMode rope_mode = RopeMode::Auto;  // CUDA rope programs (the CPU always fuses)
  friend bool operator==(const TiledAttention&, const TiledAttention&) = default;
};

// Contract: `fused` comes from fuse(). Picks the TileConfig from tile_sizes() (the one table of
// tile choices). Throws Error(Shape) for a negative head dim or a CUDA target without one (CUDA
// kernels are compiled for one head dim), Error(Unsupported) above kCudaMaxHeadDim on CUDA.
TiledAttention tile(const FusedAttention& fused, const CompileOptions& options);

// The printout of the tiled record (`attnfuse compile --emit passes`).
std::string to_string(const TiledAttention& tiled);
// The tile line shared with the KernelSpec printout ("block_q=64 block_k=64", plus warps and
// stages on CUDA).
std::string tile_text(Target target, const TileConfig& tile);
// "  rope_mode  <mode>\n" for rope programs on CUDA, else empty.
std::string rope_mode_line(Target target, ScoreKind score, RopeMode mode);

}  // namespace attnfuse::passes
