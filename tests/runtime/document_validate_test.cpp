// validate() on document programs: the offsets' checks with their exact messages, and the CUDA
// backend's refusal (document masks run on the CPU for now).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "codegen/cuda/emit.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

std::string error_of(const KernelSpec& spec, const AttentionArgs& args) {
  try {
    validate(spec, args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ValidateDocument, ExactMessages) {
  KernelSpec spec;
  spec.masks.add(MaskKind::Document);
  AttentionCase c({1, 1, 1, 6, 8, 16}, {}, 1);
  const std::vector<int64_t> q = {0, 2, 6}, k = {0, 5, 8}, k_end = {0, 5, 7}, k_start = {1, 5, 8};
  AttentionArgs a = c.args();
  a.cu_seqlens_q = SeqOffsetsView::contiguous(q.data(), 3);
  a.cu_seqlens_k = SeqOffsetsView::contiguous(k.data(), 3);
  EXPECT_EQ(error_of(spec, a), "");
  a.cu_seqlens_k = SeqOffsetsView::contiguous(k_end.data(), 3);
  EXPECT_EQ(error_of(spec, a), "cu_seqlens_k must end at Nk = 8 but its last entry is 7");
  a.cu_seqlens_k = SeqOffsetsView::contiguous(k_start.data(), 3);
  EXPECT_EQ(error_of(spec, a), "cu_seqlens_k must start at 0 but entry 0 is 1");
  a.cu_seqlens_k = SeqOffsetsView::contiguous(k.data(), 0);
  EXPECT_EQ(error_of(spec, a),
            "cu_seqlens_k has 0 entries; it needs num_docs + 1 >= 1 (e.g. [0, N] for one document)");
}

TEST(ValidateDocument, EmptyCallWithNoDocuments) {
  // Zero-sized sequences: a single offset [0] (no documents) is a valid split of nothing.
  KernelSpec spec;
  spec.masks.add(MaskKind::Document);
  AttentionCase c({1, 1, 1, 0, 0, 16}, {}, 1);
  const std::vector<int32_t> zero = {0};
  AttentionArgs a = c.args();
  a.cu_seqlens_q = a.cu_seqlens_k = SeqOffsetsView::contiguous(zero.data(), 1);
  EXPECT_EQ(error_of(spec, a), "");
  run_cpu(spec, a);
}

TEST(ValidateDocument, CudaRunsDocumentMasksButNotWithBlockSparse) {
  KernelSpec spec;
  spec.target = Target::Cuda;
  spec.dtype = DType::BF16;
  spec.head_dim = 128;
  spec.masks.add(MaskKind::Document);
  EXPECT_NO_THROW(codegen::cuda::check_supported(spec));
  spec.masks.add(MaskKind::BlockSparse);
  try {
    codegen::cuda::check_supported(spec);
    ADD_FAILURE() << "CUDA accepted block_sparse together with document";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("fold the documents"), std::string::npos) << e.what();
  }
}

TEST(ValidateDocument, DeviceOffsetsAreCheckedBySizeOnly) {
  // On CUDA the offsets are device memory: validate() must not read them (here: a pointer that
  // would crash if dereferenced), yet still checks their counts.
  KernelSpec spec;
  spec.masks.add(MaskKind::Document);
  std::vector<float> q(1 * 2 * 10 * 8), k(1 * 2 * 12 * 8), v(k.size()), o(q.size());
  AttentionArgs a;
  a.q = TensorView::contiguous(q.data(), DType::F32, {1, 2, 10, 8});
  a.k = TensorView::contiguous(k.data(), DType::F32, {1, 2, 12, 8});
  a.v = TensorView::contiguous(v.data(), DType::F32, {1, 2, 12, 8});
  a.out = TensorView::contiguous(o.data(), DType::F32, {1, 2, 10, 8});
  const auto* bogus = reinterpret_cast<const int32_t*>(uintptr_t{16});
  a.cu_seqlens_q = SeqOffsetsView::contiguous(bogus, 3);
  a.cu_seqlens_k = SeqOffsetsView::contiguous(bogus, 3);
  EXPECT_NO_THROW(validate(spec, a, IndexMemory::Device));
  a.cu_seqlens_k = SeqOffsetsView::contiguous(bogus, 4);
  EXPECT_THROW(validate(spec, a, IndexMemory::Device), Error);
}

}  // namespace
}  // namespace attnfuse::test
