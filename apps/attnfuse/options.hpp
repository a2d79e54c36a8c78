// The CLI's small value types (device choice, shape, block size) and the parsers that turn
// option text into them, each failing with one line a user can act on.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"

namespace attnfuse::cli {

// A mistake in how the CLI was called (as opposed to a library Error): exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DeviceChoice { Cpu, Cuda, Auto };

// --shape B,Hq,Hkv,Nq,Nk,D (V has the head dim of Q/K in random runs).
struct Shape {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, len_q = 0, len_kv = 0, head_dim = 0;
  int64_t head_dim_v = 0;  // Dv; equals head_dim for --shape
};

struct BlockSize {
  int q = 64;
  int k = 64;
};

DType parse_dtype(const std::string& text);               // fp32 | bf16 | fp16
DeviceChoice parse_device(const std::string& text, bool allow_auto);  // cpu | cuda | auto
RopeMode parse_rope_mode(const std::string& text);        // auto | fused | prerotate
// Six non-negative integers; heads and head dims >= 1; Hq divisible by Hkv.
Shape parse_shape(const std::string& text);
BlockSize parse_block_size(const std::string& text);  // BQ,BK, both >= 1

// PROGRAM is the text itself, or @file to read it from a file (Error(Io) if unreadable).
std::string load_program_text(const std::string& arg);

// "B=1 Hq=8 Hkv=8 Nq=1024 Nk=1024 D=64 Dv=64"
std::string describe(const Shape& s);

}  // namespace attnfuse::cli
