// The kernel templates NVRTC compiles: the copies embedded in the library at build time
// (codegen::cuda::kernel_headers), or, for kernel development, the same files read from the
// directory ATTNFUSE_KERNEL_DIR names. The override lets one process (or one device call)
// compare variants of the .cuh templates without rebuilding the library: the cache key hashes
// the text compiled, so each variant gets its own cache entries.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/emit.hpp"

namespace attnfuse::runtime {

// The headers of `dir`, under the embedded headers' names and in their order. Throws
// Error(Io) naming the first one the directory lacks or cannot be read.
std::vector<std::string> read_kernel_dir(const std::string& dir);

// The headers this process compiles with: ATTNFUSE_KERNEL_DIR's (read once, with one line on
// stderr saying so) or the embedded ones. Names and order are the embedded ones'.
const std::vector<codegen::cuda::EmbeddedHeader>& kernel_sources();

}  // namespace attnfuse::runtime
