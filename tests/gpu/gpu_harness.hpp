// The GPU suite's harness: one case = one program on random inputs, run on the CUDA backend and
// compared with the float64 reference under DESIGN §3's tolerance (poisoned outputs, LSE too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"
#include "reference/reference.hpp"

namespace attnfuse::gpu_test {

// The largest |naive LSE - reference LSE| over the rows the reference keeps keys in.
double naive_lse_error(const reference::Result& ref, const reference::Result& naive);

// How far a row's LSE may be from the reference's `ref`: 1e-2 + 1e-3 |ref|, or DESIGN §3's
// 2 x naive_error + 1e-5 where that is larger. Large logits make it so: longrope's and yarn's
// attention factors scale the rotated scores by their square, and the same-precision model
// rounds those rotated values to the dtype as the kernels do (seed 13906549303294826966 put a
// bf16 longrope call's LSE 0.0136 from the reference, whose naive LSE was 0.03-0.04 off).
inline double lse_tolerance(double ref, double naive_error) {
  const double fixed = 1e-2 + 1e-3 * (ref < 0 ? -ref : ref), design = 2 * naive_error + 1e-5;
  return fixed > design ? fixed : design;
}

struct Case {
  std::string program;
  DType dtype;
  int head_dim;
  int64_t B, Hq, Hkv, Nq, Nk;
  std::optional<int64_t> q_offset;
  bool bshd = false;  // Q/K/V/O stored [B, S, H, D] and passed as strided BHSD views
  RopeMode rope_mode = RopeMode::Auto;
  // rope / rope_window: the caller's cos/sin tables (random values, covering exactly the
  // positions the call rotates) in place of the computed ones.
  bool rope_tables = false;
  // Nonzero: scores that drift along the keys. Every query's dim 0 is 1 and key j's dim 0 is
  // key_ramp * j, so a row's scores rise (or fall) by key_ramp * scale per key on top of the
  // random part: steep ramps move the running maximum on every tile, gentle ones every few tiles,
  // falling ones never after the first (lazy rescaling's three paths).
  float key_ramp = 0.f;
  // additive_bias: the bias in the inputs' dtype (FwdParams::bias_16bit) instead of fp32.
  bool bias_16bit = false;
};


std::string case_name(const Case& c);

// Runs c with inputs drawn from `seed`; reports failures through GoogleTest.
void run_case(const Case& c, uint32_t seed);

}  // namespace attnfuse::gpu_test
