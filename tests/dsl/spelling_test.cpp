// Every well-formed structure (3 score ops x 9 mask sets x 16 modifier sequences x 2 norms) is
// accepted, spelled many random ways in text (statement vs nested, positional vs keyword,
// parameter order, mask placement, explicit defaults, number spelling, whitespace, comments)
// and built with the C++ DSL: all spellings give one canonical printout and signature, the
// DSL rendering reads back to it, and different programs never share one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attnfuse/dsl.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "ir/combinators.hpp"
#include "ir/graph.hpp"
#include "ir/printer.hpp"
#include "ir/signature.hpp"

namespace attnfuse {
namespace {

using ir::Op;
using Params = std::vector<std::pair<std::string, ir::ParamValue>>;  // in schema order

struct Call {
  Op op = Op::None;
  Params params;
};

struct Spec {
  Call score;
  std::vector<Call> masks;      // any order
  std::vector<Call> modifiers;  // program order, innermost first
  Op norm = Op::Softmax;
};

using Rng = std::mt19937_64;
int pick(Rng& rng, int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }
bool coin(Rng& rng) { return rng() & 1u; }

// Puts parameters in the schema's positional order (what a positional spelling needs).
Params in_schema_order(Op op, Params ps) {
  const auto& spec = ir::combinator(op);
  auto index = [&](const std::string& n) {
    for (size_t i = 0; i < spec.params.size(); ++i)
      if (spec.params[i].name == n) return i;
    ADD_FAILURE() << "test bug: no parameter " << n;
    return size_t{0};
  };
  std::sort(ps.begin(), ps.end(), [&](const auto& a, const auto& b) { return index(a.first) < index(b.first); });
  return ps;
}

std::vector<Params> rope_param_sets() {
  using L = std::vector<double>;
  return {
      {},
      {{"base", 500000.0}},
      {{"base", 1e6}, {"style", std::string("gptj")}},
      {{"rotary_dim", 64.0}, {"scale", 0.1}, {"rope_type", std::string("linear")}, {"factor", 2.0}},
      {{"base", 500000.0}, {"rope_type", std::string("llama3")}, {"factor", 8.0},
       {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192.0}},
      {{"rope_type", std::string("yarn")}, {"factor", 4.0}, {"original_max_position_embeddings", 4096.0},
       {"beta_fast", 16.0}, {"attention_factor", 1.1}, {"mscale", 1.0}, {"mscale_all_dim", 0.5}},
      {{"rotary_dim", 8.0}, {"rope_type", std::string("longrope")}, {"long_factor", L{1, 1.5, 2, 4}},
       {"short_factor", L{1, 1, 1, 1.25}}, {"original_max_position_embeddings", 4096.0},
       {"attention_factor", 1.2}},
      {{"style", std::string("gptj")}, {"rope_type", std::string("dynamic")}, {"factor", 2.0},
       {"original_max_position_embeddings", 2048.0}},
  };
}

Call random_score(Op op, Rng& rng) {
  Call c{op, {}};
  if (op == Op::ScaledDotProduct) {
    const double scales[] = {0.125, 0.08838834764831845};
    if (pick(rng, 3) > 0) c.params = {{"scale", scales[pick(rng, 2)]}};
    return c;
  }
  auto sets = rope_param_sets();
  c.params = sets[static_cast<size_t>(pick(rng, static_cast<int>(sets.size())))];
  if (op == Op::RopeWindow) c.params.push_back({"k", coin(rng) ? 1.0 : 2.5});
  c.params = in_schema_order(op, c.params);
  return c;
}

Call random_chain_call(Op op, Rng& rng) {
  Call c{op, {}};
  if (op == Op::SlidingWindow) {
    const double w[] = {1, 128, 4096};
    c.params = {{"window", w[pick(rng, 3)]}};
  } else if (op == Op::Softcap) {
    c.params = {{"cap", coin(rng) ? 30.0 : 50.5}};
  } else if (op == Op::Alibi && coin(rng)) {
    c.params = {{"slopes", std::vector<double>{0.5, 0.25, 0.125, 0.0625}}};
  }
  return c;
}

// All 1632 structures, with random parameter values: 3 score ops x 17 mask sets (none, full,
// and every non-empty subset of causal, sliding_window, block_sparse, document) x 16 ordered
// modifier chains x 2 normalizations.
std::vector<Spec> all_specs(Rng& rng) {
  std::vector<std::vector<Op>> mask_sets = {{}, {Op::Full}};
  const std::vector<Op> selecting = {Op::Causal, Op::SlidingWindow, Op::BlockSparse, Op::Document};
  for (unsigned bits = 1; bits < 16; ++bits) {
    std::vector<Op> set;
    for (unsigned i = 0; i < 4; ++i)
      if (bits & (1u << i)) set.push_back(selecting[i]);
    mask_sets.push_back(set);
  }
  std::vector<std::vector<Op>> mod_seqs;
  const std::vector<Op> mods = {Op::Alibi, Op::AdditiveBias, Op::Softcap};
  for (int mask = 0; mask < 8; ++mask) {
    std::vector<Op> subset;
    for (int i = 0; i < 3; ++i)
      if (mask & (1 << i)) subset.push_back(mods[static_cast<size_t>(i)]);
    std::sort(subset.begin(), subset.end());
    do mod_seqs.push_back(subset);
    while (std::next_permutation(subset.begin(), subset.end()));
  }
  std::vector<Spec> out;
  for (Op score : {Op::ScaledDotProduct, Op::Rope, Op::RopeWindow})
    for (const auto& ms : mask_sets)
      for (const auto& seq : mod_seqs)
        for (Op norm : {Op::Softmax, Op::ReluAttention}) {
          Spec s;
          s.score = random_score(score, rng);
          for (Op m : ms) s.masks.push_back(random_chain_call(m, rng));
          for (Op m : seq) s.modifiers.push_back(random_chain_call(m, rng));
          s.norm = norm;
          out.push_back(std::move(s));
        }
  return out;
}

// What the program means: defaults dropped, masks as a set, modifiers in order.
std::string semantic_key(const Spec& s) {
  auto call_key = [](const Call& c) {
    std::map<std::string, std::string> ps;
    for (const auto& [n, v] : c.params) ps[n] = ir::format_value(v);
    std::string key = ir::op_name(c.op);
    for (const auto& [n, v] : ps) key += "," + n + "=" + v;
    return key;
  };
  std::vector<std::string> masks;
  for (const auto& m : s.masks) masks.push_back(call_key(m));
  std::sort(masks.begin(), masks.end());
  std::string key = call_key(s.score) + "|" + fmt::format("{}", fmt::join(masks, ";")) + "|";
  for (const auto& m : s.modifiers) key += call_key(m) + ";";
  return key + "|" + ir::op_name(s.norm);
}

// ---- Text spellings ---------------------------------------------------------------------------

std::string spell_number(double v, Rng& rng) {
  std::vector<std::string> forms = {ir::format_number(v)};
  if (v == static_cast<double>(static_cast<long long>(v))) forms.push_back(fmt::format("{}.0", static_cast<long long>(v)));
  const std::string e = fmt::format("{:e}", v);
  if (std::strtod(e.c_str(), nullptr) == v) forms.push_back(e);
  const std::string g = fmt::format("{:.17g}", v);
  forms.push_back(g);
  return forms[static_cast<size_t>(pick(rng, static_cast<int>(forms.size())))];
}

std::string spell_value(const ir::ParamValue& v, Rng& rng) {
  if (const double* n = std::get_if<double>(&v)) return spell_number(*n, rng);
  if (const std::string* w = std::get_if<std::string>(&v)) return *w;
  std::string out = "[";
  const auto& l = std::get<std::vector<double>>(v);
  for (size_t i = 0; i < l.size(); ++i) out += (i ? (coin(rng) ? ", " : ",") : "") + spell_number(l[i], rng);
  return out + (coin(rng) ? "]" : ", ]");
}

std::string sep(Rng& rng) {
  const char* forms[] = {", ", ",", " , ", ",\n    ", ",  # note\n  "};
  return forms[pick(rng, 5)];
}

// name(operands..., params...) with a random positional prefix, shuffled keywords and, now and
// then, a parameter spelled with its default value.
std::string spell_call(const Call& c, const std::vector<std::string>& operands, Rng& rng) {
  const auto& spec = ir::combinator(c.op);
  size_t k = 0;  // how many leading schema parameters are present in order
  while (k < c.params.size() && k < spec.params.size() && c.params[k].first == spec.params[k].name) ++k;
  const size_t positional = static_cast<size_t>(pick(rng, static_cast<int>(k) + 1));
  std::vector<std::string> args = operands;
  for (size_t i = 0; i < positional; ++i) args.push_back(spell_value(c.params[i].second, rng));
  std::vector<std::string> keywords;
  for (size_t i = positional; i < c.params.size(); ++i)
    keywords.push_back(c.params[i].first + (coin(rng) ? "=" : " = ") + spell_value(c.params[i].second, rng));
  auto has = [&](const char* n) {
    for (const auto& p : c.params)
      if (p.first == n) return true;
    return false;
  };
  if (c.op == Op::Rope || c.op == Op::RopeWindow) {
    if (!has("base") && coin(rng)) keywords.push_back("base=10000");
    if (!has("style") && coin(rng)) keywords.push_back("style=neox");
    if (!has("rope_type") && coin(rng)) keywords.push_back("rope_type=default");
  }
  if (c.op == Op::Alibi && c.params.empty() && coin(rng))
    (coin(rng) ? keywords.push_back("slopes=standard") : args.push_back("standard"));
  std::shuffle(keywords.begin(), keywords.end(), rng);
  for (auto& kw : keywords) args.push_back(kw);
  std::string out = std::string(spec.name) + (coin(rng) ? "(" : "( ");
  for (size_t i = 0; i < args.size(); ++i) out += (i ? sep(rng) : "") + args[i];
  return out + (coin(rng) ? ")" : " )");
}

// The chain with masks placed at random among the modifiers (whose order is kept).
std::vector<Call> random_chain(const Spec& s, Rng& rng) {
  std::vector<Call> masks = s.masks;
  std::shuffle(masks.begin(), masks.end(), rng);
  std::vector<Call> out;
  size_t mi = 0, di = 0;
  while (mi < masks.size() || di < s.modifiers.size()) {
    const bool take_mask = di == s.modifiers.size() || (mi < masks.size() && coin(rng));
    out.push_back(take_mask ? masks[mi++] : s.modifiers[di++]);
  }
  return out;
}

std::string spell(const Spec& s, Rng& rng) {
  const std::vector<Call> chain = random_chain(s, rng);
  const std::string at = coin(rng) ? " @ " : "@";
  const std::string norm = ir::op_name(s.norm);
  if (coin(rng)) {  // one expression
    std::string e = spell_call(s.score, {"Q", "K"}, rng);
    for (const Call& c : chain) e = spell_call(c, {e}, rng);
    e = norm + "(" + e + ")";
    if (coin(rng)) e = "(" + e + ")";
    return (coin(rng) ? "  " : "") + e + at + "V" + (coin(rng) ? "\n" : "  # done\n");
  }
  const char* names[] = {"s", "x", "scores", "t1"};
  const std::string v = names[pick(rng, 4)];
  auto stmt_sep = [&] {
    const char* forms[] = {"\n", "; ", "\n\n", "\n# next step\n", " ;\n"};
    return std::string(forms[pick(rng, 5)]);
  };
  std::string out = v + " = " + spell_call(s.score, {"Q", "K"}, rng);
  for (size_t i = 0; i < chain.size(); ++i) {
    std::string e = spell_call(chain[i], {v}, rng);
    if (i + 1 < chain.size() && coin(rng)) e = spell_call(chain[++i], {e}, rng);  // two in one
    out += stmt_sep() + v + " = " + e;
  }
  if (coin(rng)) return out + stmt_sep() + "return " + norm + "(" + v + ")" + at + "V";
  return out + stmt_sep() + "p = " + norm + "(" + v + ")" + stmt_sep() + "return p" + at + "V\n";
}

// ---- The C++ DSL ------------------------------------------------------------------------------

double num(const ir::ParamValue& v) { return std::get<double>(v); }

dsl::RopeOptions rope_options(const Params& ps, double* k) {
  dsl::RopeOptions o;
  for (const auto& [n, v] : ps) {
    if (n == "k") *k = num(v);
    else if (n == "base") o.base = num(v);
    else if (n == "style") { RopeStyle s; ir::parse_rope_style(std::get<std::string>(v), &s); o.style = s; }
    else if (n == "rotary_dim") o.rotary_dim = static_cast<int>(num(v));
    else if (n == "scale") o.scale = num(v);
    else if (n == "rope_type") { RopeScaling s; ir::parse_rope_scaling(std::get<std::string>(v), &s); o.rope_type = s; }
    else if (n == "factor") o.factor = num(v);
    else if (n == "low_freq_factor") o.low_freq_factor = num(v);
    else if (n == "high_freq_factor") o.high_freq_factor = num(v);
    else if (n == "original_max_position_embeddings") o.original_max_position_embeddings = static_cast<int64_t>(num(v));
    else if (n == "beta_fast") o.beta_fast = num(v);
    else if (n == "beta_slow") o.beta_slow = num(v);
    else if (n == "attention_factor") o.attention_factor = num(v);
    else if (n == "mscale") o.mscale = num(v);
    else if (n == "mscale_all_dim") o.mscale_all_dim = num(v);
    else if (n == "long_factor") o.long_factor = std::get<std::vector<double>>(v);
    else if (n == "short_factor") o.short_factor = std::get<std::vector<double>>(v);
    else ADD_FAILURE() << "test bug: " << n;
  }
  return o;
}

dsl::Expr build(const Spec& s, Rng& rng) {
  using namespace dsl;
  Expr e = Q;
  double k = 0;
  switch (s.score.op) {
    case Op::ScaledDotProduct:
      e = s.score.params.empty() ? scaled_dot_product(Q, K)
                                 : scaled_dot_product(Q, K, {.scale = num(s.score.params[0].second)});
      break;
    case Op::Rope: e = rope(Q, K, rope_options(s.score.params, &k)); break;
    default: {
      RopeOptions o = rope_options(s.score.params, &k);
      e = rope_window(Q, K, k, o);
    }
  }
  for (const Call& c : random_chain(s, rng)) {
    switch (c.op) {
      case Op::Full: e = full(e); break;
      case Op::Causal: e = causal(e); break;
      case Op::SlidingWindow: e = sliding_window(e, static_cast<int64_t>(num(c.params[0].second))); break;
      case Op::BlockSparse: e = block_sparse(e); break;
      case Op::Document: e = document(e); break;
      case Op::Alibi:
        e = c.params.empty() ? alibi(e) : alibi(e, std::get<std::vector<double>>(c.params[0].second));
        break;
      case Op::AdditiveBias: e = additive_bias(e); break;
      case Op::Softcap: e = softcap(e, num(c.params[0].second)); break;
      default: ADD_FAILURE() << "test bug";
    }
  }
  e = s.norm == Op::Softmax ? softmax(e) : relu_attention(e);
  return matmul(e, V);
}

// ---- The tests --------------------------------------------------------------------------------

void check_all_spellings(uint64_t seed) {
  SCOPED_TRACE(fmt::format("seed {} (rerun: set ATTNFUSE_TEST_SEED={})", seed, seed));
  Rng rng(seed);
  const std::vector<Spec> specs = all_specs(rng);
  ASSERT_EQ(specs.size(), 1632u);
  std::map<std::string, std::string> canonical_of_key;
  std::set<std::string> canonicals;
  for (const Spec& s : specs) {
    const std::string first_text = spell(s, rng);
    SCOPED_TRACE("program: " + first_text);
    std::string canonical, signature;
    try {
      const Program p = Program::parse(first_text);
      canonical = p.canonical();
      signature = p.signature();
      EXPECT_EQ(signature, ir::sha256_hex(canonical));
      // The one-expression rendering reads back to the same program.
      EXPECT_EQ(Program::parse(ir::to_dsl(p.graph())).canonical(), canonical) << ir::to_dsl(p.graph());
      for (int i = 0; i < 3; ++i) {
        const std::string text = spell(s, rng);
        const Program q = Program::parse(text);
        EXPECT_EQ(q.canonical(), canonical) << "respelled as:\n" << text;
        EXPECT_EQ(q.signature(), signature);
        EXPECT_EQ(ir::collect_scalars(q.graph()), ir::collect_scalars(p.graph()));
      }
      const dsl::Expr e = build(s, rng);
      const Program c = dsl::compile_program(e);
      EXPECT_EQ(c.canonical(), canonical) << "C++ DSL: " << e.text();
      EXPECT_EQ(c.signature(), signature);
      EXPECT_EQ(ir::collect_scalars(c.graph()), ir::collect_scalars(p.graph()));
      EXPECT_EQ(Program::parse(e.text()).canonical(), canonical) << e.text();
    } catch (const Error& err) {
      ADD_FAILURE() << "rejected a well-formed program:\n" << err.what();
      continue;
    }
    const std::string key = semantic_key(s);
    auto [it, fresh] = canonical_of_key.emplace(key, canonical);
    if (!fresh) EXPECT_EQ(it->second, canonical) << "same meaning, different canonical: " << key;
    else EXPECT_TRUE(canonicals.insert(canonical).second) << "two programs share a canonical:\n" << canonical;
  }
}

TEST(Spelling, AllStructuresFixedSeeds) {
  for (uint64_t seed : {1u, 2u, 3u}) check_all_spellings(seed);
}

TEST(Spelling, AllStructuresFreshSeed) {
  const char* env = std::getenv("ATTNFUSE_TEST_SEED");
  const uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  check_all_spellings(seed);
}

}  // namespace
}  // namespace attnfuse
