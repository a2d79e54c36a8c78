// The C ABI tests' shared helpers: contiguous fp32 buffers as attnfuse_tensor (C) and TensorView
// (C++, for the reference runs), and bitwise equality of two outputs.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/attnfuse.h"

namespace capi_test {

// The C++ view of the same contiguous fp32 buffer (for the reference runs through run_cpu).
inline attnfuse::TensorView tv(std::vector<float>& data, int64_t b, int64_t h, int64_t s, int64_t d) {
  return attnfuse::TensorView::contiguous(data.data(), attnfuse::DType::F32, {b, h, s, d});
}

// A contiguous [b, h, s, d] tensor at data (any element type; strides in elements).
inline attnfuse_tensor view(void* data, int64_t b, int64_t h, int64_t s, int64_t d) {
  attnfuse_tensor t{};
  t.data = data;
  t.shape[0] = b, t.shape[1] = h, t.shape[2] = s, t.shape[3] = d;
  t.strides[0] = h * s * d, t.strides[1] = s * d, t.strides[2] = d, t.strides[3] = 1;
  return t;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace capi_test
