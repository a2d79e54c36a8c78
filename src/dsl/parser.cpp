// The text DSL's recursive-descent parser and its lowering to ir::Graph (see parser.hpp).
#include "dsl/parser.hpp"

#include <map>
#include <memory>

#include <fmt/format.h>

#include "dsl/diagnostics.hpp"
#include "dsl/lexer.hpp"
#include "ir/combinators.hpp"

namespace attnfuse::dsl {

namespace {

struct Ast;
using AstPtr = std::unique_ptr<Ast>;

struct Arg {
  std::string_view keyword;  // empty: positional
  AstPtr value;
  SourceLoc loc;  // the whole argument, `window=8` or `8`
};

struct Ast {
  enum class Kind { Name, Number, List, Call, MatMul };
  Kind kind = Kind::Name;
  std::string_view text;  // Name, Call: the identifier
  double number = 0;
  std::vector<double> list;
  std::vector<Arg> args;  // Call
  AstPtr lhs, rhs;        // MatMul
  SourceLoc loc;          // Name, Call: the identifier; MatMul: '@'; Number, List: the literal
};

struct Stmt {
  enum class Kind { Assign, Return, Expr };
  Kind kind = Kind::Expr;
  std::string_view target;  // Assign
  SourceLoc target_loc;
  AstPtr value;
  SourceLoc loc;  // the statement's first token
};

// From the start of `a` to the end of `b` (to the end of a's line when they are on two lines).
SourceLoc span(SourceLoc a, SourceLoc b) {
  if (a.line != b.line) return SourceLoc{a.line, a.col, 1 << 20};
  return SourceLoc{a.line, a.col, b.col + b.len - a.col};
}

bool is_input(std::string_view name) { return name == "Q" || name == "K" || name == "V"; }

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src), toks_(lex(src)) {}

  std::vector<Stmt> program() {
    skip_separators();
    if (at(Tok::End))
      error(peek().loc, "empty program: write an attention expression such as "
                        "softmax(causal(scaled_dot_product(Q, K))) @ V");
    std::vector<Stmt> stmts;
    while (true) {
      stmts.push_back(statement());
      if (at(Tok::End)) break;
      if (!at(Tok::Newline) && !at(Tok::Semicolon)) {
        if (at(Tok::RParen) || at(Tok::RBracket))
          error(peek().loc, fmt::format("unmatched '{}'", peek().text));
        error(peek().loc, fmt::format("expected a new line or ';' after this statement, got {}",
                                      describe(peek())));
      }
      skip_separators();
      if (at(Tok::End)) break;
    }
    return stmts;
  }

 private:
  static constexpr int kMaxDepth = 200;

  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  bool at(Tok t) const { return peek().kind == t; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  const Token& last() const { return toks_[pos_ > 0 ? pos_ - 1 : 0]; }
  void skip_separators() {
    while (at(Tok::Newline) || at(Tok::Semicolon)) next();
  }
  [[noreturn]] void error(SourceLoc loc, const std::string& msg) const {
    fail_at(ErrorCode::Parse, src_, loc, msg);
  }
  static std::string describe(const Token& t) {
    if (t.kind == Tok::Ident) return fmt::format("'{}'", t.text);
    if (t.kind == Tok::Number) return fmt::format("the number {}", t.text);
    return tok_name(t.kind);
  }

  Stmt statement() {
    Stmt s;
    s.loc = peek().loc;
    if (at(Tok::Ident) && peek().text == "return") {
      next();
      s.kind = Stmt::Kind::Return;
      if (at(Tok::Newline) || at(Tok::Semicolon) || at(Tok::End))
        error(s.loc, "`return` needs the program's result, e.g. return softmax(s) @ V");
    } else if (at(Tok::Ident) && peek(1).kind == Tok::Assign) {
      s.kind = Stmt::Kind::Assign;
      s.target = peek().text;
      s.target_loc = next().loc;
      next();
    }
    s.value = expr(0);
    return s;
  }

  AstPtr expr(int depth) {
    if (depth > kMaxDepth) error(peek().loc, "expression nested too deeply");
    AstPtr lhs = primary(depth);
    int chained = 0;
    while (at(Tok::At)) {
      // Lowering recurses down the chain; a valid program has one `@` anyway.
      if (++chained > kMaxDepth) error(peek().loc, "too many '@' in one expression");
      auto m = std::make_unique<Ast>();
      m->kind = Ast::Kind::MatMul;
      m->loc = next().loc;
      m->lhs = std::move(lhs);
      m->rhs = primary(depth);
      lhs = std::move(m);
    }
    return lhs;
  }

  AstPtr primary(int depth) {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Ident: {
        if (peek(1).kind == Tok::LParen) return call(depth);
        auto a = std::make_unique<Ast>();
        a->kind = Ast::Kind::Name;
        a->text = t.text;
        a->loc = next().loc;
        return a;
      }
      case Tok::LParen: {
        const SourceLoc open = next().loc;
        AstPtr inner = expr(depth + 1);
        if (!at(Tok::RParen))
          error(open, fmt::format("this '(' is never closed: expected ')', got {}", describe(peek())));
        next();
        return inner;
      }
      case Tok::Number:
      case Tok::Minus: {
        const SourceLoc start = t.loc;
        const bool neg = t.kind == Tok::Minus;
        if (neg) {
          next();
          if (!at(Tok::Number)) error(start, fmt::format("'-' must be followed by a number, got {}", describe(peek())));
        }
        auto a = std::make_unique<Ast>();
        a->kind = Ast::Kind::Number;
        a->number = neg ? -peek().number : peek().number;
        a->loc = span(start, next().loc);
        return a;
      }
      case Tok::LBracket: return list();
      case Tok::End:
        error(t.loc, "the program ends in the middle of an expression");
      default:
        error(t.loc, fmt::format("expected an expression, got {}", describe(t)));
    }
  }

  AstPtr list() {
    const SourceLoc open = next().loc;
    auto a = std::make_unique<Ast>();
    a->kind = Ast::Kind::List;
    while (!at(Tok::RBracket)) {
      if (at(Tok::End)) error(open, "unterminated list: this '[' is never closed; add ']'");
      const SourceLoc start = peek().loc;
      const bool neg = at(Tok::Minus);
      if (neg) next();
      if (!at(Tok::Number))
        error(neg ? start : peek().loc,
              fmt::format("list entries must be numbers, got {}", describe(peek())));
      a->list.push_back(neg ? -next().number : next().number);
      if (at(Tok::Comma)) next();
      else if (!at(Tok::RBracket) && !at(Tok::End))
        error(peek().loc, fmt::format("expected ',' or ']' in the list, got {}", describe(peek())));
    }
    a->loc = span(open, next().loc);
    return a;
  }

  AstPtr call(int depth) {
    if (depth > kMaxDepth) error(peek().loc, "expression nested too deeply");
    auto c = std::make_unique<Ast>();
    c->kind = Ast::Kind::Call;
    c->text = peek().text;
    c->loc = next().loc;
    const SourceLoc open = next().loc;  // '('
    auto unterminated = [&] {
      error(c->loc, fmt::format("unterminated call: the '(' after {} (column {}) is never closed; "
                                "add ')'", c->text, open.col));
    };
    bool keyword_seen = false;
    while (!at(Tok::RParen)) {
      if (at(Tok::End)) unterminated();
      const size_t first = pos_;
      Arg arg;
      if (at(Tok::Ident) && peek(1).kind == Tok::Assign) {
        arg.keyword = next().text;
        next();
        keyword_seen = true;
      } else if (keyword_seen) {
        AstPtr v = expr(depth + 1);
        error(span(toks_[first].loc, last().loc),
              "positional argument after a keyword argument: give positional arguments first, or "
              "name this one");
      }
      arg.value = expr(depth + 1);
      arg.loc = span(toks_[first].loc, last().loc);
      c->args.push_back(std::move(arg));
      if (at(Tok::Comma)) next();
      else if (at(Tok::End)) unterminated();
      else if (!at(Tok::RParen))
        error(peek().loc, fmt::format("expected ',' or ')' in the call to {}, got {}", c->text,
                                      describe(peek())));
    }
    next();
    return c;
  }

  std::string_view src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
};

// Lowers statements to graph nodes in order, binding names as it goes.
class Lowerer {
 public:
  explicit Lowerer(std::string_view src) : src_(src), b_(std::string(src)) {}

  ir::Graph run(const std::vector<Stmt>& stmts) {
    if (stmts.size() == 1 && stmts[0].kind == Stmt::Kind::Expr)
      return std::move(b_).finish(lower(*stmts[0].value));
    for (const Stmt& s : stmts)
      if (s.kind == Stmt::Kind::Assign) assigned_at_.emplace(std::string(s.target), s.target_loc);
    for (size_t i = 0; i < stmts.size(); ++i) {
      const Stmt& s = stmts[i];
      const bool is_last = i + 1 == stmts.size();
      switch (s.kind) {
        case Stmt::Kind::Expr:
          if (is_last)
            error(s.loc, "statement form needs `return`: the last statement must be `return "
                         "<expression>`, e.g. return softmax(s) @ V");
          error(s.loc, "the result of this expression is discarded: assign it (s = ...) or "
                       "return it");
        case Stmt::Kind::Return:
          if (!is_last) error(stmts[i + 1].loc, "this statement comes after `return` and would never run");
          return std::move(b_).finish(lower(*s.value));
        case Stmt::Kind::Assign: {
          check_target(s);
          const ir::NodeId id = lower(*s.value);
          env_[std::string(s.target)] = id;
          break;
        }
      }
    }
    error(stmts.back().loc, "statement form needs a final `return`, e.g. return softmax(s) @ V");
  }

 private:
  [[noreturn]] void error(SourceLoc loc, const std::string& msg, ErrorCode code = ErrorCode::Parse) const {
    fail_at(code, src_, loc, msg);
  }

  void check_target(const Stmt& s) const {
    if (is_input(s.target))
      error(s.target_loc, fmt::format("cannot assign to the input {}: pick another name, e.g. s", s.target));
    if (ir::find_combinator(s.target))
      error(s.target_loc, fmt::format("cannot assign to '{}': it is the name of a combinator", s.target));
    if (s.target == "return") error(s.target_loc, "cannot assign to `return`");
  }

  ir::NodeId lower(const Ast& e) {
    switch (e.kind) {
      case Ast::Kind::Name: return name_ref(e);
      case Ast::Kind::Call: return call(e);
      case Ast::Kind::MatMul: {
        const ir::NodeId l = lower(*e.lhs);
        const ir::NodeId r = lower(*e.rhs);
        return b_.call(ir::Op::MatMul, {l, r}, {}, e.loc);
      }
      case Ast::Kind::Number:
      case Ast::Kind::List:
        error(e.loc, fmt::format("expected an attention expression here, got {}",
                                 e.kind == Ast::Kind::Number ? "a number" : "a list"));
    }
    return -1;
  }

  ir::NodeId name_ref(const Ast& e) {
    const std::string name(e.text);
    if (is_input(name)) {
      ir::NodeId& t = inputs_[name == "Q" ? 0 : name == "K" ? 1 : 2];
      if (t < 0) t = b_.tensor(name, e.loc);
      return t;
    }
    if (auto it = env_.find(name); it != env_.end()) return it->second;
    if (const ir::CombinatorSpec* c = ir::find_combinator(name))
      error(e.loc, fmt::format("'{}' is a combinator: call it, e.g. {}", name, c->usage));
    if (name == "return") error(e.loc, "`return` starts a statement; it cannot appear inside an expression");
    if (auto it = assigned_at_.find(name); it != assigned_at_.end())
      error(e.loc, fmt::format("'{}' is used before it is assigned (line {}); statements run in order",
                               name, it->second.line));
    std::vector<std::string_view> known = {"Q", "K", "V"};
    std::vector<std::string> bound;
    for (const auto& [n, id] : env_) bound.push_back(n);
    for (const auto& n : bound) known.push_back(n);
    std::string msg = fmt::format("unknown name '{}'{}; the inputs are Q, K and V", name,
                                  did_you_mean(name, known));
    if (!bound.empty()) {
      std::vector<std::string_view> v(bound.begin(), bound.end());
      msg += fmt::format(", and the names assigned so far are {}", join_words(v));
    }
    error(e.loc, msg);
  }

  ir::NodeId call(const Ast& e) {
    const ir::CombinatorSpec* spec = ir::find_combinator(e.text);
    if (!spec) {
      if (env_.count(std::string(e.text)) || is_input(e.text))
        error(e.loc, fmt::format("'{}' is a value, not a combinator, so it cannot be called", e.text));
      const std::string hint = did_you_mean(e.text, ir::combinator_names());
      error(e.loc, hint.empty()
                       ? fmt::format("unknown combinator '{}'; the combinators are {}", e.text,
                                     join_words(ir::combinator_names()))
                       : fmt::format("unknown combinator '{}'{}", e.text, hint));
    }
    std::vector<ir::NodeId> inputs;
    std::vector<ir::Param> params;
    size_t positional = 0;
    for (const Arg& a : e.args) {
      if (!a.keyword.empty()) {
        params.push_back(param(*spec, std::string(a.keyword), a));
        continue;
      }
      const size_t i = positional++;
      if (i < spec->operands.size()) {
        if (a.value->kind == Ast::Kind::Number || a.value->kind == Ast::Kind::List)
          error(a.loc, fmt::format("operand {} of {} must be {}, but it is {}; parameters come after "
                                   "the operands: {}", i + 1, spec->name, ir::role_name(spec->operands[i]),
                                   a.value->kind == Ast::Kind::Number ? "a number" : "a list", spec->usage),
                ErrorCode::Verify);
        inputs.push_back(lower(*a.value));
        continue;
      }
      const size_t k = i - spec->operands.size();
      if (k >= spec->params.size())
        error(a.loc, spec->params.empty()
                         ? fmt::format("too many arguments: {} takes {} operand{} and no parameters ({}){}",
                                       spec->name, spec->operands.size(),
                                       spec->operands.size() == 1 ? "" : "s", spec->usage, spec->argument_hint)
                         : fmt::format("too many arguments: {} takes at most {} positional "
                                       "arguments ({}); give the others by name",
                                       spec->name, spec->operands.size() + spec->params.size(), spec->usage),
              ErrorCode::Verify);
      params.push_back(param(*spec, std::string(spec->params[k].name), a));
    }
    return b_.call(spec->op, std::move(inputs), std::move(params), e.loc);
  }

  ir::Param param(const ir::CombinatorSpec& spec, std::string name, const Arg& a) const {
    const Ast& v = *a.value;
    ir::Param p;
    p.loc = a.loc;
    switch (v.kind) {
      case Ast::Kind::Number: p.value = v.number; break;
      case Ast::Kind::List: p.value = v.list; break;
      case Ast::Kind::Name: p.value = std::string(v.text); break;
      default:
        error(a.loc, fmt::format("parameter '{}' of {} must be a value (a number, a word or a list), "
                                 "not an expression", name, spec.name), ErrorCode::Verify);
    }
    p.name = std::move(name);
    return p;
  }

  std::string_view src_;
  ir::Builder b_;
  std::map<std::string, ir::NodeId> env_;
  std::map<std::string, SourceLoc> assigned_at_;
  ir::NodeId inputs_[3] = {-1, -1, -1};
};

}  // namespace

ir::Graph parse(std::string_view text) {
  Parser parser(text);
  std::vector<Stmt> stmts = parser.program();
  return Lowerer(text).run(stmts);
}

}  // namespace attnfuse::dsl
