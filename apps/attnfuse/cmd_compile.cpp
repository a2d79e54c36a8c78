// `attnfuse compile`: print a program's canonical IR, the IR after each pass, its KernelSpec, or
// (CUDA) the generated translation unit and its PTX. Needs no GPU.
#include <cstdio>
#include <cstring>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "codegen/cuda/emit.hpp"
#include "commands.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/nvrtc.hpp"

namespace attnfuse::cli {
namespace {

// "sm_90" / "sm_90a" / "90" -> 90.
int parse_arch(const std::string& text) {
  std::string digits = text.rfind("sm_", 0) == 0 ? text.substr(3) : text;
  if (!digits.empty() && digits.back() == 'a') digits.pop_back();
  int arch = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') arch = -1;
    if (arch >= 0) arch = arch * 10 + (ch - '0');
  }
  if (digits.empty() || arch < 80 || arch > 120)
    throw UsageError(fmt::format("unknown --arch '{}' (expected sm_80 or newer, e.g. sm_90)", text));
  return arch;
}

}  // namespace

void add_compile_command(CLI::App& app, CompileCommand& c) {
  app.add_option("PROGRAM", c.program, "the attention program (text, or @file to read it)")->required();
  app.add_option("--emit", c.emit,
                 "ir: canonical IR | passes: the IR after each pass | spec: the KernelSpec | "
                 "cuda: the generated CUDA translation unit | ptx: its PTX through NVRTC")
      ->required()
      ->check(CLI::IsMember({"ir", "passes", "spec", "cuda", "ptx"}));
  app.add_option("--device", c.device, "cpu | cuda: the target the passes tile for (default cpu; cuda "
                                        "for --emit cuda|ptx)");
  app.add_option("--dtype", c.dtype, "fp32 | bf16 | fp16 (default fp32; bf16 for --emit cuda|ptx)");
  app.add_option("--head-dim", c.head_dim, "specialize on this head dim (default 0: any, CPU)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--arch", c.arch,
                 "--emit cuda|ptx: the GPU architecture the kernel is built for (default sm_90, where the "
                 "prefill kernel takes its Hopper wgmma form)");
  add_rope_config_option(app, c.rope_config);
  add_rope_mode_option(app, c.rope_mode);
}

int run_compile(const CompileCommand& c) {
  const bool cuda_source = c.emit == "cuda" || c.emit == "ptx";
  // Compiling needs no device: `--device cuda` prints what the CUDA target would get.
  const Target target = cuda_source || parse_device(c.device, /*allow_auto=*/false) == DeviceChoice::Cuda
                            ? Target::Cuda
                            : Target::Cpu;
  const DType dtype = cuda_source && c.dtype == "fp32" ? DType::BF16 : parse_dtype(c.dtype);
  if (cuda_source && c.head_dim == 0)
    throw UsageError(fmt::format("--emit {} compiles a kernel for one head dim: give --head-dim D", c.emit));
  // The config sets run-time scalars of the KernelSpec only; the IR and the pass trace show the
  // program as written, so asking for them with a config would silently ignore it.
  if (!c.rope_config.empty() && (c.emit == "ir" || c.emit == "passes"))
    throw UsageError(fmt::format("--rope-config sets the KernelSpec's RoPE scalars, which --emit {} "
                                 "does not show: use --emit spec", c.emit));
  const Program program = Program::parse(load_program_text(c.program));
  const CompileOptions options{target, dtype, c.head_dim, parse_rope_mode(c.rope_mode)};
  std::string out;
  if (c.emit == "ir") {
    out = program.canonical();
  } else if (c.emit == "passes") {
    program.compile(options, &out);
  } else if (c.emit == "spec") {
    out = to_string(compile_with_rope(program, options, load_rope_config(c.rope_config), c.rope_config));
  } else {
    KernelSpec spec = compile_with_rope(program, options, load_rope_config(c.rope_config), c.rope_config);
    const int arch = parse_arch(c.arch);
    spec.tile = passes::cuda_arch_tile(spec, arch);  // what the runtime would build on that GPU
    out = codegen::cuda::emit_forward(spec);
    if (c.emit == "ptx") {
      const auto r = runtime::nvrtc_compile(out, "attnfuse_emit", arch, runtime::NvrtcOutput::Ptx);
      out.assign(r.binary.data(), ::strnlen(r.binary.data(), r.binary.size()));
    }
  }
  if (!out.empty() && out.back() != '\n') out.push_back('\n');
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace attnfuse::cli
