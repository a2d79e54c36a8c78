// Reading and writing NumPy .npy files (the CLI's tensor format): float32 tensors, bool/uint8
// block grids and int32/int64 arrays, little-endian C order only; writes are atomic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace attnfuse::io {

// The element types we accept. Anything else (float64, big-endian, fortran order, ...) is
// rejected with Error(Io) naming the file and what to change, rather than silently converted.
enum class NpyDType { F32, Bool, U8, I32, I64 };

const char* npy_dtype_name(NpyDType t);  // "float32", "bool", ...
int npy_dtype_size(NpyDType t);

struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  std::vector<int64_t> shape;  // empty: a 0-d scalar (one element)
  std::vector<std::byte> data;  // numel() * element size bytes, C order, little-endian

  int64_t numel() const;
  // Typed views; throw Error(Internal) if the dtype does not match (callers check dtype first).
  std::span<const float> f32() const;
  std::span<float> f32();
  // The array as 0/1 bytes (bool, uint8 and integer arrays; nonzero = 1). Throws Error(Io)
  // for float arrays, naming `what` (e.g. "block mask M.npy").
  std::vector<uint8_t> to_mask(const std::string& what) const;
  // "(2, 3, 4)" as NumPy prints shapes.
  std::string shape_string() const;
};

// Reads a whole .npy file. Throws Error(Io) "<file>: <problem>" for a missing or unreadable
// file, a bad magic/version/header, an unsupported dtype, fortran_order True, or a size that
// does not match the header (truncated or trailing bytes).
NpyArray read_npy(const std::filesystem::path& file);

// Parses the bytes of a .npy file already in memory; `name` is used in error messages.
NpyArray parse_npy(std::span<const std::byte> bytes, const std::string& name);

// Serializes to .npy bytes (format 1.0, or 2.0 when the header needs it).
std::vector<std::byte> serialize_npy(const NpyArray& array);

// A file written next to its destination and renamed onto it on commit(), so the destination
// is either untouched or complete: readers never see a half-written file, and a failure
// anywhere before commit() leaves no trace (the destructor removes the temp file).
class StagedFile {
 public:
  // Writes `bytes` to a temp file in the destination's directory. Throws Error(Io) if the
  // directory does not exist or is not writable, or the write fails.
  StagedFile(std::filesystem::path destination, std::span<const std::byte> bytes);
  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&&) = delete;
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile();

  // Renames the temp file onto the destination. Throws Error(Io) on failure.
  void commit();

 private:
  std::filesystem::path destination_;
  std::filesystem::path temp_;  // empty once committed or moved from
};

// Stages then commits at once: an atomic write of one array.
void write_npy(const std::filesystem::path& file, const NpyArray& array);

// Convenience: a float32 array of `shape` holding `values` (numel must match).
NpyArray make_f32(std::vector<int64_t> shape, std::span<const float> values);

// Throws Error(Io) unless `file`'s directory exists (so a run can fail before computing).
void check_writable_destination(const std::filesystem::path& file, const std::string& what);

}  // namespace attnfuse::io
