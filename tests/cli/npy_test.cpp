// Unit tests of the .npy reader/writer the CLI uses: round trips, files as NumPy writes them, and
// every kind of bad file rejected with Error(Io) naming the file; atomic writes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "attnfuse/error.hpp"
#include "cli_harness.hpp"
#include "io/npy.hpp"

namespace attnfuse::clitest {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// A .npy file as NumPy 1.x/2.x writes it: magic, version, little-endian header length, a dict
// padded with spaces to a 64-byte boundary and ending in '\n', then the raw data.
std::vector<std::byte> numpy_style(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const size_t n = header.size();
  file += static_cast<char>(n & 0xff);
  file += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    file += static_cast<char>((n >> 16) & 0xff);
    file += static_cast<char>((n >> 24) & 0xff);
  }
  return bytes_of(file + header + data);
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

// Expects Error(Io) whose message names `name` and contains `needle`.
void expect_io_error(const std::vector<std::byte>& bytes, const std::string& needle) {
  try {
    io::parse_npy(bytes, "bad.npy");
    ADD_FAILURE() << "accepted a bad file (expected: " << needle << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Npy, RoundTripsFloat32OfEveryRank) {
  TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {2, 3}, {2, 0, 4}, {1, 2, 3, 4}};
  for (const auto& shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 3.0f;
    write_f32(dir / "a.npy", shape, values);
    const io::NpyArray a = io::read_npy(dir / "a.npy");
    EXPECT_EQ(a.dtype, io::NpyDType::F32);
    EXPECT_EQ(a.shape, shape);
    ASSERT_EQ(a.f32().size(), values.size());
    EXPECT_TRUE(std::equal(values.begin(), values.end(), a.f32().begin()));
  }
}

TEST(Npy, HeaderIsNumpyCompatible) {
  const auto bytes = io::serialize_npy(io::make_f32({2, 3}, std::vector<float>(6, 1.0f)));
  const std::string s(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_EQ(s.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<unsigned char>(s[8]) | (static_cast<unsigned char>(s[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u) << "data must start 64-byte aligned";
  const std::string header = s.substr(10, header_len);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': (2, 3)"), std::string::npos) << header;
  // One-dimensional shapes need Python's trailing comma.
  const auto one = io::serialize_npy(io::make_f32({4}, std::vector<float>(4)));
  EXPECT_NE(std::string(reinterpret_cast<const char*>(one.data()), one.size()).find("(4,)"), std::string::npos);
}

TEST(Npy, ReadsWhatNumpyWrites) {
  const auto a = io::parse_npy(
      numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32_bytes({1.5f, -2.0f})),
      "a.npy");
  ASSERT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a.f32()[0], 1.5f);
  EXPECT_EQ(a.f32()[1], -2.0f);
  // Format 2.0 (4-byte header length), double quotes, no trailing comma.
  const auto b = io::parse_npy(
      numpy_style("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1, 1)}", f32_bytes({7.0f}), 2),
      "b.npy");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(b.f32()[0], 7.0f);
}

TEST(Npy, ReadsMaskDtypes) {
  const auto b1 = io::parse_npy(
      numpy_style("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x00\x01", 3)),
      "m.npy");
  EXPECT_EQ(b1.dtype, io::NpyDType::Bool);
  EXPECT_EQ(b1.to_mask("m.npy"), (std::vector<uint8_t>{1, 0, 1}));
  const auto u1 = io::parse_npy(
      numpy_style("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", std::string("\x00\x07", 2)),
      "m.npy");
  EXPECT_EQ(u1.to_mask("m.npy"), (std::vector<uint8_t>{0, 1}));
  std::string i4(8, '\0');
  i4[4] = 2;
  const auto a4 = io::parse_npy(numpy_style("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", i4), "m.npy");
  EXPECT_EQ(a4.to_mask("m.npy"), (std::vector<uint8_t>{0, 1}));
  std::string i8(16, '\0');
  i8[0] = 1;
  const auto a8 = io::parse_npy(numpy_style("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", i8), "m.npy");
  EXPECT_EQ(a8.to_mask("m.npy"), (std::vector<uint8_t>{1, 0}));
  // A float array is not a mask.
  const auto f = io::parse_npy(numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                                           f32_bytes({1.0f})), "m.npy");
  EXPECT_THROW(f.to_mask("m.npy"), Error);
}

TEST(Npy, RejectsBadFilesNamingTheProblem) {
  const std::string ok_data = f32_bytes({1.0f, 2.0f});
  expect_io_error(bytes_of("PK\x03\x04 this is a zip"), "not a .npy file");
  expect_io_error(bytes_of(std::string("\x93NUMPY", 6)), "truncated");
  expect_io_error(numpy_style("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", ok_data), "fortran_order");
  expect_io_error(numpy_style("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", ok_data), "big-endian");
  expect_io_error(numpy_style("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", ok_data), "float32");
  expect_io_error(numpy_style("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", ok_data), "not supported");
  expect_io_error(numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", ok_data), "truncated");
  expect_io_error(numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", ok_data), "unexpected bytes");
  expect_io_error(numpy_style("{'descr': '<f4', 'shape': (2,), }", ok_data), "fortran_order");
  expect_io_error(numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", ok_data), "unexpected key");
  expect_io_error(numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", ok_data), "bad .npy header");
  expect_io_error(numpy_style("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", ok_data), "structured");
  expect_io_error(numpy_style("'descr': '<f4'", ok_data), "bad .npy header");
  expect_io_error(numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", ok_data, 7), "version");
  // Header length pointing past the end of the file.
  auto cut = numpy_style("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "");
  cut.resize(40);
  expect_io_error(cut, "truncated");
}

TEST(Npy, MissingFileAndDirectoryAreIoErrors) {
  TempDir dir;
  try {
    io::read_npy(dir / "nope.npy");
    ADD_FAILURE() << "read a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("nope.npy: no such file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(io::read_npy(dir.path()), Error);
}

TEST(Npy, WritesAreAtomicAndLeaveNoTempFiles) {
  TempDir dir;
  write_f32(dir / "o.npy", {2}, {1.0f, 2.0f});
  {
    // Staged but not committed: the destination keeps its old content, the temp file goes away.
    io::StagedFile staged(dir / "o.npy", io::serialize_npy(io::make_f32({1}, std::vector<float>{9.0f})));
    EXPECT_EQ(io::read_npy(dir / "o.npy").shape, (std::vector<int64_t>{2}));
  }
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{"o.npy"}));
  write_f32(dir / "o.npy", {1}, {9.0f});  // replaces
  EXPECT_EQ(io::read_npy(dir / "o.npy").f32()[0], 9.0f);
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{"o.npy"}));
  // A destination in a missing directory fails before anything is written.
  try {
    write_f32(dir / "missing" / "o.npy", {1}, {1.0f});
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{"o.npy"}));
}

}  // namespace
}  // namespace attnfuse::clitest
