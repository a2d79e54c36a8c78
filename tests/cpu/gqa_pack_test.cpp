// GQA packing in the CPU kernel: with few queries, one tile runs the query heads of a KV group
// together (fused_kernel.cpp, Kernel::run). Whether a call packs depends on the thread count (not
// when that would leave threads idle), so each case runs packed (1 thread) and per head (more
// threads than tiles): both against the float64 reference, and bit for bit against each other,
// since a row's arithmetic is the same in either tile (one query per SIMD lane).
#include <gtest/gtest.h>
#include <omp.h>

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

struct Packed {
  const char* name;
  KernelSpec spec;
};

std::vector<Packed> programs() {
  ScalarArgs s;
  s.window = 150;
  s.softcap = 15;
  s.rope.base = 10000;
  s.rope.window_k = 1.0;
  std::vector<Packed> v = {
      {"causal", make_spec({MK::Causal}, {})},
      {"sliding window", make_spec({MK::Causal, MK::SlidingWindow}, {}, NormKind::Softmax, s)},
      {"alibi (a slope per head)", make_spec({MK::Causal}, {MD::Alibi})},
      {"bias (a row per head) + softcap", make_spec({}, {MD::AdditiveBias, MD::Softcap}, NormKind::Softmax, s)},
      {"relu + alibi", make_spec({MK::Causal}, {MD::Alibi}, NormKind::ReluAttention)},
      {"rope", make_spec({MK::Causal}, {}, NormKind::Softmax, s)},
      {"rope_window k=1", make_spec({MK::Causal}, {}, NormKind::Softmax, s)},
  };
  v[5].spec.score = ScoreKind::Rope;
  v[6].spec.score = ScoreKind::RopeWindow;
  return v;
}

// Runs the call on `threads` OpenMP threads, then restores the previous count.
void run_on(int threads, const KernelSpec& spec, const AttentionArgs& args) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  run_cpu(spec, args);
  omp_set_num_threads(saved);
}

std::vector<float> lse_values(const AttentionCase& c) {
  std::vector<float> v;
  if (c.lse)
    for (int64_t b = 0; b < c.shape.B; ++b)
      for (int64_t h = 0; h < c.shape.Hq; ++h)
        for (int64_t i = 0; i < c.shape.Nq; ++i) v.push_back(c.lse->get(b, h, i));
  return v;
}

// Packed and per-head runs of one call: each against the reference, then against each other.
void check(const Packed& p, AttentionCase& c, const AttentionArgs& args) {
  run_on(1, p.spec, args);
  {
    SCOPED_TRACE("packed");
    expect_matches_reference(p.spec, args);
  }
  const std::vector<std::byte> packed_out = c.out.storage();
  const std::vector<float> packed_lse = lse_values(c);
  c.poison_outputs();
  run_on(256, p.spec, args);
  {
    SCOPED_TRACE("per head");
    expect_matches_reference(p.spec, args);
  }
  EXPECT_TRUE(c.out.storage() == packed_out) << "packed and per-head outputs differ";
  EXPECT_TRUE(lse_values(c) == packed_lse) << "packed and per-head LSE differ";
}

TEST(CpuGqaPack, EveryCombinatorPackedAndPerHead) {
  const uint64_t seed = fresh_seed();
  for (const Packed& p : programs())
    for (int64_t nq : {1, 5})
      for (DType t : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(fmt::format("{} Nq {} {} seed {}", p.name, nq, dtype_name(t), seed));
        CaseOptions o;
        o.dtype = t;
        o.bias = p.spec.needs_bias();
        o.layout = nq == 5 ? Layout::Bshd : Layout::Bhsd;
        if (nq == 5) o.q_offset = 311;  // chunked-prefill style: queries inside the cache
        // GQA 4 (12 query heads over 3 KV heads), D 80: a packed tile holds 4 or 20 rows.
        AttentionCase c({2, 12, 3, nq, 317, 80}, o, seed + static_cast<uint64_t>(nq));
        check(p, c, c.args());
      }
}

TEST(CpuGqaPack, GroupOfEightFillsTheTile) {
  // 8 query heads per KV head x 8 queries = 64 rows, the whole tile.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  for (const Packed& p : programs()) {
    SCOPED_TRACE(p.name);
    CaseOptions o;
    o.bias = p.spec.needs_bias();
    AttentionCase c({1, 16, 2, 8, 260, 64}, o, seed);
    check(p, c, c.args());
  }
}

TEST(CpuGqaPack, DocumentsOfFewQueries) {
  // Speculative drafts of 1-2 tokens per document, packed along the sequence axis.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  const std::vector<int64_t> cu_q = {0, 2, 3, 5}, cu_k = {0, 100, 250, 400};
  for (const Packed& p : programs()) {
    SCOPED_TRACE(p.name);
    CaseOptions o;
    o.bias = p.spec.needs_bias();
    AttentionCase c({1, 8, 2, 5, 400, 64}, o, seed);
    KernelSpec spec = p.spec;
    spec.masks.add(MK::Document);
    AttentionArgs args = c.args();
    args.cu_seqlens_q = SeqOffsetsView::contiguous(cu_q.data(), 4);
    args.cu_seqlens_k = SeqOffsetsView::contiguous(cu_k.data(), 4);
    check({p.name, spec}, c, args);
  }
}

}  // namespace
}  // namespace attnfuse::test
