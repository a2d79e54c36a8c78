// The schema table of the DSL's combinators and the value checks and scalar collection that
// read it (see combinators.hpp).
#include "ir/combinators.hpp"

#include <array>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "dsl/diagnostics.hpp"

// The table uses designated initializers that leave fields at their defaults on purpose; GCC
// warns about each one under -Wextra.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace attnfuse::ir {

namespace {

constexpr unsigned bit(RopeScaling s) { return 1u << static_cast<unsigned>(s); }
constexpr RopeTypeSet types(std::initializer_list<RopeScaling> list) {
  unsigned b = 0;
  for (RopeScaling s : list) b |= bit(s);
  return {b};
}
using RS = RopeScaling;

constexpr std::string_view kStyleWords[] = {"neox", "gptj"};
constexpr std::string_view kRopeTypeWords[] = {"default", "linear", "dynamic",
                                               "yarn",    "llama3", "longrope"};
constexpr std::string_view kSlopeWords[] = {"standard"};

constexpr ParamSpec kScale{.name = "scale", .type = ParamType::Number, .rule = Rule::Positive,
                           .presence = Presence::Derived, .default_doc = "1/sqrt(D)",
                           .meaning = "the factor multiplying q.k"};

// The RoPE parameters, Hugging Face names (rope_scaling / rope_parameters), positional order.
constexpr std::array<ParamSpec, 16> kRopeParams = {{
    {.name = "base", .type = ParamType::Number, .rule = Rule::GreaterThanOne,
     .presence = Presence::Defaulted, .default_number = 10000.0, .default_doc = "10000",
     .meaning = "the frequency base: theta_r = base^(-2r/rotary_dim) must shrink as r grows"},
    {.name = "style", .type = ParamType::Word, .presence = Presence::Defaulted,
     .default_word = "neox", .words = kStyleWords, .default_doc = "neox",
     .meaning = "which dimensions form a rotated pair: neox (r, r + rotary_dim/2), gptj (2r, 2r+1)"},
    {.name = "rotary_dim", .type = ParamType::Integer, .rule = Rule::EvenPositive,
     .presence = Presence::Derived, .default_doc = "D",
     .meaning = "RoPE rotates the first rotary_dim dimensions in pairs"},
    kScale,
    {.name = "rope_type", .type = ParamType::Word, .presence = Presence::Defaulted,
     .default_word = "default", .words = kRopeTypeWords, .default_doc = "default",
     .meaning = "the RoPE scaling (Hugging Face rope_scaling.rope_type)"},
    {.name = "factor", .type = ParamType::Number, .rule = Rule::Positive,
     .default_doc = "unset", .meaning = "the context extension factor",
     .used_by = types({RS::Linear, RS::Dynamic, RS::Yarn, RS::Llama3, RS::Longrope}),
     .needed_by = types({RS::Linear, RS::Dynamic, RS::Yarn, RS::Llama3})},
    {.name = "low_freq_factor", .type = ParamType::Number, .rule = Rule::Positive,
     .default_doc = "unset", .meaning = "llama3: wavelengths above original/low_freq_factor are scaled",
     .used_by = types({RS::Llama3}), .needed_by = types({RS::Llama3})},
    {.name = "high_freq_factor", .type = ParamType::Number, .rule = Rule::Positive,
     .default_doc = "unset", .meaning = "llama3: wavelengths below original/high_freq_factor are kept",
     .used_by = types({RS::Llama3}), .needed_by = types({RS::Llama3})},
    {.name = "original_max_position_embeddings", .type = ParamType::Integer,
     .rule = Rule::AtLeastOne, .default_doc = "unset",
     .meaning = "the context length the model was trained with",
     .used_by = types({RS::Dynamic, RS::Yarn, RS::Llama3, RS::Longrope}),
     .needed_by = types({RS::Dynamic, RS::Yarn, RS::Llama3})},
    {.name = "beta_fast", .type = ParamType::Number, .rule = Rule::Positive,
     .presence = Presence::Defaulted, .default_number = 32.0, .default_doc = "32",
     .meaning = "yarn: rotations per context above which a pair is not interpolated",
     .used_by = types({RS::Yarn})},
    {.name = "beta_slow", .type = ParamType::Number, .rule = Rule::Positive,
     .presence = Presence::Defaulted, .default_number = 1.0, .default_doc = "1",
     .meaning = "yarn: rotations per context below which a pair is fully interpolated",
     .used_by = types({RS::Yarn})},
    {.name = "attention_factor", .type = ParamType::Number, .rule = Rule::Positive,
     .default_doc = "unset", .meaning = "the factor on cos/sin (yarn, longrope)",
     .used_by = types({RS::Yarn, RS::Longrope})},
    {.name = "mscale", .type = ParamType::Number, .rule = Rule::NonNegative,
     .default_doc = "unset", .meaning = "yarn (DeepSeek): the mscale of the attention factor",
     .used_by = types({RS::Yarn})},
    {.name = "mscale_all_dim", .type = ParamType::Number, .rule = Rule::NonNegative,
     .default_doc = "unset", .meaning = "yarn (DeepSeek): the mscale_all_dim of the attention factor",
     .used_by = types({RS::Yarn})},
    {.name = "long_factor", .type = ParamType::NumberList, .rule = Rule::PositiveEntries,
     .default_doc = "unset", .meaning = "longrope: per-pair factors beyond the original context",
     .used_by = types({RS::Longrope}), .needed_by = types({RS::Longrope})},
    {.name = "short_factor", .type = ParamType::NumberList, .rule = Rule::PositiveEntries,
     .default_doc = "unset", .meaning = "longrope: per-pair factors within the original context",
     .used_by = types({RS::Longrope}), .needed_by = types({RS::Longrope})},
}};

constexpr ParamSpec kWindowK{.name = "k", .type = ParamType::Number, .rule = Rule::Positive,
                             .presence = Presence::Required, .default_doc = "required",
                             .meaning = "rope_window keeps pair r where |delta| <= k * lambda_r"};

template <size_t N>
constexpr std::array<ParamSpec, N + 1> prepend(const ParamSpec& first,
                                               const std::array<ParamSpec, N>& rest) {
  std::array<ParamSpec, N + 1> out{};
  out[0] = first;
  for (size_t i = 0; i < N; ++i) out[i + 1] = rest[i];
  return out;
}

constexpr std::array<ParamSpec, 1> kScaledDotParams = {kScale};
constexpr std::array<ParamSpec, 17> kRopeWindowParams = prepend(kWindowK, kRopeParams);
constexpr std::array<ParamSpec, 1> kSlidingParams = {{
    {.name = "window", .type = ParamType::Integer, .rule = Rule::AtLeastOne,
     .presence = Presence::Required, .default_doc = "required",
     .meaning = "sliding_window keeps keys with |delta| < window"}}};
constexpr std::array<ParamSpec, 1> kAlibiParams = {{
    {.name = "slopes", .type = ParamType::WordOrList, .rule = Rule::FiniteEntries,
     .presence = Presence::Defaulted, .default_word = "standard", .words = kSlopeWords,
     .default_doc = "standard",
     .meaning = "one slope per query head (or one for all); `standard` is the ALiBi paper's"}}};
constexpr std::array<ParamSpec, 1> kSoftcapParams = {{
    {.name = "cap", .type = ParamType::Number, .rule = Rule::Positive,
     .presence = Presence::Required, .default_doc = "required",
     .meaning = "softcap computes cap * tanh(s / cap)"}}};

constexpr Role kQK[] = {Role::Query, Role::Key};
constexpr Role kS[] = {Role::Scores};
constexpr Role kPV[] = {Role::Probabilities, Role::Value};

const std::array<CombinatorSpec, 14> kTable = {{
    {Op::ScaledDotProduct, "scaled_dot_product", NodeKind::ScoreOp, kQK, kScaledDotParams,
     "scaled_dot_product(Q, K, scale=1/sqrt(D))"},
    {Op::Rope, "rope", NodeKind::ScoreOp, kQK, kRopeParams, "rope(Q, K, base=10000, ...)"},
    {Op::RopeWindow, "rope_window", NodeKind::ScoreOp, kQK, kRopeWindowParams,
     "rope_window(Q, K, k, base=10000, ...)"},
    {Op::Full, "full", NodeKind::MaskOp, kS, {}, "full(s)"},
    {Op::Causal, "causal", NodeKind::MaskOp, kS, {}, "causal(s)"},
    {Op::SlidingWindow, "sliding_window", NodeKind::MaskOp, kS, kSlidingParams,
     "sliding_window(s, window)"},
    {Op::BlockSparse, "block_sparse", NodeKind::MaskOp, kS, {}, "block_sparse(s)"},
    // Packed sequences: the boundaries are run-time tensors (cu_seqlens), not parameters.
    {Op::Document, "document", NodeKind::MaskOp, kS, {}, "document(s)",
     "; the documents are run-time tensors, not arguments: pass cu_seqlens_q and cu_seqlens_k "
     "with the call (CLI: --cu-seqlens-q, --cu-seqlens-k)"},
    {Op::Alibi, "alibi", NodeKind::BiasOp, kS, kAlibiParams, "alibi(s, slopes=standard)"},
    {Op::AdditiveBias, "additive_bias", NodeKind::BiasOp, kS, {}, "additive_bias(s)"},
    {Op::Softcap, "softcap", NodeKind::BiasOp, kS, kSoftcapParams, "softcap(s, cap)"},
    {Op::Softmax, "softmax", NodeKind::NormOp, kS, {}, "softmax(s)"},
    {Op::ReluAttention, "relu_attention", NodeKind::NormOp, kS, {}, "relu_attention(s)"},
    {Op::MatMul, "matmul", NodeKind::MatMulPV, kPV, {}, "p @ V"},
}};

std::string describe(const ParamValue& v) {
  if (const double* n = std::get_if<double>(&v)) return format_number(*n);
  if (const std::string* w = std::get_if<std::string>(&v)) return fmt::format("'{}'", *w);
  return fmt::format("the list {}", format_value(v));
}

bool contains(std::span<const std::string_view> words, std::string_view w) {
  for (std::string_view x : words)
    if (x == w) return true;
  return false;
}

std::string bad_word(const ParamSpec& s, const std::string& w) {
  return fmt::format("is '{}', which is not {}{}", w,
                     s.words.size() == 1 ? std::string(s.words[0])
                                         : "one of " + dsl::join_words(s.words, ", "),
                     dsl::did_you_mean(w, s.words));
}

}  // namespace

std::span<const CombinatorSpec> combinators() { return kTable; }

const CombinatorSpec* find_combinator(std::string_view name) {
  for (const auto& c : kTable)
    if (c.name == name) return &c;
  return nullptr;
}

const CombinatorSpec& combinator(Op op) {
  const int i = static_cast<int>(op) - 1;
  if (i < 0 || i >= static_cast<int>(kTable.size()) || kTable[static_cast<size_t>(i)].op != op)
    throw Error(ErrorCode::Internal, "combinator(): no schema entry for this op");
  return kTable[static_cast<size_t>(i)];
}

const ParamSpec* find_param(const CombinatorSpec& spec, std::string_view name) {
  for (const auto& p : spec.params)
    if (p.name == name) return &p;
  return nullptr;
}

std::span<const std::string_view> combinator_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& c : kTable) v.push_back(c.name);
    return v;
  }();
  return names;
}

std::vector<std::string_view> param_names(const CombinatorSpec& spec) {
  std::vector<std::string_view> v;
  for (const auto& p : spec.params) v.push_back(p.name);
  return v;
}

const char* role_name(Role r) {
  switch (r) {
    case Role::Query: return "the query tensor Q";
    case Role::Key: return "the key tensor K";
    case Role::Value: return "the value tensor V";
    case Role::Scores: return "attention scores";
    case Role::Probabilities: return "attention probabilities";
  }
  return "?";
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Integral values print as integers so `4` and `4.0` are the same text.
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

std::string format_value(const ParamValue& value) {
  if (const double* n = std::get_if<double>(&value)) return format_number(*n);
  if (const std::string* w = std::get_if<std::string>(&value)) return *w;
  const auto& list = std::get<std::vector<double>>(value);
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + format_number(list[i]);
  return out + "]";
}

std::string check_value(const ParamSpec& s, const ParamValue& v) {
  const double* num = std::get_if<double>(&v);
  const std::string* word = std::get_if<std::string>(&v);
  const std::vector<double>* list = std::get_if<std::vector<double>>(&v);
  switch (s.type) {
    case ParamType::Number:
      if (!num) return fmt::format("must be a number, got {}", describe(v));
      break;
    case ParamType::Integer:
      if (!num) return fmt::format("must be an integer, got {}", describe(v));
      if (!std::isfinite(*num) || *num != std::floor(*num))
        return fmt::format("must be an integer, got {}", format_number(*num));
      if (std::fabs(*num) > 9007199254740992.0)
        return fmt::format("is too large, got {}", format_number(*num));
      break;
    case ParamType::Word:
      if (!word)
        return fmt::format("must be one of {}, got {}", dsl::join_words(s.words, ", "), describe(v));
      if (!contains(s.words, *word)) return bad_word(s, *word);
      break;
    case ParamType::NumberList:
      if (!list) return fmt::format("must be a list of numbers such as [1.0, 1.0], got {}", describe(v));
      break;
    case ParamType::WordOrList:
      if (num)
        return fmt::format("must be {} or a list of numbers such as [0.5, 0.25], got {}",
                           dsl::join_words(s.words, " or "), describe(v));
      if (word && !contains(s.words, *word)) return bad_word(s, *word);
      break;
  }
  auto finite_positive = [](double x) { return std::isfinite(x) && x > 0; };
  switch (s.rule) {
    case Rule::None: break;
    case Rule::Positive:
      if (!finite_positive(*num)) return fmt::format("must be a finite number > 0, got {}", describe(v));
      break;
    case Rule::NonNegative:
      if (!(std::isfinite(*num) && *num >= 0))
        return fmt::format("must be a finite number >= 0, got {}", describe(v));
      break;
    case Rule::GreaterThanOne:
      if (!(std::isfinite(*num) && *num > 1))
        return fmt::format("must be a finite number > 1, got {}", describe(v));
      break;
    case Rule::AtLeastOne:
      if (*num < 1) return fmt::format("must be an integer >= 1, got {}", describe(v));
      break;
    case Rule::EvenPositive:
      if (*num < 2 || std::fmod(*num, 2.0) != 0)
        return fmt::format("must be a positive even integer, got {}", describe(v));
      break;
    case Rule::PositiveEntries:
    case Rule::FiniteEntries:
      if (!list) break;  // a valid word (alibi's `standard`)
      if (list->empty()) return "must be a non-empty list of numbers, got []";
      for (double x : *list) {
        if (s.rule == Rule::PositiveEntries ? !finite_positive(x) : !std::isfinite(x))
          return fmt::format("must hold only finite numbers{}, got {}",
                             s.rule == Rule::PositiveEntries ? " > 0" : "", describe(v));
      }
      break;
  }
  return {};
}

bool is_default(const ParamSpec& s, const ParamValue& value) {
  if (s.presence != Presence::Defaulted) return false;
  if (const double* n = std::get_if<double>(&value))
    return s.default_word.empty() && *n == s.default_number;
  if (const std::string* w = std::get_if<std::string>(&value)) return *w == s.default_word;
  return false;
}

bool parse_rope_style(std::string_view word, RopeStyle* out) {
  for (RopeStyle s : {RopeStyle::Neox, RopeStyle::Gptj})
    if (word == rope_style_name(s)) return *out = s, true;
  return false;
}

bool parse_rope_scaling(std::string_view word, RopeScaling* out) {
  for (RopeScaling s : {RS::None, RS::Linear, RS::Dynamic, RS::Yarn, RS::Llama3, RS::Longrope})
    if (word == rope_scaling_name(s)) return *out = s, true;
  return false;
}

namespace {

const double* number(const Node& n, const char* name) {
  const Param* p = n.param(name);
  return p ? std::get_if<double>(&p->value) : nullptr;
}

void collect_rope(const Node& n, RopeParams& r) {
  if (const double* v = number(n, "base")) r.base = *v;
  if (const Param* p = n.param("style"))
    if (const auto* w = std::get_if<std::string>(&p->value)) parse_rope_style(*w, &r.style);
  if (const double* v = number(n, "rotary_dim")) r.rotary_dim = static_cast<int>(*v);
  if (const Param* p = n.param("rope_type"))
    if (const auto* w = std::get_if<std::string>(&p->value)) parse_rope_scaling(*w, &r.rope_type);
  if (const double* v = number(n, "factor")) r.factor = *v;
  if (const double* v = number(n, "low_freq_factor")) r.low_freq_factor = *v;
  if (const double* v = number(n, "high_freq_factor")) r.high_freq_factor = *v;
  if (const double* v = number(n, "original_max_position_embeddings"))
    r.original_max_position_embeddings = static_cast<int64_t>(*v);
  if (const double* v = number(n, "beta_fast")) r.beta_fast = *v;
  if (const double* v = number(n, "beta_slow")) r.beta_slow = *v;
  if (const double* v = number(n, "attention_factor")) r.attention_factor = *v;
  if (const double* v = number(n, "mscale")) r.mscale = *v;
  if (const double* v = number(n, "mscale_all_dim")) r.mscale_all_dim = *v;
  if (const Param* p = n.param("long_factor"))
    if (const auto* l = std::get_if<std::vector<double>>(&p->value)) r.long_factor = *l;
  if (const Param* p = n.param("short_factor"))
    if (const auto* l = std::get_if<std::vector<double>>(&p->value)) r.short_factor = *l;
  if (const double* v = number(n, "k")) r.window_k = *v;
}

}  // namespace

ScalarArgs collect_scalars(const Graph& graph) {
  ScalarArgs out;
  for (const Node& n : graph.nodes()) {
    switch (n.op) {
      case Op::ScaledDotProduct:
        if (const double* v = number(n, "scale")) out.scale = *v;
        break;
      case Op::Rope:
      case Op::RopeWindow:
        if (const double* v = number(n, "scale")) out.scale = *v;
        collect_rope(n, out.rope);
        break;
      case Op::SlidingWindow:
        if (const double* v = number(n, "window")) out.window = static_cast<int64_t>(*v);
        break;
      case Op::Softcap:
        if (const double* v = number(n, "cap")) out.softcap = *v;
        break;
      case Op::Alibi:
        if (const Param* p = n.param("slopes")) {
          if (const auto* l = std::get_if<std::vector<double>>(&p->value)) {
            out.alibi = AlibiSlopes::Custom;
            out.alibi_slopes = *l;
          }
        }
        break;
      default: break;
    }
  }
  return out;
}

}  // namespace attnfuse::ir
