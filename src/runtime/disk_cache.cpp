// File format: "AFKC" | u32 format version | u64 payload size | 32-byte SHA-256 of payload | payload.
#include "runtime/disk_cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "common/sha256.hpp"

namespace attnfuse::runtime {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[4] = {'A', 'F', 'K', 'C'};
constexpr uint32_t kFormat = 1;
constexpr size_t kHeader = 4 + 4 + 8 + 32;

}  // namespace

DiskCache DiskCache::from_environment() {
  if (const char* off = std::getenv("ATTNFUSE_CACHE"); off && std::string(off) == "0") return DiskCache("");
  if (const char* d = std::getenv("ATTNFUSE_CACHE_DIR"); d && *d) return DiskCache(d);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return DiskCache(std::string(x) + "/attnfuse");
  if (const char* h = std::getenv("HOME"); h && *h) return DiskCache(std::string(h) + "/.cache/attnfuse");
  return DiskCache("");
}

std::string DiskCache::path_for(const std::string& key) const { return dir_ + "/" + key + ".cubin"; }

std::optional<std::vector<char>> DiskCache::load(const std::string& key) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](const char* why) -> std::optional<std::vector<char>> {
    std::cerr << fmt::format("attnfuse: discarding corrupt kernel cache entry {} ({}); rebuilding\n", path, why);
    std::error_code ec;
    fs::remove(path, ec);
    return std::nullopt;
  };
  if (file.size() < kHeader || std::memcmp(file.data(), kMagic, 4) != 0) return corrupt("bad header");
  uint32_t format = 0;
  uint64_t size = 0;
  std::memcpy(&format, file.data() + 4, 4);
  std::memcpy(&size, file.data() + 8, 8);
  if (format != kFormat) return corrupt("unknown format version");
  if (size != file.size() - kHeader) return corrupt("truncated");
  std::vector<char> payload(file.begin() + kHeader, file.end());
  const auto digest = sha256(std::string_view(payload.data(), payload.size()));
  if (std::memcmp(digest.data(), file.data() + 16, 32) != 0) return corrupt("checksum mismatch");
  return payload;
}

void DiskCache::store(const std::string& key, const std::vector<char>& payload) const {
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  const std::string path = path_for(key);
  // A unique temporary name in the same directory, then an atomic rename over the final name.
  std::random_device rd;
  const std::string tmp = fmt::format("{}.tmp.{}.{:x}", path, static_cast<long>(getpid()), rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      std::cerr << fmt::format("attnfuse: kernel cache not writable at {}; continuing without it\n", dir_);
      return;
    }
    const uint64_t size = payload.size();
    const auto digest = sha256(std::string_view(payload.data(), payload.size()));
    out.write(kMagic, 4);
    out.write(reinterpret_cast<const char*>(&kFormat), 4);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out.write(reinterpret_cast<const char*>(digest.data()), 32);
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace attnfuse::runtime
