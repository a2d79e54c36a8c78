// merge_states on the CPU: the log-sum-exp merge of partial attention results, one row at a time.
#include "attnfuse/merge_states.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnfuse/error.hpp"
#include "common/dtype.hpp"
#include "common/merge_check.hpp"

namespace attnfuse {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

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

// row[d] = acc[d] in o's dtype, the switch outside the loops as in add_row.
void store_row(const float* acc, const TensorView& o, int64_t off, int64_t D) {
  switch (o.dtype) {
    case DType::BF16: {
      auto* p = static_cast<uint16_t*>(o.data) + off;
      for (int64_t d = 0; d < D; ++d) p[d] = f32_to_bf16(acc[d]);
      break;
    }
    case DType::F16: {
      auto* p = static_cast<uint16_t*>(o.data) + off;
      for (int64_t d = 0; d < D; ++d) p[d] = f32_to_f16(acc[d]);
      break;
    }
    default: std::copy(acc, acc + D, static_cast<float*>(o.data) + off);
  }
}

}  // namespace

void merge_states(std::span<const AttentionState> states, const AttentionState& out) {
  validate_merge(states, out);
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
