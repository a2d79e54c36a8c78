// The embedded C++ DSL: the text DSL's combinators as C++ functions, so a program can be built
// in code, e.g.
//   using namespace attnfuse::dsl;
//   auto o = matmul(softmax(causal(rope(Q, K, {.base = 500000}))), V);
//   attnfuse::Program p = compile_program(o);   // verified; same signature as the text form
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/program.hpp"

namespace attnfuse::dsl {

struct ExprNode;  // defined in src/dsl/cpp_dsl.cpp

// An input symbol. Literal, so the globals Q, K, V are usable at any point of static init.
struct Sym {
  const char* name;
};
inline constexpr Sym Q{"Q"};
inline constexpr Sym K{"K"};
inline constexpr Sym V{"V"};

// A (sub)program: an immutable expression tree; copies share it. Expressions are checked only
// when verified (compile_program / Program::from_graph), exactly like the text form.
class Expr {
 public:
  Expr(Sym s);  // implicit, so Q, K and V can be passed directly
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

  // The IR graph of this expression (include "ir/graph.hpp" to use it). Shared
  // subexpressions become one node; Q, K and V one TensorSym each.
  ir::Graph graph() const;
  // The expression in the text DSL (one-expression form).
  std::string text() const;
  const std::shared_ptr<const ExprNode>& node() const { return node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

// A tensor symbol other than Q, K, V (no combinator takes one yet; the verifier says so).
Expr tensor(std::string name);

// ---- Parameters. Unset fields are left out of the program (the text form's defaults). The
// explicit `= std::nullopt` keeps GCC's -Wextra quiet about designated initializers. ----------

struct ScaledDotOptions {
  std::optional<double> scale = std::nullopt;  // unset: 1/sqrt(D)
};

// Hugging Face names; see RopeParams in attnfuse/kernel_spec.hpp and DESIGN §2.
struct RopeOptions {
  std::optional<double> base = std::nullopt;  // 10000
  std::optional<RopeStyle> style = std::nullopt;  // neox
  std::optional<int> rotary_dim = std::nullopt;   // D
  std::optional<double> scale = std::nullopt;     // 1/sqrt(D)
  std::optional<RopeScaling> rope_type = std::nullopt;  // RopeScaling::None ("default")
  std::optional<double> factor = std::nullopt;
  std::optional<double> low_freq_factor = std::nullopt;
  std::optional<double> high_freq_factor = std::nullopt;
  std::optional<int64_t> original_max_position_embeddings = std::nullopt;
  std::optional<double> beta_fast = std::nullopt;
  std::optional<double> beta_slow = std::nullopt;
  std::optional<double> attention_factor = std::nullopt;
  std::optional<double> mscale = std::nullopt;
  std::optional<double> mscale_all_dim = std::nullopt;
  std::vector<double> long_factor = {};   // empty: unset
  std::vector<double> short_factor = {};  // empty: unset
};

// ---- Combinators (DESIGN §2) --------------------------------------------------------------

Expr scaled_dot_product(const Expr& q, const Expr& k, const ScaledDotOptions& options = {});
Expr rope(const Expr& q, const Expr& k, const RopeOptions& options = {});
// `k` keeps pair r where |delta| <= k * lambda_r (ATFlash); named `k` in the text form.
Expr rope_window(const Expr& q, const Expr& k, double window_k, const RopeOptions& options = {});

Expr full(const Expr& s);
Expr causal(const Expr& s);
Expr sliding_window(const Expr& s, int64_t window);
Expr block_sparse(const Expr& s);
// Packed sequences: the documents come from AttentionArgs::cu_seqlens_q / cu_seqlens_k.
Expr document(const Expr& s);

Expr alibi(const Expr& s);  // standard slopes
Expr alibi(const Expr& s, std::vector<double> slopes);
Expr additive_bias(const Expr& s);
Expr softcap(const Expr& s, double cap);

Expr softmax(const Expr& s);
Expr relu_attention(const Expr& s);

// `p @ V` of the text form.
Expr matmul(const Expr& p, const Expr& v);

// Verifies the expression and wraps it as a Program. Throws Error(Verify) with the message of
// the text form and a caret under the combinator in the program's text rendering.
Program compile_program(const Expr& e);

}  // namespace attnfuse::dsl
