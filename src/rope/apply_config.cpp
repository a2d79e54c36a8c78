// The `--rope-config` merge rule: a Hugging Face config's RoPE replaces the program's defaults,
// the program's explicit parameters win (see apply_config.hpp).
#include "rope/apply_config.hpp"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "attnfuse/error.hpp"
#include "ir/graph.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::rope {

namespace {

// One row per field: its DSL keyword and how to copy it from the config's RopeParams. The
// keywords are the IR's parameter names (ir/combinators.cpp's table), so a written parameter
// is found by name on the rope node.
struct FieldInfo {
  RopeField field;
  std::string_view name;
  bool scaling;  // a rope_scaling parameter (only meaningful for the config's own rope_type)
  void (*copy)(RopeParams& to, const RopeParams& from);
};

#define ATTNFUSE_ROPE_FIELD(F, NAME, SCALING, MEMBER) \
  FieldInfo { RopeField::F, NAME, SCALING, [](RopeParams& to, const RopeParams& from) { to.MEMBER = from.MEMBER; } }

const std::array<FieldInfo, kRopeFieldCount> kFields = {{
    ATTNFUSE_ROPE_FIELD(Base, "base", false, base),
    ATTNFUSE_ROPE_FIELD(Style, "style", false, style),
    ATTNFUSE_ROPE_FIELD(RotaryDim, "rotary_dim", false, rotary_dim),
    ATTNFUSE_ROPE_FIELD(RopeType, "rope_type", false, rope_type),
    ATTNFUSE_ROPE_FIELD(Factor, "factor", true, factor),
    ATTNFUSE_ROPE_FIELD(LowFreqFactor, "low_freq_factor", true, low_freq_factor),
    ATTNFUSE_ROPE_FIELD(HighFreqFactor, "high_freq_factor", true, high_freq_factor),
    ATTNFUSE_ROPE_FIELD(OriginalMaxPositionEmbeddings, "original_max_position_embeddings", true,
                        original_max_position_embeddings),
    ATTNFUSE_ROPE_FIELD(BetaFast, "beta_fast", true, beta_fast),
    ATTNFUSE_ROPE_FIELD(BetaSlow, "beta_slow", true, beta_slow),
    ATTNFUSE_ROPE_FIELD(AttentionFactor, "attention_factor", true, attention_factor),
    ATTNFUSE_ROPE_FIELD(Mscale, "mscale", true, mscale),
    ATTNFUSE_ROPE_FIELD(MscaleAllDim, "mscale_all_dim", true, mscale_all_dim),
    ATTNFUSE_ROPE_FIELD(LongFactor, "long_factor", true, long_factor),
    ATTNFUSE_ROPE_FIELD(ShortFactor, "short_factor", true, short_factor),
}};

#undef ATTNFUSE_ROPE_FIELD

const ir::Node* rope_node(const ir::Graph& graph) {
  for (const ir::Node& n : graph.nodes())
    if (n.op == ir::Op::Rope || n.op == ir::Op::RopeWindow) return &n;
  return nullptr;
}

[[noreturn]] void no_rope() {
  throw Error(ErrorCode::Verify,
              "the program has no rope: a RoPE config only sets the parameters of rope(...) or "
              "rope_window(...); use one of them as the score op, or drop the config");
}

}  // namespace

const char* rope_field_name(RopeField f) {
  return kFields[static_cast<size_t>(f)].name.data();  // NUL-terminated literals
}

bool has_rope(const ir::Graph& graph) { return rope_node(graph) != nullptr; }

RopeFieldSet explicit_rope_fields(const ir::Graph& graph) {
  const ir::Node* n = rope_node(graph);
  if (!n) no_rope();
  RopeFieldSet set;
  for (const FieldInfo& f : kFields)
    if (n->param(std::string(f.name))) set.add(f.field);
  return set;
}

void apply_hf_rope(KernelSpec& spec, const HfRopeConfig& config, RopeFieldSet written) {
  if (spec.score == ScoreKind::ScaledDot) no_rope();
  RopeParams merged = spec.scalars.rope;
  const RopeParams& from = config.rope;
  // A program that picks its own scaling keeps that scaling's parameters to itself.
  const bool other_scaling = written.has(RopeField::RopeType) && merged.rope_type != from.rope_type;
  for (const FieldInfo& f : kFields) {
    if (written.has(f.field) || (f.scaling && other_scaling)) continue;
    f.copy(merged, from);
  }
  merged.window_k = spec.scalars.rope.window_k;

  if (spec.head_dim > 0 && merged.rotary_dim > spec.head_dim)
    throw Error(ErrorCode::Verify,
                fmt::format("the RoPE config rotates rotary_dim = {} dims (its head_dim is {}) but the "
                            "kernel's head dim is {}: use the model's head dim, or write rotary_dim in "
                            "the program", merged.rotary_dim, config.head_dim, spec.head_dim));
  // With the head dim decided at run time, check what can be checked now: the rotary dim is
  // always known here (the config sets it, or the program wrote it).
  const int check_dim = spec.head_dim > 0 ? spec.head_dim : merged.rotary_dim;
  if (check_dim > 0) validate_rope_params(merged, check_dim);
  spec.scalars.rope = std::move(merged);
}

void apply_hf_rope(KernelSpec& spec, const HfRopeConfig& config, const Program& program) {
  apply_hf_rope(spec, config, explicit_rope_fields(program.graph()));
}

}  // namespace attnfuse::rope
