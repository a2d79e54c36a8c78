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

TEST(ValidateDocument, CudaRefusesDocumentMasks) {
  KernelSpec spec;
  spec.target = Target::Cuda;
  spec.dtype = DType::BF16;
  spec.head_dim = 128;
  spec.masks.add(MaskKind::Document);
  try {
    codegen::cuda::check_supported(spec);
    ADD_FAILURE() << "CUDA accepted a document mask";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("run it on the CPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnfuse::test
