// DESIGN §3's tolerance rule applied to CLI runs, and exact kept-cell counts for FLOP accounting.
#include "check.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/documents.hpp"
#include "common/paged.hpp"

namespace attnfuse::cli {

ReferenceSet compute_reference(const KernelSpec& spec, const AttentionArgs& args) {
  ReferenceSet r;
  r.exact = reference::attention(spec, args, reference::Precision::F64);
  r.naive = reference::attention(spec, args, reference::Precision::Naive);
  return r;
}

namespace {

template <class T>
ErrorStats compare_impl(std::span<const T> got, std::span<const double> ref) {
  ErrorStats s;
  s.count = static_cast<int64_t>(ref.size());
  if (got.size() != ref.size()) {  // a shape bug: everything is a mismatch
    s.mismatches = std::max<int64_t>(1, s.count);
    return s;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    const double r = ref[i];
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) != std::isnan(g)) ++s.mismatches;
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (g != r) ++s.mismatches;
      continue;
    }
    s.max_abs = std::max(s.max_abs, std::abs(g - r));
    s.max_ref = std::max(s.max_ref, std::abs(r));
  }
  return s;
}

bool within(const ErrorStats& e, double bound, DType dtype) {
  if (e.mismatches > 0) return false;
  if (!(e.max_abs <= bound)) return false;
  if (dtype == DType::F32 && e.max_abs > 1e-5 * std::max(1.0, e.max_ref)) return false;
  return true;
}

std::string line(const char* what, const ErrorStats& e, const ErrorStats& naive, double bound,
                 DType dtype, const std::string& indent) {
  std::string s = fmt::format("{}{}: max abs err {:.3g} vs float64 reference (naive {} {:.3g}; "
                              "bound {:.3g}), max |ref| {:.3g}",
                              indent, what, e.max_abs, dtype_name(dtype), naive.max_abs, bound,
                              e.max_ref);
  if (e.mismatches > 0)
    s += fmt::format("; {} of {} elements NaN/Inf where the reference is not (or unwritten)",
                     e.mismatches, e.count);
  return s + "\n";
}

}  // namespace

ErrorStats compare(std::span<const float> got, std::span<const double> ref) { return compare_impl(got, ref); }
ErrorStats compare(std::span<const double> got, std::span<const double> ref) { return compare_impl(got, ref); }

Verdict judge(const ReferenceSet& ref, DType dtype, std::span<const float> out,
              std::optional<std::span<const float>> lse) {
  Verdict v;
  v.out = compare(out, ref.exact.out);
  v.out_naive = compare(std::span<const double>(ref.naive.out), ref.exact.out);
  v.out_bound = 2.0 * v.out_naive.max_abs + 1e-5;
  v.pass = within(v.out, v.out_bound, dtype);
  if (lse && !ref.exact.lse.empty()) {
    v.lse = compare(*lse, ref.exact.lse);
    v.lse_naive = compare(std::span<const double>(ref.naive.lse), ref.exact.lse);
    v.lse_bound = 2.0 * v.lse_naive->max_abs + 1e-5;
    v.pass = v.pass && within(*v.lse, v.lse_bound, dtype);
  }
  return v;
}

std::string describe(const Verdict& v, DType dtype, const std::string& indent) {
  std::string s = line("out", v.out, v.out_naive, v.out_bound, dtype, indent);
  if (v.lse) s += line("lse", *v.lse, *v.lse_naive, v.lse_bound, dtype, indent);
  s += indent + (v.pass ? "PASS" : "FAIL") +
       (dtype == DType::F32 ? " (err <= 2 x naive + 1e-5 and err <= 1e-5 x max(1, |ref|))"
                            : " (err <= 2 x naive + 1e-5)") + "\n";
  return s;
}

double kept_cells(const KernelSpec& spec, const AttentionArgs& args) {
  const int64_t B = args.q.shape[0], Hq = args.q.shape[1], Nq = args.q.shape[2], Nk = args.k.shape[2];
  const bool causal = spec.masks.has(MaskKind::Causal);
  const bool window = spec.masks.has(MaskKind::SlidingWindow);
  const int64_t w = spec.scalars.window;
  if (args.paged) {  // each sequence its own length and frame (no block masks or documents)
    double per_head = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t nk = args.paged->kv_len(b), q0 = paged_q_offset(args, nk);
      for (int64_t i = 0; i < Nq; ++i) {
        int64_t lo = 0, hi = nk;
        if (causal) hi = std::min(hi, i + q0 + 1);
        if (window) lo = std::max(lo, i + q0 - w + 1), hi = std::min(hi, i + q0 + w);
        per_head += static_cast<double>(std::max<int64_t>(hi - lo, 0));
      }
    }
    return per_head * static_cast<double>(Hq);
  }
  if (B == 0 || Hq == 0 || Nq == 0 || Nk == 0) return 0.0;
  // document: each batch entry's documents (one shared entry unless the offsets are per batch).
  std::vector<Documents> docs;
  if (spec.needs_cu_seqlens()) {
    const bool shared = args.cu_seqlens_q->batch == 1 && args.cu_seqlens_k->batch == 1;
    for (int64_t b = 0; b < (shared ? 1 : B); ++b) docs.push_back(read_documents(args, b));
  }
  const int64_t rows = docs.size() > 1 ? B : 1;  // batch entries whose counts differ
  // Keys row i of batch entry b keeps under the position masks: the interval [lo, hi) (inside
  // its document, whose own Δ frame applies).
  auto interval = [&](int64_t b, int64_t i, int64_t& lo, int64_t& hi) {
    int64_t q0 = args.resolved_q_offset();
    lo = 0;
    hi = Nk;
    if (!docs.empty()) {
      const Documents& row = docs[docs.size() > 1 ? size_t(b) : 0];
      const int64_t d = row.doc_of_query(i);
      q0 = row.shift(d), lo = row.k[size_t(d)], hi = row.k[size_t(d + 1)];
    }
    const int64_t pq = i + q0;
    if (causal) hi = std::min(hi, pq + 1);
    if (window) {
      lo = std::max(lo, pq - w + 1);
      hi = std::min(hi, pq + w);
    }
    hi = std::max(hi, lo);
  };
  const BlockMask* bm = spec.masks.has(MaskKind::BlockSparse) ? args.block_mask : nullptr;
  if (!bm) {
    double per_head = 0.0;
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t i = 0; i < Nq; ++i) {
        int64_t lo, hi;
        interval(b, i, lo, hi);
        per_head += static_cast<double>(hi - lo);
      }
    return per_head * static_cast<double>(B / rows * Hq);
  }
  // Block mask: per (b, h) of the mask (broadcast axes counted once, then multiplied), per
  // active key block, the overlap of the block's keys with the row's interval. Partial blocks
  // (from a predicate) are counted cell by cell.
  double total = 0.0;
  const int64_t mh = bm->heads(), mb = std::max(bm->batch(), rows);  // batch entries counted
  const int bq = bm->block_q(), bk = bm->block_k();
  for (int64_t b = 0; b < mb; ++b)
    for (int64_t h = 0; h < mh; ++h)
      for (int64_t qb = 0; qb < bm->num_q_blocks(); ++qb) {
        const auto blocks = bm->kv_blocks(b, h, qb);
        const auto full = bm->full_flags(b, h, qb);
        const int64_t i_end = std::min<int64_t>(Nq, (qb + 1) * bq);
        for (int64_t i = qb * bq; i < i_end; ++i) {
          int64_t lo, hi;
          interval(b, i, lo, hi);
          for (size_t e = 0; e < blocks.size(); ++e) {
            const int64_t k0 = std::max<int64_t>(lo, int64_t{blocks[e]} * bk);
            const int64_t k1 = std::min<int64_t>(hi, std::min<int64_t>(Nk, (int64_t{blocks[e]} + 1) * bk));
            if (k1 <= k0) continue;
            if (full[e]) {
              total += static_cast<double>(k1 - k0);
            } else {
              for (int64_t j = k0; j < k1; ++j) total += bm->keeps(b, h, i, j) ? 1.0 : 0.0;
            }
          }
        }
      }
  return total * static_cast<double>(B / mb) * static_cast<double>(Hq / mh);
}

}  // namespace attnfuse::cli
