// attnfuse::Program: parse or wrap, verify, print, hash, compile (see attnfuse/program.hpp).
#include "attnfuse/program.hpp"

#include "dsl/parser.hpp"
#include "ir/graph.hpp"
#include "ir/printer.hpp"
#include "ir/signature.hpp"
#include "ir/verifier.hpp"
#include "passes/pipeline.hpp"

namespace attnfuse {

Program Program::parse(std::string_view text) {
  ir::Graph g = dsl::parse(text);
  ir::verify(g);
  return Program(std::make_shared<const ir::Graph>(std::move(g)));
}

Program Program::from_graph(ir::Graph graph) {
  ir::verify(graph);
  return Program(std::make_shared<const ir::Graph>(std::move(graph)));
}

std::string Program::canonical() const { return ir::print(*graph_); }

std::string Program::signature() const { return ir::signature(*graph_); }

KernelSpec Program::compile(const CompileOptions& options, std::string* trace) const {
  return passes::run_pipeline(*graph_, options, trace);
}

}  // namespace attnfuse
