// merge_states: one decode step over a 1000-key cache, attended in two parts (keys [0, 600) and
// [600, 1000)) with their LSE, merged, and compared with attending to the whole cache at once.
// The README's merge_states example; it runs as a test (exit 1 if the merge is off).
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/merge_states.hpp"
#include "attnfuse/program.hpp"

int main() {
  using namespace attnfuse;
  const KernelSpec spec = Program::parse("softmax(causal(scaled_dot_product(Q, K))) @ V")
                              .compile({Target::Cpu, DType::F32, /*head_dim=*/0});
  const int64_t B = 1, H = 4, Nq = 1, Nk = 1000, D = 64, split = 600;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> q(B * H * Nq * D), k(B * H * Nk * D), v(B * H * Nk * D);
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = normal(rng);
  std::vector<float> o_a(q.size()), o_b(q.size()), o(q.size()), o_all(q.size());
  std::vector<float> lse_a(B * H * Nq), lse_b(lse_a.size()), lse(lse_a.size()), lse_all(lse_a.size());

  // Attention of the queries over keys [k0, k1): K and V are views of the cache, and q_offset
  // keeps every key at its global position, so causal (and alibi, windows) see the same Δ.
  auto attend = [&](int64_t k0, int64_t k1, std::vector<float>& out, std::vector<float>& out_lse) {
    AttentionArgs a;
    a.q = TensorView::contiguous(q.data(), DType::F32, {B, H, Nq, D});
    a.k = TensorView::contiguous(k.data(), DType::F32, {B, H, Nk, D});
    a.v = TensorView::contiguous(v.data(), DType::F32, {B, H, Nk, D});
    for (TensorView* t : {&a.k, &a.v}) {
      t->data = static_cast<float*>(t->data) + k0 * t->strides[2];
      t->shape[2] = k1 - k0;
    }
    a.q_offset = (Nk - Nq) - k0;  // the whole problem's bottom-right offset, shifted
    a.out = TensorView::contiguous(out.data(), DType::F32, {B, H, Nq, D});
    a.lse = LseView::contiguous(out_lse.data(), {B, H, Nq});
    run_cpu(spec, a);
    return AttentionState{a.out, *a.lse};
  };
  const AttentionState part_a = attend(0, split, o_a, lse_a), part_b = attend(split, Nk, o_b, lse_b);
  const AttentionState merged{TensorView::contiguous(o.data(), DType::F32, {B, H, Nq, D}),
                              LseView::contiguous(lse.data(), {B, H, Nq})};
  merge_states(part_a, part_b, merged);  // or merge_states(span_of_states, merged) for n parts

  attend(0, Nk, o_all, lse_all);  // the whole cache at once, for comparison
  double err = 0;
  for (size_t i = 0; i < o.size(); ++i) err = std::fmax(err, std::fabs(o[i] - o_all[i]));
  std::printf("max |merged - whole| = %.1e, LSE %.6f vs %.6f\n", err, lse[0], lse_all[0]);
  return err < 1e-5 ? 0 : 1;
}
