// Hugging Face config.json -> RopeParams + head geometry (see hf_config.hpp). Key precedence
// follows transformers v5 (RotaryEmbeddingConfigMixin.standardize_rope_params and the
// _compute_*_parameters functions of modeling_rope_utils.py).
#include "rope/hf_config.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnfuse/error.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::rope {

namespace {

using json = nlohmann::json;

// Typed access to one JSON object; every failure names the source and the dotted key.
class Obj {
 public:
  Obj(const json& j, std::string prefix, const std::string& origin)
      : j_(j), prefix_(std::move(prefix)), origin_(origin) {}

  [[noreturn]] void fail(ErrorCode code, const std::string& msg) const {
    throw Error(code, fmt::format("{}: {}", origin_, msg));
  }
  std::string key(std::string_view k) const { return prefix_ + std::string(k); }

  // Null counts as absent (HF reads these with `get(...) or default`).
  const json* find(std::string_view k) const {
    auto it = j_.find(std::string(k));
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(std::string_view k) const { return find(k) != nullptr; }

  std::optional<double> number(std::string_view k) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    if (!v->is_number())
      fail(ErrorCode::Verify, fmt::format("key '{}' must be a number, got {}", key(k), v->dump()));
    const double d = v->get<double>();
    if (!std::isfinite(d)) fail(ErrorCode::Verify, fmt::format("key '{}' must be finite", key(k)));
    return d;
  }
  std::optional<int64_t> integer(std::string_view k) const {
    const std::optional<double> d = number(k);
    if (!d) return std::nullopt;
    if (*d != std::floor(*d) || std::fabs(*d) > 0x1p62)
      fail(ErrorCode::Verify, fmt::format("key '{}' must be an integer, got {}", key(k), find(k)->dump()));
    return static_cast<int64_t>(*d);
  }
  std::optional<std::string> string(std::string_view k) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    if (!v->is_string())
      fail(ErrorCode::Verify, fmt::format("key '{}' must be a string, got {}", key(k), v->dump()));
    return v->get<std::string>();
  }
  std::optional<bool> boolean(std::string_view k) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    if (!v->is_boolean())
      fail(ErrorCode::Verify, fmt::format("key '{}' must be true or false, got {}", key(k), v->dump()));
    return v->get<bool>();
  }
  std::optional<std::vector<double>> numbers(std::string_view k) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    std::vector<double> out;
    if (v->is_array())
      for (const json& e : *v) {
        if (!e.is_number()) break;
        out.push_back(e.get<double>());
      }
    if (!v->is_array() || out.size() != v->size())
      fail(ErrorCode::Verify, fmt::format("key '{}' must be a list of numbers", key(k)));
    return out;
  }
  double require_number(std::string_view k, std::string_view why) const {
    if (auto d = number(k)) return *d;
    fail(ErrorCode::Verify, fmt::format("key '{}' is missing ({})", key(k), why));
  }
  int positive_int(std::string_view k) const {
    const std::optional<int64_t> v = integer(k);
    if (v && (*v < 1 || *v > (int64_t{1} << 30)))
      fail(ErrorCode::Verify, fmt::format("key '{}' = {} must be a positive count", key(k), *v));
    return v ? static_cast<int>(*v) : 0;
  }

 private:
  const json& j_;
  std::string prefix_;
  const std::string& origin_;
};

// The rope dict: transformers v5 writes rope_parameters, older configs rope_scaling.
const char* rope_dict_key(const Obj& top) {
  if (top.has("rope_parameters")) return "rope_parameters";
  if (top.has("rope_scaling")) return "rope_scaling";
  return nullptr;
}

RopeScaling parse_type(const Obj& d, const std::string& word) {
  if (word == "default") return RopeScaling::None;
  if (word == "linear") return RopeScaling::Linear;
  if (word == "dynamic") return RopeScaling::Dynamic;
  if (word == "yarn") return RopeScaling::Yarn;
  if (word == "llama3") return RopeScaling::Llama3;
  if (word == "longrope" || word == "su") return RopeScaling::Longrope;  // "su": early Phi-3
  if (word == "mrope" || word == "proportional" || word == "axial" || word == "3d")
    d.fail(ErrorCode::Unsupported,
           fmt::format("{} = \"{}\" is a RoPE form attnfuse does not implement (supported: default, "
                       "linear, dynamic, yarn, llama3, longrope)", d.key("rope_type"), word));
  d.fail(ErrorCode::Verify, fmt::format("{} = \"{}\" is not a RoPE scaling; use one of default, "
                                        "linear, dynamic, yarn, llama3, longrope",
                                        d.key("rope_type"), word));
}

// The HF rule for llama3/yarn/longrope: top-level original_max_position_embeddings (Phi-3),
// then the dict's, then max_position_embeddings.
int64_t original_context(const Obj& top, const Obj& d, int64_t max_pos, const char* type) {
  if (auto v = top.integer("original_max_position_embeddings")) return *v;
  if (auto v = d.integer("original_max_position_embeddings")) return *v;
  if (max_pos > 0) return max_pos;
  d.fail(ErrorCode::Verify,
         fmt::format("rope_type={} needs {} (or a top-level max_position_embeddings): the "
                     "context length the model was trained with", type,
                     d.key("original_max_position_embeddings")));
}

void read_scaling(const Obj& top, const Obj& d, int64_t max_pos, RopeParams& p) {
  const char* type = rope_scaling_name(p.rope_type);
  switch (p.rope_type) {
    case RopeScaling::None:
      return;
    case RopeScaling::Linear:
      p.factor = d.require_number("factor", "linear divides every frequency by it");
      return;
    case RopeScaling::Dynamic:
      p.factor = d.require_number("factor", "dynamic NTK grows the base with it");
      // HF's dynamic NTK starts growing the base beyond config.max_position_embeddings.
      if (max_pos <= 0)
        top.fail(ErrorCode::Verify, "rope_type=dynamic needs key 'max_position_embeddings' (the "
                                    "length beyond which dynamic NTK grows the base)");
      p.original_max_position_embeddings = max_pos;
      return;
    case RopeScaling::Llama3:
      p.factor = d.require_number("factor", "llama3 divides long-wavelength frequencies by it");
      p.low_freq_factor = d.require_number("low_freq_factor", "llama3's long-wavelength bound");
      p.high_freq_factor = d.require_number("high_freq_factor", "llama3's short-wavelength bound");
      p.original_max_position_embeddings = original_context(top, d, max_pos, type);
      return;
    case RopeScaling::Yarn: {
      p.original_max_position_embeddings = original_context(top, d, max_pos, type);
      if (auto f = d.number("factor"))
        p.factor = *f;
      else if (max_pos > 0)  // HF (DeepSeek-V3): the ratio of the two context lengths
        p.factor = static_cast<double>(max_pos) / static_cast<double>(p.original_max_position_embeddings);
      else
        d.fail(ErrorCode::Verify, fmt::format("rope_type=yarn needs {} (or max_position_embeddings)",
                                              d.key("factor")));
      // HF: `get("beta_fast") or 32`, so 0 also means the default.
      if (auto v = d.number("beta_fast"); v && *v != 0.0) p.beta_fast = *v;
      if (auto v = d.number("beta_slow"); v && *v != 0.0) p.beta_slow = *v;
      p.attention_factor = d.number("attention_factor");
      p.mscale = d.number("mscale").value_or(0.0);
      p.mscale_all_dim = d.number("mscale_all_dim").value_or(0.0);
      if (d.boolean("truncate") == false)
        d.fail(ErrorCode::Unsupported,
               fmt::format("{} = false (an untruncated yarn ramp, e.g. gpt-oss) is not supported: "
                           "RopeParams has no truncate field", d.key("truncate")));
      return;
    }
    case RopeScaling::Longrope: {
      p.original_max_position_embeddings = original_context(top, d, max_pos, type);
      auto lf = d.numbers("long_factor");
      auto sf = d.numbers("short_factor");
      if (!lf || !sf)
        d.fail(ErrorCode::Verify, fmt::format("rope_type=longrope needs {} and {} (one factor per "
                                              "rotated pair)", d.key("long_factor"), d.key("short_factor")));
      p.long_factor = std::move(*lf);
      p.short_factor = std::move(*sf);
      if (auto f = d.number("factor"))
        p.factor = *f;
      else if (max_pos > 0)  // HF (Phi-3): the ratio of the two context lengths
        p.factor = static_cast<double>(max_pos) / static_cast<double>(p.original_max_position_embeddings);
      p.attention_factor = d.number("attention_factor");
      return;
    }
  }
}

HfRopeConfig parse_root(const json& root, const std::string& origin) {
  if (!root.is_object())
    throw Error(ErrorCode::Io, fmt::format("{}: not a model config: the JSON top level is {}, not "
                                           "an object", origin, root.type_name()));
  // Multimodal configs keep the language model's geometry in text_config.
  const json* body = &root;
  if (!root.contains("num_attention_heads") && !root.contains("n_head")) {
    auto it = root.find("text_config");
    if (it != root.end() && it->is_object()) body = &*it;
  }
  const std::string prefix = body == &root ? "" : "text_config.";
  const Obj top(*body, prefix, origin);

  HfRopeConfig c;
  c.model_type = top.string("model_type").value_or(Obj(root, "", origin).string("model_type").value_or(""));
  c.num_attention_heads = top.positive_int("num_attention_heads");
  if (c.num_attention_heads == 0) c.num_attention_heads = top.positive_int("n_head");
  if (c.num_attention_heads == 0)
    top.fail(ErrorCode::Verify, fmt::format("key '{}' is missing: the number of query heads",
                                            top.key("num_attention_heads")));
  c.num_key_value_heads = top.positive_int("num_key_value_heads");
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    top.fail(ErrorCode::Verify, fmt::format("num_attention_heads = {} is not a multiple of "
                                            "num_key_value_heads = {}", c.num_attention_heads,
                                            c.num_key_value_heads));
  c.max_position_embeddings = top.integer("max_position_embeddings").value_or(0);
  if (c.max_position_embeddings < 0)
    top.fail(ErrorCode::Verify, fmt::format("key '{}' = {} must be >= 1", top.key("max_position_embeddings"),
                                            c.max_position_embeddings));

  c.head_dim = top.positive_int("head_dim");
  if (c.head_dim == 0) {
    int hidden = top.positive_int("hidden_size");
    if (hidden == 0) hidden = top.positive_int("n_embd");
    if (hidden == 0)
      top.fail(ErrorCode::Verify, fmt::format("neither '{}' nor '{}' is given: the head dim is one of "
                                              "them or their quotient by num_attention_heads",
                                              top.key("head_dim"), top.key("hidden_size")));
    if (hidden % c.num_attention_heads != 0)
      top.fail(ErrorCode::Verify, fmt::format("hidden_size = {} is not a multiple of num_attention_heads "
                                              "= {}; give head_dim explicitly", hidden,
                                              c.num_attention_heads));
    c.head_dim = hidden / c.num_attention_heads;
  }

  const char* dict_key = rope_dict_key(top);
  const json empty = json::object();
  const json* dict_json = dict_key ? top.find(dict_key) : &empty;
  if (!dict_json->is_object())
    top.fail(ErrorCode::Verify, fmt::format("key '{}' must be an object, got {}", top.key(dict_key),
                                            dict_json->dump()));
  const Obj d(*dict_json, dict_key ? top.key(dict_key) + "." : "", origin);
  // Per-layer-type parameters (Gemma-3 style) nest one dict per layer kind.
  if (!d.has("rope_type") && !d.has("type"))
    for (const auto& [k, v] : dict_json->items())
      if (v.is_object())
        d.fail(ErrorCode::Unsupported, fmt::format("{} holds per-layer RoPE parameters ('{}'); "
                                                   "attnfuse reads one RoPE per model", d.key(""), k));

  RopeParams& p = c.rope;
  p.base = d.number("rope_theta").value_or(
      top.number("rope_theta").value_or(top.number("rotary_emb_base").value_or(10000.0)));
  if (c.model_type == "gptj" || c.model_type == "codegen") p.style = RopeStyle::Gptj;

  std::optional<double> prf = d.number("partial_rotary_factor");
  if (!prf) prf = top.number("partial_rotary_factor");
  if (!prf) prf = top.number("rotary_pct");  // GPT-NeoX's spelling
  if (auto rd = top.integer("rotary_dim"); rd && !prf) {
    p.rotary_dim = static_cast<int>(std::min<int64_t>(*rd, int64_t{1} << 30));
  } else {
    const double f = prf.value_or(1.0);
    if (!(f > 0.0 && f <= 1.0))
      top.fail(ErrorCode::Verify, fmt::format("partial_rotary_factor = {} must be in (0, 1]: the share "
                                              "of the head dim that RoPE rotates", f));
    p.rotary_dim = static_cast<int>(c.head_dim * f);  // HF: int(head_dim * partial_rotary_factor)
  }

  std::optional<std::string> type = d.string("rope_type");
  if (!type) type = d.string("type");  // the older spelling
  p.rope_type = type ? parse_type(d, *type) : RopeScaling::None;
  read_scaling(top, d, c.max_position_embeddings, p);

  try {
    validate_rope_params(p, c.head_dim);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", origin, e.what()));
  }
  return c;
}

}  // namespace

HfRopeConfig parse_hf_config(std::string_view json_text, const std::string& origin) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    throw Error(ErrorCode::Io, fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
  return parse_root(root, origin);
}

HfRopeConfig load_hf_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::Io, fmt::format("{}: is a directory; give the path of its config.json", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::Io, fmt::format("{}: cannot open the model config (missing or unreadable)", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw Error(ErrorCode::Io, fmt::format("{}: error while reading the model config", path));
  return parse_hf_config(text.str(), path);
}

}  // namespace attnfuse::rope
