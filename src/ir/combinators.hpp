// The one schema table of the DSL: for every combinator its Op, node kind, operand roles and
// parameters (positional order, type, default, validation rule). The text parser, the C++ DSL,
// the verifier, the printer and collect_scalars all read this table and nothing else.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "attnfuse/kernel_spec.hpp"
#include "ir/graph.hpp"

namespace attnfuse::ir {

// What an operand slot expects.
enum class Role { Query, Key, Value, Scores, Probabilities };

// How a parameter value is written. Integers are numbers with no fractional part.
enum class ParamType {
  Number,      // 0.125, 1e-3, -2
  Integer,     // 1024
  Word,        // an enum word such as `neox`
  NumberList,  // [1.0, 1.5]
  WordOrList,  // alibi slopes: `standard` or [0.5, 0.25]
};

// The range check applied to a value of the right type.
enum class Rule {
  None,
  Positive,         // finite and > 0
  NonNegative,      // finite and >= 0
  GreaterThanOne,   // finite and > 1
  AtLeastOne,       // integer >= 1
  EvenPositive,     // even integer >= 2
  PositiveEntries,  // non-empty list of finite numbers > 0
  FiniteEntries,    // non-empty list of finite numbers
};

// Whether a parameter may be left out, and what it then means. The canonical printout omits a
// `Defaulted` parameter written with its default value, so `rope(Q, K)` and
// `rope(Q, K, base=10000)` are the same program.
enum class Presence {
  Required,   // must be given
  Defaulted,  // has a constant default (default_number / default_word)
  Derived,    // defaults to something known only at run time (1/sqrt(D), D)
  Optional,   // unset unless given (some rope_types require it; see needed_by)
};

// A set of rope_type values, for parameters that only some RoPE scalings read.
struct RopeTypeSet {
  unsigned bits = 0;
  static constexpr RopeTypeSet all() { return {0x3Fu}; }
  constexpr bool has(RopeScaling s) const { return (bits >> static_cast<unsigned>(s)) & 1u; }
};

struct ParamSpec {
  std::string_view name;
  ParamType type = ParamType::Number;
  Rule rule = Rule::None;
  Presence presence = Presence::Optional;
  double default_number = 0.0;                  // Defaulted numbers
  std::string_view default_word;                // Defaulted words
  std::span<const std::string_view> words;      // Word / WordOrList: the valid words
  std::string_view default_doc;                 // "10000", "1/sqrt(D)", "required", ...
  std::string_view meaning;                     // one phrase, used in error messages
  RopeTypeSet used_by = RopeTypeSet::all();     // rope only: rope_types that read it
  RopeTypeSet needed_by = {};                   // rope only: rope_types that require it
};

struct CombinatorSpec {
  Op op = Op::None;
  std::string_view name;  // the DSL spelling
  NodeKind kind = NodeKind::TensorSym;
  std::span<const Role> operands;
  std::span<const ParamSpec> params;  // in positional order
  std::string_view usage;             // e.g. "sliding_window(s, window)", for messages
  // Appended to "too many arguments" / "takes no parameters" errors where users are likely to
  // pass a run-time tensor as an argument ("" for none).
  std::string_view argument_hint;
};

// Every combinator, in Op order (Op::None excluded).
std::span<const CombinatorSpec> combinators();
// nullptr if `name` is not a combinator.
const CombinatorSpec* find_combinator(std::string_view name);
// The entry of `op`; throws Error(Internal) for Op::None.
const CombinatorSpec& combinator(Op op);
// nullptr if `spec` has no parameter `name`.
const ParamSpec* find_param(const CombinatorSpec& spec, std::string_view name);
// The names of all combinators / of the parameters of one, for suggestions and messages.
std::span<const std::string_view> combinator_names();
std::vector<std::string_view> param_names(const CombinatorSpec& spec);

// Role name for messages: "the query tensor Q", "scores", ...
const char* role_name(Role r);

// "" if `value` has `spec`'s type and passes its rule, else the reason, e.g.
// "must be an integer >= 1, got 0".
std::string check_value(const ParamSpec& spec, const ParamValue& value);
// True for a Defaulted parameter written with its default value.
bool is_default(const ParamSpec& spec, const ParamValue& value);
// The canonical text of a value: shortest round-trip numbers ("0.125", "500000"), integers
// without a fraction, words as written, lists as "[1, 2.5]".
std::string format_value(const ParamValue& value);
std::string format_number(double v);

// Enum words <-> enums (nullopt-like: false if the word is not valid).
bool parse_rope_style(std::string_view word, RopeStyle* out);
bool parse_rope_scaling(std::string_view word, RopeScaling* out);

// The run-time scalars of a verified graph (scale, window, softcap, ALiBi slopes, RoPE
// parameters). Parameters left out keep ScalarArgs' defaults.
ScalarArgs collect_scalars(const Graph& graph);

}  // namespace attnfuse::ir
