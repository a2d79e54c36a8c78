// A verified attention program: parse text (or wrap a C++ DSL graph), print, hash, compile.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse {

namespace ir {
class Graph;
}

// What the passes need besides the program to choose a kernel.
struct CompileOptions {
  Target target = Target::Cpu;
  DType dtype = DType::F32;
  int head_dim = 0;  // 0: decided at run time (CPU)
  RopeMode rope_mode = RopeMode::Auto;  // CUDA rope / rope_window: where Q and K are rotated
};

class Program {
 public:
  // Parses and verifies. Throws Error(Parse|Verify) with line, column and a caret.
  static Program parse(std::string_view text);
  // Verifies a graph built by the C++ DSL. Throws Error(Verify).
  static Program from_graph(ir::Graph graph);

  const ir::Graph& graph() const { return *graph_; }
  // Canonical printout: one line per node, independent of how the program was spelled.
  std::string canonical() const;
  // SHA-256 (hex) of the canonical printout: the graph's identity.
  std::string signature() const;
  // Runs fuse -> tile -> lower. `trace`, if given, receives the IR after each pass.
  KernelSpec compile(const CompileOptions& options, std::string* trace = nullptr) const;

 private:
  explicit Program(std::shared_ptr<const ir::Graph> g) : graph_(std::move(g)) {}
  std::shared_ptr<const ir::Graph> graph_;
};

}  // namespace attnfuse
