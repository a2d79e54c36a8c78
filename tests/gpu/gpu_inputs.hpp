// Inputs and checks of the GPU suite's decode, paged, document and block-sparse tests: random
// 16-bit Q/K/V (and bias) held on the host and copied to the device, paged caches built on the
// host (shuffled, optionally shared pages) with their page tables in device memory, one device
// call with poisoned outputs and a LaunchTuning, and the comparison with the float64 reference
// under gpu_harness's tolerance (DESIGN §3): max |O - ref| <= 2 x max |naive - ref| + 1e-5, LSE
// within gpu_harness.hpp's lse_tolerance and -inf exactly where the reference keeps no key (O = 0
// there).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "reference/reference.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/device_buffer.hpp"

namespace attnfuse::gpu_test {

using runtime::DeviceBuffer;
using runtime::LaunchTuning;

// The program compiled for CUDA.
KernelSpec cuda_spec(const std::string& program, DType dtype, int head_dim, RopeMode mode = RopeMode::Auto);

// A device copy of `bytes` bytes at `src`.
DeviceBuffer upload(const void* src, size_t bytes);
template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  return upload(v.data(), v.size() * sizeof(T));
}

// Normal(0, stddev) values rounded to a 16-bit dtype (bf16 / fp16 bit patterns).
std::vector<uint16_t> random16(DType dtype, size_t n, std::mt19937_64& rng, float stddev = 1.0f);

// One contiguous call's inputs: Q [B,Hq,Nq,D], K / V [B,Hkv,Nk,D] (BHSD) and, when the spec
// needs it, a bias [B,Hq,Nq,Nk] (fp32), on the host and on the device.
struct Dims {
  int64_t B = 1, Hq = 1, Hkv = 1, Nq = 1, Nk = 1;
  int D = 128;
};
std::string dims_name(const Dims& d);

struct Inputs {
  DType dtype = DType::BF16;
  Dims dims;
  std::vector<uint16_t> q, k, v;
  std::vector<float> bias;
  DeviceBuffer dq, dk, dv, dbias;
  // Host views (what the reference reads) and the same views on device memory; no outputs.
  AttentionArgs host, device;
};
// Fresh random inputs; k / v empty (shape 0) when `with_kv` is false (paged calls).
Inputs make_inputs(const KernelSpec& spec, const Dims& d, std::mt19937_64& rng, bool with_kv = true);

// What one device call wrote: O [B,Hq,Nq,D] (16-bit bit patterns) and LSE [B,Hq,Nq].
struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};
// Runs args (device pointers, outputs not set) with fresh outputs poisoned with 0xFF bytes (NaN;
// a bit pattern no kernel writes), synchronously, and downloads them.
Outputs run_device(const KernelSpec& spec, const AttentionArgs& args, const Dims& d,
                   const LaunchTuning& tuning = {});
// Calls run_device expecting Error(code) with `phrase` in its message, and checks that neither
// output was written.
void expect_refused(const KernelSpec& spec, const AttentionArgs& args, const Dims& d, ErrorCode code,
                    const std::string& phrase, const LaunchTuning& tuning = {});

// The float64 reference and the same-precision naive decomposition of one call (host args).
struct Expected {
  reference::Result ref, naive;
  Dims dims;
};
Expected expected(const KernelSpec& spec, const AttentionArgs& host, const Dims& d);

// gpu_harness's tolerance (see the top of this file); poison left in O or LSE (never written)
// and NaN fail.
::testing::AssertionResult matches(const Expected& e, DType dtype, const Outputs& got);
// Every bit of O and LSE equal.
::testing::AssertionResult bitwise_equal(const Outputs& a, const Outputs& b, const Dims& d);

std::string tuning_name(const LaunchTuning& t);

// ---- Paged KV caches --------------------------------------------------------------------------

// A page pool [num_pages, page_size, Hkv, D] (NHD) or [num_pages, Hkv, page_size, D] (HND) with
// the page table of `lengths`, on the host and on the device. Pages are handed out in a shuffled
// order with spare pages left over; with `share_prefix`, every sequence after the first reuses the
// first sequence's full pages for its own leading pages (prefix sharing), so a page appears in
// several sequences. Rows no sequence covers hold NaN.
struct PagedInputs {
  PagedKV::Layout layout = PagedKV::Layout::NHD;
  int64_t page_size = 0, num_pages = 0;
  std::vector<int64_t> lengths;
  std::vector<uint16_t> k_pool, v_pool;
  std::vector<int32_t> indices, indptr, last;
  DeviceBuffer dk, dv, dindices, dindptr, dlast;
  PagedKV host, device;  // device: page tensors and the three index spans in device memory
  // Sequence b's keys / values gathered from the pages: [1, Hkv, lengths[b], D] contiguous.
  std::vector<uint16_t> gather_k(int64_t b, int64_t Hkv, int D) const;
  std::vector<uint16_t> gather_v(int64_t b, int64_t Hkv, int D) const;
};
PagedInputs make_paged(DType dtype, PagedKV::Layout layout, const std::vector<int64_t>& lengths,
                       int64_t page_size, int64_t Hkv, int D, bool share_prefix, std::mt19937_64& rng);

const char* layout_name(PagedKV::Layout l);

// The fixture of the decode and sparse suites: skips without a CUDA device, and draws a fresh
// seed per test (printed by TRACE_SEED() so a failure can be replayed).
class SeededCudaTest : public ::testing::Test {
 protected:
  void SetUp() override;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace attnfuse::gpu_test

#define TRACE_SEED() SCOPED_TRACE("seed " + std::to_string(seed_))
