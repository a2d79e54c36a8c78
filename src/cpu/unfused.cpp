// The ablation's decomposition variants: three materialized ops, and scores+softmax fused with P
// materialized. Both parallelize over (batch, query head) like the fused kernel, and the second
// uses the fused kernel's micro-kernels and mask ranges, so its gap to the fused kernel is the P
// round trip through memory and the second softmax pass, not code quality or threading.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <exception>
#include <limits>
#include <vector>

#include "attnfuse/error.hpp"
#include "common/dtype.hpp"
#include "cpu/fused_kernel.hpp"
#include "cpu/isa.hpp"
#include "cpu/rope_apply.hpp"
#include "cpu/simd.hpp"
#include "reference/reference.hpp"

namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Dims {
  int64_t B, Hq, Hkv, Nq, Nk, D, Dv;
  explicit Dims(const AttentionArgs& a)
      : B(a.q.shape[0]), Hq(a.q.shape[1]), Hkv(a.k.shape[1]), Nq(a.q.shape[2]), Nk(a.k.shape[2]),
        D(a.q.shape[3]), Dv(a.v.shape[3]) {}
};


// Runs body(b, hq) for every head in parallel, rethrowing the first failure.
template <class F>
void for_each_head(const Dims& d, F&& body) {
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bh = 0; bh < d.B * d.Hq; ++bh) {
    try {
      body(bh / d.Hq, bh % d.Hq);
    } catch (...) {
#pragma omp critical(attnfuse_unfused_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Writes one head's contiguous fp32 O [Nq, Dv] and LSE [Nq] into the call's outputs.
void store_head(const AttentionArgs& a, const Dims& d, int64_t b, int64_t hq, const float* o,
                const float* lse) {
  for (int64_t i = 0; i < d.Nq; ++i)
    for (int64_t x = 0; x < d.Dv; ++x)
      store_elem(a.out.data, a.out.dtype, a.out.offset(b, hq, i, x), o[i * d.Dv + x]);
  if (a.lse)
    for (int64_t i = 0; i < d.Nq; ++i)
      a.lse->data[b * a.lse->strides[0] + hq * a.lse->strides[1] + i * a.lse->strides[2]] = lse[i];
}

// Row i of one head: which keys survive every mask (1/0), from the causal / sliding interval
// and the BlockMask's CSR row (bitmaps only on partial blocks).
void kept_row(const KernelSpec& spec, const AttentionArgs& a, const Dims& d, int64_t b, int64_t hq,
              int64_t i, uint8_t* keep) {
  const __int128 pq = __int128(i) + a.resolved_q_offset();
  __int128 lo = 0, hi = d.Nk;
  if (spec.masks.has(MaskKind::Causal)) hi = std::min(hi, pq + 1);
  if (spec.masks.has(MaskKind::SlidingWindow))
    lo = std::max(lo, pq - spec.scalars.window + 1), hi = std::min(hi, pq + spec.scalars.window);
  std::memset(keep, 0, static_cast<size_t>(d.Nk));
  if (lo >= hi) return;
  const auto klo = static_cast<int64_t>(lo), khi = static_cast<int64_t>(hi);
  if (!spec.masks.has(MaskKind::BlockSparse)) {
    std::memset(keep + klo, 1, static_cast<size_t>(khi - klo));
    return;
  }
  const BlockMask& bm = *a.block_mask;
  const int64_t qb = i / bm.block_q();
  const auto cols = bm.kv_blocks(b, hq, qb);
  for (size_t e = 0; e < cols.size(); ++e) {
    const int64_t k0 = int64_t{cols[e]} * bm.block_k();
    const uint64_t* bits = bm.cell_bits(b, hq, qb, e);
    for (int64_t j = std::max(k0, klo); j < std::min(k0 + bm.block_k(), khi); ++j) {
      const int64_t bit = (i - qb * bm.block_q()) * bm.block_k() + (j - k0);
      keep[j] = !bits || ((bits[bit >> 6] >> (bit & 63)) & 1u);
    }
  }
}

}  // namespace

// The ablation variants read contiguous K/V only (a benchmark of fusion, not of paging).
static void refuse_paged(const AttentionArgs& args) {
  if (args.paged)
    throw Error(ErrorCode::Unsupported, "the ablation variants read contiguous K/V; ablate without a "
                                        "paged cache (no --page-size / --k-pages)");
}

void run_unfused(const KernelSpec& spec, const AttentionArgs& args) {
  validate(spec, args);
  refuse_paged(args);
  const Dims d(args);
  for_each_head(d, [&](int64_t b, int64_t hq) {
    std::vector<float> S(static_cast<size_t>(d.Nq * d.Nk)), lse(static_cast<size_t>(d.Nq));
    std::vector<float> O(static_cast<size_t>(d.Nq * d.Dv));
    reference::scores<float>(spec, args, b, hq, S.data());
    reference::normalize<float>(spec, args, b, hq, S.data(), lse.data());
    reference::pv<float>(args, b, hq, S.data(), O.data());
    store_head(args, d, b, hq, O.data(), lse.data());
  });
}

void run_scores_softmax_fused(const KernelSpec& spec, const AttentionArgs& args) {
  validate(spec, args);
  refuse_paged(args);
  // This variant tiles whole rows of P; restricting them to documents would be a second copy of
  // the fused kernel's document tiling for a benchmark-only path.
  if (spec.needs_cu_seqlens())
    throw Error(ErrorCode::Unsupported, "the scores+softmax ablation variant does not run document "
                                        "masks; ablate the program without document()");
  const Dims d(args);
  constexpr int kTq = simd::kStride;  // query rows per tile: one per SIMD lane, as in the fused kernel
  constexpr float kLog2e = 1.44269504088896340736f;
  const float scale = static_cast<float>(
      spec.scalars.scale ? *spec.scalars.scale : (d.D > 0 ? 1.0 / std::sqrt(double(d.D)) : 1.0));
  const float cap = static_cast<float>(spec.scalars.softcap);
  const int64_t group = d.Hq / std::max<int64_t>(d.Hkv, 1);
  const int64_t q_offset = args.resolved_q_offset();
  const int64_t dvp = (d.Dv + simd::kLanes - 1) / simd::kLanes * simd::kLanes;
  const int64_t ntiles = (d.Nq + kTq - 1) / kTq;
  // RoPE as in the fused kernel: Q rotated per tile, K once per head.
  std::optional<RopePlan> rope_plan;
  if (spec.score != ScoreKind::ScaledDot)
    rope_plan = make_rope_plan(spec.scalars.rope, d.D, reference::rope_seq_len(args),
                               spec.score == ScoreKind::RopeWindow, d.Nk, q_offset, d.Nq);
  if (rope_plan && args.rope_tables) rope_plan->use_tables(*args.rope_tables, q_offset, d.Nq);
  const RopePlan* rope = rope_plan ? &*rope_plan : nullptr;
  for_each_head(d, [&](int64_t b, int64_t hq) {
    const int64_t hkv = hq / group;
    std::vector<float> rc(rope ? size_t(rope->half) : 0), rs(rc.size());
    WindowSplit split;
    std::vector<const float*> kscratch(64);
    // K rows in fp32 (in place when they already are; rotated copies under RoPE) and V rows
    // padded to whole vectors.
    const bool copy_k = args.k.dtype != DType::F32 || rope;
    AlignedFloats kbuf = alloc_floats(copy_k ? d.Nk * d.D : 0), vbuf = alloc_floats(d.Nk * dvp);
    std::vector<const float*> krow(static_cast<size_t>(d.Nk)), vrow(static_cast<size_t>(d.Nk));
    for (int64_t j = 0; j < d.Nk; ++j) {
      if (!copy_k) {
        krow[size_t(j)] = static_cast<const float*>(args.k.data) + args.k.offset(b, hkv, j, 0);
      } else {
        for (int64_t x = 0; x < d.D; ++x)
          kbuf[j * d.D + x] = load_elem(args.k.data, args.k.dtype, args.k.offset(b, hkv, j, x));
        if (rope) rotate_row(*rope, rope->keys, j, kbuf.get() + j * d.D);
        krow[size_t(j)] = kbuf.get() + j * d.D;
      }
      for (int64_t x = 0; x < dvp; ++x)
        vbuf[j * dvp + x] = x < d.Dv ? load_elem(args.v.data, args.v.dtype, args.v.offset(b, hkv, j, x)) : 0.0f;
      vrow[size_t(j)] = vbuf.get() + j * dvp;
    }
    const float slope = spec.modifiers.has(ModifierKind::Alibi)
                            ? static_cast<float>(reference::alibi_slope(spec.scalars, hq, d.Hq))
                            : 0.0f;
    // P of the whole head, materialized as P^T tiles [ntiles][Nk][kTq] (zero where masked).
    AlignedFloats pt = alloc_floats(ntiles * d.Nk * kTq), qt = alloc_floats(d.D * kTq), o = alloc_floats(kTq * dvp);
    std::vector<float> lse(static_cast<size_t>(d.Nq));
    std::vector<uint8_t> keep_t(static_cast<size_t>(d.Nk * kTq)), row(static_cast<size_t>(d.Nk));
    std::vector<std::pair<int64_t, int64_t>> range(static_cast<size_t>(ntiles));

    // Op 1, per query tile: S^T = (scale Q) K^T with the fused kernel's QK micro-kernel, then the
    // modifiers, the masks and a two-pass normalization over the whole key range, written as P.
    for (int64_t t = 0; t < ntiles; ++t) {
      const int64_t i0 = t * kTq;
      const int m = static_cast<int>(std::min<int64_t>(kTq, d.Nq - i0));
      const int qv = (m + simd::kLanes - 1) / simd::kLanes;
      float* P = pt.get() + t * d.Nk * kTq;
      std::fill(P, P + d.Nk * kTq, 0.0f);
      for (int i = 0; i < kTq; ++i)
        for (int64_t x = 0; x < d.D; ++x)
          qt[x * kTq + i] =
              i < m ? scale * load_elem(args.q.data, args.q.dtype, args.q.offset(b, hq, i0 + i, x)) : 0.0f;
      if (rope)
        for (int i = 0; i < m; ++i) {
          rope->angles(rope->queries, i0 + i + q_offset, rc.data(), rs.data());
          rope->rotate(rc.data(), rs.data(), qt.get() + i, kTq);
        }
      // Keys any row keeps (causal / sliding window): [lo, hi); masked cells inside get -inf.
      // keep_t[j][i]: the kept cells transposed like S^T, so the mask pass is vertical too.
      int64_t lo = d.Nk, hi = 0;
      std::fill(keep_t.begin(), keep_t.end(), uint8_t{0});
      for (int i = 0; i < m; ++i) {
        kept_row(spec, args, d, b, hq, i0 + i, row.data());
        for (int64_t j = 0; j < d.Nk; ++j)
          if (row[size_t(j)]) keep_t[size_t(j * kTq + i)] = 1, lo = std::min(lo, j), hi = std::max(hi, j + 1);
      }
      range[size_t(t)] = {lo, hi};
      for (int64_t a = lo; a < hi; a += 64) {
        const int n = static_cast<int>(std::min<int64_t>(64, hi - a));
        if (rope && rope->windowed()) {  // rope_window: the fused kernel's pruned product
          const int64_t delta0 = i0 + q_offset - a;
          split_window(*rope, d.D, delta0 - (n - 1), delta0 + (m - 1), split);
          if (!split.all) {
            windowed_scores(*rope, split, qt.get(), kbuf.get() + a * d.D, d.D, n, delta0, qv,
                            qv * simd::kLanes, qv * simd::kLanes, kscratch.data(), P + a * kTq);
            continue;
          }
        }
        simd::qk(qv, krow.data() + a, n, qt.get(), d.D, P + a * kTq);
      }
      for (int mi = 0; mi < spec.modifiers.size(); ++mi)
        for (int64_t j = lo; j < hi; ++j) {
          float* s = P + j * kTq;
          switch (spec.modifiers[mi]) {
            case ModifierKind::Alibi:
              for (int i = 0; i < m; ++i) s[i] -= slope * std::fabs(float(i0 + i + q_offset - j));
              break;
            case ModifierKind::AdditiveBias: {
              const TensorView& bias = *args.bias;
              const int64_t bb = bias.shape[0] == 1 ? 0 : b, bh = bias.shape[1] == 1 ? 0 : hq;
              for (int i = 0; i < m; ++i) s[i] += load_elem(bias.data, bias.dtype, bias.offset(bb, bh, i0 + i, j));
              break;
            }
            case ModifierKind::Softcap:
              for (int i = 0; i < m; ++i) s[i] = cap * fastmath::tanh(s[i] / cap);
              break;
          }
        }
      // Pass 1: masks, column max (softmax) or kept count (relu); pass 2: P and its normalizer.
      float mx[kTq], sum[kTq], count[kTq];
      std::fill(mx, mx + kTq, kNegInf);
      std::fill(sum, sum + kTq, 0.0f);
      std::fill(count, count + kTq, 0.0f);
      for (int64_t j = lo; j < hi; ++j) {
        float* s = P + j * kTq;
        const uint8_t* kept = keep_t.data() + j * kTq;
        for (int i = 0; i < kTq; ++i) {
          s[i] = kept[i] ? s[i] : kNegInf;
          mx[i] = std::isnan(s[i]) || s[i] > mx[i] ? s[i] : mx[i];
          count[i] += kept[i];
        }
      }
      for (int64_t j = lo; j < hi; ++j) {
        float* s = P + j * kTq;
        for (int i = 0; i < kTq; ++i) {
          if (spec.norm == NormKind::Softmax) {
            const float msafe = mx[i] == kNegInf ? 0.0f : mx[i];
            s[i] = fastmath::exp2_nonpositive((s[i] - msafe) * kLog2e);
          } else {
            s[i] = s[i] < 0.0f ? 0.0f : s[i];
          }
          sum[i] += s[i];
        }
      }
      for (int i = 0; i < kTq; ++i) {
        const float denom = spec.norm == NormKind::Softmax ? sum[i] : count[i];
        const float shift = spec.norm == NormKind::Softmax && mx[i] != kNegInf ? mx[i] : 0.0f;
        if (i < m) lse[size_t(i0 + i)] = denom == 0.0f ? kNegInf : shift + std::log(denom);
        sum[i] = denom == 0.0f ? 0.0f : 1.0f / denom;
      }
      for (int64_t j = lo; j < hi; ++j)
        for (int i = 0; i < kTq; ++i) P[j * kTq + i] *= sum[i];
    }

    // Op 2: O = P V, reading P back from memory, with the fused kernel's PV micro-kernel.
    std::vector<float> O(static_cast<size_t>(d.Nq * d.Dv));
    for (int64_t t = 0; t < ntiles; ++t) {
      const int64_t i0 = t * kTq;
      const int m = static_cast<int>(std::min<int64_t>(kTq, d.Nq - i0));
      const auto [lo, hi] = range[size_t(t)];
      std::fill(o.get(), o.get() + kTq * dvp, 0.0f);
      if (lo < hi)
        simd::pv(pt.get() + (t * d.Nk + lo) * kTq, vrow.data() + lo, static_cast<int>(hi - lo),
                 (m + 3) / 4 * 4, dvp, o.get());
      for (int i = 0; i < m; ++i)
        std::copy(o.get() + i * dvp, o.get() + i * dvp + d.Dv, O.begin() + (i0 + i) * d.Dv);
    }
    store_head(args, d, b, hq, O.data(), lse.data());
  });
}

}  // namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS
