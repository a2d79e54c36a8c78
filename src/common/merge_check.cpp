// merge_states' argument rules, shared by the CPU merge and the CUDA one (DESIGN §4: every error
// before anything is written).
#include "common/merge_check.hpp"

#include <fmt/format.h>

#include <array>
#include <string>

#include "attnfuse/error.hpp"

namespace attnfuse {
namespace {

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

}  // namespace

void validate_merge(std::span<const AttentionState> states, const AttentionState& out) {
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


}  // namespace attnfuse
