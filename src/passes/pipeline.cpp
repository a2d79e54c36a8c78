// The pass pipeline: fuse -> tile -> lower, printing the IR after each step on request.
#include "passes/pipeline.hpp"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "ir/printer.hpp"
#include "passes/fuse.hpp"
#include "passes/lower.hpp"
#include "passes/tile.hpp"

namespace attnfuse::passes {

KernelSpec run_pipeline(const ir::Graph& graph, const CompileOptions& options, std::string* trace) {
  const char* env = std::getenv("ATTNFUSE_DEBUG");
  const bool debug = env && std::strcmp(env, "1") == 0;
  const bool printing = trace || debug;
  // Printouts are built only when someone reads them: compile() sits on the cold path, but
  // there is no reason to format strings nobody asked for.
  auto after = [&](const char* pass, auto&& printout) {
    if (!printing) return;
    const std::string block = fmt::format("== after {} ==\n{}\n", pass, printout());
    if (trace) *trace += block;
    if (debug) std::cerr << block << std::flush;
  };
  after("verify", [&] { return ir::print(graph); });
  const FusedAttention fused = fuse(graph);
  after("fuse", [&] { return to_string(fused); });
  const TiledAttention tiled = tile(fused, options);
  after("tile", [&] { return to_string(tiled); });
  KernelSpec spec = lower(tiled);
  after("lower", [&] { return attnfuse::to_string(spec); });
  return spec;
}

}  // namespace attnfuse::passes
