// Small helpers for the reference tests: owned tensors, specs and argument bundles.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "common/dtype.hpp"
#include "reference/reference.hpp"

namespace attnfuse::testing {

// A contiguous BHSD tensor that owns its storage (fp32, or 16-bit words for bf16/fp16).
struct Tensor {
  std::vector<float> f32;
  std::vector<uint16_t> u16;
  TensorView view;

  Tensor(std::array<int64_t, 4> shape, DType dt = DType::F32) {
    const auto n = static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]);
    void* data;
    if (dt == DType::F32) {
      f32.assign(n, 0.0f);
      data = f32.data();
    } else {
      u16.assign(n, 0);
      data = u16.data();
    }
    view = TensorView::contiguous(data, dt, shape);
  }
  void set(int64_t b, int64_t h, int64_t s, int64_t d, float x) {
    store_elem(view.data, view.dtype, view.offset(b, h, s, d), x);
  }
  float get(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return load_elem(view.data, view.dtype, view.offset(b, h, s, d));
  }
  void fill_random(std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    const auto& s = view.shape;
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t h = 0; h < s[1]; ++h)
        for (int64_t i = 0; i < s[2]; ++i)
          for (int64_t d = 0; d < s[3]; ++d) set(b, h, i, d, u(rng));
  }
  // Row-major values: fills [b, h, :, :] in order from `vals`.
  void fill(std::initializer_list<float> vals) {
    int64_t idx = 0;
    const auto& s = view.shape;
    auto it = vals.begin();
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t h = 0; h < s[1]; ++h)
        for (int64_t i = 0; i < s[2]; ++i)
          for (int64_t d = 0; d < s[3]; ++d, ++idx) set(b, h, i, d, *it++);
  }
};

inline KernelSpec spec_of(NormKind norm = NormKind::Softmax) {
  KernelSpec s;
  s.norm = norm;
  return s;
}

inline AttentionArgs args_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  AttentionArgs a;
  a.q = q.view;
  a.k = k.view;
  a.v = v.view;
  return a;
}

// Fixed seeds plus one fresh seed; callers wrap each in SCOPED_TRACE so a failure prints it.
inline std::vector<uint64_t> seeds() { return {11, 22, std::random_device{}()}; }

inline ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::Internal;  // "no error" sentinel for these tests
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return INFINITY;
      continue;
    }
    if (!std::isnan(a[i])) m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

}  // namespace attnfuse::testing
