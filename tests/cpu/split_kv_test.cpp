// Split-KV in the CPU kernel (flash decoding): where a call has fewer tiles than threads and keys
// enough, each tile's keys are cut into parts merged by log-sum-exp (fused_kernel.cpp,
// merge_splits). Whether a call splits depends on the thread count, so each case runs on 8
// threads (split: its tiles are fewer) and on 1 (not): both against the float64 reference.
// Cases include parts that keep nothing (sliding windows, rows before the first key), relu's
// count-normalized merge, packed and per-head tiles, paged caches and documents.
#include <gtest/gtest.h>
#include <omp.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/paged_kv.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

struct Program {
  const char* name;
  KernelSpec spec;
};

std::vector<Program> programs() {
  ScalarArgs s;
  s.window = 300;  // a part of 512+ keys far from the queries keeps nothing
  s.softcap = 15;
  s.rope.base = 10000;
  s.rope.window_k = 1.0;
  std::vector<Program> v = {
      {"causal", make_spec({MK::Causal}, {})},
      {"sliding window 300", make_spec({MK::Causal, MK::SlidingWindow}, {}, NormKind::Softmax, s)},
      {"alibi", make_spec({MK::Causal}, {MD::Alibi})},
      {"bias + softcap", make_spec({}, {MD::AdditiveBias, MD::Softcap}, NormKind::Softmax, s)},
      {"relu", make_spec({MK::Causal}, {}, NormKind::ReluAttention)},
      {"rope", make_spec({MK::Causal}, {}, NormKind::Softmax, s)},
      {"rope_window k=1", make_spec({MK::Causal}, {}, NormKind::Softmax, s)},
  };
  v[5].spec.score = ScoreKind::Rope;
  v[6].spec.score = ScoreKind::RopeWindow;
  return v;
}

// Runs the call on `threads` OpenMP threads and checks it, then restores the thread count.
void run_and_check(int threads, const KernelSpec& spec, const AttentionArgs& args, const char* label) {
  SCOPED_TRACE(fmt::format("{} threads ({})", threads, label));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  run_cpu(spec, args);
  omp_set_num_threads(saved);
  expect_matches_reference(spec, args);
}

void both_ways(const KernelSpec& spec, AttentionCase& c, const AttentionArgs& args) {
  run_and_check(8, spec, args, "split");
  c.poison_outputs();
  run_and_check(1, spec, args, "whole");
}

TEST(CpuSplitKv, EveryCombinatorOnOneLongSequence) {
  const uint64_t seed = fresh_seed();
  for (const Program& p : programs())
    for (int64_t nk : {1500, 4097})
      for (int64_t nq : {1, 5})
        for (DType t : {DType::F32, DType::BF16}) {
          SCOPED_TRACE(fmt::format("{} Nq {} Nk {} {} seed {}", p.name, nq, nk, dtype_name(t), seed));
          CaseOptions o;
          o.dtype = t;
          o.bias = p.spec.needs_bias();
          // Nq 5 starts 3 positions before the first key: causal rows 0-2 keep nothing at all.
          if (nq == 5) o.q_offset = -3;
          // GQA 4 over 2 KV heads: 2 packed tiles, so 8 threads cut each into 4 parts.
          AttentionCase c({1, 8, 2, nq, nk, 64}, o, seed + static_cast<uint64_t>(nk + nq));
          both_ways(p.spec, c, c.args());
        }
}

TEST(CpuSplitKv, PerHeadTilesAndBlockSparse) {
  // No GQA (no packing), two heads: 2 tiles, 4 parts each; block-sparse parts clamp the blocks.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  for (const Program& p : {programs()[0], Program{"block sparse", make_spec({MK::BlockSparse}, {})}}) {
    SCOPED_TRACE(p.name);
    AttentionCase c({1, 2, 2, 3, 3000, 32}, {}, seed);
    if (p.spec.needs_block_mask()) c.set_block_mask(random_block_mask(c.shape, 16, 128, seed));
    both_ways(p.spec, c, c.args());
  }
}

TEST(CpuSplitKv, DocumentsOfDifferentLengths) {
  // Parts are cut from each document's own keys; short documents leave some parts empty.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  const std::vector<int64_t> cu_q = {0, 1, 3, 4}, cu_k = {0, 40, 2100, 2600};
  for (const Program& p : programs()) {
    SCOPED_TRACE(p.name);
    CaseOptions o;
    o.bias = p.spec.needs_bias();
    AttentionCase c({1, 4, 1, 4, 2600, 64}, o, seed);
    KernelSpec spec = p.spec;
    spec.masks.add(MK::Document);
    AttentionArgs args = c.args();
    args.cu_seqlens_q = SeqOffsetsView::contiguous(cu_q.data(), 4);
    args.cu_seqlens_k = SeqOffsetsView::contiguous(cu_k.data(), 4);
    both_ways(spec, c, args);
  }
}

TEST(CpuSplitKv, PagedEntriesOfDifferentLengths) {
  // The longest entry sets the part count; the short one's parts are mostly empty.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  const std::vector<int64_t> lengths = {3000, 37};
  for (const Program& p : programs()) {
    if (p.spec.needs_bias()) continue;  // bias rows follow the contiguous key axis only
    SCOPED_TRACE(p.name);
    AttentionCase c({2, 4, 1, 2, 3000, 32}, {}, seed);
    PagedCache cache = make_paged_cache(c.k.view(), c.v.view(), lengths, 64, PagedKV::Layout::NHD, seed);
    AttentionArgs args = c.args();
    args.k = TensorView{}, args.v = TensorView{};
    args.paged = cache.view();
    both_ways(p.spec, c, args);
  }
}

}  // namespace
}  // namespace attnfuse::test
