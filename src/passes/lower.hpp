// Pass 3, lower: flatten the tiled record into the typed KernelSpec that codegen and the
// backends consume.
#pragma once

#include "attnfuse/kernel_spec.hpp"
#include "passes/tile.hpp"

namespace attnfuse::passes {

// Contract: `tiled` comes from tile(). Copies roles, target, tile and scalars into a KernelSpec
// and checks what only becomes checkable once the head dim is known at compile time (a RoPE
// rotary_dim larger than the head dim: Error(Shape)). Printout: attnfuse::to_string(KernelSpec).
KernelSpec lower(const TiledAttention& tiled);

}  // namespace attnfuse::passes
