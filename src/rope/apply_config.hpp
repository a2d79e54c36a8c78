// Applies a Hugging Face config's RoPE to a compiled program (`--rope-config`): the config's
// parameters replace the defaults, while every parameter written in the program text wins.
#pragma once

#include <cstdint>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/program.hpp"
#include "rope/hf_config.hpp"

namespace attnfuse::ir {
class Graph;
}

namespace attnfuse::rope {

// The RoPE parameters a program can write, one per RopeParams field that a config also sets
// (window_k and scale are not RoPE-config parameters: they always stay the program's).
enum class RopeField {
  Base,
  Style,
  RotaryDim,
  RopeType,
  Factor,
  LowFreqFactor,
  HighFreqFactor,
  OriginalMaxPositionEmbeddings,
  BetaFast,
  BetaSlow,
  AttentionFactor,
  Mscale,
  MscaleAllDim,
  LongFactor,
  ShortFactor,
};
inline constexpr int kRopeFieldCount = 15;

// The DSL keyword of a field (the Hugging Face name, e.g. "original_max_position_embeddings").
const char* rope_field_name(RopeField f);

// A set of RopeFields (the ones a program wrote explicitly).
class RopeFieldSet {
 public:
  constexpr RopeFieldSet() = default;
  constexpr bool has(RopeField f) const { return (bits_ >> static_cast<unsigned>(f)) & 1u; }
  constexpr void add(RopeField f) { bits_ |= 1u << static_cast<unsigned>(f); }
  constexpr bool empty() const { return bits_ == 0; }
  friend constexpr bool operator==(RopeFieldSet, RopeFieldSet) = default;

 private:
  uint32_t bits_ = 0;
};

// True when the graph's score op is rope or rope_window.
bool has_rope(const ir::Graph& graph);

// The RoPE parameters the graph's rope / rope_window node writes explicitly (a parameter
// written with its default value, e.g. `base=10000`, counts as written). Throws Error(Verify)
// "the program has no rope ..." when the graph has no rope or rope_window node.
RopeFieldSet explicit_rope_fields(const ir::Graph& graph);

// Sets spec.scalars.rope from `config` (HfRopeConfig::rope), field by field, except:
//  - fields in `written` keep the spec's value (the program's text wins over the config);
//  - window_k (rope_window's k) and the score scale always stay the program's;
//  - when `written` has RopeType and the program's rope_type differs from the config's, the
//    config's scaling parameters (factor ... short_factor) belong to another scaling and are
//    not used: only base, style and rotary_dim can come from the config then.
// Then checks the merged parameters (validate_rope_params) for spec.head_dim, or for the rotary
// dim when the head dim is decided at run time (head_dim 0).
// Throws Error(Verify) when spec.score is ScaledDot ("the program has no rope ..."), when the
// merged parameters are invalid (e.g. a longrope list that does not fit the program's
// rotary_dim), or when the config's rotary_dim exceeds spec.head_dim.
void apply_hf_rope(KernelSpec& spec, const HfRopeConfig& config, RopeFieldSet written);

// explicit_rope_fields(program.graph()), then the above.
void apply_hf_rope(KernelSpec& spec, const HfRopeConfig& config, const Program& program);

}  // namespace attnfuse::rope
