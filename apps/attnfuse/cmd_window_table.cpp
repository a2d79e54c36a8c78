// `attnfuse window-table`: the ATFlash rope_window table of a model's RoPE, read from its
// Hugging Face config.json: per pair θ_r, λ_r and w_r = k·λ_r, then the predicted pruned share of
// the rotated-pair QK terms over a causal length N and the ceiling speedup 2/(1+s).
#include <cmath>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "rope/hf_config.hpp"
#include "rope/window_table.hpp"

namespace attnfuse::cli {

namespace {

// The scaling and the parameters it reads, e.g. "llama3 (factor 32, low_freq_factor 1, ...)".
std::string describe_scaling(const RopeParams& p) {
  const std::string orig = fmt::format("original_max_position_embeddings {}", p.original_max_position_embeddings);
  std::string params;
  switch (p.rope_type) {
    case RopeScaling::None:
      return "default (no scaling)";
    case RopeScaling::Linear:
      params = fmt::format("factor {}", p.factor);
      break;
    case RopeScaling::Dynamic:
      params = fmt::format("factor {}, max_position_embeddings {}", p.factor, p.original_max_position_embeddings);
      break;
    case RopeScaling::Yarn:
      params = fmt::format("factor {}, {}, beta_fast {}, beta_slow {}", p.factor, orig, p.beta_fast, p.beta_slow);
      break;
    case RopeScaling::Llama3:
      params = fmt::format("factor {}, low_freq_factor {}, high_freq_factor {}, {}", p.factor,
                           p.low_freq_factor, p.high_freq_factor, orig);
      break;
    case RopeScaling::Longrope:
      params = fmt::format("factor {}, {}", p.factor, orig);
      break;
  }
  return fmt::format("{} ({})", rope_scaling_name(p.rope_type), params);
}

}  // namespace

void add_window_table_command(CLI::App& app, WindowTableCommand& c) {
  app.add_option("--config", c.config,
                 "the model's Hugging Face config.json (rope_theta, head_dim or hidden_size / "
                 "num_attention_heads, partial_rotary_factor, rope_scaling / rope_parameters)")
      ->required();
  app.add_option("--k", c.k, "rope_window's k: pair r is kept where |delta| <= k * lambda_r (k > 0)")
      ->required();
  app.add_option_function<int64_t>(
      "--seq-len",
      [&c](const int64_t& n) {
        c.seq_len = n;
        c.seq_len_given = true;
      },
      "the causal length N of the predicted shares (default: the config's max_position_embeddings); "
      "dynamic and longrope also compute their frequencies for it");
}

int run_window_table(const WindowTableCommand& c) {
  if (!(std::isfinite(c.k) && c.k > 0.0))
    throw UsageError(fmt::format("--k {}: must be a finite number > 0 (rope_window keeps pair r where "
                                 "|delta| <= k * lambda_r)", c.k));
  if (c.seq_len_given && c.seq_len < 1)
    throw UsageError(fmt::format("--seq-len {}: the causal length must be >= 1", c.seq_len));

  const rope::HfRopeConfig cfg = rope::load_hf_config(c.config);
  int64_t n = c.seq_len;
  std::string n_note = "given by --seq-len";
  if (!c.seq_len_given) {
    if (cfg.max_position_embeddings < 1)
      throw UsageError(fmt::format("{} has no max_position_embeddings: pass --seq-len N (the causal "
                                   "length of the predicted shares)", c.config));
    n = cfg.max_position_embeddings;
    n_note = "the config's max_position_embeddings; pass --seq-len N for another causal length";
  }
  const rope::WindowTable table = rope::window_table(cfg.rope, cfg.head_dim, c.k, n);

  std::string out = fmt::format("# window table of {}{}: head_dim {}, rotary_dim {}, base {}, style {}, rope_type {}\n",
                                c.config, cfg.model_type.empty() ? "" : " (" + cfg.model_type + ")",
                                cfg.head_dim, table.rotary_dim, cfg.rope.base,
                                rope_style_name(cfg.rope.style), describe_scaling(cfg.rope));
  out += fmt::format("# seq_len N = {} ({})\n", n, n_note);
  out += "# theta: radians per position after scaling; lambda = 2*pi/theta; window = k*lambda (pair r "
         "is kept where |delta| <= window); pruned_share of a pair: its share of the N(N+1)/2 causal "
         "cells where its term is dropped\n";
  out += "# retained_share s: QK multiply-adds kept per cell (unrotated dims always count); "
         "ceiling_speedup = 2/(1+s) (PV and softmax unchanged); last line: the pruned share of all "
         "rotated-pair QK terms\n";
  out += rope::format_window_table(table);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace attnfuse::cli
