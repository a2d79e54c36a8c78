// The canonical printout of a KernelSpec (`attnfuse compile --emit spec`, golden tests): the
// compile-time structure first, then the run-time scalars, one fact per line.
#include <fmt/format.h>

#include "attnfuse/kernel_spec.hpp"
#include "passes/fuse.hpp"
#include "passes/tile.hpp"

namespace attnfuse {

std::string to_string(const KernelSpec& s) {
  std::string inputs = "Q, K, V";
  if (s.needs_bias()) inputs += ", bias";
  if (s.needs_block_mask()) inputs += ", block_mask";
  if (s.needs_cu_seqlens()) inputs += ", cu_seqlens_q, cu_seqlens_k";
  return fmt::format("kernel_spec\n{}  target     {}\n  dtype      {}\n  head_dim   {}\n  tile       {}\n"
                     "  inputs     {}\n",
                     passes::role_lines(s.score, s.masks, s.modifiers, s.norm), target_name(s.target),
                     dtype_name(s.dtype), s.head_dim > 0 ? std::to_string(s.head_dim) : "any (run time)",
                     passes::tile_text(s.target, s.tile), inputs) +
         passes::rope_mode_line(s.target, s.score, s.rope_mode) +
         "run-time scalars\n" + passes::scalar_lines(s.scalars, s.score, s.masks, s.modifiers);
}

}  // namespace attnfuse
