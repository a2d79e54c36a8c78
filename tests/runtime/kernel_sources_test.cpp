// The kernel templates NVRTC compiles: the embedded copies by default, or a directory's
// (ATTNFUSE_KERNEL_DIR) under the same names and order, refused with a clear error when the
// directory lacks one; a changed template changes the kernel cache key.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "attnfuse/error.hpp"
#include "runtime/kernel_sources.hpp"

namespace attnfuse::runtime {
namespace {
namespace fs = std::filesystem;

// A copy of the embedded templates in a fresh directory.
fs::path copy_of_templates(const char* tag) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("attnfuse-kernels-{}-{}", tag, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& h : codegen::cuda::kernel_headers()) std::ofstream(dir / h.name, std::ios::binary) << h.source;
  return dir;
}

TEST(KernelSources, DefaultsToTheEmbeddedTemplates) {
  ASSERT_EQ(std::getenv("ATTNFUSE_KERNEL_DIR"), nullptr) << "the test expects no override in its environment";
  const auto& embedded = codegen::cuda::kernel_headers();
  const auto& used = kernel_sources();
  ASSERT_EQ(used.size(), embedded.size());
  for (size_t i = 0; i < used.size(); ++i) {
    EXPECT_STREQ(used[i].name, embedded[i].name);
    EXPECT_EQ(used[i].source, embedded[i].source) << used[i].name;
  }
}

TEST(KernelSources, ReadsADirectoryUnderTheEmbeddedNames) {
  const auto& embedded = codegen::cuda::kernel_headers();
  ASSERT_FALSE(embedded.empty());
  const fs::path dir = copy_of_templates("read");
  const std::string changed = std::string(embedded.back().source) + "\n// a variant under test\n";
  std::ofstream(dir / embedded.back().name, std::ios::binary | std::ios::trunc) << changed;
  const auto texts = read_kernel_dir(dir.string());
  ASSERT_EQ(texts.size(), embedded.size());
  for (size_t i = 0; i + 1 < texts.size(); ++i) EXPECT_EQ(texts[i], embedded[i].source) << embedded[i].name;
  EXPECT_EQ(texts.back(), changed);
  fs::remove_all(dir);
}

TEST(KernelSources, ADirectoryMissingATemplateIsRefusedByName) {
  const auto& embedded = codegen::cuda::kernel_headers();
  const fs::path dir = copy_of_templates("missing");
  fs::remove(dir / embedded.front().name);
  try {
    read_kernel_dir(dir.string());
    FAIL() << "a directory without " << embedded.front().name << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find(embedded.front().name), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attnfuse::runtime
