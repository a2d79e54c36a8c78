// Kernel templates for NVRTC: embedded, or read from ATTNFUSE_KERNEL_DIR (kernel_sources.hpp).
#include "runtime/kernel_sources.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "attnfuse/error.hpp"

namespace attnfuse::runtime {

std::vector<std::string> read_kernel_dir(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& h : codegen::cuda::kernel_headers()) {
    const std::string path = dir + "/" + h.name;
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw Error(ErrorCode::Io,
                  fmt::format("ATTNFUSE_KERNEL_DIR={}: cannot read {} (the directory must hold every kernel "
                              "template: a copy of src/codegen/cuda/kernels/)",
                              dir, path));
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

const std::vector<codegen::cuda::EmbeddedHeader>& kernel_sources() {
  // The texts live as long as the process; the views below point into them.
  static const std::vector<std::string> texts = [] {
    const char* dir = std::getenv("ATTNFUSE_KERNEL_DIR");
    if (dir == nullptr || *dir == '\0') return std::vector<std::string>{};
    std::fprintf(stderr, "attnfuse: kernel templates read from %s (ATTNFUSE_KERNEL_DIR)\n", dir);
    return read_kernel_dir(dir);
  }();
  static const std::vector<codegen::cuda::EmbeddedHeader> headers = [] {
    std::vector<codegen::cuda::EmbeddedHeader> h = codegen::cuda::kernel_headers();
    for (size_t i = 0; i < texts.size(); ++i) h[i].source = texts[i].c_str();
    return h;
  }();
  return headers;
}

}  // namespace attnfuse::runtime
