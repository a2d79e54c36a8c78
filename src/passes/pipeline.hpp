// The pass pipeline: fuse -> tile(target) -> lower, called in order, printing the IR after
// each step when asked (`attnfuse compile --emit passes`, or ATTNFUSE_DEBUG=1 to stderr).
#pragma once

#include <string>

#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/program.hpp"
#include "ir/graph.hpp"

namespace attnfuse::passes {

// Contract: `graph` has passed ir::verify. Returns the KernelSpec of the one fused kernel.
// If `trace` is non-null, appends "== after <pass> ==\n<printout>\n" for each pass.
KernelSpec run_pipeline(const ir::Graph& graph, const CompileOptions& options, std::string* trace);

}  // namespace attnfuse::passes
