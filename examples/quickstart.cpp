// The README's C++ example: build a variant with the embedded DSL, compile it, run the fused CPU
// kernel on a GQA problem and compare it with the float64 reference.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/dsl.hpp"
#include "attnfuse/program.hpp"
#include "reference/reference.hpp"  // the oracle (not part of the public API)

int main() {
  using namespace attnfuse;
  using namespace attnfuse::dsl;

  // softmax(softcap(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 256)), 30)) @ V
  const Expr o = matmul(softmax(softcap(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 256)), 30)), V);
  const Program program = compile_program(o);
  std::printf("program:   %s\nsignature: %s\n", o.text().c_str(), program.signature().c_str());
  const KernelSpec spec = program.compile({Target::Cpu, DType::F32, /*head_dim=*/0});

  // Q [1, 8, 300, 64], K/V [1, 2, 300, 64]: 4 query heads share each KV head.
  const int64_t B = 1, Hq = 8, Hkv = 2, N = 300, D = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> q(B * Hq * N * D), k(B * Hkv * N * D), v(B * Hkv * N * D), out(B * Hq * N * D);
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = normal(rng);

  AttentionArgs args;
  args.q = TensorView::contiguous(q.data(), DType::F32, {B, Hq, N, D});
  args.k = TensorView::contiguous(k.data(), DType::F32, {B, Hkv, N, D});
  args.v = TensorView::contiguous(v.data(), DType::F32, {B, Hkv, N, D});
  args.out = TensorView::contiguous(out.data(), DType::F32, {B, Hq, N, D});
  run_cpu(spec, args);

  const reference::Result ref = reference::attention(spec, args);
  double err = 0;
  for (size_t i = 0; i < out.size(); ++i) err = std::fmax(err, std::fabs(out[i] - ref.out[i]));
  std::printf("max |fused - float64 reference| = %.2e\n", err);
  return err <= 1e-5 ? 0 : 1;
}
