// Caller-supplied RoPE cos/sin tables (AttentionArgs::rope_tables) in the fused CPU kernel and the
// unfused ablation, against the float64 reference reading the same tables; tables equal to the
// computed ones reproduce the computed rotation; every refusal says what is wrong.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"
#include "cpu/unfused.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;

struct Tables {
  std::vector<float> cos, sin;
  RopeTablesView view;
};

// The tables the program's own parameters give (what the kernel computes without tables).
Tables computed_tables(const RopeParams& p, int D, int64_t positions, int64_t seq_len) {
  const rope::RopeFrequencies f = rope::rope_frequencies(p, D, seq_len);
  const int64_t half = static_cast<int64_t>(f.inv_freq.size());
  Tables t;
  t.cos.resize(static_cast<size_t>(positions * half));
  t.sin.resize(t.cos.size());
  for (int64_t pos = 0; pos < positions; ++pos)
    for (int64_t r = 0; r < half; ++r) {
      const double angle = static_cast<double>(pos) * f.inv_freq[size_t(r)];
      t.cos[size_t(pos * half + r)] = static_cast<float>(f.attention_factor * std::cos(angle));
      t.sin[size_t(pos * half + r)] = static_cast<float>(f.attention_factor * std::sin(angle));
    }
  t.view = {t.cos.data(), t.sin.data(), positions, half};
  return t;
}

// Arbitrary values (not even rotations): the kernel must apply exactly what it is given.
Tables random_tables(int64_t positions, int64_t pairs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.2f, 1.2f);
  Tables t;
  t.cos.resize(static_cast<size_t>(positions * pairs));
  t.sin.resize(t.cos.size());
  for (auto& x : t.cos) x = u(rng);
  for (auto& x : t.sin) x = u(rng);
  t.view = {t.cos.data(), t.sin.data(), positions, pairs};
  return t;
}

KernelSpec rope_spec(ScoreKind score, RopeParams rp, std::initializer_list<MK> masks = {MK::Causal}) {
  ScalarArgs s;
  s.rope = std::move(rp);
  KernelSpec spec = make_spec(masks, {}, NormKind::Softmax, s);
  spec.score = score;
  return spec;
}

TEST(RopeTables, ComputedTablesReproduceTheComputedRotation) {
  RopeParams rp;
  rp.base = 500000;
  rp.rope_type = RopeScaling::Llama3;
  rp.factor = 32;
  rp.original_max_position_embeddings = 8192;
  const KernelSpec spec = rope_spec(ScoreKind::Rope, rp);
  AttentionCase c({2, 4, 2, 37, 301, 64}, {}, fresh_seed());
  const AttentionArgs plain = c.args();
  run_cpu(spec, plain);
  const std::vector<float> expected(static_cast<const float*>(plain.out.data),
                                    static_cast<const float*>(plain.out.data) + plain.out.numel());
  const Tables t = computed_tables(rp, 64, 301, 301);
  AttentionArgs with = c.args();
  with.rope_tables = t.view;
  c.poison_outputs();
  run_cpu(spec, with);
  expect_matches_reference(spec, with);
  double worst = 0;
  for (int64_t i = 0; i < with.out.numel(); ++i)
    worst = std::max(worst, double(std::fabs(static_cast<const float*>(with.out.data)[i] - expected[size_t(i)])));
  EXPECT_LT(worst, 2e-5) << "tables equal to the computed ones must give the computed rotation";
}

TEST(RopeTables, ArbitraryTablesMatchTheReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  RopeParams neox;
  RopeParams gptj_partial;
  gptj_partial.style = RopeStyle::Gptj;
  gptj_partial.rotary_dim = 32;
  RopeParams window = neox;
  window.window_k = 1.0;
  struct Case {
    const char* name;
    KernelSpec spec;
    int D;
    int64_t nq, nk;
    std::optional<int64_t> q_offset;
    DType dtype;
  };
  const Case cases[] = {
      {"neox causal", rope_spec(ScoreKind::Rope, neox), 64, 100, 250, std::nullopt, DType::F32},
      {"gptj partial, q_offset", rope_spec(ScoreKind::Rope, gptj_partial), 64, 33, 90, int64_t{400}, DType::BF16},
      {"decode", rope_spec(ScoreKind::Rope, neox), 128, 1, 777, std::nullopt, DType::F16},
      {"rope_window k=1", rope_spec(ScoreKind::RopeWindow, window), 64, 129, 129, std::nullopt, DType::F32},
      {"full, no mask", rope_spec(ScoreKind::Rope, neox, {}), 96, 17, 300, std::nullopt, DType::F32},
  };
  uint64_t k = 0;
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    CaseOptions opt;
    opt.dtype = cs.dtype;
    opt.q_offset = cs.q_offset;
    AttentionCase c({1, 4, 2, cs.nq, cs.nk, cs.D}, opt, seed + k);
    const int64_t pairs = (cs.spec.scalars.rope.rotary_dim > 0 ? cs.spec.scalars.rope.rotary_dim : cs.D) / 2;
    const int64_t positions = std::max(cs.nk, cs.q_offset.value_or(cs.nk - cs.nq) + cs.nq) + 5;
    const Tables t = random_tables(positions, pairs, seed + 100 + k++);
    AttentionArgs a = c.args();
    a.rope_tables = t.view;
    run_cpu(cs.spec, a);
    expect_matches_reference(cs.spec, a);
  }
}

TEST(RopeTables, AblationVariantsReadThemToo) {
  // The decomposition variants (attnfuse bench --ablate) rotate through the same plan.
  RopeParams rp;
  rp.style = RopeStyle::Gptj;
  const KernelSpec spec = rope_spec(ScoreKind::Rope, rp);
  AttentionCase c({1, 4, 2, 50, 80, 64}, {}, fresh_seed());
  const Tables t = random_tables(80, 32, 3);
  AttentionArgs a = c.args();
  a.rope_tables = t.view;
  for (auto* variant : {&cpu::run_unfused, &cpu::run_scores_softmax_fused}) {
    c.poison_outputs();
    variant(spec, a);
    expect_matches_reference(spec, a);
  }
}

TEST(RopeTables, RefusalsNameTheProblem) {
  RopeParams rp;
  const KernelSpec spec = rope_spec(ScoreKind::Rope, rp);
  AttentionCase c({1, 2, 2, 8, 20, 64}, {}, 7);
  auto expect_error = [&](const AttentionArgs& a, const KernelSpec& s, ErrorCode code, const char* phrase) {
    try {
      run_cpu(s, a);
      ADD_FAILURE() << "accepted: " << phrase;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  Tables ok = random_tables(20, 32, 1);
  AttentionArgs a = c.args();
  a.rope_tables = random_tables(20, 16, 1).view;  // wrong pair count (kept alive below)
  Tables wrong = random_tables(20, 16, 1);
  a.rope_tables = wrong.view;
  expect_error(a, spec, ErrorCode::Shape, "pairs");
  Tables short_t = random_tables(19, 32, 1);
  a.rope_tables = short_t.view;
  expect_error(a, spec, ErrorCode::Shape, "cover positions");
  a.rope_tables = ok.view;
  a.q_offset = -3;  // query positions -3 .. 4
  expect_error(a, spec, ErrorCode::Shape, "start at position 0");
  a.q_offset.reset();
  expect_error(a, make_spec({MK::Causal}, {}), ErrorCode::Unsupported, "no rope");
  KernelSpec cuda = spec;  // CUDA takes the same tables (in device memory) under the same checks
  cuda.target = Target::Cuda;
  cuda.dtype = DType::F32;
  EXPECT_NO_THROW(validate(cuda, a));
  a.rope_tables = short_t.view;
  expect_error(a, cuda, ErrorCode::Shape, "cover positions");
  // A compiled kernel serves every program of its structure, so the pair count comes from the
  // call's scalars: tables of 16 pairs fit rotary_dim = 32 even where the kernel's own spec
  // (here full rotary, 32 pairs) says otherwise.
  a.rope_tables = wrong.view;
  ScalarArgs partial = cuda.scalars;
  partial.rope.rotary_dim = 32;
  EXPECT_NO_THROW(validate(cuda, partial, a, IndexMemory::Device));
  EXPECT_THROW(validate(cuda, a, IndexMemory::Device), Error);
}

}  // namespace
}  // namespace attnfuse::test
