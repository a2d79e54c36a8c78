// Printable names of the public enums (used by printers, errors and the CLI).
#include "attnfuse/error.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"

namespace attnfuse {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Parse: return "parse error";
    case ErrorCode::Verify: return "invalid program";
    case ErrorCode::Shape: return "shape error";
    case ErrorCode::DType: return "dtype error";
    case ErrorCode::MissingTensor: return "missing tensor";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Io: return "I/O error";
    case ErrorCode::Device: return "device error";
    case ErrorCode::Internal: return "internal error";
  }
  return "error";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
  }
  return "?";
}

int dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

const char* score_kind_name(ScoreKind k) {
  switch (k) {
    case ScoreKind::ScaledDot: return "scaled_dot_product";
    case ScoreKind::Rope: return "rope";
    case ScoreKind::RopeWindow: return "rope_window";
  }
  return "?";
}

const char* mask_kind_name(MaskKind k) {
  switch (k) {
    case MaskKind::Causal: return "causal";
    case MaskKind::SlidingWindow: return "sliding_window";
    case MaskKind::BlockSparse: return "block_sparse";
    case MaskKind::Document: return "document";
  }
  return "?";
}

const char* modifier_kind_name(ModifierKind k) {
  switch (k) {
    case ModifierKind::Alibi: return "alibi";
    case ModifierKind::AdditiveBias: return "additive_bias";
    case ModifierKind::Softcap: return "softcap";
  }
  return "?";
}

const char* norm_kind_name(NormKind k) {
  switch (k) {
    case NormKind::Softmax: return "softmax";
    case NormKind::ReluAttention: return "relu_attention";
  }
  return "?";
}

const char* target_name(Target t) { return t == Target::Cpu ? "cpu" : "cuda"; }

const char* rope_style_name(RopeStyle s) { return s == RopeStyle::Neox ? "neox" : "gptj"; }

const char* rope_mode_name(RopeMode m) {
  switch (m) {
    case RopeMode::Auto: return "auto";
    case RopeMode::Fused: return "fused";
    case RopeMode::Prerotate: return "prerotate";
  }
  return "?";
}

const char* rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::None: return "default";
    case RopeScaling::Linear: return "linear";
    case RopeScaling::Dynamic: return "dynamic";
    case RopeScaling::Yarn: return "yarn";
    case RopeScaling::Llama3: return "llama3";
    case RopeScaling::Longrope: return "longrope";
  }
  return "?";
}

}  // namespace attnfuse
