// Pass 3, lower: the tiled record as a flat KernelSpec (roles, target, tile, run-time scalars).
#include "passes/lower.hpp"

#include <fmt/format.h>

namespace attnfuse::passes {

KernelSpec lower(const TiledAttention& t) {
  const FusedAttention& f = t.fused;
  KernelSpec s;
  s.score = f.score;
  s.masks = f.masks;
  s.modifiers = f.modifiers;
  s.norm = f.norm;
  s.target = t.target;
  s.tile = t.tile;
  s.dtype = t.dtype;
  s.head_dim = t.head_dim;
  s.rope_mode = t.rope_mode;
  s.scalars = f.scalars;
  if (s.score != ScoreKind::ScaledDot && s.head_dim > 0 && s.scalars.rope.rotary_dim > s.head_dim)
    throw Error(ErrorCode::Shape,
                fmt::format("rotary_dim={} is larger than the head dim {}: RoPE rotates at most all "
                            "of a head's dimensions",
                            s.scalars.rope.rotary_dim, s.head_dim));
  return s;
}

}  // namespace attnfuse::passes
