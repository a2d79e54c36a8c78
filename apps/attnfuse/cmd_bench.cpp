// `attnfuse bench`: validate against the reference first (small problems), then time the fused
// kernel (median of many runs after warm-up) and, with --ablate, the decomposition variants.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnfuse/error.hpp"
#include "backend.hpp"
#include "check.hpp"
#include "commands.hpp"
#include "io/npy.hpp"

// The ablation variants come from the CPU backend's engineer; until that header exists the
// bench offers the fused kernel only (and says so for --ablate).
#if __has_include("cpu/unfused.hpp")
#include "cpu/unfused.hpp"
#define ATTNFUSE_CLI_HAVE_ABLATION 1
#else
#define ATTNFUSE_CLI_HAVE_ABLATION 0
#endif

namespace attnfuse::cli {

namespace {

// Problems with more cells than this skip the reference check: the float64 reference
// materializes every score and would take far longer than the benchmark itself.
constexpr double kCheckCellLimit = double(1 << 25);

struct Variant {
  const char* name;   // stable key in the JSON
  const char* label;  // what a reader sees
  std::function<void(const AttentionArgs&)> run;
  // Brings the result into the host buffers before a check (device-resident variants).
  std::function<void(const AttentionArgs&)> finish = nullptr;
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Two warm-up runs (first-touch of buffers, thread pool start), then `reps` timed runs, or as
// many as fit in about a second (5 to 200) when reps is 0.
Timing time_runs(const std::function<void()>& fn, int reps) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  fn();
  const double warm = std::max(1e-3, elapsed_ms(t0) / 2);
  if (reps <= 0) reps = std::clamp(static_cast<int>(1000.0 / warm), 5, 200);
  std::vector<double> ms(static_cast<size_t>(reps));
  for (auto& m : ms) {
    t0 = std::chrono::steady_clock::now();
    fn();
    m = elapsed_ms(t0);
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  Timing t;
  t.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  t.min_ms = ms.front();
  t.max_ms = ms.back();
  t.reps = reps;
  return t;
}

std::vector<Variant> variants(const Prepared& p, bool ablate) {
  std::vector<Variant> v;
  const Target target = p.target;
  const KernelSpec spec = p.spec;
  if (ablate) {
    if (target != Target::Cpu) throw UsageError("--ablate runs the CPU decomposition variants: use --device cpu");
#if ATTNFUSE_CLI_HAVE_ABLATION
    v.push_back({"unfused", "three unfused ops (S, P, O materialized)",
                 [spec](const AttentionArgs& a) { cpu::run_unfused(spec, a); }});
    v.push_back({"scores_softmax_fused", "scores+softmax fused, then P V",
                 [spec](const AttentionArgs& a) { cpu::run_scores_softmax_fused(spec, a); }});
#else
    throw Error(ErrorCode::Unsupported, "--ablate is not available in this build (the unfused CPU "
                                        "variants are missing)");
#endif
  }
  if (target == Target::Cuda) {
    // Inputs stay on the GPU across runs: the timing is the kernel's, not the copies'.
    auto resident = std::make_shared<std::unique_ptr<CudaResident>>();
    auto ensure = [resident, spec](const AttentionArgs& a) -> CudaResident& {
      if (!*resident) *resident = std::make_unique<CudaResident>(spec, a);
      return **resident;
    };
    v.push_back({"fused", spec.score == ScoreKind::ScaledDot ? "fully fused (one CUDA kernel)"
                                                             : "fused attention on CUDA (rope placement above)",
                 [ensure](const AttentionArgs& a) { ensure(a).launch(); },
                 [ensure](const AttentionArgs& a) { ensure(a).download(a); }});
    return v;
  }
  v.push_back({"fused", "fully fused (one kernel)",
               [spec, target](const AttentionArgs& a) { run_attention(target, spec, a); }});
  return v;
}

}  // namespace

void add_bench_command(CLI::App& app, BenchCommand& c) {
  add_problem_options(app, c.problem);
  app.add_flag("--ablate", c.ablate,
               "also time the decomposition variants: three unfused ops, scores+softmax fused");
  app.add_option("--json", c.json, "write the results as JSON to this file");
  app.add_flag("--no-check", c.no_check,
               "skip the reference check (only when the caller has validated this output itself)");
  app.add_option("--reps", c.reps, "timed runs per variant (default: about 1 s worth, 5 to 200)")
      ->check(CLI::NonNegativeNumber);
}

int run_bench(const BenchCommand& c) {
  if (!c.json.empty()) io::check_writable_destination(c.json, "--json");
  Prepared p = prepare(c.problem, /*want_lse=*/false);
  AttentionArgs args = p.problem.args();
  validate(p.spec, args);
  const std::vector<Variant> vs = variants(p, c.ablate);

  const Shape& s = p.problem.shape;
  const double cells = static_cast<double>(s.batch) * s.heads_q * s.len_q * s.len_kv;
  const double kept = kept_cells(p.spec, args);
  const double density = cells > 0 ? kept / cells : 0.0;
  // Two matmuls (QK^T: 2*D flops per kept cell; PV: 2*Dv) over the kept cells only.
  const double flops = 2.0 * static_cast<double>(s.head_dim + s.head_dim_v) * kept;

  std::string report = fmt::format("attnfuse bench: {}\n  {}\n  work: {:.4f} of {:.0f} cells kept, "
                                   "{:.3f} GFLOP per call\n",
                                   one_line(p.text), describe_problem(p), density, cells, flops * 1e-9) +
                       cuda_rope_placement_line(p.target, p.spec, args) +
                       cuda_launch_line(p.target, p.spec, args);
  nlohmann::json j;
  j["program"] = p.text;
  j["shape"] = {{"B", s.batch}, {"Hq", s.heads_q}, {"Hkv", s.heads_kv}, {"Nq", s.len_q},
                {"Nk", s.len_kv}, {"D", s.head_dim}, {"Dv", s.head_dim_v}};
  j["dtype"] = dtype_name(p.dtype);
  j["device"] = target_name(p.target);
  j["threads"] = p.threads;
  if (p.target == Target::Cpu) j["cpu_isa"] = cpu_kernel_isa();
  j["q_offset"] = args.resolved_q_offset();
  j["inputs"] = p.random ? fmt::format("random normal(0,1), seed {}", p.seed) : std::string("files");
  j["density"] = density;
  j["flops"] = flops;
  j["command"] = c.command_line;

  // Validate every variant before timing any of them.
  bool pass = true;
  if (c.no_check) {
    report += "  check: skipped (--no-check)\n";
    j["check"] = "skipped: --no-check";
  } else if (cells <= kCheckCellLimit) {
    const ReferenceSet ref = compute_reference(p.spec, args);
    for (const Variant& v : vs) {
      p.problem.out.poison();
      v.run(args);
      if (v.finish) v.finish(args);
      const Verdict verdict = judge(ref, p.dtype, p.problem.out.to_f32(), std::nullopt);
      report += fmt::format("  check {}:\n{}", v.name, describe(verdict, p.dtype, "    "));
      j["check"][v.name] = {{"max_abs_err", verdict.out.max_abs}, {"naive_err", verdict.out_naive.max_abs},
                            {"bound", verdict.out_bound}, {"pass", verdict.pass}};
      pass = pass && verdict.pass;
    }
  } else {
    report += fmt::format("  check: skipped ({:.3g} cells > {:.3g}: the float64 reference would take "
                          "too long; check a smaller shape with `attnfuse run --check`)\n",
                          cells, kCheckCellLimit);
    j["check"] = "skipped: too large for the float64 reference";
  }
  if (!pass) {
    std::fputs(report.c_str(), stdout);
    std::fputs("  not timing: the output is wrong\n", stdout);
    return 1;
  }

  report += fmt::format("  {:<22} {:>11} {:>11} {:>6} {:>10}  {}\n", "variant", "median ms", "min ms", "reps",
                        "GFLOP/s", "what");
  j["variants"] = nlohmann::json::array();
  for (const Variant& v : vs) {
    const Timing t = time_runs([&] { v.run(args); }, c.reps);
    const double gflops = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) * 1e-9 : 0.0;
    report += fmt::format("  {:<22} {:>11.3f} {:>11.3f} {:>6} {:>10.2f}  {}\n", v.name, t.median_ms,
                          t.min_ms, t.reps, gflops, v.label);
    j["variants"].push_back({{"name", v.name}, {"label", v.label}, {"median_ms", t.median_ms},
                             {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"reps", t.reps},
                             {"gflops", gflops}});
  }
  std::fputs(report.c_str(), stdout);
  if (!c.json.empty()) {
    const std::string text = j.dump(2) + "\n";
    io::StagedFile f(c.json, std::as_bytes(std::span<const char>(text.data(), text.size())));
    f.commit();
  }
  return 0;
}

}  // namespace attnfuse::cli
