// .npy reading (strict header parser: anything we would have to guess about is rejected) and
// atomic writing (temp file in the destination's directory, then rename).
#include "io/npy.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "attnfuse/error.hpp"

namespace attnfuse::io {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw Error(ErrorCode::Io, fmt::format("{}: {}", name, problem));
}

// A tiny cursor over the header text, which is a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* where) {
    if (!eat(c)) bad(fmt::format("expected '{}' {}", c, where));
  }
  bool at_end() {
    skip_ws();
    return pos_ >= s_.size();
  }
  std::string string_literal() {
    skip_ws();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) bad("expected a quoted string");
    const char q = s_[pos_++];
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != q) ++pos_;
    if (pos_ >= s_.size()) bad("unterminated string");
    return std::string(s_.substr(start, pos_++ - start));
  }
  bool boolean() {
    skip_ws();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("expected True or False for 'fortran_order'");
  }
  std::vector<int64_t> shape_tuple() {
    expect('(', "to open 'shape'");
    std::vector<int64_t> dims;
    while (!eat(')')) {
      skip_ws();
      int64_t v = 0;
      size_t digits = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) bad("shape dimension too large");
        v = v * 10 + (s_[pos_++] - '0');
        ++digits;
      }
      if (digits == 0) bad("expected a non-negative integer in 'shape'");
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 longs
      dims.push_back(v);
      if (!eat(',')) {
        expect(')', "to close 'shape'");
        break;
      }
    }
    return dims;
  }
  [[noreturn]] void bad(const std::string& what) const {
    fail(name_, fmt::format("bad .npy header ({} at offset {} of \"{}\")", what, pos_, s_));
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  const std::string& name_;
};

// Maps a descr string to our dtype, or explains why it is refused.
NpyDType parse_descr(const std::string& d, const std::string& name) {
  if (d.size() < 3) fail(name, fmt::format("unsupported dtype '{}'", d));
  const char order = d[0];
  const std::string kind = d.substr(1);
  const bool one_byte = kind == "b1" || kind == "u1";
  if (order == '>' && !one_byte)
    fail(name, fmt::format("big-endian data ('{}') is not supported: save it little-endian, "
                           "e.g. arr.astype('<{}')", d, kind));
  if (order != '<' && order != '|' && order != '=' && !(one_byte && order == '>'))
    fail(name, fmt::format("unsupported dtype '{}'", d));
  if (kind == "f4") return NpyDType::F32;
  if (kind == "b1") return NpyDType::Bool;
  if (kind == "u1") return NpyDType::U8;
  if (kind == "i4") return NpyDType::I32;
  if (kind == "i8") return NpyDType::I64;
  std::string hint = "float32 for tensors, bool or uint8 for block masks";
  if (kind == "f8" || kind == "f2")
    hint = "save tensors as float32, e.g. arr.astype(np.float32)";
  fail(name, fmt::format("dtype '{}' is not supported ({})", d, hint));
}

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& name) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail(name, "negative dimension in shape");
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 8 / d) fail(name, "shape too large");
    n *= d;
  }
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

const char* descr_of(NpyDType t) {
  switch (t) {
    case NpyDType::F32: return "<f4";
    case NpyDType::Bool: return "|b1";
    case NpyDType::U8: return "|u1";
    case NpyDType::I32: return "<i4";
    case NpyDType::I64: return "<i8";
  }
  return "?";
}

}  // namespace

const char* npy_dtype_name(NpyDType t) {
  switch (t) {
    case NpyDType::F32: return "float32";
    case NpyDType::Bool: return "bool";
    case NpyDType::U8: return "uint8";
    case NpyDType::I32: return "int32";
    case NpyDType::I64: return "int64";
  }
  return "?";
}

int npy_dtype_size(NpyDType t) {
  switch (t) {
    case NpyDType::F32: return 4;
    case NpyDType::Bool: return 1;
    case NpyDType::U8: return 1;
    case NpyDType::I32: return 4;
    case NpyDType::I64: return 8;
  }
  return 1;
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::span<const float> NpyArray::f32() const {
  if (dtype != NpyDType::F32) throw Error(ErrorCode::Internal, "NpyArray::f32 on a non-float32 array");
  return {reinterpret_cast<const float*>(data.data()), static_cast<size_t>(numel())};
}

std::span<float> NpyArray::f32() {
  if (dtype != NpyDType::F32) throw Error(ErrorCode::Internal, "NpyArray::f32 on a non-float32 array");
  return {reinterpret_cast<float*>(data.data()), static_cast<size_t>(numel())};
}

std::vector<uint8_t> NpyArray::to_mask(const std::string& what) const {
  const auto n = static_cast<size_t>(numel());
  std::vector<uint8_t> out(n);
  switch (dtype) {
    case NpyDType::Bool:
    case NpyDType::U8:
      for (size_t i = 0; i < n; ++i) out[i] = std::to_integer<uint8_t>(data[i]) != 0;
      break;
    case NpyDType::I32:
      for (size_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, data.data() + 4 * i, 4);
        out[i] = v != 0;
      }
      break;
    case NpyDType::I64:
      for (size_t i = 0; i < n; ++i) {
        int64_t v;
        std::memcpy(&v, data.data() + 8 * i, 8);
        out[i] = v != 0;
      }
      break;
    case NpyDType::F32:
      throw Error(ErrorCode::Io, fmt::format("{}: is float32; a block mask must be bool or uint8 "
                                             "(e.g. arr.astype(np.bool_))", what));
  }
  return out;
}

std::string NpyArray::shape_string() const { return shape_text(shape); }

NpyArray parse_npy(std::span<const std::byte> bytes, const std::string& name) {
  auto byte_at = [&](size_t i) { return std::to_integer<uint8_t>(bytes[i]); };
  if (bytes.size() < kMagicLen || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    fail(name, "not a .npy file (missing the \\x93NUMPY magic)");
  if (bytes.size() < kMagicLen + 2) fail(name, "truncated .npy header");
  const int major = byte_at(6);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    if (bytes.size() < 10) fail(name, "truncated .npy header");
    header_len = byte_at(8) | (static_cast<size_t>(byte_at(9)) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(name, "truncated .npy header");
    header_len = byte_at(8) | (static_cast<size_t>(byte_at(9)) << 8) |
                 (static_cast<size_t>(byte_at(10)) << 16) | (static_cast<size_t>(byte_at(11)) << 24);
    offset = 12;
  } else {
    fail(name, fmt::format("unsupported .npy format version {}.{}", major, byte_at(7)));
  }
  if (bytes.size() < offset + header_len) fail(name, "truncated .npy header");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + offset, header_len);
  HeaderParser p(text, name);

  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  p.expect('{', "at the start of the header");
  while (!p.eat('}')) {
    const std::string key = p.string_literal();
    p.expect(':', "after a key");
    if (key == "descr") {
      p.skip_ws();
      if (p.eat('[')) fail(name, "structured dtypes are not supported");
      descr = p.string_literal();
    } else if (key == "fortran_order") {
      fortran = p.boolean();
    } else if (key == "shape") {
      shape = p.shape_tuple();
    } else {
      p.bad(fmt::format("unexpected key '{}'", key));
    }
    if (!p.eat(',')) {
      p.expect('}', "to close the header");
      break;
    }
  }
  if (!p.at_end()) p.bad("text after the header dict");
  if (!descr || !fortran || !shape) fail(name, "bad .npy header (needs descr, fortran_order and shape)");
  if (*fortran)
    fail(name, "fortran_order arrays are not supported: save a C-order array "
               "(np.ascontiguousarray(arr))");

  NpyArray a;
  a.dtype = parse_descr(*descr, name);
  a.shape = *shape;
  const int64_t n = checked_numel(a.shape, name);
  const auto want = static_cast<uint64_t>(n) * static_cast<uint64_t>(npy_dtype_size(a.dtype));
  const uint64_t have = bytes.size() - offset - header_len;
  if (have < want)
    fail(name, fmt::format("truncated: shape {} of {} needs {} data bytes, the file has {}",
                           shape_text(a.shape), npy_dtype_name(a.dtype), want, have));
  if (have > want)
    fail(name, fmt::format("corrupt: {} unexpected bytes after the {} data bytes of shape {}",
                           have - want, want, shape_text(a.shape)));
  const auto* begin = bytes.data() + offset + header_len;
  a.data.assign(begin, begin + want);
  return a;
}

NpyArray read_npy(const fs::path& file) {
  const std::string name = file.string();
  std::error_code ec;
  if (!fs::exists(file, ec)) fail(name, "no such file");
  if (fs::is_directory(file, ec)) fail(name, "is a directory, not a .npy file");
  std::FILE* f = std::fopen(name.c_str(), "rb");
  if (!f) fail(name, fmt::format("cannot open: {}", std::strerror(errno)));
  std::vector<std::byte> bytes;
  std::byte buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + got);
  const bool err = std::ferror(f) != 0;
  const int saved = errno;
  std::fclose(f);
  if (err) fail(name, fmt::format("read failed: {}", std::strerror(saved)));
  return parse_npy(bytes, name);
}

std::vector<std::byte> serialize_npy(const NpyArray& a) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                 descr_of(a.dtype), shape_text(a.shape));
  // Pad with spaces so the data starts 64-byte aligned, ending the header with '\n'.
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  const size_t want = static_cast<size_t>(a.numel()) * static_cast<size_t>(npy_dtype_size(a.dtype));
  if (a.data.size() != want)
    throw Error(ErrorCode::Internal, "serialize_npy: data size does not match the shape");

  std::vector<std::byte> out;
  out.reserve(total + want);
  for (size_t i = 0; i < kMagicLen; ++i) out.push_back(static_cast<std::byte>(kMagic[i]));
  out.push_back(static_cast<std::byte>(v2 ? 2 : 1));
  out.push_back(std::byte{0});
  const size_t hl = dict.size();
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out.push_back(static_cast<std::byte>((hl >> (8 * i)) & 0xff));
  for (char c : dict) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

void check_writable_destination(const fs::path& file, const std::string& what) {
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(file.string(), fmt::format("cannot write {}: directory {} does not exist", what, dir.string()));
  if (fs::is_directory(file, ec)) fail(file.string(), fmt::format("cannot write {}: is a directory", what));
  if (::access(dir.c_str(), W_OK) != 0)
    fail(file.string(), fmt::format("cannot write {}: directory {} is not writable", what, dir.string()));
}

StagedFile::StagedFile(fs::path destination, std::span<const std::byte> bytes)
    : destination_(std::move(destination)) {
  static std::atomic<unsigned> counter{0};
  const std::string name = destination_.string();
  check_writable_destination(destination_, "the output");
  const fs::path dir = destination_.has_parent_path() ? destination_.parent_path() : fs::path(".");
  temp_ = dir / fmt::format(".{}.tmp.{}.{}", destination_.filename().string(),
                            static_cast<long>(::getpid()), counter++);
  std::FILE* f = std::fopen(temp_.c_str(), "wb");
  if (!f) {
    const int saved = errno;
    temp_.clear();
    fail(name, fmt::format("cannot create a temp file next to it: {}", std::strerror(saved)));
  }
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int saved = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::error_code ec;
    fs::remove(temp_, ec);
    temp_.clear();
    fail(name, fmt::format("write failed: {}", std::strerror(saved)));
  }
}

StagedFile::StagedFile(StagedFile&& other) noexcept
    : destination_(std::move(other.destination_)), temp_(std::move(other.temp_)) {
  other.temp_.clear();
}

StagedFile::~StagedFile() {
  if (!temp_.empty()) {
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

void StagedFile::commit() {
  if (temp_.empty()) throw Error(ErrorCode::Internal, "StagedFile::commit twice");
  std::error_code ec;
  fs::rename(temp_, destination_, ec);
  if (ec) fail(destination_.string(), fmt::format("cannot replace: {}", ec.message()));
  temp_.clear();
}

void write_npy(const fs::path& file, const NpyArray& array) {
  StagedFile staged(file, serialize_npy(array));
  staged.commit();
}

NpyArray make_f32(std::vector<int64_t> shape, std::span<const float> values) {
  NpyArray a;
  a.dtype = NpyDType::F32;
  a.shape = std::move(shape);
  if (static_cast<size_t>(a.numel()) != values.size())
    throw Error(ErrorCode::Internal, "make_f32: value count does not match the shape");
  const auto* p = reinterpret_cast<const std::byte*>(values.data());
  a.data.assign(p, p + values.size_bytes());
  return a;
}

}  // namespace attnfuse::io
