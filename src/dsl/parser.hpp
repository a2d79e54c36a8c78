// The text DSL's parser: program text -> ir::Graph (unverified; Program::parse verifies it).
#pragma once

#include <string_view>

#include "ir/graph.hpp"

namespace attnfuse::dsl {

// Reads either one expression, `softmax(causal(rope(Q, K))) @ V`, or statements separated by
// new lines or ';' ending in `return`:
//   s = scaled_dot_product(Q, K, scale=0.125)   # comments run to the end of the line
//   s = causal(s); s = sliding_window(s, 1024)
//   return softmax(s) @ V
// Arguments are positional (operands first, then parameters in the schema's order) or
// keyword (`window=1024`); values are numbers (`-2`, `1e-5`), bare words (`gptj`) or lists
// (`[1.0, 2.0]`). A call may span lines. Q, K and V are the inputs; a name must be assigned
// before it is used. `matmul(p, V)` is accepted as another spelling of `p @ V`.
// Throws Error(Parse) for malformed text, unknown names or combinators, and Error(Verify) for
// arguments that do not fit the combinator's schema (a number where an operand belongs, an
// expression where a parameter belongs, too many arguments); every message has line, column
// and a caret. Everything else (operand roles, parameter values) is left to ir::verify.
ir::Graph parse(std::string_view text);

}  // namespace attnfuse::dsl
