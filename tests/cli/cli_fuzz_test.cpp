// `attnfuse run` on mutated inputs: page tables and document offsets holding int32's and int64's
// extremes, entries dropped or repeated, and .npy files with corrupted headers, truncated or
// extended. Every run must end in a checked result (exit 0) or in one "attnfuse: error:" line
// (exit 2): never a failed check (1), an internal error (3) or a crash. Under `make sanitize`,
// where every sanitizer report aborts the CLI, this is how an input reaching undefined behaviour
// shows up (the first such run found an int32 overflow in PagedKV::kv_len). Fixed seeds, and a
// fresh one printed on failure.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cli_harness.hpp"

namespace attnfuse::clitest {
namespace {

constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min(), kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min(), kI64Max = std::numeric_limits<int64_t>::max();

int64_t pick(std::mt19937_64& rng, const std::vector<int64_t>& v) { return v[rng() % v.size()]; }

// Replaces one entry with an extreme or nearby value, drops the tail or repeats the list.
void mutate(std::vector<int64_t>& v, io::NpyDType dtype, std::mt19937_64& rng, const std::vector<int64_t>& near) {
  std::vector<int64_t> values = {0, 1, -1, kI32Min, kI32Max, kI32Min + 1, kI32Max - 1};
  if (dtype == io::NpyDType::I64) values.insert(values.end(), {kI64Min, kI64Max, int64_t{1} << 40, -(int64_t{1} << 33)});
  values.insert(values.end(), near.begin(), near.end());
  switch (rng() % 4) {
    case 0:
    case 1:
      if (!v.empty()) v[rng() % v.size()] = pick(rng, values);
      break;
    case 2: v.resize(rng() % (v.size() + 1)); break;
    default: v.insert(v.end(), v.begin(), v.end()); break;
  }
}

// Exit 0 (the run's --check passed), or exit 2 with exactly one "attnfuse: error:" line.
void expect_clean(const CliResult& r, const std::string& what) {
  if (r.exit_code == 0) return;
  EXPECT_EQ(r.exit_code, 2) << what << "\nstdout: " << r.out << "\nstderr: " << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << what << "\n" << r.err;
  EXPECT_EQ(lines[0].rfind("attnfuse: error: ", 0), 0u) << what << "\n" << lines[0];
}

std::string list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, " ")); }

void fuzz_page_tables(uint64_t seed, int runs) {
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  // Q [2, 4, 2, 8]; 6 pages of 4 rows (NHD), 2 KV heads: sequence 0 pages 0, 3, 5 (10 keys),
  // sequence 1 pages 1, 2 (8 keys).
  write_f32(dir / "q.npy", {2, 4, 2, 8}, random_normal(2 * 4 * 2 * 8, rng));
  write_f32(dir / "kp.npy", {6, 4, 2, 8}, random_normal(6 * 4 * 2 * 8, rng));
  write_f32(dir / "vp.npy", {6, 4, 2, 8}, random_normal(6 * 4 * 2 * 8, rng));
  const char* programs[] = {"softmax(causal(scaled_dot_product(Q, K))) @ V", "softmax(causal(rope(Q, K))) @ V",
                            "softmax(alibi(sliding_window(scaled_dot_product(Q, K), 3))) @ V"};
  for (int run = 0; run < runs; ++run) {
    const io::NpyDType dtype = rng() % 2 ? io::NpyDType::I32 : io::NpyDType::I64;
    std::vector<int64_t> indices = {0, 3, 5, 1, 2}, indptr = {0, 3, 5}, last = {2, 4};
    for (auto* v : {&indices, &indptr, &last})
      if (rng() % 2) mutate(*v, dtype, rng, {4, 5, 6, 7, 10});
    write_ints(dir / "pi.npy", indices, dtype);
    write_ints(dir / "pp.npy", indptr, dtype);
    write_ints(dir / "pl.npy", last, dtype);
    const std::string program = programs[rng() % 3];
    expect_clean(run_cli({"run", program, "--q", (dir / "q.npy").string(), "--k-pages", (dir / "kp.npy").string(),
                          "--v-pages", (dir / "vp.npy").string(), "--page-indices", (dir / "pi.npy").string(),
                          "--page-indptr", (dir / "pp.npy").string(), "--last-page-len", (dir / "pl.npy").string(),
                          "--device", "cpu", "--check"},
                         dir),
                 program + " indices " + list(indices) + " indptr " + list(indptr) + " last " + list(last));
  }
}

// q.npy and k.npy of shape [1, 2, n, 8] (k.npy serves as V too).
void write_qk(const TempDir& dir, int64_t n, std::mt19937_64& rng) {
  for (const char* name : {"q.npy", "k.npy"}) write_f32(dir / name, {1, 2, n, 8}, random_normal(size_t(2 * n * 8), rng));
}

void fuzz_documents(uint64_t seed, int runs) {
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  write_qk(dir, 20, rng);
  const char* programs[] = {"softmax(document(causal(scaled_dot_product(Q, K)))) @ V",
                            "softmax(document(sliding_window(causal(rope(Q, K)), 4))) @ V"};
  for (int run = 0; run < runs; ++run) {
    const io::NpyDType tq = rng() % 2 ? io::NpyDType::I32 : io::NpyDType::I64;
    const io::NpyDType tk = rng() % 4 ? tq : (tq == io::NpyDType::I32 ? io::NpyDType::I64 : io::NpyDType::I32);
    std::vector<int64_t> cq = {0, 7, 20}, ck = {0, 7, 20};
    for (auto [v, t] : {std::pair{&cq, tq}, std::pair{&ck, tk}})
      if (rng() % 3) mutate(*v, t, rng, {19, 20, 21, 7});
    write_ints(dir / "cq.npy", cq, tq);
    write_ints(dir / "ck.npy", ck, tk);
    const std::string program = programs[rng() % 2];
    expect_clean(run_cli({"run", program, "--q", (dir / "q.npy").string(), "--k", (dir / "k.npy").string(), "--v",
                          (dir / "k.npy").string(), "--cu-seqlens-q", (dir / "cq.npy").string(), "--cu-seqlens-k",
                          (dir / "ck.npy").string(), "--device", "cpu", "--check"},
                         dir),
                 program + " cu_seqlens_q " + list(cq) + " cu_seqlens_k " + list(ck));
  }
}

std::vector<char> bytes_of(const std::filesystem::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void fuzz_npy(uint64_t seed, int runs) {
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  write_qk(dir, 5, rng);
  const std::vector<char> good = bytes_of(dir / "q.npy");
  const size_t header_end = 10 + static_cast<size_t>(uint8_t(good[8]) | uint8_t(good[9]) << 8);
  for (int run = 0; run < runs; ++run) {
    std::vector<char> b = good;
    std::string what;
    switch (rng() % 4) {
      case 0:  // bytes of the magic, version, length or header text
        for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) {
          const size_t at = rng() % header_end;
          b[at] = static_cast<char>(rng() % 256);
          what += fmt::format("byte {} ", at);
        }
        break;
      case 1:  // truncated
        b.resize(rng() % b.size());
        what = fmt::format("truncated to {}", b.size());
        break;
      case 2: {  // the header's length field
        const uint16_t len = static_cast<uint16_t>(pick(rng, {0, 1, 0xffff, int64_t(header_end), int64_t(header_end) - 11}));
        b[8] = static_cast<char>(len & 0xff), b[9] = static_cast<char>(len >> 8);
        what = fmt::format("header length {}", len);
        break;
      }
      default: {  // trailing bytes
        const size_t n = 1 + rng() % 64;
        for (size_t i = 0; i < n; ++i) b.push_back(static_cast<char>(rng() % 256));
        what = fmt::format("{} trailing bytes", n);
      }
    }
    std::ofstream(dir / "bad.npy", std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
    expect_clean(run_cli({"run", "softmax(causal(scaled_dot_product(Q, K))) @ V", "--q", (dir / "bad.npy").string(),
                          "--k", (dir / "k.npy").string(), "--v", (dir / "k.npy").string(), "--device", "cpu",
                          "--check"},
                         dir),
                 what);
  }
}

TEST(CliFuzz, PageTables) {
  fuzz_page_tables(1, 60);
  fuzz_page_tables(fresh_seed(), 30);
}

TEST(CliFuzz, DocumentOffsets) {
  fuzz_documents(2, 60);
  fuzz_documents(fresh_seed(), 30);
}

TEST(CliFuzz, NpyFiles) {
  fuzz_npy(3, 60);
  fuzz_npy(fresh_seed(), 30);
}

}  // namespace
}  // namespace attnfuse::clitest
