// One attention problem as the CLI holds it: owning buffers for Q/K/V/O (in the compute dtype),
// LSE, bias and BlockMask, built from .npy files or from random numbers, and viewed as
// AttentionArgs for the library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/block_mask.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/paged_kv.hpp"
#include "attnfuse/tensor.hpp"
#include "options.hpp"

namespace attnfuse::cli {

// An owning, 64-byte aligned, contiguous BHSD host tensor of one dtype.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::array<int64_t, 4> shape);

  DType dtype() const { return dtype_; }
  const std::array<int64_t, 4>& shape() const { return shape_; }
  int64_t numel() const { return shape_[0] * shape_[1] * shape_[2] * shape_[3]; }
  TensorView view() const;

  // Stores fp32 values rounded to the dtype (round to nearest even).
  void fill_from_f32(std::span<const float> values);
  std::vector<float> to_f32() const;
  // NaN in every element, so an element the kernel forgot to write cannot pass a check.
  void poison();

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  DType dtype_ = DType::F32;
  std::array<int64_t, 4> shape_{0, 0, 0, 0};
  std::unique_ptr<std::byte[], Free> data_;
};

// Document offsets as the CLI holds them: int64 values, one row or one row per batch entry.
struct Offsets {
  std::vector<int64_t> values;  // batch * length, row-major
  int64_t batch = 1, length = 0;
  SeqOffsetsView view() const { return SeqOffsetsView::contiguous(values.data(), length, batch); }
  int64_t documents() const { return length - 1; }
};

struct Problem {
  Shape shape;
  DType dtype = DType::F32;
  HostTensor q, k, v, out;
  bool want_lse = false;
  std::vector<float> lse;  // [B, Hq, Nq] when want_lse
  std::optional<HostTensor> bias;
  std::optional<BlockMask> block_mask;
  std::optional<Offsets> cu_seqlens_q, cu_seqlens_k;  // document
  std::optional<int64_t> q_offset;
  // Paged KV cache (--k-pages ... or --shape with --page-size): K and V live here and k / v are
  // empty; shape.len_kv is the longest sequence.
  std::optional<PagedCache> paged;
  bool paged_table_settled = false;  // --paged-table-settled (PagedKV::table_settled)
  // --rope-cos / --rope-sin: the caller's RoPE tables, [positions, pairs] each.
  struct RopeTables {
    std::vector<float> cos, sin;
    int64_t positions = 0, pairs = 0;
  };
  std::optional<RopeTables> rope_tables;

  // Views of the buffers above (out and lse are written by a run).
  AttentionArgs args();
};

// Where `run`/`bench` read their tensors from (empty path: not given).
struct FileInputs {
  std::string q, k, v, bias, block_mask;
  std::string cu_seqlens_q, cu_seqlens_k;  // document: int32/int64 [num_docs + 1] or [B, num_docs + 1]
  std::optional<BlockSize> block_size;  // default 64,64
  std::optional<int64_t> q_offset;
  // Paged KV cache instead of --k/--v: float32 page tensors, int32/int64 page table.
  std::string k_pages, v_pages, page_indices, page_indptr, last_page_len;
  std::string kv_layout;  // nhd (default) | hnd
  std::string rope_cos, rope_sin;  // float32 [positions, rotary_dim / 2]: the caller's RoPE tables
  bool paged() const { return !k_pages.empty() || !v_pages.empty() || !page_indices.empty() ||
                              !page_indptr.empty() || !last_page_len.empty(); }
};

// --rope-cos / --rope-sin into p (both or neither; float32 [positions, pairs], same shape);
// validate() then checks them against the program and the call.
void load_rope_tables(Problem& p, const FileInputs& files);

// Loads float32 C-order .npy inputs and converts them to `dtype`. Checks what the CLI can tell
// better than validate() (file names, ranks, missing or unneeded bias / block mask, block grid
// size) and throws Error / UsageError; validate() checks the rest before any kernel runs.
Problem load_problem(const KernelSpec& spec, const FileInputs& files, DType dtype, bool want_lse);

// Random normal(0,1) inputs (and a random bias / block grid / document split when the program
// needs them). Documents: 1 to 8 of them, the boundaries uniform draws from the seed (empty
// documents possible), shared by the batch, and the same for queries and keys when Nq = Nk.
// page_size > 0: K/V stored in shuffled pages of that size (every sequence Nk long, NHD).
Problem random_problem(const KernelSpec& spec, const Shape& shape, uint64_t seed, DType dtype,
                       std::optional<BlockSize> block_size, std::optional<int64_t> q_offset,
                       bool want_lse, int64_t page_size = 0);

// The dtype a bias tensor is handed to the kernel in.
DType bias_dtype(DType compute);

// Refuses problems whose buffers would not fit in memory (instead of being killed later).
void check_fits_in_memory(const Shape& shape, DType dtype, bool with_bias);

}  // namespace attnfuse::cli
