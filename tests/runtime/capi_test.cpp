// The C ABI (include/attnfuse/attnfuse.h) through the shared library: compile, launch on host
// pointers (CPU device), and every error path as a status code plus a readable message.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attnfuse.h"

namespace {

attnfuse_tensor view(void* data, int64_t b, int64_t h, int64_t s, int64_t d) {
  attnfuse_tensor t{};
  t.data = data;
  t.shape[0] = b, t.shape[1] = h, t.shape[2] = s, t.shape[3] = d;
  t.strides[0] = h * s * d, t.strides[1] = s * d, t.strides[2] = d, t.strides[3] = 1;
  return t;
}

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

TEST(CApi, RopePlacementIsAnOption) {
  attnfuse_kernel* k = nullptr;
  EXPECT_EQ(attnfuse_compile_rope("softmax(causal(rope(Q, K))) @ V", ATTNFUSE_DEVICE_CPU, ATTNFUSE_FP32, 0,
                                  static_cast<attnfuse_rope_mode>(7), &k),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnfuse_last_error()).find("rope_mode"), std::string::npos);
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
