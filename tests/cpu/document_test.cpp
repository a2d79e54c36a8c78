// The fused CPU kernel's document masks against the float64 reference (DESIGN §3 tolerance,
// poisoned outputs): random document splits (many short documents, one long one, documents of
// length 1, lengths around the tile sizes, Nq != Nk aligned bottom-right per document, per-batch
// offsets) composed with causal, sliding_window, alibi, softcap, bias, block_sparse, rope and
// rope_window, in fp32/bf16/fp16; isolation of documents; argument errors before any write.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

// Offsets [0, l0, l0 + l1, ...] from document lengths.
std::vector<int64_t> offsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> o{0};
  for (int64_t l : lengths) o.push_back(o.back() + l);
  return o;
}

// `count` documents of lengths drawn from [lo, hi].
std::vector<int64_t> random_lengths(std::mt19937_64& rng, int count, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> len(lo, hi);
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (auto& l : out) l = len(rng);
  return out;
}

struct Split {
  std::string name;
  std::vector<int64_t> q, k;  // document lengths, one list each (same count)
};

std::vector<Split> splits(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> short_docs = random_lengths(rng, 30, 1, 8);
  const std::vector<int64_t> edges = {63, 64, 65, 127, 129, 1, 2};
  std::vector<int64_t> ones(40, 1);
  return {
      {"one_long", {200}, {200}},
      {"many_short", short_docs, short_docs},
      {"length_1", ones, ones},
      {"tile_edges", edges, edges},
      // Nq != Nk per document, both ways, and empty documents on either side: bottom-right
      // alignment puts the first queries of a document with more queries than keys before every
      // key (fully masked under causal).
      {"nq_ne_nk", {3, 70, 0, 65, 1, 17}, {64, 10, 5, 129, 0, 17}},
  };
}

struct Variant {
  std::string name;
  KernelSpec spec;
};

KernelSpec doc_spec(std::initializer_list<MK> masks, std::initializer_list<MD> mods = {},
                    NormKind norm = NormKind::Softmax) {
  ScalarArgs s;
  s.window = 37;
  s.softcap = 2.5;
  KernelSpec spec = make_spec(masks, mods, norm, s);
  spec.masks.add(MK::Document);
  return spec;
}

KernelSpec rope_spec(ScoreKind score, std::initializer_list<MK> masks) {
  KernelSpec s = doc_spec(masks);
  s.score = score;
  s.scalars.rope.window_k = 1.0;
  return s;
}

std::vector<Variant> variants() {
  return {
      {"document", doc_spec({})},
      {"causal", doc_spec({MK::Causal})},
      {"sliding", doc_spec({MK::SlidingWindow})},
      {"causal_sliding", doc_spec({MK::Causal, MK::SlidingWindow})},
      {"causal_alibi", doc_spec({MK::Causal}, {MD::Alibi})},
      {"softcap_alibi", doc_spec({}, {MD::Softcap, MD::Alibi})},
      {"bias_causal", doc_spec({MK::Causal}, {MD::AdditiveBias})},
      {"relu_causal", doc_spec({MK::Causal}, {}, NormKind::ReluAttention)},
      {"block_sparse_causal", doc_spec({MK::BlockSparse, MK::Causal})},
      {"rope_causal", rope_spec(ScoreKind::Rope, {MK::Causal})},
      {"rope_window_sliding", rope_spec(ScoreKind::RopeWindow, {MK::SlidingWindow})},
  };
}

// One call with the split's documents (shared by the batch unless `per_batch` draws another
// split for batch entry 1), poisoned outputs, run on the fused kernel, checked.
void check(const KernelSpec& spec, const Split& split, DType dtype, int64_t B, bool per_batch, uint64_t seed) {
  std::vector<int64_t> cu_q = offsets(split.q), cu_k = offsets(split.k);
  Shape shape{B, 4, 2, cu_q.back(), cu_k.back(), 32};
  if (per_batch) {  // batch entry 1: the same lengths in reverse order
    std::vector<int64_t> rq(split.q.rbegin(), split.q.rend()), rk(split.k.rbegin(), split.k.rend());
    for (int64_t x : offsets(rq)) cu_q.push_back(x);
    for (int64_t x : offsets(rk)) cu_k.push_back(x);
  }
  CaseOptions opt;
  opt.dtype = dtype;
  opt.bias = spec.needs_bias();
  opt.stddev = spec.modifiers.has(MD::Softcap) ? 2.0f : 1.0f;
  AttentionCase c(shape, opt, seed);
  if (spec.needs_block_mask()) c.set_block_mask(random_block_mask(c.shape, 48, 32, seed));
  const int64_t n = std::ssize(split.q) + 1;
  AttentionArgs args = c.args();
  args.cu_seqlens_q = SeqOffsetsView::contiguous(cu_q.data(), n, per_batch ? B : 1);
  args.cu_seqlens_k = SeqOffsetsView::contiguous(cu_k.data(), n, per_batch ? B : 1);
  run_cpu(spec, args);
  expect_matches_reference(spec, args);
}

TEST(CpuDocument, MatchesReferenceFp32) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const Split& split : splits(seed))
    for (const Variant& v : variants()) {
      SCOPED_TRACE(split.name + " / " + v.name);
      check(v.spec, split, DType::F32, 1, false, seed);
    }
}

TEST(CpuDocument, MatchesReference16Bit) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<Split> all = splits(seed);
  for (DType dtype : {DType::BF16, DType::F16})
    for (const Split& split : {all[1], all[3], all[4]})
      for (const Variant& v : variants()) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + split.name + " / " + v.name);
        check(v.spec, split, dtype, 1, false, seed);
      }
}

TEST(CpuDocument, BatchSharedAndPerBatchOffsets) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Split split = splits(seed)[4];
  for (bool per_batch : {false, true})
    for (const Variant& v : {variants()[1], variants()[9]}) {
      SCOPED_TRACE(v.name + (per_batch ? " per batch" : " shared"));
      check(v.spec, split, DType::F32, 2, per_batch, seed);
    }
}

TEST(CpuDocument, TileShapes) {
  // Tiles of other sizes than the documents' edges: small, and the largest the kernel takes.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Split split = splits(seed)[3];
  for (TileConfig tile : {TileConfig{16, 16}, TileConfig{64, 256}, TileConfig{33, 7}}) {
    KernelSpec spec = doc_spec({MK::Causal}, {MD::Alibi});
    spec.tile = tile;
    SCOPED_TRACE("tile " + std::to_string(tile.block_q) + "x" + std::to_string(tile.block_k));
    check(spec, split, DType::F32, 1, false, seed);
  }
}

TEST(CpuDocument, DocumentsDoNotSeeEachOther) {
  // NaN and Inf in the keys and values of document 1: the rows of documents 0 and 2 stay exact.
  const std::vector<int64_t> cu = {0, 70, 140, 200};
  const KernelSpec spec = doc_spec({});
  AttentionCase c({1, 2, 1, 200, 200, 32}, {}, 5);
  for (int64_t j = 70; j < 140; ++j)
    for (int64_t x = 0; x < 32; ++x) {
      c.k.set(0, 0, j, x, std::numeric_limits<float>::quiet_NaN());
      c.v.set(0, 0, j, x, std::numeric_limits<float>::infinity());
    }
  AttentionArgs args = c.args();
  args.cu_seqlens_q = args.cu_seqlens_k = SeqOffsetsView::contiguous(cu.data(), 4);
  run_cpu(spec, args);
  expect_matches_reference(spec, args);
  for (int64_t i : {0, 69, 140, 199}) EXPECT_TRUE(std::isfinite(c.out.get(0, 1, i, 3))) << "row " << i;
}

TEST(CpuDocument, ProgramTextEndToEnd) {
  const KernelSpec spec =
      Program::parse("softmax(alibi(document(causal(rope(Q, K, base=500000))))) @ V").compile(CompileOptions{});
  const std::vector<int64_t> cu_q = {0, 1, 130}, cu_k = {0, 65, 200};
  AttentionCase c({1, 8, 2, 130, 200, 64}, {}, 17);
  AttentionArgs args = c.args();
  args.cu_seqlens_q = SeqOffsetsView::contiguous(cu_q.data(), 3);
  args.cu_seqlens_k = SeqOffsetsView::contiguous(cu_k.data(), 3);
  run_cpu(spec, args);
  expect_matches_reference(spec, args);
}

TEST(CpuDocument, Int32Offsets) {
  const std::vector<int32_t> cu = {0, 5, 64, 65, 100};
  const KernelSpec spec = doc_spec({MK::Causal});
  AttentionCase c({1, 2, 2, 100, 100, 32}, {}, 3);
  AttentionArgs args = c.args();
  args.cu_seqlens_q = args.cu_seqlens_k = SeqOffsetsView::contiguous(cu.data(), 5);
  run_cpu(spec, args);
  expect_matches_reference(spec, args);
}

// ---- Bad arguments: a typed error, and the outputs untouched --------------------------------

void expect_rejected_untouched(const KernelSpec& spec, const AttentionArgs& args, const AttentionCase& c,
                               ErrorCode code, const std::string& phrase) {
  const std::vector<std::byte> before = c.out.storage();
  try {
    run_cpu(spec, args);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
  EXPECT_TRUE(c.out.storage() == before) << "the output was written";
}

TEST(CpuDocument, ArgumentErrorsBeforeAnyWrite) {
  const KernelSpec spec = doc_spec({MK::Causal});
  AttentionCase c({2, 2, 1, 10, 12, 32}, {}, 9);
  const std::vector<int64_t> good_q = {0, 4, 10}, good_k = {0, 6, 12};
  const std::vector<int64_t> non_monotone = {0, 7, 4, 10}, short_end = {0, 4, 9}, two_docs_k = {0, 3, 6, 12};
  auto with = [&](const std::vector<int64_t>& q, const std::vector<int64_t>& k, int64_t batch = 1) {
    AttentionArgs a = c.args();
    a.cu_seqlens_q = SeqOffsetsView::contiguous(q.data(), std::ssize(q) / batch, batch);
    a.cu_seqlens_k = SeqOffsetsView::contiguous(k.data(), std::ssize(k) / batch, batch);
    return a;
  };
  AttentionArgs missing = c.args();
  expect_rejected_untouched(spec, missing, c, ErrorCode::MissingTensor, "no cu_seqlens_q / cu_seqlens_k");
  missing.cu_seqlens_q = SeqOffsetsView::contiguous(good_q.data(), 3);
  expect_rejected_untouched(spec, missing, c, ErrorCode::MissingTensor, "no cu_seqlens_k");
  expect_rejected_untouched(spec, with(non_monotone, two_docs_k), c, ErrorCode::Shape,
                            "cu_seqlens_q must be non-decreasing");
  expect_rejected_untouched(spec, with(short_end, good_k), c, ErrorCode::Shape, "must end at Nq = 10");
  expect_rejected_untouched(spec, with(good_q, two_docs_k), c, ErrorCode::Shape,
                            "cu_seqlens_q has 2 documents but cu_seqlens_k has 3");
  const std::vector<int64_t> three_rows = {0, 4, 10, 0, 5, 10, 0, 1, 10};
  expect_rejected_untouched(spec, with(three_rows, {0, 6, 12, 0, 6, 12, 0, 6, 12}, 3), c, ErrorCode::Shape,
                            "must have 1 (shared by every batch entry) or B = 2");
  const std::vector<int64_t> bad_row1 = {0, 4, 10, 1, 5, 10};
  expect_rejected_untouched(spec, with(bad_row1, {0, 6, 12, 0, 6, 12}, 2), c, ErrorCode::Shape,
                            "cu_seqlens_q[1] must start at 0");
  AttentionArgs offset = with(good_q, good_k);
  offset.q_offset = 0;
  expect_rejected_untouched(spec, offset, c, ErrorCode::Unsupported, "q_offset does not apply");
  expect_rejected_untouched(make_spec({MK::Causal}, {}), with(good_q, good_k), c, ErrorCode::Unsupported,
                            "the program has no document mask");
}

}  // namespace
}  // namespace attnfuse::test
