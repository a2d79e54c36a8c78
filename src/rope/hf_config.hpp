// Reads a Hugging Face `config.json` into RoPE parameters and attention geometry, with the
// same key precedence and defaults as transformers (so `--rope-config` means what HF means).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::rope {

struct HfRopeConfig {
  // rotary_dim is always set explicitly (head_dim * partial_rotary_factor, truncated as HF's
  // int()); window_k is 0. Conventions as in rope_frequencies (frequencies.hpp): for
  // `dynamic`, original_max_position_embeddings holds HF's max_position_embeddings; for
  // `yarn` and `longrope` without an explicit factor, factor = max_position_embeddings /
  // original_max_position_embeddings.
  RopeParams rope;
  int head_dim = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;          // num_attention_heads when the config has none
  int64_t max_position_embeddings = 0;  // 0 when the config has none
  std::string model_type;               // empty when the config has none
};

// Parses the file at `path`. Keys read (null counts as absent, as HF's `get(...) or default`):
//  - head_dim, else hidden_size / num_attention_heads (GPT-J spellings n_embd / n_head too);
//    multimodal configs without num_attention_heads are read from their `text_config`;
//  - num_attention_heads, num_key_value_heads, max_position_embeddings, model_type;
//  - rope_theta (in rope_parameters first, then top level, then GPT-NeoX rotary_emb_base,
//    default 10000);
//  - partial_rotary_factor (rope_parameters, top level, or GPT-NeoX rotary_pct; default 1),
//    or an explicit top-level rotary_dim (GPT-J, CodeGen);
//  - style: gptj for model_type gptj / codegen (interleaved pairs), else neox;
//  - rope_parameters (transformers v5) or rope_scaling (older): rope_type or type ("default",
//    "linear", "dynamic", "yarn", "llama3", "longrope"; Phi-3's early "su" = longrope) and
//    their parameters with HF names. A top-level original_max_position_embeddings takes
//    precedence for llama3/yarn/longrope (HF's Phi-3 rule), then the dict's, then
//    max_position_embeddings.
// Errors: Error(Io) when the file is missing, unreadable or not valid JSON (the message names
// the path and the JSON problem); Error(Verify) for missing or out-of-range values (named by
// key); Error(Unsupported) for RoPE forms attnfuse does not implement (per-layer nested
// rope_parameters, mrope, yarn truncate=false, other rope_types HF knows).
HfRopeConfig load_hf_config(const std::string& path);

// The same from JSON text; `origin` names the source in messages (a path or "<string>").
HfRopeConfig parse_hf_config(std::string_view json_text, const std::string& origin);

}  // namespace attnfuse::rope
