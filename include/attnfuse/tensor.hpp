// Non-owning views of the tensors an attention call reads and writes (BHSD logical layout).
#pragma once

#include <array>
#include <cstdint>

namespace attnfuse {

enum class DType { F32, BF16, F16 };

const char* dtype_name(DType t);
int dtype_size(DType t);

// A 4-D strided view. shape/strides are in elements, logical order [B, H, S, D]; any strides
// are accepted as long as the last dimension is contiguous (strides[3] == 1), so BSHD tensors
// need no copy. All offsets are 64-bit.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::array<int64_t, 4> shape{0, 0, 0, 0};
  std::array<int64_t, 4> strides{0, 0, 0, 1};

  // Contiguous BHSD view.
  static TensorView contiguous(void* data, DType dtype, std::array<int64_t, 4> shape) {
    TensorView t;
    t.data = data;
    t.dtype = dtype;
    t.shape = shape;
    t.strides = {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
    return t;
  }
  int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  int64_t offset(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return b * strides[0] + h * strides[1] + s * strides[2] + d * strides[3];
  }
};

// The LSE output [B, Hq, Nq], fp32, natural log.
struct LseView {
  float* data = nullptr;
  std::array<int64_t, 3> shape{0, 0, 0};
  std::array<int64_t, 3> strides{0, 0, 1};
  static LseView contiguous(float* data, std::array<int64_t, 3> shape) {
    LseView l;
    l.data = data;
    l.shape = shape;
    l.strides = {shape[1] * shape[2], shape[2], 1};
    return l;
  }
};

}  // namespace attnfuse
