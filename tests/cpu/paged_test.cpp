// The fused CPU kernel with a paged KV cache: bitwise the same as contiguous K/V for the same data
// (page sizes 1, 16, 64, 100; NHD and HND; variable lengths including 0, 1, page_size and
// page_size + 1; decode and prefill), every combinator against the float64 reference (DESIGN §3
// tolerance, poisoned outputs) in fp32/bf16/fp16 with GQA, and argument errors before any write.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/paged_kv.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;
using Layout = PagedKV::Layout;

// The case's contiguous K/V (Nk = the longest length) copied into pages; k / v left empty.
AttentionArgs paged_args(const AttentionCase& c, PagedCache& cache) {
  AttentionArgs a = c.args();
  a.k = TensorView{}, a.v = TensorView{};
  a.paged = cache.view();
  return a;
}

int64_t longest(const std::vector<int64_t>& lengths) {
  int64_t n = 0;
  for (int64_t l : lengths) n = std::max(n, l);
  return n;
}

// Batch entry b of a view, as a batch of 1 (and its first n rows when n >= 0).
TensorView entry(const TensorView& t, int64_t b, int64_t n = -1) {
  TensorView e = t;
  e.data = static_cast<std::byte*>(t.data) + b * t.strides[0] * dtype_size(t.dtype);
  e.shape[0] = 1;
  if (n >= 0) e.shape[2] = n;
  return e;
}

KernelSpec spec_of(std::initializer_list<MK> masks, std::initializer_list<MD> mods = {},
                   NormKind norm = NormKind::Softmax, ScoreKind score = ScoreKind::ScaledDot) {
  ScalarArgs s;
  s.window = 29;
  s.softcap = 2.5;
  s.rope.window_k = 1.0;
  KernelSpec spec = make_spec(masks, mods, norm, s);
  spec.score = score;
  return spec;
}

// The paged call against one contiguous call per batch entry (its own length, bottom-right):
// the kernel gathers the same rows into the same chunks, so every bit of O and LSE agrees.
void expect_identical_to_contiguous(const KernelSpec& spec, const std::vector<int64_t>& lengths,
                                    int64_t page_size, Layout layout, int64_t Nq, DType dtype, uint64_t seed) {
  const int64_t B = std::ssize(lengths);
  CaseOptions opt;
  opt.dtype = dtype;
  AttentionCase c({B, 4, 2, Nq, longest(lengths), 32}, opt, seed);
  PagedCache cache = make_paged_cache(c.k.view(), c.v.view(), lengths, page_size, layout, seed);
  run_cpu(spec, paged_args(c, cache));
  for (int64_t b = 0; b < B; ++b) {
    HostTensor out(dtype, {1, 4, Nq, 32});
    HostLse lse({1, 4, Nq});
    AttentionArgs one;
    one.q = entry(c.q.view(), b), one.k = entry(c.k.view(), b, lengths[size_t(b)]);
    one.v = entry(c.v.view(), b, lengths[size_t(b)]);
    one.out = out.view(), one.lse = lse.view();
    run_cpu(spec, one);
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t i = 0; i < Nq; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(lse.get(0, h, i)), std::bit_cast<uint32_t>(c.lse->get(b, h, i)))
            << "LSE of entry " << b << " head " << h << " row " << i;
        for (int64_t x = 0; x < 32; ++x)
          ASSERT_EQ(std::bit_cast<uint32_t>(out.get(0, h, i, x)), std::bit_cast<uint32_t>(c.out.get(b, h, i, x)))
              << "O of entry " << b << " head " << h << " row " << i << " dim " << x;
      }
  }
}

TEST(CpuPaged, BitwiseIdenticalToContiguous) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<KernelSpec> specs = {spec_of({}), spec_of({MK::Causal}, {MD::Alibi, MD::Softcap}),
                                         spec_of({MK::SlidingWindow}), spec_of({MK::Causal}, {}, NormKind::ReluAttention)};
  for (int64_t ps : {1, 16, 64, 100})
    for (Layout layout : {Layout::NHD, Layout::HND})
      for (int64_t Nq : {1, 16}) {
        // 0, 1, page_size, page_size + 1 and odd lengths in one batch.
        const std::vector<int64_t> lengths = {0, 1, ps, ps + 1, 37, 131};
        for (size_t s = 0; s < specs.size(); ++s) {
          SCOPED_TRACE(fmt::format("page size {} {} Nq {} spec {}", ps, layout == Layout::NHD ? "NHD" : "HND", Nq, s));
          expect_identical_to_contiguous(specs[s], lengths, ps, layout, Nq, DType::F32, seed);
        }
      }
}

// Page tensors that are views with padded strides (rows of D + 8, pages 40 elements apart
// beyond their size): the kernel must follow the strides, not assume dense pages.
TEST(CpuPaged, StridedPageTensorsGiveTheSameBits) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<int64_t> lengths = {5, 0, 33, 64};
  const KernelSpec spec = spec_of({MK::Causal}, {MD::Alibi});
  for (Layout layout : {Layout::NHD, Layout::HND}) {
    AttentionCase c({4, 4, 2, 3, longest(lengths), 32}, CaseOptions{}, seed);
    PagedCache cache = make_paged_cache(c.k.view(), c.v.view(), lengths, 16, layout, seed);
    run_cpu(spec, paged_args(c, cache));
    const std::vector<std::byte> dense_out = c.out.storage();

    // The same pages copied into padded storage, element by element.
    const PagedKV dense = cache.view();
    auto padded = [](const TensorView& t, std::vector<float>& store) {
      const auto& sh = t.shape;
      const int64_t row = sh[3] + 8, mid = sh[2] * row, outer = sh[1] * mid, page = outer + 40;
      store.assign(static_cast<size_t>(sh[0] * page), std::nanf(""));
      TensorView v = t;
      v.data = store.data();
      v.strides = {page, mid, row, 1};
      for (int64_t a = 0; a < sh[0]; ++a)
        for (int64_t b = 0; b < sh[1]; ++b)
          for (int64_t r = 0; r < sh[2]; ++r)
            for (int64_t d = 0; d < sh[3]; ++d)
              store[static_cast<size_t>(a * page + b * mid + r * row + d)] =
                  static_cast<const float*>(t.data)[t.offset(a, b, r, d)];
      return v;
    };
    std::vector<float> ks, vs;
    PagedKV strided = dense;
    strided.k_pages = padded(dense.k_pages, ks);
    strided.v_pages = padded(dense.v_pages, vs);
    c.out.poison();
    AttentionArgs args = paged_args(c, cache);
    args.paged = strided;
    run_cpu(spec, args);
    EXPECT_TRUE(c.out.storage() == dense_out) << (layout == Layout::NHD ? "NHD" : "HND")
                                              << ": strided pages changed the output bits";
  }
}

TEST(CpuPaged, BitwiseIdentical16BitAndPrefill) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_identical_to_contiguous(spec_of({MK::Causal}), {0, 1, 16, 17, 99}, 16, Layout::HND, 16, dtype, seed);
    // Prefill: Nq = Nk for every entry.
    expect_identical_to_contiguous(spec_of({MK::Causal}, {MD::Alibi}), {70, 70}, 64, Layout::NHD, 70, dtype, seed);
  }
}

// One paged call against the float64 reference.
void expect_paged_matches_reference(const KernelSpec& spec, const std::vector<int64_t>& lengths, int64_t Nq,
                                    DType dtype, int64_t page_size, Layout layout, uint64_t seed,
                                    std::optional<int64_t> q_offset = {}) {
  CaseOptions opt;
  opt.dtype = dtype;
  opt.stddev = spec.modifiers.has(MD::Softcap) ? 2.0f : 1.0f;
  AttentionCase c({std::ssize(lengths), 8, 2, Nq, longest(lengths), 64}, opt, seed);
  PagedCache cache = make_paged_cache(c.k.view(), c.v.view(), lengths, page_size, layout, seed + 1);
  AttentionArgs args = paged_args(c, cache);
  args.q_offset = q_offset;
  run_cpu(spec, args);
  expect_matches_reference(spec, args);
}

TEST(CpuPaged, EveryCombinatorMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  KernelSpec dynamic = spec_of({MK::Causal}, {}, NormKind::Softmax, ScoreKind::Rope);
  dynamic.scalars.rope.rope_type = RopeScaling::Dynamic;
  dynamic.scalars.rope.factor = 2.0;
  dynamic.scalars.rope.original_max_position_embeddings = 64;
  const std::vector<std::pair<std::string, KernelSpec>> all = {
      {"full", spec_of({})},
      {"causal", spec_of({MK::Causal})},
      {"sliding", spec_of({MK::SlidingWindow})},
      {"causal_sliding", spec_of({MK::Causal, MK::SlidingWindow})},
      {"alibi_causal", spec_of({MK::Causal}, {MD::Alibi})},
      {"softcap_alibi", spec_of({}, {MD::Softcap, MD::Alibi})},
      {"relu_causal", spec_of({MK::Causal}, {}, NormKind::ReluAttention)},
      {"rope_causal", spec_of({MK::Causal}, {}, NormKind::Softmax, ScoreKind::Rope)},
      {"rope_dynamic_causal", dynamic},
      {"rope_window_sliding", spec_of({MK::SlidingWindow}, {}, NormKind::Softmax, ScoreKind::RopeWindow)},
      {"rope_window_causal_softcap", spec_of({MK::Causal}, {MD::Softcap}, NormKind::Softmax, ScoreKind::RopeWindow)},
  };
  const std::vector<int64_t> lengths = {0, 1, 16, 17, 45, 150};
  for (const auto& [name, spec] : all) {
    SCOPED_TRACE(name);
    for (int64_t Nq : {1, 16}) expect_paged_matches_reference(spec, lengths, Nq, DType::F32, 16, Layout::NHD, seed);
    expect_paged_matches_reference(spec, {90, 90}, 90, DType::F32, 64, Layout::HND, seed);  // prefill
  }
}

TEST(CpuPaged, SixteenBitAndExplicitOffset) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const KernelSpec rope = spec_of({MK::Causal}, {MD::Alibi}, NormKind::Softmax, ScoreKind::Rope);
  const KernelSpec window = spec_of({MK::SlidingWindow}, {}, NormKind::Softmax, ScoreKind::RopeWindow);
  for (DType dtype : {DType::BF16, DType::F16})
    for (const KernelSpec* spec : {&rope, &window}) {
      SCOPED_TRACE(dtype_name(dtype));
      expect_paged_matches_reference(*spec, {0, 5, 33, 100}, 4, dtype, 32, Layout::HND, seed);
    }
  // An explicit q_offset applies to every sequence (queries at 40.., whatever each length).
  expect_paged_matches_reference(rope, {1, 64, 65, 120}, 8, DType::F32, 64, Layout::NHD, seed, 40);
}

// ---- Bad arguments: a typed error, and the outputs untouched --------------------------------

void expect_rejected_untouched(const KernelSpec& spec, const AttentionArgs& args, const AttentionCase& c,
                               ErrorCode code, const std::string& phrase) {
  const std::vector<std::byte> before = c.out.storage();
  try {
    run_cpu(spec, args);
    ADD_FAILURE() << "accepted: " << phrase;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
  EXPECT_TRUE(c.out.storage() == before) << "the output was written";
}

TEST(CpuPaged, ArgumentErrorsBeforeAnyWrite) {
  const KernelSpec spec = spec_of({MK::Causal});
  AttentionCase c({2, 4, 2, 3, 40, 32}, {}, 7);
  const std::vector<int64_t> lengths = {40, 17};
  PagedCache cache = make_paged_cache(c.k.view(), c.v.view(), lengths, 16, Layout::NHD, 3);
  auto fresh = [&] { return paged_args(c, cache); };
  EXPECT_NO_THROW(validate(spec, fresh()));

  AttentionArgs a = fresh();
  a.k = c.k.view();
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "args.k and args.v must be left empty");
  const std::vector<int32_t> bad_index = {0, 1, 99, 3, 4};
  a = fresh(), a.paged->page_indices = bad_index;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "page_indices[2] = 99 is out of range");
  const std::vector<int32_t> short_indptr = {0, 3};
  a = fresh(), a.paged->page_indptr = short_indptr;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "page_indptr has 2 entries but the batch has B = 2");
  const std::vector<int32_t> decreasing = {0, 3, 2};
  a = fresh(), a.paged->page_indptr = decreasing;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "page_indptr decreases at entry 2");
  const std::vector<int32_t> not_zero = {1, 3, 5};
  a = fresh(), a.paged->page_indptr = not_zero;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "page_indptr must start at 0");
  const std::vector<int32_t> past_end = {0, 3, 40};
  a = fresh(), a.paged->page_indptr = past_end;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "but page_indices has only");
  for (int32_t bad : {0, 17}) {
    const std::vector<int32_t> last = {8, bad};
    a = fresh(), a.paged->last_page_len = last;
    expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "last_page_len[1] = " + std::to_string(bad));
  }
  // Heads that do not divide Hq, another head dim, another dtype, mismatched V pages, no data.
  a = fresh(), a.paged->k_pages.shape[2] = a.paged->v_pages.shape[2] = 3;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "must be a multiple of the paged cache's");
  a = fresh(), a.paged->k_pages.shape[3] = 16;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "has head dim 16 but Q has 32");
  a = fresh(), a.paged->v_pages.shape[1] = 8;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "v_pages [");
  a = fresh(), a.paged->v_pages.dtype = DType::BF16;
  expect_rejected_untouched(spec, a, c, ErrorCode::DType, "v_pages is bf16 but Q is fp32");
  a = fresh(), a.paged->k_pages.data = nullptr;
  expect_rejected_untouched(spec, a, c, ErrorCode::MissingTensor, "k_pages");
  a = fresh(), a.paged->k_pages.strides[3] = 2;
  expect_rejected_untouched(spec, a, c, ErrorCode::Shape, "must be contiguous");
  // Masks and modifiers that need one key axis for the whole batch.
  expect_rejected_untouched(make_spec({}, {MD::AdditiveBias}), fresh(), c, ErrorCode::Unsupported, "additive_bias");
  expect_rejected_untouched(make_spec({MK::BlockSparse}, {}), fresh(), c, ErrorCode::Unsupported, "block_sparse");
  KernelSpec doc = make_spec({MK::Causal}, {});
  doc.masks.add(MK::Document);
  expect_rejected_untouched(doc, fresh(), c, ErrorCode::Unsupported, "document masks are not supported");
}

TEST(CpuPaged, EmptyBatchAndNoQueries) {
  // B = 0 (indptr [0]) and Nq = 0: nothing to do, nothing read.
  const KernelSpec spec = spec_of({MK::Causal});
  AttentionCase none({0, 4, 2, 3, 8, 32}, {}, 1);
  PagedCache empty = make_paged_cache(none.k.view(), none.v.view(), std::vector<int64_t>{}, 4, Layout::NHD, 1);
  EXPECT_NO_THROW(run_cpu(spec, paged_args(none, empty)));
  AttentionCase rows({2, 4, 2, 0, 8, 32}, {}, 1);
  PagedCache cache = make_paged_cache(rows.k.view(), rows.v.view(), std::vector<int64_t>{8, 3}, 4, Layout::HND, 1);
  EXPECT_NO_THROW(run_cpu(spec, paged_args(rows, cache)));
}

}  // namespace
}  // namespace attnfuse::test
