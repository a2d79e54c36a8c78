// Owning test tensors (any dtype, BHSD / BSHD / padded strides), poisoning, and attention cases.
#include "common/tensors.hpp"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/dtype.hpp"

namespace attnfuse::test {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Bhsd: return "BHSD";
    case Layout::Bshd: return "BSHD";
    case Layout::Padded: return "padded";
  }
  return "?";
}

HostTensor::HostTensor(DType dtype, std::array<int64_t, 4> shape, Layout layout) {
  const auto [B, H, S, D] = shape;
  std::array<int64_t, 4> strides{};
  int64_t elems = 0;
  switch (layout) {
    case Layout::Bhsd:
      strides = {H * S * D, S * D, D, 1};
      elems = B * H * S * D;
      break;
    case Layout::Bshd:
      strides = {S * H * D, D, H * D, 1};
      elems = B * S * H * D;
      break;
    case Layout::Padded: {
      const int64_t row = D + 3, head = S * row + 5;
      strides = {H * head + 7, head, row, 1};
      elems = B * strides[0];
      break;
    }
  }
  storage_.assign(static_cast<size_t>(std::max<int64_t>(elems, 1) * dtype_size(dtype)), std::byte{0});
  view_.data = storage_.data();
  view_.dtype = dtype;
  view_.shape = shape;
  view_.strides = strides;
}

HostTensor::HostTensor(DType dtype, std::array<int64_t, 4> shape, std::array<int64_t, 4> strides) {
  int64_t elems = 1;  // largest offset + 1
  for (int a = 0; a < 4; ++a) elems += shape[a] > 0 ? (shape[a] - 1) * strides[a] : 0;
  if (shape[0] * shape[1] * shape[2] * shape[3] == 0) elems = 0;
  storage_.assign(static_cast<size_t>(std::max<int64_t>(elems, 1) * dtype_size(dtype)), std::byte{0});
  view_.data = storage_.data();
  view_.dtype = dtype;
  view_.shape = shape;
  view_.strides = strides;
}

float HostTensor::get(int64_t b, int64_t h, int64_t s, int64_t d) const {
  return load_elem(view_.data, view_.dtype, view_.offset(b, h, s, d));
}

void HostTensor::set(int64_t b, int64_t h, int64_t s, int64_t d, float x) {
  store_elem(view_.data, view_.dtype, view_.offset(b, h, s, d), x);
}

bool HostTensor::is_poison(int64_t b, int64_t h, int64_t s, int64_t d) const {
  const int64_t i = view_.offset(b, h, s, d);
  if (view_.dtype != DType::F32) {
    uint16_t bits;
    std::memcpy(&bits, static_cast<const uint16_t*>(view_.data) + i, 2);
    return bits == kPoison16;
  }
  uint32_t bits;
  std::memcpy(&bits, static_cast<const float*>(view_.data) + i, 4);
  return bits == kPoisonF32;
}

void HostTensor::fill_random(std::mt19937_64& rng, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  const auto& s = view_.shape;
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t i = 0; i < s[2]; ++i)
        for (int64_t d = 0; d < s[3]; ++d) set(b, h, i, d, dist(rng));
}

void HostTensor::poison() {
  if (view_.dtype != DType::F32) {
    for (size_t i = 0; i + 2 <= storage_.size(); i += 2) std::memcpy(&storage_[i], &kPoison16, 2);
    return;
  }
  const float p = std::bit_cast<float>(kPoisonF32);
  for (size_t i = 0; i + 4 <= storage_.size(); i += 4) std::memcpy(&storage_[i], &p, 4);
}

HostLse::HostLse(std::array<int64_t, 3> shape) {
  storage_.assign(static_cast<size_t>(std::max<int64_t>(shape[0] * shape[1] * shape[2], 1)), 0.0f);
  view_ = LseView::contiguous(storage_.data(), shape);
}

float HostLse::get(int64_t b, int64_t h, int64_t i) const {
  return view_.data[b * view_.strides[0] + h * view_.strides[1] + i * view_.strides[2]];
}

bool HostLse::is_poison(int64_t b, int64_t h, int64_t i) const {
  return std::bit_cast<uint32_t>(get(b, h, i)) == kPoisonF32;
}

void HostLse::poison() { std::fill(storage_.begin(), storage_.end(), std::bit_cast<float>(kPoisonF32)); }

AttentionCase::AttentionCase(const Shape& s, const CaseOptions& o, uint64_t seed) : shape(s), options(o) {
  if (shape.Dv < 0) shape.Dv = shape.D;
  const DType t = o.dtype;
  q = HostTensor(t, {shape.B, shape.Hq, shape.Nq, shape.D}, o.layout);
  k = HostTensor(t, {shape.B, shape.Hkv, shape.Nk, shape.D}, o.layout);
  v = HostTensor(t, {shape.B, shape.Hkv, shape.Nk, shape.Dv}, o.layout);
  out = HostTensor(t, {shape.B, shape.Hq, shape.Nq, shape.Dv}, o.layout);
  std::mt19937_64 rng(seed);
  q.fill_random(rng, o.stddev);
  k.fill_random(rng, o.stddev);
  v.fill_random(rng, 1.0f);
  if (o.lse) lse.emplace(std::array<int64_t, 3>{shape.B, shape.Hq, shape.Nq});
  if (o.bias) {
    bias = HostTensor(o.bias_dtype,
                      {o.bias_broadcast_batch ? 1 : shape.B, o.bias_broadcast_heads ? 1 : shape.Hq,
                       shape.Nq, shape.Nk});
    bias->fill_random(rng, 1.0f);
  }
  poison_outputs();
}

AttentionArgs AttentionCase::args() const {
  AttentionArgs a;
  a.q = q.view(), a.k = k.view(), a.v = v.view(), a.out = out.view();
  if (lse) a.lse = lse->view();
  if (bias) a.bias = bias->view();
  if (block_mask_) a.block_mask = &*block_mask_;
  a.q_offset = options.q_offset;
  return a;
}

void AttentionCase::poison_outputs() {
  out.poison();
  if (lse) lse->poison();
}

namespace {
uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

BlockMask random_block_mask(const Shape& shape, int block_q, int block_k, uint64_t seed, bool broadcast) {
  auto keep = [=](int64_t b, int64_t h, int64_t q, int64_t kv) {
    const uint64_t blk = mix(seed ^ mix(uint64_t(b) * 1000003u + uint64_t(h)) ^
                             mix(uint64_t(q / block_q) * 7919u + uint64_t(kv / block_k) + 17u));
    switch (blk % 3) {
      case 0: return false;  // inactive
      case 1: return true;   // full
      default: return (mix(blk ^ uint64_t(q) * 131u ^ uint64_t(kv)) & 1u) != 0;  // partial
    }
  };
  return BlockMask::from_predicate(keep, broadcast ? 1 : shape.B, broadcast ? 1 : shape.Hq, shape.Nq,
                                   shape.Nk, block_q, block_k);
}

uint64_t fresh_seed() {
  // ATTNFUSE_TEST_SEED replays a failure: the tests print their seed (TRACE_SEED), and the same
  // seed draws the same inputs in the same binary.
  if (const char* env = std::getenv("ATTNFUSE_TEST_SEED"); env && *env) return std::strtoull(env, nullptr, 10);
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

KernelSpec make_spec(std::initializer_list<MaskKind> masks, std::initializer_list<ModifierKind> modifiers,
                     NormKind norm, ScalarArgs scalars) {
  KernelSpec spec;
  for (MaskKind m : masks) spec.masks.add(m);
  for (ModifierKind m : modifiers) spec.modifiers.push(m);
  spec.norm = norm;
  spec.scalars = std::move(scalars);
  return spec;
}

std::string describe(const KernelSpec& spec) {
  std::ostringstream os;
  os << norm_kind_name(spec.norm) << "(";
  for (int i = spec.modifiers.size() - 1; i >= 0; --i) os << modifier_kind_name(spec.modifiers[i]) << "(";
  int closes = spec.modifiers.size();
  for (MaskKind m : {MaskKind::Causal, MaskKind::SlidingWindow, MaskKind::BlockSparse})
    if (spec.masks.has(m)) os << mask_kind_name(m) << "(", ++closes;
  os << "scaled_dot_product(Q, K)";
  for (int i = 0; i < closes; ++i) os << ")";
  os << ") @ V";
  if (spec.masks.has(MaskKind::SlidingWindow)) os << " [window " << spec.scalars.window << "]";
  if (spec.modifiers.has(ModifierKind::Softcap)) os << " [softcap " << spec.scalars.softcap << "]";
  return os.str();
}

}  // namespace attnfuse::test
