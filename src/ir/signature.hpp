// The identity of a graph: SHA-256 (hex) of its canonical printout.
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.hpp"

namespace attnfuse::ir {

// Lower-case hex SHA-256 of `data` (the project's one hashing routine, common/sha256.hpp).
std::string sha256_hex(std::string_view data);

// sha256_hex(print(graph)): equal for programs that differ only in spelling.
std::string signature(const Graph& graph);

}  // namespace attnfuse::ir
