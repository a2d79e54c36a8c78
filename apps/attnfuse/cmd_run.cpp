// `attnfuse run`: one attention call on .npy inputs (writing .npy outputs atomically) or on
// random inputs, optionally checked against the float64 reference.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "check.hpp"
#include "commands.hpp"
#include "io/npy.hpp"

namespace attnfuse::cli {

void add_run_command(CLI::App& app, RunCommand& c) {
  add_problem_options(app, c.problem);
  app.add_option("--out", c.out, "write O here: .npy float32 [B, Hq, Nq, Dv]");
  app.add_option("--lse", c.lse, "write the log-sum-exp here: .npy float32 [B, Hq, Nq]");
  app.add_flag("--check", c.check,
               "compare with the float64 reference (DESIGN §3 rule); exit 1 on FAIL");
}

int run_run(const RunCommand& c) {
  const bool files = c.problem.shape.empty();
  if (files && c.out.empty() && !c.check)
    throw UsageError("--out O.npy is required with --q/--k/--v (or pass --check)");
  // Fail on an impossible destination before computing anything.
  if (!c.out.empty()) io::check_writable_destination(c.out, "--out");
  if (!c.lse.empty()) io::check_writable_destination(c.lse, "--lse");

  Prepared p = prepare(c.problem, /*want_lse=*/!c.lse.empty() || c.check);
  AttentionArgs args = p.problem.args();
  validate(p.spec, args);

  // Poisoned outputs: an element the kernel does not write stays NaN and fails the check.
  p.problem.out.poison();
  std::fill(p.problem.lse.begin(), p.problem.lse.end(), std::numeric_limits<float>::quiet_NaN());
  const auto t0 = std::chrono::steady_clock::now();
  run_attention(p.target, p.spec, args);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const std::vector<float> out = p.problem.out.to_f32();
  const Shape& s = p.problem.shape;
  std::fputs(fmt::format("attnfuse run: {}\n  {}\n  kernel time {:.3f} ms\n",
                         one_line(p.text), describe_problem(p), ms)
                 .c_str(),
             stdout);
  std::fputs(cuda_rope_placement_line(p.target, p.spec, args).c_str(), stdout);
  std::fputs(cuda_launch_line(p.target, p.spec, args).c_str(), stdout);

  bool pass = true;
  if (c.check) {
    const ReferenceSet ref = compute_reference(p.spec, args);
    const Verdict v = judge(ref, p.dtype, out, std::span<const float>(p.problem.lse));
    std::fputs(describe(v, p.dtype, "  ").c_str(), stdout);
    pass = v.pass;
  }
  if (!pass) return 1;  // nothing is written for a failed check

  // Stage every output first, then rename: either all files appear or none.
  std::vector<io::StagedFile> staged;
  if (!c.out.empty())
    staged.emplace_back(c.out, io::serialize_npy(io::make_f32({s.batch, s.heads_q, s.len_q, s.head_dim_v}, out)));
  if (!c.lse.empty())
    staged.emplace_back(c.lse, io::serialize_npy(io::make_f32({s.batch, s.heads_q, s.len_q}, p.problem.lse)));
  for (auto& f : staged) f.commit();
  if (!c.out.empty()) std::fputs(fmt::format("  wrote {}\n", c.out).c_str(), stdout);
  if (!c.lse.empty()) std::fputs(fmt::format("  wrote {}\n", c.lse).c_str(), stdout);
  return 0;
}

}  // namespace attnfuse::cli
