// The C ABI (include/attnfuse/attnfuse.h) through the shared library: compile, launch on host
// pointers (CPU device), paged KV caches and block masks, and every error path as a status code
// plus a readable message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/attnfuse.h"
#include "attnfuse/block_mask.hpp"
#include "attnfuse/program.hpp"
#include "common/dtype.hpp"
#include "runtime/capi_c_callers.h"
#include "runtime/capi_views.hpp"

namespace {

using capi_test::same_bits;
using capi_test::tv;
using capi_test::view;

TEST(CApi, CompileAndLaunchOnTheCpu) {
  attnfuse_kernel* k = nullptr;
  ASSERT_EQ(attnfuse_compile("softmax(causal(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32,
                             0, &k),
            ATTNFUSE_OK)
      << attnfuse_last_error();
  const int64_t B = 1, Hq = 4, Hkv = 2, N = 33, D = 16;
  std::vector<float> q(B * Hq * N * D), kk(B * Hkv * N * D), v(B * Hkv * N * D), o(B * Hq * N * D, NAN),
      lse(B * Hq * N, NAN);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto* t : {&q, &kk, &v})
    for (float& x : *t) x = nd(rng);
  attnfuse_args a{};
  a.q = view(q.data(), B, Hq, N, D);
  a.k = view(kk.data(), B, Hkv, N, D);
  a.v = view(v.data(), B, Hkv, N, D);
  a.out = view(o.data(), B, Hq, N, D);
  a.lse = lse.data();
  a.lse_strides[0] = Hq * N, a.lse_strides[1] = N, a.lse_strides[2] = 1;
  ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  EXPECT_STREQ(attnfuse_last_error(), "");
  // Row 0 of head 0 sees only key 0: its output is V[kv head 0, key 0] and its LSE is s_00.
  for (int d = 0; d < D; ++d) EXPECT_NEAR(o[d], v[d], 1e-6);
  double s00 = 0;
  for (int d = 0; d < D; ++d) s00 += double(q[d]) * kk[d];
  EXPECT_NEAR(lse[0], s00 / std::sqrt(double(D)), 1e-5);
  for (float x : o) EXPECT_FALSE(std::isnan(x));
  attnfuse_kernel_free(k);
}

TEST(CApi, ErrorsAreStatusCodesWithMessages) {
  attnfuse_kernel* k = reinterpret_cast<attnfuse_kernel*>(0x1);
  EXPECT_EQ(attnfuse_compile("softmax(casual(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k),
            ATTNFUSE_ERROR_PARSE);
  EXPECT_EQ(k, nullptr) << "out is cleared on error";
  EXPECT_NE(std::string(attnfuse_last_error()).find("did you mean 'causal'"), std::string::npos) << attnfuse_last_error();

  EXPECT_EQ(attnfuse_compile("causal(softmax(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k),
            ATTNFUSE_ERROR_VERIFY);
  EXPECT_NE(std::string(attnfuse_last_error()).find("after the normalization"), std::string::npos);

  EXPECT_EQ(attnfuse_compile(nullptr, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k), ATTNFUSE_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(attnfuse_compile("softmax(additive_bias(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CPU,
                             ATTNFUSE_FP32, 0, &k),
            ATTNFUSE_OK);
  std::vector<float> q(2 * 8 * 4), o(2 * 8 * 4, 7.f);
  attnfuse_args a{};
  a.q = view(q.data(), 1, 2, 8, 4);
  a.k = view(q.data(), 1, 2, 8, 4);
  a.v = view(q.data(), 1, 2, 8, 4);
  a.out = view(o.data(), 1, 2, 8, 4);
  EXPECT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_ERROR_MISSING_TENSOR);
  EXPECT_NE(std::string(attnfuse_last_error()).find("bias"), std::string::npos) << attnfuse_last_error();
  for (float x : o) EXPECT_EQ(x, 7.f) << "nothing written on error";

  a.k = view(q.data(), 1, 3, 8, 4);  // 2 query heads over 3 KV heads
  attnfuse_tensor bias = view(o.data(), 1, 1, 8, 8);
  a.bias = &bias;
  EXPECT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_ERROR_SHAPE);
  attnfuse_kernel_free(k);
}

// attnfuse_args.bias_dtype: a bf16 kernel takes its bias in fp32 (the zeroed default) or bf16, with
// the same result where the values are bf16's; fp16 and values outside the enum are refused.
TEST(CApi, BiasDtypeIsFp32OrTheKernels) {
  attnfuse_kernel* k = nullptr;
  ASSERT_EQ(attnfuse_compile("softmax(additive_bias(causal(scaled_dot_product(Q, K)))) @ V", ATTNFUSE_DEVICE_CPU,
                             ATTNFUSE_BF16, 0, &k),
            ATTNFUSE_OK)
      << attnfuse_last_error();
  const int64_t H = 2, N = 13, D = 8;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<uint16_t> q(H * N * D), o32(H * N * D), o16(H * N * D, 0x7fc0), b16(H * N * N);
  std::vector<float> b32(H * N * N);
  for (auto& x : q) x = attnfuse::f32_to_bf16(nd(rng));
  for (size_t i = 0; i < b32.size(); ++i) {
    b16[i] = attnfuse::f32_to_bf16(3.f * nd(rng));
    b32[i] = attnfuse::bf16_to_f32(b16[i]);
  }
  attnfuse_args a{};
  a.q = a.k = a.v = view(q.data(), 1, H, N, D);
  a.out = view(o32.data(), 1, H, N, D);
  attnfuse_tensor bias = view(b32.data(), 1, H, N, N);
  a.bias = &bias;
  ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  bias.data = b16.data();
  a.bias_dtype = ATTNFUSE_BF16;
  a.out = view(o16.data(), 1, H, N, D);
  ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  EXPECT_EQ(o16, o32);
  a.bias_dtype = ATTNFUSE_FP16;
  EXPECT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_ERROR_DTYPE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("bias is fp16 but must be fp32 or the inputs' dtype (bf16)"),
            std::string::npos)
      << attnfuse_last_error();
  std::memset(&a.bias_dtype, 0xff, sizeof a.bias_dtype);
  EXPECT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_ERROR_DTYPE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("bias_dtype must be"), std::string::npos) << attnfuse_last_error();
  attnfuse_kernel_free(k);
}

TEST(CApi, RopePlacementIsAnOption) {
  attnfuse_kernel* k = nullptr;
  EXPECT_EQ(capi_compile_raw("softmax(causal(rope(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, 7, &k),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnfuse_last_error()).find("rope_mode"), std::string::npos);
  EXPECT_EQ(k, nullptr);
  // The CPU always fuses; the placement is accepted and the kernel runs.
  ASSERT_EQ(attnfuse_compile_rope("softmax(causal(rope(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0,
                                  ATTNFUSE_ROPE_PREROTATE, &k),
            ATTNFUSE_OK)
      << attnfuse_last_error();
  std::vector<float> q(2 * 8 * 4, 0.5f), o(2 * 8 * 4, 7.f);
  attnfuse_args a{};
  a.q = view(q.data(), 1, 2, 8, 4);
  a.k = a.q;
  a.v = a.q;
  a.out = view(o.data(), 1, 2, 8, 4);
  EXPECT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  for (float x : o) EXPECT_NEAR(x, 0.5f, 1e-6f) << "V is constant, so O is too";
  attnfuse_kernel_free(k);
}

// A C caller may put any int in an enum argument: values outside the enumerators are refused
// by name, before anything is compiled (they once fell back to the CPU and to fp32).
TEST(CApi, EnumArgumentsOutsideTheirValuesAreRefused) {
  const char* prog = "softmax(causal(scaled_dot_product(Q, K))) @ V";
  attnfuse_kernel* k = nullptr;
  for (int device : {-1, 2, 1 << 20}) {
    EXPECT_EQ(capi_compile_raw(prog, device, ATTNFUSE_FP32, 0, ATTNFUSE_ROPE_AUTO, &k), ATTNFUSE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attnfuse_last_error()).find("device must be"), std::string::npos) << attnfuse_last_error();
    EXPECT_NE(std::string(attnfuse_last_error()).find(std::to_string(device)), std::string::npos);
    EXPECT_EQ(k, nullptr);
  }
  for (int dtype : {-3, 3, 255}) {
    EXPECT_EQ(capi_compile_raw(prog, ATTNFUSE_DEVICE_CPU, dtype, 0, ATTNFUSE_ROPE_AUTO, &k),
              ATTNFUSE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attnfuse_last_error()).find("dtype must be"), std::string::npos) << attnfuse_last_error();
    EXPECT_EQ(k, nullptr);
  }
  for (int mode : {-1, 3}) {
    EXPECT_EQ(capi_compile_raw(prog, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, mode, &k), ATTNFUSE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attnfuse_last_error()).find("rope_mode must be"), std::string::npos) << attnfuse_last_error();
  }
  // Every valid combination on the CPU compiles (CUDA needs a device; its refusal is a Device error).
  for (int dtype : {ATTNFUSE_FP32, ATTNFUSE_BF16, ATTNFUSE_FP16})
    for (int mode : {ATTNFUSE_ROPE_AUTO, ATTNFUSE_ROPE_FUSED, ATTNFUSE_ROPE_PREROTATE}) {
      ASSERT_EQ(capi_compile_raw(prog, ATTNFUSE_DEVICE_CPU, dtype, 0, mode, &k), ATTNFUSE_OK) << attnfuse_last_error();
      attnfuse_kernel_free(k);
      k = nullptr;
    }
}

TEST(CApi, DocumentOffsetsReachTheKernel) {
  // Two documents of 5 and 3 tokens packed in one sequence of 8: running the packed call must
  // equal running each document alone (positions restart per document).
  attnfuse_kernel* k = nullptr;
  const char* prog = "softmax(document(causal(scaled_dot_product(Q, K)))) @ V";
  ASSERT_EQ(attnfuse_compile(prog, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k), ATTNFUSE_OK) << attnfuse_last_error();
  attnfuse_kernel* plain = nullptr;
  ASSERT_EQ(attnfuse_compile("softmax(causal(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0,
                             &plain),
            ATTNFUSE_OK);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const int64_t N = 8, D = 4;
  std::vector<float> q(N * D), kk(N * D), v(N * D), o(N * D, 7.f), want(N * D, 7.f);
  for (auto* t : {&q, &kk, &v})
    for (float& x : *t) x = normal(rng);
  const int32_t cu[] = {0, 5, 8};
  const attnfuse_offsets offsets{cu, 0, 1, 3, 3};
  attnfuse_args a{};
  a.q = view(q.data(), 1, 1, N, D);
  a.k = view(kk.data(), 1, 1, N, D);
  a.v = view(v.data(), 1, 1, N, D);
  a.out = view(o.data(), 1, 1, N, D);
  EXPECT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_ERROR_MISSING_TENSOR) << "document() needs the offsets";
  a.cu_seqlens_q = &offsets;
  a.cu_seqlens_k = &offsets;
  ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  for (auto [begin, len] : {std::pair<int64_t, int64_t>{0, 5}, {5, 3}}) {
    attnfuse_args d{};
    d.q = view(q.data() + begin * D, 1, 1, len, D);
    d.k = view(kk.data() + begin * D, 1, 1, len, D);
    d.v = view(v.data() + begin * D, 1, 1, len, D);
    d.out = view(want.data() + begin * D, 1, 1, len, D);
    ASSERT_EQ(attnfuse_launch(plain, &d, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  }
  for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(o[i], want[i], 1e-6f) << i;
  attnfuse_kernel_free(k);
  attnfuse_kernel_free(plain);
}

// Contiguous K/V of B sequences of different lengths copied into shuffled pages (NaN in every row
// the table does not cover: page tails and spare pages), in either layout.
struct Pages {
  std::vector<float> k, v;
  std::vector<int32_t> indices, indptr, last;
  attnfuse_paged_kv desc{};
};

Pages make_pages(const std::vector<float>& k, const std::vector<float>& v, int64_t Hkv, int64_t Nk, int64_t D,
                 const std::vector<int64_t>& lengths, int64_t page_size, attnfuse_paged_layout layout,
                 std::mt19937& rng) {
  Pages p;
  const auto B = static_cast<int64_t>(lengths.size());
  int64_t used = 0;
  for (int64_t n : lengths) used += (n + page_size - 1) / page_size;
  const int64_t num_pages = used + 3;  // spare pages nobody owns
  std::vector<int32_t> order(static_cast<size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  p.k.assign(static_cast<size_t>(num_pages * page_size * Hkv * D), NAN);
  p.v = p.k;
  const bool nhd = layout == ATTNFUSE_PAGED_NHD;
  // Element offset of (page, row in page, head, d) in either layout.
  auto at = [&](int64_t page, int64_t r, int64_t h, int64_t d) {
    return nhd ? ((page * page_size + r) * Hkv + h) * D + d : ((page * Hkv + h) * page_size + r) * D + d;
  };
  p.indptr.push_back(0);
  size_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[size_t(b)], pages = (n + page_size - 1) / page_size;
    for (int64_t i = 0; i < pages; ++i) p.indices.push_back(order[next++]);
    p.indptr.push_back(static_cast<int32_t>(p.indices.size()));
    p.last.push_back(static_cast<int32_t>(pages == 0 ? 0 : n - (pages - 1) * page_size));
    for (int64_t u = 0; u < n; ++u)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const auto page = p.indices[size_t(p.indptr[size_t(b)] + u / page_size)];
          const auto src = static_cast<size_t>(((b * Hkv + h) * Nk + u) * D + d);
          p.k[size_t(at(page, u % page_size, h, d))] = k[src];
          p.v[size_t(at(page, u % page_size, h, d))] = v[src];
        }
  }
  auto pages_view = [&](std::vector<float>& data) {
    attnfuse_tensor t{};
    t.data = data.data();
    const int64_t s1 = nhd ? page_size : Hkv, s2 = nhd ? Hkv : page_size;
    t.shape[0] = num_pages, t.shape[1] = s1, t.shape[2] = s2, t.shape[3] = D;
    t.strides[0] = s1 * s2 * D, t.strides[1] = s2 * D, t.strides[2] = D, t.strides[3] = 1;
    return t;
  };
  p.desc.k_pages = pages_view(p.k);
  p.desc.v_pages = pages_view(p.v);
  p.desc.layout = layout;
  p.desc.page_indices = p.indices.data();
  p.desc.num_page_indices = static_cast<int64_t>(p.indices.size());
  p.desc.page_indptr = p.indptr.data();
  p.desc.last_page_len = p.last.data();
  return p;
}

TEST(CApi, PagedCacheGivesTheBitsOfContiguousKV) {
  // Sequences of 37, 1, 16 and 0 keys (one page exactly, none at all) in pages of 8, decoding 3
  // queries each: O and LSE of the paged call equal, bit for bit, one contiguous call per sequence.
  const char* prog = "softmax(causal(scaled_dot_product(Q, K))) @ V";
  attnfuse_kernel* k = nullptr;
  ASSERT_EQ(attnfuse_compile(prog, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k), ATTNFUSE_OK) << attnfuse_last_error();
  const std::vector<int64_t> lengths = {37, 1, 16, 0};
  const int64_t B = 4, Hq = 4, Hkv = 2, Nq = 3, Nk = 37, D = 16;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> q(B * Hq * Nq * D), kk(B * Hkv * Nk * D), v(kk.size());
  for (auto* t : {&q, &kk, &v})
    for (float& x : *t) x = nd(rng);
  for (attnfuse_paged_layout layout : {ATTNFUSE_PAGED_NHD, ATTNFUSE_PAGED_HND}) {
    SCOPED_TRACE(layout == ATTNFUSE_PAGED_NHD ? "NHD" : "HND");
    Pages pages = make_pages(kk, v, Hkv, Nk, D, lengths, 8, layout, rng);
    std::vector<float> o(q.size(), 7.f), lse(B * Hq * Nq, 7.f), want(q.size(), 7.f), want_lse(lse.size(), 7.f);
    attnfuse_args a{};
    a.q = view(q.data(), B, Hq, Nq, D);
    a.out = view(o.data(), B, Hq, Nq, D);
    a.lse = lse.data();
    a.lse_strides[0] = Hq * Nq, a.lse_strides[1] = Nq, a.lse_strides[2] = 1;
    a.paged = &pages.desc;
    ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
    for (int64_t b = 0; b < B; ++b) {  // batch entry b alone, its own length, bottom-right
      const int64_t n = lengths[size_t(b)];
      attnfuse_args one{};
      one.q = view(q.data() + b * Hq * Nq * D, 1, Hq, Nq, D);
      one.k = view(kk.data() + b * Hkv * Nk * D, 1, Hkv, n, D);
      one.k.strides[1] = Nk * D;  // rows of the full [B, Hkv, Nk, D] tensor
      one.v = view(v.data() + b * Hkv * Nk * D, 1, Hkv, n, D);
      one.v.strides[1] = Nk * D;
      one.out = view(want.data() + b * Hq * Nq * D, 1, Hq, Nq, D);
      one.lse = want_lse.data() + b * Hq * Nq;
      one.lse_strides[0] = Hq * Nq, one.lse_strides[1] = Nq, one.lse_strides[2] = 1;
      ASSERT_EQ(attnfuse_launch(k, &one, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
    }
    EXPECT_TRUE(same_bits(o, want));
    EXPECT_TRUE(same_bits(lse, want_lse));
    for (int64_t i = 3 * Hq * Nq * D; i < B * Hq * Nq * D; ++i) ASSERT_EQ(o[size_t(i)], 0.f) << "no keys: O = 0";
    EXPECT_TRUE(std::isinf(lse.back()) && lse.back() < 0) << "no keys: LSE = -inf";
    // paged_table_settled only moves when a CUDA call reads the table: the CPU gives the same bits.
    std::vector<float> o2(q.size(), 7.f), lse2(lse.size(), 7.f);
    a.out = view(o2.data(), B, Hq, Nq, D);
    a.lse = lse2.data();
    a.paged_table_settled = 1;
    ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
    EXPECT_TRUE(same_bits(o2, o));
    EXPECT_TRUE(same_bits(lse2, lse));
  }
  attnfuse_kernel_free(k);
}

TEST(CApi, PagedCacheErrorsWriteNothing) {
  attnfuse_kernel* k = nullptr;
  ASSERT_EQ(attnfuse_compile("softmax(causal(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32,
                             0, &k),
            ATTNFUSE_OK);
  const int64_t B = 2, H = 2, Nq = 1, Nk = 20, D = 8;
  std::mt19937 rng(5);
  std::vector<float> q(B * H * Nq * D, 0.25f), kk(B * H * Nk * D, 0.5f), v(kk.size(), 1.f), o(q.size(), 7.f);
  Pages pages = make_pages(kk, v, H, Nk, D, {20, 13}, 4, ATTNFUSE_PAGED_NHD, rng);
  attnfuse_args a{};
  a.q = view(q.data(), B, H, Nq, D);
  a.out = view(o.data(), B, H, Nq, D);
  a.paged = &pages.desc;
  auto expect_refused = [&](attnfuse_status want, const char* words) {
    EXPECT_EQ(attnfuse_launch(k, &a, nullptr), want) << attnfuse_last_error();
    EXPECT_NE(std::string(attnfuse_last_error()).find(words), std::string::npos) << attnfuse_last_error();
    for (float x : o) ASSERT_EQ(x, 7.f) << "nothing written on error";
  };

  a.k = view(kk.data(), B, H, Nk, D);  // K given as well as the pages
  expect_refused(ATTNFUSE_ERROR_SHAPE, "must be left");
  a.k = attnfuse_tensor{};

  attnfuse_paged_kv bad = pages.desc;
  a.paged = &bad;
  bad.page_indptr = nullptr;
  expect_refused(ATTNFUSE_ERROR_MISSING_TENSOR, "page_indptr");
  bad = pages.desc, bad.last_page_len = nullptr;
  expect_refused(ATTNFUSE_ERROR_MISSING_TENSOR, "last_page_len");
  bad = pages.desc, bad.page_indices = nullptr;
  expect_refused(ATTNFUSE_ERROR_MISSING_TENSOR, "page_indices");
  bad = pages.desc, bad.num_page_indices = 2;  // the table needs 9
  expect_refused(ATTNFUSE_ERROR_SHAPE, "page_indices has only 2");
  bad = pages.desc;
  capi_set_paged_layout_raw(&bad, 5);
  expect_refused(ATTNFUSE_ERROR_INVALID_ARGUMENT, "layout");
  std::vector<int32_t> out_of_range = pages.indices;
  out_of_range[3] = 99;
  bad = pages.desc, bad.page_indices = out_of_range.data();
  expect_refused(ATTNFUSE_ERROR_SHAPE, "out of range");
  bad = pages.desc, bad.k_pages.shape[3] = D + 1;
  expect_refused(ATTNFUSE_ERROR_SHAPE, "head dim");

  a.paged = &pages.desc;
  ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  for (float x : o) EXPECT_NEAR(x, 1.f, 1e-6f) << "V is 1 everywhere, so O is too";
  attnfuse_kernel_free(k);
}

TEST(CApi, BlockMaskFromDenseMatchesTheCppRun) {
  // A random grid of 16 x 16 blocks over 100 x 100 cells (edge blocks cut), one grid per query head
  // and shared by the batch, with one query block row left empty (O = 0, LSE = -inf).
  const char* prog = "softmax(block_sparse(scaled_dot_product(Q, K))) @ V";
  const int64_t B = 2, Hq = 4, Hkv = 2, N = 100, D = 16;
  const int bs = 16;
  const int64_t nb = (N + bs - 1) / bs;
  std::mt19937 rng(7);
  std::vector<uint8_t> grid(static_cast<size_t>(Hq * nb * nb));
  std::bernoulli_distribution active(0.4);
  for (auto& g : grid) g = active(rng) ? 1 : 0;
  for (int64_t kb = 0; kb < nb; ++kb) grid[size_t(2 * nb + kb)] = 0;  // head 0, query block 2
  attnfuse_block_mask* mask = nullptr;
  ASSERT_EQ(attnfuse_block_mask_from_dense(grid.data(), 1, Hq, N, N, bs, bs, &mask), ATTNFUSE_OK)
      << attnfuse_last_error();
  ASSERT_NE(mask, nullptr);
  const attnfuse::BlockMask cpp_mask = attnfuse::BlockMask::from_dense(grid.data(), 1, Hq, N, N, bs, bs);
  grid.assign(grid.size(), 0xAB);  // the C mask holds its own copy

  std::normal_distribution<float> nd;
  std::vector<float> q(B * Hq * N * D), kk(B * Hkv * N * D), v(kk.size());
  for (auto* t : {&q, &kk, &v})
    for (float& x : *t) x = nd(rng);
  std::vector<float> o(q.size(), 7.f), lse(B * Hq * N, 7.f), want(q.size(), 7.f), want_lse(lse.size(), 7.f);

  attnfuse_kernel* k = nullptr;
  ASSERT_EQ(attnfuse_compile(prog, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k), ATTNFUSE_OK) << attnfuse_last_error();
  attnfuse_args a{};
  a.q = view(q.data(), B, Hq, N, D);
  a.k = view(kk.data(), B, Hkv, N, D);
  a.v = view(v.data(), B, Hkv, N, D);
  a.out = view(o.data(), B, Hq, N, D);
  a.lse = lse.data();
  a.lse_strides[0] = Hq * N, a.lse_strides[1] = N, a.lse_strides[2] = 1;
  a.block_mask = mask;
  ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();

  attnfuse::AttentionArgs c;
  c.q = tv(q, B, Hq, N, D), c.k = tv(kk, B, Hkv, N, D), c.v = tv(v, B, Hkv, N, D), c.out = tv(want, B, Hq, N, D);
  attnfuse::LseView l;
  l.data = want_lse.data();
  l.shape = {B, Hq, N};
  l.strides = {Hq * N, N, 1};
  c.lse = l;
  c.block_mask = &cpp_mask;
  attnfuse::run_cpu(attnfuse::Program::parse(prog).compile({attnfuse::Target::Cpu, attnfuse::DType::F32, 0}), c);
  EXPECT_TRUE(same_bits(o, want));
  EXPECT_TRUE(same_bits(lse, want_lse));
  for (int64_t i = 2 * bs; i < 3 * bs; ++i) {  // batch 0, head 0, the empty query block row
    EXPECT_TRUE(std::isinf(lse[size_t(i)]) && lse[size_t(i)] < 0) << i;
    for (int64_t d = 0; d < D; ++d) ASSERT_EQ(o[size_t(i * D + d)], 0.f);
  }

  // The mask matters: the same call without block_sparse differs.
  attnfuse_kernel* dense = nullptr;
  ASSERT_EQ(attnfuse_compile("softmax(scaled_dot_product(Q, K)) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &dense),
            ATTNFUSE_OK);
  std::vector<float> o_dense(q.size());
  attnfuse_args d = a;
  d.out = view(o_dense.data(), B, Hq, N, D);
  d.lse = nullptr;
  d.block_mask = nullptr;
  ASSERT_EQ(attnfuse_launch(dense, &d, nullptr), ATTNFUSE_OK) << attnfuse_last_error();
  EXPECT_FALSE(same_bits(o, o_dense));

  attnfuse_kernel_free(dense);
  attnfuse_kernel_free(k);
  attnfuse_block_mask_free(mask);
  attnfuse_block_mask_free(nullptr);  // a no-op
}

TEST(CApi, RopeTablesMatchTheCppRunAndAreRefusedOnMismatch) {
  // Arbitrary tables through attnfuse_args.rope_cos / rope_sin give the bits of the C++ call with
  // AttentionArgs::rope_tables; a wrong pair count is a SHAPE status that writes nothing.
  const char* prog = "softmax(causal(rope(Q, K, style=gptj))) @ V";
  const int64_t B = 1, Hq = 2, Hkv = 1, N = 30, D = 16, P = 40;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> q(B * Hq * N * D), kk(B * Hkv * N * D), v(kk.size()), cs(P * D / 2), sn(cs.size());
  for (auto* t : {&q, &kk, &v, &cs, &sn})
    for (float& x : *t) x = nd(rng);
  std::vector<float> o(q.size(), 7.f), want(q.size(), 7.f);
  attnfuse_kernel* k = nullptr;
  ASSERT_EQ(attnfuse_compile(prog, ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k), ATTNFUSE_OK) << attnfuse_last_error();
  attnfuse_args a{};
  a.q = view(q.data(), B, Hq, N, D);
  a.k = view(kk.data(), B, Hkv, N, D);
  a.v = view(v.data(), B, Hkv, N, D);
  a.out = view(o.data(), B, Hq, N, D);
  a.rope_cos = cs.data();
  a.rope_sin = sn.data();
  a.rope_positions = P;
  a.rope_pairs = D / 2;
  ASSERT_EQ(attnfuse_launch(k, &a, nullptr), ATTNFUSE_OK) << attnfuse_last_error();

  attnfuse::AttentionArgs c;
  c.q = tv(q, B, Hq, N, D), c.k = tv(kk, B, Hkv, N, D), c.v = tv(v, B, Hkv, N, D), c.out = tv(want, B, Hq, N, D);
  c.rope_tables = attnfuse::RopeTablesView{cs.data(), sn.data(), P, D / 2};
  attnfuse::run_cpu(attnfuse::Program::parse(prog).compile({attnfuse::Target::Cpu, attnfuse::DType::F32, 0}), c);
  EXPECT_TRUE(same_bits(o, want));

  std::vector<float> o2(q.size(), 7.f);
  attnfuse_args bad = a;
  bad.out = view(o2.data(), B, Hq, N, D);
  bad.rope_pairs = D / 4;
  EXPECT_EQ(attnfuse_launch(k, &bad, nullptr), ATTNFUSE_ERROR_SHAPE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("pairs"), std::string::npos) << attnfuse_last_error();
  for (float x : o2) ASSERT_EQ(x, 7.f);
  attnfuse_kernel_free(k);
}

TEST(CApi, BlockMaskErrorsAreStatusCodes) {
  const uint8_t grid[4] = {1, 0, 1, 1};
  attnfuse_block_mask* mask = reinterpret_cast<attnfuse_block_mask*>(0x1);
  EXPECT_EQ(attnfuse_block_mask_from_dense(grid, 1, 1, 32, 32, 0, 16, &mask), ATTNFUSE_ERROR_SHAPE);
  EXPECT_EQ(mask, nullptr) << "out is cleared on error";
  EXPECT_NE(std::string(attnfuse_last_error()).find("block sizes must be >= 1"), std::string::npos)
      << attnfuse_last_error();
  EXPECT_EQ(attnfuse_block_mask_from_dense(grid, 1, -1, 32, 32, 16, 16, &mask), ATTNFUSE_ERROR_SHAPE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("must be >= 0"), std::string::npos) << attnfuse_last_error();
  EXPECT_EQ(attnfuse_block_mask_from_dense(nullptr, 1, 1, 32, 32, 16, 16, &mask), ATTNFUSE_ERROR_SHAPE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("grid pointer is null"), std::string::npos)
      << attnfuse_last_error();
  EXPECT_EQ(attnfuse_block_mask_from_dense(grid, 1, 1, 32, 32, 16, 16, nullptr), ATTNFUSE_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(attnfuse_block_mask_from_dense(grid, 1, 1, 32, 32, 16, 16, &mask), ATTNFUSE_OK) << attnfuse_last_error();

  attnfuse_kernel* k = nullptr;
  ASSERT_EQ(attnfuse_compile("softmax(block_sparse(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CPU,
                             ATTNFUSE_FP32, 0, &k),
            ATTNFUSE_OK);
  std::vector<float> q(2 * 48 * 4, 0.5f), o(q.size(), 7.f);
  attnfuse_args a{};
  a.q = view(q.data(), 1, 2, 48, 4);
  a.k = a.q;
  a.v = a.q;
  a.out = view(o.data(), 1, 2, 48, 4);
  auto expect_refused = [&](attnfuse_status want, const char* words) {
    EXPECT_EQ(attnfuse_launch(k, &a, nullptr), want) << attnfuse_last_error();
    EXPECT_NE(std::string(attnfuse_last_error()).find(words), std::string::npos) << attnfuse_last_error();
    for (float x : o) ASSERT_EQ(x, 7.f) << "nothing written on error";
  };
  expect_refused(ATTNFUSE_ERROR_MISSING_TENSOR, "no BlockMask");
  a.block_mask = mask;  // built for 32 x 32, the call is 48 x 48
  expect_refused(ATTNFUSE_ERROR_SHAPE, "rebuild it for these lengths");
  attnfuse_block_mask* heads3 = nullptr;
  const std::vector<uint8_t> grid3(3 * 3 * 3, 1);
  ASSERT_EQ(attnfuse_block_mask_from_dense(grid3.data(), 1, 3, 48, 48, 16, 16, &heads3), ATTNFUSE_OK);
  a.block_mask = heads3;  // 3 heads for a call with 2
  expect_refused(ATTNFUSE_ERROR_SHAPE, "heads");
  attnfuse_kernel_free(k);

  ASSERT_EQ(attnfuse_compile("softmax(scaled_dot_product(Q, K)) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0, &k),
            ATTNFUSE_OK);
  attnfuse_block_mask* fits = nullptr;
  ASSERT_EQ(attnfuse_block_mask_from_dense(grid3.data(), 1, 1, 48, 48, 16, 16, &fits), ATTNFUSE_OK);
  a.block_mask = fits;
  expect_refused(ATTNFUSE_ERROR_UNSUPPORTED, "no block_sparse");
  attnfuse_kernel_free(k);
  attnfuse_block_mask_free(fits);
  attnfuse_block_mask_free(heads3);
  attnfuse_block_mask_free(mask);
}

TEST(CApi, CpuKernelLevelIsTheLibrarys) {
  const char* name = attnfuse_cpu_kernel_isa();
  ASSERT_NE(name, nullptr) << attnfuse_last_error();
  EXPECT_STREQ(name, attnfuse::cpu_kernel_isa());
}

TEST(CApi, CudaRequestWithoutADeviceIsADeviceError) {
  if (attnfuse_cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  attnfuse_kernel* k = nullptr;
  EXPECT_EQ(attnfuse_compile("softmax(causal(scaled_dot_product(Q, K))) @ V", ATTNFUSE_DEVICE_CUDA, ATTNFUSE_BF16,
                             128, &k),
            ATTNFUSE_ERROR_DEVICE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("CUDA backend not available"), std::string::npos)
      << attnfuse_last_error();
}

}  // namespace
