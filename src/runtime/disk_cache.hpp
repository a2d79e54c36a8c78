// The on-disk level of the kernel cache (DESIGN §5): one checksummed file per key, written to a
// temporary file and renamed, so concurrent processes never see a half-written entry and a
// corrupt or truncated entry is detected, discarded and rebuilt.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attnfuse::runtime {

class DiskCache {
 public:
  // The directory from the environment: ATTNFUSE_CACHE_DIR, else $XDG_CACHE_HOME/attnfuse, else
  // ~/.cache/attnfuse. Disabled when ATTNFUSE_CACHE=0 (or no directory can be found).
  static DiskCache from_environment();
  explicit DiskCache(std::string directory) : dir_(std::move(directory)) {}

  bool enabled() const { return !dir_.empty(); }
  const std::string& directory() const { return dir_; }
  std::string path_for(const std::string& key) const;

  // The entry's payload, or nothing when absent; a corrupt entry is removed (with one log line
  // on stderr) and reported as absent.
  std::optional<std::vector<char>> load(const std::string& key) const;
  // Best effort: a cache that cannot be written never fails the compile (one line on stderr).
  void store(const std::string& key, const std::vector<char>& payload) const;

 private:
  std::string dir_;
};

}  // namespace attnfuse::runtime
