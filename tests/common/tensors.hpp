// Test utilities: owning random tensors in fp32/bf16/fp16 with arbitrary strides (BHSD, BSHD
// views, padded rows), NaN poisoning of outputs, and one attention call's worth of them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <optional>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/block_mask.hpp"
#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::test {

// How a logical [B, H, S, D] tensor sits in memory.
enum class Layout {
  Bhsd,    // contiguous
  Bshd,    // [B, S, H, D] buffer viewed as BHSD (what most models hold)
  Padded,  // BHSD with every row and head padded (strides larger than the sizes)
};
const char* layout_name(Layout l);

// Bit patterns written by poison(): NaNs no kernel produces, so an element that still holds one
// was never written.
constexpr uint32_t kPoisonF32 = 0x7fbadbadu;
constexpr uint16_t kPoison16 = 0x7fbau;  // a NaN in both bf16 and fp16

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::array<int64_t, 4> shape, Layout layout = Layout::Bhsd);
  // Any non-negative strides (elements); the storage covers the largest offset.
  HostTensor(DType dtype, std::array<int64_t, 4> shape, std::array<int64_t, 4> strides);
  // The view points into the storage: moves keep it valid, copies would not.
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;

  const TensorView& view() const { return view_; }
  DType dtype() const { return view_.dtype; }
  const std::array<int64_t, 4>& shape() const { return view_.shape; }
  int64_t numel() const { return view_.numel(); }

  float get(int64_t b, int64_t h, int64_t s, int64_t d) const;
  void set(int64_t b, int64_t h, int64_t s, int64_t d, float x);  // rounded to the dtype
  bool is_poison(int64_t b, int64_t h, int64_t s, int64_t d) const;
  // Normal(0, stddev) in every element, rounded to the dtype.
  void fill_random(std::mt19937_64& rng, float stddev = 1.0f);
  // Every byte of the storage, padding included, set to the poison pattern.
  void poison();
  // The raw storage (to check that nothing changed).
  const std::vector<std::byte>& storage() const { return storage_; }

 private:
  std::vector<std::byte> storage_;
  TensorView view_;
};

// An owned LSE output [B, H, N] (fp32), contiguous.
class HostLse {
 public:
  HostLse() = default;
  explicit HostLse(std::array<int64_t, 3> shape);
  HostLse(const HostLse&) = delete;
  HostLse& operator=(const HostLse&) = delete;
  HostLse(HostLse&&) = default;
  HostLse& operator=(HostLse&&) = default;
  const LseView& view() const { return view_; }
  float get(int64_t b, int64_t h, int64_t i) const;
  bool is_poison(int64_t b, int64_t h, int64_t i) const;
  void poison();

 private:
  std::vector<float> storage_;
  LseView view_;
};

struct Shape {
  int64_t B = 1, Hq = 1, Hkv = 1, Nq = 1, Nk = 1, D = 64;
  int64_t Dv = -1;  // -1: same as D
};

// Options of one attention call.
struct CaseOptions {
  DType dtype = DType::F32;
  Layout layout = Layout::Bhsd;
  bool lse = true;
  float stddev = 1.0f;                 // of Q, K and V
  bool bias = false;                   // additive_bias tensor
  bool bias_broadcast_batch = false;   // bias batch axis of size 1
  bool bias_broadcast_heads = false;   // bias head axis of size 1
  DType bias_dtype = DType::F32;
  std::optional<int64_t> q_offset;
};

// Owns Q, K, V, out (poisoned), optional LSE (poisoned), bias and BlockMask of one call.
class AttentionCase {
 public:
  AttentionCase(const Shape& shape, const CaseOptions& options, uint64_t seed);

  AttentionArgs args() const;
  void set_block_mask(BlockMask mask) { block_mask_ = std::move(mask); }
  void poison_outputs();

  Shape shape;
  CaseOptions options;
  HostTensor q, k, v, out;
  std::optional<HostLse> lse;
  std::optional<HostTensor> bias;

 private:
  std::optional<BlockMask> block_mask_;
};

// A BlockMask for the shape's lengths with a seeded mix of inactive, full and partial blocks
// (partial blocks keep a seeded half of their cells); one mask for all batches/heads when
// `broadcast`, else one per (b, query head).
BlockMask random_block_mask(const Shape& shape, int block_q, int block_k, uint64_t seed,
                            bool broadcast = false);

// A seed from the system's entropy, or ATTNFUSE_TEST_SEED where it is set (print it with
// SCOPED_TRACE so a failure can be replayed with that variable).
uint64_t fresh_seed();

// Spec built by hand: masks, modifiers in program order, norm, scalars.
KernelSpec make_spec(std::initializer_list<MaskKind> masks, std::initializer_list<ModifierKind> modifiers,
                     NormKind norm = NormKind::Softmax, ScalarArgs scalars = {});
// "softmax(softcap(causal(...)))"-style description for test traces.
std::string describe(const KernelSpec& spec);

}  // namespace attnfuse::test
