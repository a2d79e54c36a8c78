// The DESIGN §3 tolerance check against the float64 reference (see check.hpp).
#include "common/check.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "common/dtype.hpp"
#include "common/tensors.hpp"
#include "reference/reference.hpp"

namespace attnfuse::test {
namespace {

constexpr double kAbsTol = 1e-5;
constexpr double kRelTolF32 = 1e-5;
constexpr int kMaxReports = 5;

// Running comparison of one output (O or LSE) against the references.
struct Comparison {
  explicit Comparison(const char* w) : what(w) {}
  const char* what;
  double err = 0.0, naive_err = 0.0, ref_max = 0.0;
  std::string where;  // location of the largest error
  std::string failures;
  int failed = 0;

  void fail(const std::string& msg) {
    if (failed++ < kMaxReports) failures += "  " + msg + "\n";
  }

  // kernel value (float), whether it still holds the poison, ref and naive values; `at` formats
  // the element's index (only when it is reported).
  template <class At>
  void add(const At& at_fn, float got, bool poisoned, double ref, double naive) {
    auto at = [&] { return at_fn(); };
    if (poisoned) return fail(fmt::format("{}{} was never written (still poisoned)", what, at()));
    if (std::isnan(ref)) {
      if (!std::isnan(got)) fail(fmt::format("{}{} = {} but the reference is NaN", what, at(), got));
      return;
    }
    if (std::isnan(got)) return fail(fmt::format("{}{} is NaN, reference {}", what, at(), ref));
    if (std::isinf(ref) || std::isinf(got)) {
      if (double(got) != ref) fail(fmt::format("{}{} = {}, reference {}", what, at(), got, ref));
      return;
    }
    const double e = std::abs(double(got) - ref);
    if (e > err) err = e, where = fmt::format("{}{} = {} vs reference {}", what, at(), got, ref);
    if (std::isfinite(naive)) naive_err = std::max(naive_err, std::abs(naive - ref));
    ref_max = std::max(ref_max, std::abs(ref));
  }

  void finish(bool fp32, double slack = 0.0) {
    const double bound = 2.0 * naive_err + kAbsTol + slack;
    if (err > bound)
      fail(fmt::format("{} max error {:.3g} > 2 * naive error {:.3g} + {:g}{} (at {})", what, err,
                       naive_err, kAbsTol, slack > 0.0 ? fmt::format(" + slack {:.3g}", slack) : "", where));
    if (fp32 && err / std::max(1.0, ref_max) > kRelTolF32)
      fail(fmt::format("{} relative error {:.3g} > {:g} for fp32 (at {})", what,
                       err / std::max(1.0, ref_max), kRelTolF32, where));
  }
};

}  // namespace

::testing::AssertionResult matches_reference(const KernelSpec& spec, const AttentionArgs& args,
                                             const TensorView& out, const LseView* lse, double slack) {
  const reference::Result ref = reference::attention(spec, args, reference::Precision::F64);
  const reference::Result naive = reference::attention(spec, args, reference::Precision::Naive);
  const int64_t B = args.q.shape[0], Hq = args.q.shape[1], Nq = args.q.shape[2], Dv = out.shape[3];
  const bool fp32 = args.q.dtype == DType::F32;
  const uint32_t poison_bits = out.dtype == DType::F32 ? kPoisonF32 : kPoison16;

  Comparison o("O"), l("LSE");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Nq; ++i) {
        const int64_t row = (b * Hq + h) * Nq + i;
        for (int64_t d = 0; d < Dv; ++d) {
          const int64_t off = out.offset(b, h, i, d);
          uint32_t bits = 0;
          std::memcpy(&bits, static_cast<const char*>(out.data) + off * dtype_size(out.dtype),
                      static_cast<size_t>(dtype_size(out.dtype)));
          const auto r = static_cast<size_t>(row * Dv + d);
          o.add([&] { return fmt::format("[{},{},{},{}]", b, h, i, d); }, load_elem(out.data, out.dtype, off),
                bits == poison_bits, ref.out[r], naive.out[r]);
        }
        if (lse) {
          const float got = lse->data[b * lse->strides[0] + h * lse->strides[1] + i * lse->strides[2]];
          l.add([&] { return fmt::format("[{},{},{}]", b, h, i); }, got, std::bit_cast<uint32_t>(got) == kPoisonF32,
                ref.lse[static_cast<size_t>(row)], naive.lse[static_cast<size_t>(row)]);
        }
      }
  o.finish(fp32, slack);
  if (lse) l.finish(fp32);
  if (o.failed + l.failed == 0) return ::testing::AssertionSuccess();
  auto res = ::testing::AssertionFailure();
  res << o.failed + l.failed << " check(s) failed:\n" << o.failures << l.failures;
  if (o.failed > kMaxReports || l.failed > kMaxReports) res << "  ...\n";
  return res;
}

void expect_matches_reference(const KernelSpec& spec, const AttentionArgs& args, const TensorView& out) {
  EXPECT_TRUE(matches_reference(spec, args, out, args.lse ? &*args.lse : nullptr));
}

}  // namespace attnfuse::test
