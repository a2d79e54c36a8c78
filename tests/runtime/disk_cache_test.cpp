// The on-disk kernel cache: round trip, corruption and truncation detected and rebuilt, the
// environment switches, and writers racing readers never expose a half-written entry.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "attnfuse/program.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/nvrtc.hpp"

namespace attnfuse::runtime {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const char* tag) {
  fs::path dir = fs::temp_directory_path() / fmt::format("attnfuse-cache-test-{}-{}", tag, ::getpid());
  fs::remove_all(dir);
  return dir;
}

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(DiskCache, RoundTrip) {
  DiskCache cache(fresh_dir("rt").string());
  EXPECT_FALSE(cache.load("k1").has_value());
  cache.store("k1", bytes("payload-1"));
  auto got = cache.load("k1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::string(got->begin(), got->end()), "payload-1");
}

TEST(DiskCache, CorruptEntryIsDiscarded) {
  DiskCache cache(fresh_dir("corrupt").string());
  cache.store("k", bytes(std::string(1000, 'x')));
  {
    std::fstream f(cache.path_for("k"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500);
    f.put('y');
  }
  EXPECT_FALSE(cache.load("k").has_value());
  EXPECT_FALSE(fs::exists(cache.path_for("k"))) << "a corrupt entry must be removed";
}

TEST(DiskCache, TruncatedEntryIsDiscarded) {
  DiskCache cache(fresh_dir("trunc").string());
  cache.store("k", bytes(std::string(1000, 'x')));
  fs::resize_file(cache.path_for("k"), 700);
  EXPECT_FALSE(cache.load("k").has_value());
  EXPECT_FALSE(fs::exists(cache.path_for("k")));
}

TEST(DiskCache, EnvironmentSwitches) {
  ::setenv("ATTNFUSE_CACHE_DIR", "/tmp/attnfuse-env-dir", 1);
  EXPECT_EQ(DiskCache::from_environment().directory(), "/tmp/attnfuse-env-dir");
  ::setenv("ATTNFUSE_CACHE", "0", 1);
  EXPECT_FALSE(DiskCache::from_environment().enabled());
  ::unsetenv("ATTNFUSE_CACHE");
  ::unsetenv("ATTNFUSE_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(DiskCache::from_environment().directory(), "/tmp/xdg/attnfuse");
  ::unsetenv("XDG_CACHE_HOME");
}

TEST(DiskCache, ConcurrentWritersNeverExposeHalfWrittenFiles) {
  DiskCache cache(fresh_dir("race").string());
  const std::vector<char> payload = bytes(std::string(1 << 20, 'z'));
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread writer([&] {
    for (int i = 0; i < 30; ++i) cache.store("shared", payload);
    stop = true;
  });
  while (!stop) {
    auto got = cache.load("shared");  // absent or complete, never corrupt
    if (got && *got != payload) ++bad;
  }
  writer.join();
  EXPECT_EQ(bad.load(), 0);
  for (const auto& e : fs::directory_iterator(cache.directory()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "temp file left behind";
}

TEST(KernelCache, SecondCompileComesFromDiskAndKeyIgnoresScalars) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const fs::path dir = fresh_dir("kernels");
  ::setenv("ATTNFUSE_CACHE_DIR", dir.c_str(), 1);
  const KernelSpec a = Program::parse("softmax(sliding_window(causal(scaled_dot_product(Q, K)), 128)) @ V")
                           .compile({Target::Cuda, DType::BF16, 64});
  const KernelSpec b = Program::parse("softmax(sliding_window(causal(scaled_dot_product(Q, K)), 4096)) @ V")
                           .compile({Target::Cuda, DType::BF16, 64});
  EXPECT_EQ(cache_key(a, 90), cache_key(b, 90)) << "a window size is a run-time argument";
  EXPECT_NE(cache_key(a, 90), cache_key(a, 80));
  const CompiledBinary cold = compile_cuda(a, 90);
  EXPECT_FALSE(cold.from_disk);
  const CompiledBinary warm = compile_cuda(b, 90);
  EXPECT_TRUE(warm.from_disk);
  EXPECT_EQ(cold.cubin, warm.cubin);
  ::unsetenv("ATTNFUSE_CACHE_DIR");
}

}  // namespace
}  // namespace attnfuse::runtime
