// The reference's document mask on tiny hand-checked cases (no attention across documents,
// positions restarting per document, causal aligned bottom-right per document, empty documents,
// fully masked rows), the argument errors, and the defining property on random inputs: a packed
// call equals one call per document.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ref_helpers.hpp"

namespace attnfuse::testing {
namespace {

using reference::attention;
constexpr double kTol = 1e-12;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Zero queries (every score 0 before modifiers) and V = 1, 2, 3, ...: each row's output is the
// weighted mean of the values of the keys it keeps, so the outputs are easy to work out by hand.
struct Packed {
  Tensor q, k, v;
  std::vector<int64_t> cu_q, cu_k;
  Packed(std::vector<int64_t> cq, std::vector<int64_t> ck)
      : q({1, 1, cq.back(), 1}), k({1, 1, ck.back(), 1}), v({1, 1, ck.back(), 1}), cu_q(std::move(cq)),
        cu_k(std::move(ck)) {
    for (int64_t j = 0; j < ck_len(); ++j) v.set(0, 0, j, 0, float(j + 1));
  }
  int64_t ck_len() const { return cu_k.back(); }
  AttentionArgs args() const {
    AttentionArgs a = args_of(q, k, v);
    a.cu_seqlens_q = SeqOffsetsView::contiguous(cu_q.data(), std::ssize(cu_q));
    a.cu_seqlens_k = SeqOffsetsView::contiguous(cu_k.data(), std::ssize(cu_k));
    return a;
  }
};

KernelSpec document_spec(std::initializer_list<MaskKind> more = {}) {
  KernelSpec s = spec_of();
  s.masks.add(MaskKind::Document);
  for (MaskKind m : more) s.masks.add(m);
  return s;
}

void expect_rows(const reference::Result& r, std::initializer_list<double> out, std::initializer_list<double> lse) {
  ASSERT_EQ(r.out.size(), out.size());
  size_t i = 0;
  for (double x : out) {
    EXPECT_NEAR(r.out[i], x, kTol) << "row " << i;
    ++i;
  }
  i = 0;
  for (double x : lse) {
    if (std::isinf(x)) EXPECT_EQ(r.lse[i], x) << "row " << i;
    else EXPECT_NEAR(r.lse[i], x, kTol) << "row " << i;
    ++i;
  }
}

TEST(ReferenceDocument, NoAttentionAcrossDocuments) {
  const Packed p({0, 2, 4}, {0, 2, 4});
  expect_rows(attention(document_spec(), p.args()), {1.5, 1.5, 3.5, 3.5},
              {std::log(2.0), std::log(2.0), std::log(2.0), std::log(2.0)});
}

TEST(ReferenceDocument, CausalRestartsInEachDocument) {
  // Row 2 is the first query of document 1: it sees key 2 only (globally causal it would see
  // keys 0..2 and give 2).
  const Packed p({0, 2, 4}, {0, 2, 4});
  expect_rows(attention(document_spec({MaskKind::Causal}), p.args()), {1, 1.5, 3, 3.5},
              {0, std::log(2.0), 0, std::log(2.0)});
}

TEST(ReferenceDocument, CausalIsBottomRightPerDocument) {
  // Document 0: 1 query, 3 keys, so the query sits at position 2 and sees keys 0..2.
  // Document 1: 2 queries, 1 key: positions -1 and 0; the first sees nothing (O = 0, LSE = -inf).
  const Packed p({0, 1, 3}, {0, 3, 4});
  expect_rows(attention(document_spec({MaskKind::Causal}), p.args()), {2, 0, 4}, {std::log(3.0), -kInf, 0});
}

TEST(ReferenceDocument, EmptyDocuments) {
  // Document 0 has keys but no queries (nothing to compute), document 1 queries but no keys
  // (fully masked rows), document 2 both.
  const Packed p({0, 0, 2, 4}, {0, 2, 2, 4});
  expect_rows(attention(document_spec(), p.args()), {0, 0, 3.5, 3.5}, {-kInf, -kInf, std::log(2.0), std::log(2.0)});
}

TEST(ReferenceDocument, SlidingWindowCountsInsideTheDocument) {
  // Causal window of 2 (0 <= Δ < 2) over two documents of 3: each row sees itself and the row
  // before, never one of the previous document.
  const Packed p({0, 3, 6}, {0, 3, 6});
  KernelSpec s = document_spec({MaskKind::Causal, MaskKind::SlidingWindow});
  s.scalars.window = 2;
  expect_rows(attention(s, p.args()), {1, 1.5, 2.5, 4, 4.5, 5.5}, {});
}

TEST(ReferenceDocument, AlibiReadsPositionsInsideTheDocument) {
  // Slope ln 2: weight 2^-|Δ|. Document 0 (3 queries, 3 keys) puts query 0 at position 0, so its
  // keys are at |Δ| = 0, 1, 2 (the call's global frame, q_offset = 2, would say 2, 1, 0 and give
  // 17/7). Document 1 (1 query, 3 keys): the query at position 2 sees |Δ| = 2, 1, 0.
  const Packed p({0, 3, 4}, {0, 3, 6});
  KernelSpec s = document_spec();
  s.modifiers.push(ModifierKind::Alibi);
  s.scalars.alibi = AlibiSlopes::Custom;
  s.scalars.alibi_slopes = {std::log(2.0)};
  const auto r = attention(s, p.args());
  EXPECT_NEAR(r.out[0], (1 * 1 + 0.5 * 2 + 0.25 * 3) / 1.75, kTol);
  EXPECT_NEAR(r.out[3], (0.25 * 4 + 0.5 * 5 + 1 * 6) / 1.75, kTol);
}

TEST(ReferenceDocument, KeepsAgreesWithTheDocuments) {
  const Packed p({0, 1, 3}, {0, 3, 4});
  const KernelSpec s = document_spec({MaskKind::Causal});
  const AttentionArgs a = p.args();
  EXPECT_TRUE(reference::keeps(s, a, 0, 0, 0, 2));   // document 0, Δ = 0
  EXPECT_FALSE(reference::keeps(s, a, 0, 0, 0, 3));  // key of document 1
  EXPECT_FALSE(reference::keeps(s, a, 0, 0, 1, 3));  // query at position -1
  EXPECT_TRUE(reference::keeps(s, a, 0, 0, 2, 3));
  EXPECT_FALSE(reference::keeps(s, a, 0, 0, 2, 0));  // key of document 0
}

TEST(ReferenceDocument, RopeSeqLenIsTheLongestKeyDocument) {
  const Packed p({0, 1, 3}, {0, 3, 4});
  EXPECT_EQ(reference::rope_seq_len(p.args()), 3);
}

TEST(ReferenceDocument, ArgumentErrors) {
  const Packed p({0, 2, 4}, {0, 2, 4});
  const KernelSpec s = document_spec();
  AttentionArgs a = p.args();
  a.cu_seqlens_k.reset();
  EXPECT_THROW(attention(s, a), Error);
  try {
    attention(s, a);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::MissingTensor);
    EXPECT_NE(std::string(e.what()).find("cu_seqlens_k"), std::string::npos) << e.what();
  }
  a = p.args();
  a.q_offset = 0;
  try {
    attention(s, a);
    ADD_FAILURE() << "q_offset with documents was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  }
  // Offsets without a document mask are a mistake, not something to ignore.
  try {
    attention(spec_of(), p.args());
    ADD_FAILURE() << "cu_seqlens without document() was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  }
}

// ---- Random inputs: a packed call is one call per document ------------------------------------

// Q/K/V rows [a, b) of a [1, H, N, D] tensor as a tensor of their own.
Tensor rows(const Tensor& t, int64_t a, int64_t b) {
  const auto& s = t.view.shape;
  Tensor out({1, s[1], b - a, s[3]});
  for (int64_t h = 0; h < s[1]; ++h)
    for (int64_t i = a; i < b; ++i)
      for (int64_t d = 0; d < s[3]; ++d) out.set(0, h, i - a, d, t.get(0, h, i, d));
  return out;
}

TEST(ReferenceDocument, PackedEqualsOneCallPerDocument) {
  const std::vector<int64_t> cu_q = {0, 5, 5, 12, 13, 20}, cu_k = {0, 9, 11, 17, 17, 30};
  std::vector<KernelSpec> specs;
  specs.push_back(document_spec({MaskKind::Causal}));
  KernelSpec rope = document_spec({MaskKind::Causal, MaskKind::SlidingWindow});
  rope.score = ScoreKind::Rope;
  rope.scalars.window = 4;
  rope.modifiers.push(ModifierKind::Alibi);
  specs.push_back(rope);
  KernelSpec window = rope;
  window.score = ScoreKind::RopeWindow;
  window.scalars.rope.window_k = 0.5;
  window.modifiers.push(ModifierKind::Softcap);
  window.scalars.softcap = 2.0;
  specs.push_back(window);
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    Tensor q({1, 4, 20, 8}), k({1, 2, 30, 8}), v({1, 2, 30, 8});
    q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
    AttentionArgs packed = args_of(q, k, v);
    packed.cu_seqlens_q = SeqOffsetsView::contiguous(cu_q.data(), std::ssize(cu_q));
    packed.cu_seqlens_k = SeqOffsetsView::contiguous(cu_k.data(), std::ssize(cu_k));
    for (const KernelSpec& spec : specs) {
      const auto whole = attention(spec, packed);
      KernelSpec alone = spec;
      alone.masks = MaskSet{};
      for (MaskKind m : {MaskKind::Causal, MaskKind::SlidingWindow})
        if (spec.masks.has(m)) alone.masks.add(m);
      for (size_t d = 0; d + 1 < cu_q.size(); ++d) {
        const Tensor qd = rows(q, cu_q[d], cu_q[d + 1]), kd = rows(k, cu_k[d], cu_k[d + 1]),
                     vd = rows(v, cu_k[d], cu_k[d + 1]);
        // Each document on its own, its RoPE frequencies at the packed call's length (what
        // dynamic / longrope scalings read; the default scaling ignores it).
        const auto part = attention(alone, args_of(qd, kd, vd));
        const int64_t n = cu_q[d + 1] - cu_q[d];
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t i = 0; i < n; ++i) {
            const size_t row = size_t(h * 20 + cu_q[d] + i), prow = size_t(h * n + i);
            if (std::isinf(part.lse[prow])) EXPECT_EQ(whole.lse[row], part.lse[prow]);
            else EXPECT_NEAR(whole.lse[row], part.lse[prow], 1e-12);
            for (int64_t x = 0; x < 8; ++x)
              EXPECT_NEAR(whole.out[row * 8 + size_t(x)], part.out[prow * 8 + size_t(x)], 1e-12)
                  << "document " << d << " head " << h << " row " << i;
          }
      }
    }
  }
}

}  // namespace
}  // namespace attnfuse::testing
