// Parsers for the CLI's option values; every failure names the option and what is expected.
#include "options.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "attnfuse/error.hpp"

namespace attnfuse::cli {

namespace {

// Splits "a,b,c" into integers; throws UsageError naming `option` and `expected`.
std::vector<int64_t> parse_int_list(const std::string& text, const char* option,
                                    const char* expected, size_t count) {
  std::vector<int64_t> values;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int64_t v = 0;
    const char* first = item.data();
    const char* last = item.data() + item.size();
    while (first < last && *first == ' ') ++first;
    while (last > first && last[-1] == ' ') --last;
    const auto [ptr, ec] = std::from_chars(first, last, v);
    if (first == last || ec != std::errc() || ptr != last)
      throw UsageError(fmt::format("{} '{}': '{}' is not an integer (expected {})", option, text,
                                   item, expected));
    values.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (values.size() != count)
    throw UsageError(fmt::format("{} '{}': expected {} ({} integers), got {}", option, text,
                                 expected, count, values.size()));
  return values;
}

}  // namespace

DType parse_dtype(const std::string& text) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::F32;
  if (text == "bf16" || text == "bfloat16") return DType::BF16;
  if (text == "fp16" || text == "f16" || text == "float16") return DType::F16;
  throw UsageError(fmt::format("unknown --dtype '{}' (expected fp32, bf16 or fp16)", text));
}

DeviceChoice parse_device(const std::string& text, bool allow_auto) {
  if (text == "cpu") return DeviceChoice::Cpu;
  if (text == "cuda") return DeviceChoice::Cuda;
  if (allow_auto && text == "auto") return DeviceChoice::Auto;
  throw UsageError(fmt::format("unknown --device '{}' (expected cpu, cuda{})", text,
                               allow_auto ? " or auto" : ""));
}

RopeMode parse_rope_mode(const std::string& text) {
  if (text == "auto") return RopeMode::Auto;
  if (text == "fused") return RopeMode::Fused;
  if (text == "prerotate") return RopeMode::Prerotate;
  throw UsageError(fmt::format("unknown --rope-mode '{}' (expected auto, fused or prerotate)", text));
}

Shape parse_shape(const std::string& text) {
  const auto v = parse_int_list(text, "--shape", "B,Hq,Hkv,Nq,Nk,D", 6);
  Shape s{v[0], v[1], v[2], v[3], v[4], v[5], v[5]};
  if (s.batch < 0 || s.len_q < 0 || s.len_kv < 0)
    throw UsageError(fmt::format("--shape '{}': B, Nq and Nk must be >= 0", text));
  if (s.heads_q < 1 || s.heads_kv < 1 || s.head_dim < 1)
    throw UsageError(fmt::format("--shape '{}': Hq, Hkv and D must be >= 1", text));
  if (s.heads_q % s.heads_kv != 0)
    throw UsageError(fmt::format("--shape '{}': Hq={} is not divisible by Hkv={} (grouped-query "
                                 "attention needs Hq % Hkv == 0)", text, s.heads_q, s.heads_kv));
  // Keep every tensor's element count comfortably inside int64 (and any sane memory).
  const long double cells = static_cast<long double>(s.batch) * s.heads_q *
                            (static_cast<long double>(s.len_q) + s.len_kv) * s.head_dim;
  if (cells > 1e15L) throw UsageError(fmt::format("--shape '{}': tensors too large", text));
  return s;
}

BlockSize parse_block_size(const std::string& text) {
  const auto v = parse_int_list(text, "--block-size", "BQ,BK", 2);
  if (v[0] < 1 || v[1] < 1 || v[0] > (1 << 20) || v[1] > (1 << 20))
    throw UsageError(fmt::format("--block-size '{}': block sizes must be between 1 and 1048576", text));
  return BlockSize{static_cast<int>(v[0]), static_cast<int>(v[1])};
}

std::string load_program_text(const std::string& arg) {
  if (arg.empty() || arg[0] != '@') return arg;
  const std::string path = arg.substr(1);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::Io, fmt::format("cannot read program file {}: is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::Io, fmt::format("cannot read program file {}: {}", path,
                                           std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::Io, fmt::format("cannot read program file {}", path));
  return text.str();
}

std::string describe(const Shape& s) {
  return fmt::format("B={} Hq={} Hkv={} Nq={} Nk={} D={} Dv={}", s.batch, s.heads_q, s.heads_kv,
                     s.len_q, s.len_kv, s.head_dim, s.head_dim_v);
}

}  // namespace attnfuse::cli
