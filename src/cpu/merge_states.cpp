// merge_states on the CPU: the log-sum-exp merge of partial attention results, one row at a time.
#include "attnfuse/merge_states.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnfuse/error.hpp"
#include "common/dtype.hpp"

namespace attnfuse {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

[[noreturn]] void fail(ErrorCode code, const std::string& msg) {
  throw Error(code, "merge_states: " + msg);
}

std::string dims(const std::array<int64_t, 4>& s) {
  return fmt::format("[{}, {}, {}, {}]", s[0], s[1], s[2], s[3]);
}

// The same rules as attention's outputs (runtime/validate.cpp): sizes >= 0, a contiguous last axis,
// a known dtype and data behind anything non-empty.
void check_state(const AttentionState& s, const std::string& name) {
  const TensorView& o = s.o;
  for (int64_t d : o.shape)
    if (d < 0) fail(ErrorCode::Shape, fmt::format("{}.o has a negative dimension: {}", name, dims(o.shape)));
  if (o.dtype != DType::F32 && o.dtype != DType::BF16 && o.dtype != DType::F16)
    fail(ErrorCode::DType, fmt::format("{}.o has an unknown dtype (code {}); use fp32, bf16 or fp16",
                                       name, static_cast<int>(o.dtype)));
  if (o.shape[3] > 1 && o.strides[3] != 1)
    fail(ErrorCode::Shape, fmt::format("{}.o's last dimension must be contiguous (stride 1) but has "
                                       "stride {}",
                                       name, o.strides[3]));
  if (o.numel() > 0 && o.data == nullptr)
    fail(ErrorCode::MissingTensor, fmt::format("{}.o {} has no data pointer", name, dims(o.shape)));
  const auto& l = s.lse.shape;
  if (l[0] != o.shape[0] || l[1] != o.shape[1] || l[2] != o.shape[2])
    fail(ErrorCode::Shape, fmt::format("{}.lse [{}, {}, {}] must be [B, H, N] = [{}, {}, {}] of {}.o {}",
                                       name, l[0], l[1], l[2], o.shape[0], o.shape[1], o.shape[2],
                                       name, dims(o.shape)));
  if (l[0] * l[1] * l[2] > 0 && s.lse.data == nullptr)
    fail(ErrorCode::MissingTensor, fmt::format("{}.lse has no data pointer", name));
}

// An in-place merge reads each element before writing it, which is only true when out is exactly
// the state (same start, strides and dtype); any other overlap would read already-merged values.
void check_alias(const AttentionState& s, const AttentionState& out, const std::string& name) {
  if (s.o.data != nullptr && s.o.data == out.o.data &&
      (s.o.dtype != out.o.dtype || s.o.strides != out.o.strides))
    fail(ErrorCode::Shape, fmt::format("out.o shares its data with {}.o but not its dtype and strides; "
                                       "an in-place merge needs the very same view",
                                       name));
  if (s.lse.data != nullptr && s.lse.data == out.lse.data && s.lse.strides != out.lse.strides)
    fail(ErrorCode::Shape, fmt::format("out.lse shares its data with {}.lse but not its strides; an "
                                       "in-place merge needs the very same view",
                                       name));
}

void validate(std::span<const AttentionState> states, const AttentionState& out) {
  if (states.empty()) fail(ErrorCode::Shape, "no states to merge (need at least one)");
  check_state(out, "out");
  for (size_t k = 0; k < states.size(); ++k) {
    const std::string name = fmt::format("states[{}]", k);
    check_state(states[k], name);
    if (states[k].o.shape != out.o.shape)
      fail(ErrorCode::Shape, fmt::format("{}.o {} does not match out.o {}: every state must cover the "
                                         "same [B, H, N, D]",
                                         name, dims(states[k].o.shape), dims(out.o.shape)));
    check_alias(states[k], out, name);
  }
}

float lse_at(const LseView& l, int64_t b, int64_t h, int64_t i) {
  return l.data[b * l.strides[0] + h * l.strides[1] + i * l.strides[2]];
}

// acc[d] += w * row[d]: the dtype switch sits outside the loop so each loop vectorizes.
void add_row(float* acc, float w, const TensorView& o, int64_t off, int64_t D) {
  switch (o.dtype) {
    case DType::BF16: {
      const auto* p = static_cast<const uint16_t*>(o.data) + off;
      for (int64_t d = 0; d < D; ++d) acc[d] += w * bf16_to_f32(p[d]);
      break;
    }
    case DType::F16: {
      const auto* p = static_cast<const uint16_t*>(o.data) + off;
      for (int64_t d = 0; d < D; ++d) acc[d] += w * f16_to_f32(p[d]);
      break;
    }
    default: {
      const auto* p = static_cast<const float*>(o.data) + off;
      for (int64_t d = 0; d < D; ++d) acc[d] += w * p[d];
    }
  }
}

void store_row(const float* acc, const TensorView& o, int64_t off, int64_t D) {
  for (int64_t d = 0; d < D; ++d) store_elem(o.data, o.dtype, off + d, acc[d]);
}

}  // namespace

void merge_states(std::span<const AttentionState> states, const AttentionState& out) {
  validate(states, out);
  const int64_t B = out.o.shape[0], H = out.o.shape[1], N = out.o.shape[2], D = out.o.shape[3];
  const int64_t rows = B * H * N;
  const auto n = states.size();

  // Rows are independent; small merges (one decode step) stay on the calling thread.
#pragma omp parallel if (rows * (D + 1) * static_cast<int64_t>(n) > (int64_t{1} << 16))
  {
    std::vector<float> acc(static_cast<size_t>(D)), lse(n), w(n);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % N, h = (r / N) % H, b = r / (N * H);
      float m = -kInf;
      bool nan = false;
      for (size_t k = 0; k < n; ++k) {
        lse[k] = lse_at(states[k].lse, b, h, i);
        if (std::isnan(lse[k])) nan = true;
        else if (lse[k] > m) m = lse[k];
      }
      float out_lse;
      if (nan) {
        std::fill(acc.begin(), acc.end(), kNaN);
        out_lse = kNaN;
      } else if (m == -kInf) {  // no state kept a key of this row
        std::fill(acc.begin(), acc.end(), 0.0f);
        out_lse = -kInf;
      } else {
        // e^{LSE_k - m} <= 1 with one term exactly 1, so the sum is in [1, n]: no overflow, and
        // log(sum) is well conditioned. (m = +inf gives NaN weights, as one big softmax would.)
        float sum = 0.0f;
        for (size_t k = 0; k < n; ++k) {
          w[k] = std::exp(lse[k] - m);
          sum += w[k];
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        // An empty state (-inf) is skipped rather than weighted by 0, so its O row is never read.
        // A weight that merely underflows still multiplies, so NaN in that O still propagates.
        for (size_t k = 0; k < n; ++k)
          if (lse[k] != -kInf)
            add_row(acc.data(), w[k] / sum, states[k].o, states[k].o.offset(b, h, i, 0), D);
        out_lse = m + std::log(sum);
      }
      // Everything was read above, so writing over an aliased state is safe.
      store_row(acc.data(), out.o, out.o.offset(b, h, i, 0), D);
      out.lse.data[b * out.lse.strides[0] + h * out.lse.strides[1] + i * out.lse.strides[2]] = out_lse;
    }
  }
}

void merge_states(const AttentionState& a, const AttentionState& b, const AttentionState& out) {
  const AttentionState both[] = {a, b};
  merge_states(both, out);
}

}  // namespace attnfuse
