// SHA-256 signatures of canonical printouts (see signature.hpp).
#include "ir/signature.hpp"

#include "common/sha256.hpp"
#include "ir/printer.hpp"

namespace attnfuse::ir {

std::string sha256_hex(std::string_view data) { return attnfuse::sha256_hex(data); }

std::string signature(const Graph& graph) { return sha256_hex(print(graph)); }

}  // namespace attnfuse::ir
