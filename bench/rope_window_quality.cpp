// rope_window_quality: ATFlash's quality dial measured. For a sweep of k it reports how much
// rope_window changes causal attention rows against plain rope (top-1 agreement, mean and max
// KL(P_rope || P_window), retained share of rotated-pair QK terms), in float64, on random and
// structured synthetic inputs, for a model's RoPE (--config) or an explicit one (--base ...).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "attnfuse/error.hpp"
#include "rope/apply_config.hpp"
#include "rope/frequencies.hpp"
#include "rope/hf_config.hpp"
#include "rope_window_quality.hpp"

using namespace attnfuse;

namespace {

struct Options {
  std::string config;
  std::optional<double> base;
  std::optional<int> head_dim;
  std::optional<int> rotary_dim;
  std::optional<std::string> style;
  std::vector<double> ks{0.25, 0.5, 1.0, 2.0, 4.0, 8.0};
  std::vector<int64_t> seq_lens{4096};
  std::vector<std::string> inputs{"random", "low_rank", "positional", "sinks"};
  int heads = 4;
  int64_t rows = 256;
  int64_t all_rows_up_to = 2048;
  uint64_t seed = 1;
  std::string json;
};

// The RoPE of the run: the config's (rope_frequencies conventions of hf_config.hpp) with the
// explicit --base / --rotary-dim / --style winning, as `--rope-config` merges a program's
// parameters (rope::apply_hf_rope); without --config, default RoPE (no scaling) from the flags.
quality::Problem make_problem(const Options& o, std::string& described) {
  quality::Problem pb;
  KernelSpec spec;
  spec.score = ScoreKind::RopeWindow;
  rope::RopeFieldSet written;
  if (o.base) spec.scalars.rope.base = *o.base, written.add(rope::RopeField::Base);
  if (o.rotary_dim) spec.scalars.rope.rotary_dim = *o.rotary_dim, written.add(rope::RopeField::RotaryDim);
  if (o.style) {
    spec.scalars.rope.style = *o.style == "gptj" ? RopeStyle::Gptj : RopeStyle::Neox;
    written.add(rope::RopeField::Style);
  }
  if (!o.config.empty()) {
    const rope::HfRopeConfig cfg = rope::load_hf_config(o.config);
    spec.head_dim = o.head_dim.value_or(cfg.head_dim);
    rope::apply_hf_rope(spec, cfg, written);
    described = fmt::format("{}{}", o.config, cfg.model_type.empty() ? "" : " (" + cfg.model_type + ")");
  } else {
    spec.head_dim = o.head_dim.value_or(128);
    rope::validate_rope_params(spec.scalars.rope, spec.head_dim);
    described = "explicit RoPE (--base, --head-dim)";
  }
  pb.rope = spec.scalars.rope;
  pb.head_dim = spec.head_dim;
  return pb;
}

// "llama3 (factor 32, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings
// 8192)": the scaling and the parameters it reads.
std::string describe_scaling(const RopeParams& p) {
  const std::string orig = fmt::format("original_max_position_embeddings {}", p.original_max_position_embeddings);
  switch (p.rope_type) {
    case RopeScaling::None: return "default (no scaling)";
    case RopeScaling::Linear: return fmt::format("linear (factor {})", p.factor);
    case RopeScaling::Dynamic:
      return fmt::format("dynamic (factor {}, max_position_embeddings {})", p.factor, p.original_max_position_embeddings);
    case RopeScaling::Yarn:
      return fmt::format("yarn (factor {}, {}, beta_fast {}, beta_slow {})", p.factor, orig, p.beta_fast, p.beta_slow);
    case RopeScaling::Llama3:
      return fmt::format("llama3 (factor {}, low_freq_factor {}, high_freq_factor {}, {})", p.factor,
                         p.low_freq_factor, p.high_freq_factor, orig);
    case RopeScaling::Longrope: return fmt::format("longrope (factor {}, {})", p.factor, orig);
  }
  return "?";
}

std::string command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) out += (i ? " " : "") + std::string(argv[i]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rope_window quality dial: top-1 agreement and KL(P_rope || P_window) of causal "
               "attention rows for a sweep of k, in float64 on synthetic inputs"};
  Options o;
  app.add_option("--config", o.config,
                 "a Hugging Face config.json (rope_theta, head_dim, rope_scaling); --base/--rotary-dim/"
                 "--style given too win over it");
  app.add_option("--base", o.base, "RoPE base (default 10000 without --config)");
  app.add_option("--head-dim", o.head_dim, "head dim D (default: the config's, else 128)");
  app.add_option("--rotary-dim", o.rotary_dim, "rotated dims (default: the config's, else D)");
  app.add_option("--style", o.style, "pair convention")->check(CLI::IsMember({"neox", "gptj"}));
  app.add_option("--k", o.ks, "rope_window's k values (pair r kept where |delta| <= k*lambda_r)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seq-len,-n", o.seq_lens, "causal lengths N = Nq = Nk, one table each")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--inputs", o.inputs, "input kinds: random, low_rank, positional, sinks")
      ->delimiter(',')
      ->check(CLI::IsMember({"random", "low_rank", "positional", "sinks"}));
  app.add_option("--heads", o.heads, "heads per input kind (each its own random draw)")->check(CLI::Range(1, 1024));
  app.add_option("--rows", o.rows, "query rows sampled per head when N > --all-rows-up-to (stratified, "
                                   "the last rows/8 rows always included)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  app.add_option("--all-rows-up-to", o.all_rows_up_to, "evaluate every row when N <= this");
  app.add_option("--seed", o.seed, "seed of the inputs and the row sample");
  app.add_option("--json", o.json, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    std::string source;
    const quality::Problem base_pb = make_problem(o, source);
    const int rotary_dim = rope::rotary_dim_of(base_pb.rope, base_pb.head_dim);
    const RopeParams& rp = base_pb.rope;

    std::string out = fmt::format("# {}\n", command_line(argc, argv));
    out += fmt::format("# {:%Y-%m-%d}, {} OpenMP threads (the numbers do not depend on them, only the times)\n",
                       fmt::localtime(std::time(nullptr)), omp_get_max_threads());
    out += fmt::format("# rope_window quality dial of {}: head_dim {}, rotary_dim {}, base {}, style {}, rope_type {}\n",
                       source, base_pb.head_dim, rotary_dim, rp.base, rope_style_name(rp.style), describe_scaling(rp));
    out += "# per causal attention row (Nq = Nk = N, scale 1/sqrt(D), float64): top1 = the windowed row's "
           "argmax key is plain rope's; KL = KL(P_rope || P_window) in nats, mean weighted over rows "
           "(stratified sample: an estimate of the mean over all rows), max over the sampled rows; "
           "retained = share of rotated-pair QK terms kept over the causal N x N square\n";
    out += "# inputs: random = N(0,1) q, k; low_rank = q, k in a shared rank-4 subspace; positional = "
           "near-constant q, k (2 (mean + 0.1 noise)): scores mostly a function of delta; sinks = random "
           "plus 4 sink keys aligned with every query on the 8 longest-wavelength pairs\n";
    std::fputs(out.c_str(), stdout);

    nlohmann::json j;
    j["command"] = command_line(argc, argv);
    j["source"] = source;
    j["rope"] = {{"base", rp.base},
                 {"head_dim", base_pb.head_dim},
                 {"rotary_dim", rotary_dim},
                 {"style", rope_style_name(rp.style)},
                 {"rope_type", rope_scaling_name(rp.rope_type)},
                 {"scaling", describe_scaling(rp)}};
    j["heads"] = o.heads;
    j["seed"] = o.seed;
    j["scale"] = "1/sqrt(head_dim)";
    j["runs"] = nlohmann::json::array();

    for (int64_t n : o.seq_lens) {
      quality::Problem pb = base_pb;
      pb.seq_len = n;
      const quality::RowSample rows = quality::sample_rows(n, o.rows, o.all_rows_up_to, o.seed);
      const auto t0 = std::chrono::steady_clock::now();
      std::string table = fmt::format("{:<11} {:>6} {:>9} {:>10} {:>10} {:>9}\n", "input", "k", "top1",
                                      "mean_kl", "max_kl", "retained");
      nlohmann::json results = nlohmann::json::array();
      for (const std::string& name : o.inputs) {
        const quality::InputKind kind = *quality::parse_input_kind(name);
        for (const quality::DialPoint& p : quality::measure(kind, pb, o.ks, o.heads, rows, o.seed)) {
          table += fmt::format("{:<11} {:>6g} {:>9.4f} {:>10.3e} {:>10.3e} {:>9.4f}\n", name, p.k, p.top1(),
                               p.mean_kl(), p.max_kl, p.retained_share);
          results.push_back({{"input", name},
                             {"k", p.k},
                             {"top1_agreement", p.top1()},
                             {"mean_kl", p.mean_kl()},
                             {"max_kl", p.max_kl},
                             {"retained_share", p.retained_share},
                             {"retained_share_evaluated_cells", p.retained_evaluated()},
                             {"rows_evaluated", p.rows}});
        }
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("\n# N = {}: {} head{} x {} rows{} per input kind, seed {} ({:.1f} s)\n{}", n, o.heads,
                 o.heads == 1 ? "" : "s", rows.rows.size(), rows.all ? " (every row)" : " (sampled)", o.seed, seconds, table);
      std::fflush(stdout);
      j["runs"].push_back({{"seq_len", n},
                           {"rows_per_head", rows.rows.size()},
                           {"every_row", rows.all},
                           {"seconds", seconds},
                           {"results", results}});
    }

    if (!o.json.empty()) {
      std::ofstream f(o.json);
      f << j.dump(2) << '\n';
      if (!f) throw Error(ErrorCode::Io, fmt::format("cannot write {}", o.json));
    }
  } catch (const std::exception& e) {  // attnfuse::Error (bad config or parameters) and the like
    fmt::print(stderr, "rope_window_quality: {}\n", e.what());
    return 2;
  }
  return 0;
}
