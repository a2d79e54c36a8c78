// `attnfuse compile`: print a program's canonical IR, the IR after each pass, or its KernelSpec.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.hpp"

namespace attnfuse::cli {

void add_compile_command(CLI::App& app, CompileCommand& c) {
  app.add_option("PROGRAM", c.program, "the attention program (text, or @file to read it)")->required();
  app.add_option("--emit", c.emit, "ir: canonical IR | passes: the IR after each pass | spec: the KernelSpec")
      ->required()
      ->check(CLI::IsMember({"ir", "passes", "spec"}));
  app.add_option("--device", c.device, "cpu | cuda: the target the passes tile for (default cpu)");
  app.add_option("--dtype", c.dtype, "fp32 | bf16 | fp16 (default fp32)");
  app.add_option("--head-dim", c.head_dim, "specialize on this head dim (default 0: any, CPU)")
      ->check(CLI::NonNegativeNumber);
  add_rope_config_option(app, c.rope_config);
}

int run_compile(const CompileCommand& c) {
  const DType dtype = parse_dtype(c.dtype);
  // Compiling needs no device: `--device cuda` prints what the CUDA target would get.
  const Target target = parse_device(c.device, /*allow_auto=*/false) == DeviceChoice::Cuda ? Target::Cuda
                                                                                         : Target::Cpu;
  // The config sets run-time scalars of the KernelSpec only; the IR and the pass trace show the
  // program as written, so asking for them with a config would silently ignore it.
  if (!c.rope_config.empty() && c.emit != "spec")
    throw UsageError(fmt::format("--rope-config sets the KernelSpec's RoPE scalars, which --emit {} "
                                 "does not show: use --emit spec", c.emit));
  const Program program = Program::parse(load_program_text(c.program));
  std::string out;
  if (c.emit == "ir") {
    out = program.canonical();
  } else if (c.emit == "passes") {
    program.compile(CompileOptions{target, dtype, c.head_dim}, &out);
  } else {
    out = to_string(compile_with_rope(program, CompileOptions{target, dtype, c.head_dim},
                                      load_rope_config(c.rope_config), c.rope_config));
  }
  if (!out.empty() && out.back() != '\n') out.push_back('\n');
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace attnfuse::cli
