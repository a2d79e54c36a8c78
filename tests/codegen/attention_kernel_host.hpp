// The forward attention kernel of attention_fwd.cuh run as a whole grid on the host
// (codegen/kernel_host.hpp), checked against the float64 reference: the Spec a test names, the
// call's parameters as the runtime sets them, and DESIGN §3's rule. Shared by the mma.sync tests
// (attention_kernel_host_test.cpp) and the Hopper ones (attention_kernel_hopper_host_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/program.hpp"
#include "codegen/cuda/emit.hpp"
#include "common/dtype.hpp"
#include "passes/tile_sizes.hpp"
#include "reference/reference.hpp"
#include "runtime/cuda_knobs.hpp"
#include "runtime/device_block_mask.hpp"
#include "runtime/rope_args.hpp"
#include "runtime/sparse_work.hpp"
#include "runtime/tma.hpp"
// Last: it defines the CUDA keywords as macros.
#include "codegen/kernel_host.hpp"
#include "codegen/cuda/kernels/attention_fwd.cuh"

namespace attnfuse {
namespace kernel_host_test {

using attnfuse_kernels::bf16_t;
using attnfuse_kernels::f16_t;
using attnfuse_kernels::FwdKernel;
using attnfuse_kernels::FwdParams;

// A Spec as codegen emits one (codegen/cuda/emit.cpp) for a test's program: the tile, and which
// features the kernel compiles in (checked against the tile pass's and the emitter's choices for
// the program in check_kernel).
struct Tile {
  int bm, bn, warps, stages, key_warps;
  bool pack;                // the GQA-packed decode variant
  bool wgmma = false;       // Hopper's warpgroup MMA prefill tile
  bool tma = false;         // K/V by the copy engine (where the call has tensor maps)
  bool producer = false;    // a producer warp (decode) or warpgroup (wgmma) issues the copies
  bool skip_groups = false;  // block-sparse row groups skip the blocks they do not keep
};
struct Features {
  bool rotate = false, window = false, neox = true, paged = false;
  int rope_half = 0, page_slots = 0;
  bool pair_window = false;   // rope_window
  bool alibi = false, softcap = false;  // score modifiers, alibi first where both
  bool bias = false;                    // additive_bias, the only modifier where set
  bool document = false;                // packed sequences (cu_seqlens)
  bool block_sparse = false;            // a BlockMask's active blocks
  bool causal = true;
};
constexpr Tile kDecode{16, 64, 4, 2, 4, true}, kDecodeSplit{16, 64, 4, 3, 4, true}, kPrefill64{64, 64, 4, 2, 1, false};

template <class E, int kD, Tile kT, Features kF = Features{}>
struct HostSpec {
  using Element = E;
  static constexpr int kHeadDim = kD, kBlockM = kT.bm, kBlockN = kT.bn, kWarps = kT.warps, kStages = kT.stages;
  static constexpr int kKeyWarps = kT.key_warps;
  static constexpr bool kCausal = kF.causal, kSlidingWindow = kF.window, kAlibi = kF.alibi, kBias = kF.bias;
  static constexpr bool kHasModifiers = kF.alibi || kF.softcap || kF.bias, kRelu = false;
  static constexpr bool kRotate = kF.rotate, kPairWindow = kF.pair_window, kNeox = kF.neox;
  static constexpr int kRopeHalf = kF.rope_half;
  static constexpr bool kDocument = kF.document, kPagedKV = kF.paged, kBlockSparse = kF.block_sparse;
  static constexpr bool kPackGqa = kT.pack;
  static constexpr int kPageListSlots = kF.page_slots;
  static constexpr bool kWgmma = kT.wgmma, kTmaKV = kT.tma, kProducerWarp = kT.producer;
  static constexpr bool kSkipRowGroups = kT.skip_groups;
  static constexpr Features kFeatures = kF;
  // The hook's lines as codegen::cuda::emit_forward writes them for each modifier.
  static float modify(float s, const FwdParams& p, const attnfuse_kernels::CellCtx& c) {
    if constexpr (kF.alibi) s -= c.slope * (float)abs(c.delta);
    if constexpr (kF.softcap) s = p.softcap * attnfuse_kernels::fast_tanh(s * p.inv_softcap);
    if constexpr (kF.bias) s += c.bias;
    return s;
  }
};

template <class E>
std::vector<E> random_elements(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> val(0.f, 1.f);
  std::vector<E> v(n);
  for (E& e : v) e.bits = std::is_same_v<E, bf16_t> ? f32_to_bf16(val(rng)) : f32_to_f16(val(rng));
  return v;
}

template <class E>
double to_double(E e) {
  return std::is_same_v<E, bf16_t> ? bf16_to_f32(e.bits) : f16_to_f32(e.bits);
}

// Spec's kernel over `grid`, with 256 KB of shared memory aligned as the wgmma form would want
// (poisoned before each block), and a block of its computing warps plus its producer warp
// (decode) or warpgroup (wgmma), as codegen::cuda::threads_per_block sizes it.
template <class Spec>
void launch_forward(const FwdParams& p, attnfuse_host_cuda::Dim3 grid) {
  using K = FwdKernel<Spec>;
  constexpr size_t kSmem = 256 * 1024;
  std::vector<char> smem(kSmem + 1024);
  char* base = smem.data() + (1024 - reinterpret_cast<uintptr_t>(smem.data()) % 1024) % 1024;
  const unsigned threads = K::kThreads + (Spec::kProducerWarp ? (Spec::kWgmma ? 128 : 32) : 0);
  attnfuse_host_cuda::launch_grid_on_host(grid, threads, base, [&] { K::run(p, base); }, kSmem);
}

// A K or V tensor map for the emulated copy engine: the geometry the runtime hands the driver
// (runtime::tile_map_geometry, as cuda_launch.cpp calls it).
inline bool host_tile_map(unsigned char* map, const void* base, int64_t B, int64_t H, int64_t N, int64_t D,
                          const long long* strides, int box_rows) {
  const auto g = runtime::tile_map_geometry(base, B, H, N, D, strides, box_rows);
  if (!g) return false;
  attnfuse_host_cuda::HostTensorMap m{static_cast<const char*>(base), {}, {}, {}};
  for (int i = 0; i < 4; ++i) m.dims[i] = g->dims[i], m.box[i] = g->box[i];
  for (int i = 0; i < 3; ++i) m.byte_strides[i] = g->byte_strides[i];
  std::memset(map, 0, 128);
  std::memcpy(map, &m, sizeof m);
  return true;
}

// The parameters of a call over contiguous [B, H, N, D] Q, K, V, O and [B, Hq, Nq] LSE (the
// pointers are the caller's to set): causal rows bottom-right, the default scale, one split.
inline FwdParams contiguous_params(int B, int Hq, int Hkv, int Nq, int Nk, int D) {
  FwdParams p{};
  const int64_t qs[3] = {int64_t{Hq} * Nq * D, int64_t{Nq} * D, D}, ks[3] = {int64_t{Hkv} * Nk * D, int64_t{Nk} * D, D};
  for (int i = 0; i < 3; ++i) p.q_stride[i] = p.o_stride[i] = qs[i], p.k_stride[i] = p.v_stride[i] = ks[i];
  p.lse_stride[0] = int64_t{Hq} * Nq, p.lse_stride[1] = Nq;
  p.batch = B, p.heads_q = Hq, p.heads_kv = Hkv, p.len_q = Nq, p.len_k = Nk, p.head_ratio = Hq / Hkv;
  p.q_offset = Nk - Nq;  // bottom-right, as the reference aligns causal rows
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  p.num_splits = 1;
  return p;
}

// Runs Spec's kernel on B x Hq x Nq queries over Nk keys (Hkv heads), split into `splits` parts
// of the key axis (decode tiles merge them in the kernel), and checks O and LSE. Paged specs
// take their keys from pages of `page_size` rows ([pages, page_size, Hkv, D]) in shuffled order
// among spare ones, batch entry b holding Nk - 29 b keys. Document specs pack `docs` (lengths,
// for queries and keys alike) into Nq = Nk rows.
// The rotation kernel as the runtime's prerotate placement launches it (cuda_launch.cpp): rotated
// copies of Q (positions q_offset + i) and K (positions j) in q_rot / k_rot, [B, H, N, D], by
// p.rope; kInterleave puts each neox pair's two dims side by side (rope_window's wgmma form).
template <class E, int D, bool kNeox, bool kInterleave>
void prerotate_on_host(const FwdParams& p, const std::vector<E>& q, const std::vector<E>& k, std::vector<E>& q_rot,
                       std::vector<E>& k_rot, int B, int Hq, int Hkv, int Nq, int Nk) {
  q_rot.assign(q.size(), E{0x7fc1});
  k_rot.assign(k.size(), E{0x7fc1});
  attnfuse_kernels::RotateParams r{};
  const void* src[2] = {q.data(), k.data()};
  void* dst[2] = {q_rot.data(), k_rot.data()};
  const int heads[2] = {Hq, Hkv}, lens[2] = {Nq, Nk};
  for (int t = 0; t < 2; ++t) {
    r.src[t] = src[t], r.dst[t] = dst[t], r.heads[t] = heads[t], r.len[t] = lens[t];
    for (int i = 0; i < 3; ++i) r.src_stride[t][i] = t == 0 ? p.q_stride[i] : p.k_stride[i];
    r.rows[t] = int64_t{B} * heads[t] * lens[t];
  }
  r.pos0[0] = p.q_offset, r.pos0[1] = 0;
  r.rope = p.rope;
  r.vec = true;
  attnfuse_host_cuda::launch_on_host(4, codegen::cuda::kRotateThreads,
                                     [&] { attnfuse_kernels::RotateKernel<E, D, kNeox, kInterleave>::run(r); });
}

// Key rows first, first + 1, ..., first + count - 1 for each of `firsts` (CallOptions::inf_v_rows).
inline std::vector<int32_t> row_runs(std::initializer_list<int32_t> firsts, int32_t count) {
  std::vector<int32_t> rows;
  for (const int32_t first : firsts)
    for (int32_t u = 0; u < count; ++u) rows.push_back(first + u);
  return rows;
}

// A random block-sparse grid over N x N for `heads` heads: per (head, 64-block pair) empty, full
// or a random cell pattern, query block `empty_q` (of 64 rows) keeping nothing; blocks of
// `block` rows and keys.
inline BlockMask random_block_grid(std::mt19937& rng, int heads, int N, int block, int empty_q) {
  const int nb = (N + 63) / 64;
  auto kind = std::make_shared<std::vector<int>>(size_t(heads) * nb * nb);
  for (int& k : *kind) k = static_cast<int>(rng() % 3);
  const uint32_t salt = rng();
  return BlockMask::from_predicate(
      [kind, nb, salt, empty_q](int64_t, int64_t h, int64_t q, int64_t kv) {
        if (q / 64 == empty_q) return false;
        const int c = (*kind)[size_t((h * nb + q / 64) * nb + kv / 64)];
        return c == 1 || (c == 2 && ((q * 7 + kv * 13 + salt) % 5) < 2);
      },
      1, heads, N, N, block, block);
}

// Copy-engine specs (Spec::kTmaKV) get tensor maps unless `tensor_maps` is false, which runs the
// same module's cp.async fallback (the runtime's call when the copy engine refuses a tensor).
struct CallOptions {
  int page_size = 0;                // paged specs: rows per page
  std::vector<int32_t> docs = {};   // document specs: the packed lengths (queries and keys)
  std::vector<int32_t> key_docs = {};  // ... their keys where they differ (varlen decode)
  const BlockMask* mask = nullptr;  // block-sparse specs
  bool tensor_maps = true;
  bool settled_table = false;  // paged: FwdParams::page_table_settled (lookups before the grid wait)
  int sparse_parts = 0;  // block-sparse: > 0 runs the runtime's work list, every row cut in this many parts
  // Key rows (of every batch entry and KV head) whose V is +Inf: rows no query keeps, so the
  // reference stays finite (checked) and a kernel that multiplies their P = 0 makes NaN. A tile's
  // rows past its document's end hold the next document's, which the kernel must zero in V.
  std::vector<int32_t> inf_v_rows = {};
  attnfuse_host_cuda::Lag lag = {};  // threads that run only while no other can (kernel_host.hpp)
  bool tma_late = false;  // tensor copies land just before their barrier's next operation (else at issue)
  bool cp_async_early = false;  // cp.async lands at issue (else at the wait that covers it)
  int bias_batches = 1;  // bias specs: the bias's batch entries, 1 (broadcast) or B
  bool bias_16bit = false;  // bias specs: the bias in the inputs' dtype (FwdParams::bias_16bit), else fp32
};
template <class Spec>
void check_kernel(const std::string& program, int B, int Hq, int Hkv, int Nq, int Nk, int splits, std::mt19937& rng,
                  const CallOptions& call = {}) {
  const int page_size = call.page_size;
  const std::vector<int32_t>& docs = call.docs;
  const BlockMask* mask = call.mask;
  using E = typename Spec::Element;
  constexpr int D = Spec::kHeadDim;
  constexpr DType kType = std::is_same_v<E, bf16_t> ? DType::BF16 : DType::F16;
  SCOPED_TRACE(::testing::Message() << program << " D " << D << " B " << B << " Hq " << Hq << " Hkv " << Hkv << " Nq "
                                    << Nq << " Nk " << Nk << " splits " << splits << " tile " << Spec::kBlockM << "x"
                                    << Spec::kBlockN);
  const KernelSpec spec = Program::parse(program).compile({Target::Cuda, kType, D});
  {  // the Spec is the one codegen emits for this program in the fused placement (the wgmma tile
     // never fuses the rotation: prerotate)
    KernelSpec emitted = spec;
    emitted.rope_mode = Spec::kWgmma ? RopeMode::Prerotate : RopeMode::Fused;
    emitted.tile = {.block_q = Spec::kBlockM, .block_k = Spec::kBlockN, .num_warps = Spec::kWarps,
                    .stages = Spec::kStages, .pack_gqa = Spec::kPackGqa, .key_warps = Spec::kKeyWarps,
                    .wgmma = Spec::kWgmma, .tma_kv = Spec::kTmaKV && !Spec::kWgmma,
                    .producer_warp = Spec::kProducerWarp, .skip_row_groups = Spec::kSkipRowGroups};
    if (Spec::kPagedKV) emitted.kv_layout = KvLayout::Paged;
    ASSERT_EQ(Spec::kTmaKV, codegen::cuda::uses_tma(emitted));
    ASSERT_EQ(Spec::kProducerWarp, codegen::cuda::producer_warp(emitted));
    ASSERT_EQ(codegen::cuda::threads_per_block(emitted),
              FwdKernel<Spec>::kThreads + (Spec::kProducerWarp ? (Spec::kWgmma ? 128 : 32) : 0));
    if constexpr (Spec::kWgmma) {  // Hopper's prefill tile as the tile pass makes it
      KernelSpec base = spec;
      base.rope_mode = RopeMode::Prerotate;
      base.kv_layout = emitted.kv_layout;
      TileConfig t = passes::cuda_arch_tile(base, 90);
      if (Spec::kBlockM == 64) t = passes::cuda_wgmma_64_rows(t);  // 64-row block-sparse masks
      ASSERT_TRUE(t.wgmma);
      ASSERT_EQ(Spec::kBlockM, t.block_q);
      ASSERT_EQ(Spec::kBlockN, t.block_k);
      ASSERT_EQ(Spec::kWarps, t.num_warps);
      ASSERT_EQ(Spec::kStages, t.stages);
      t.skip_row_groups = Spec::kSkipRowGroups;
      base.tile = t;
      ASSERT_EQ(Spec::kProducerWarp, codegen::cuda::producer_warp(base));
    }
    ASSERT_EQ(Spec::kRotate, codegen::cuda::rotates_in_kernel(emitted));
    ASSERT_EQ(Spec::kRopeHalf, codegen::cuda::rope_half_in_kernel(emitted));
    ASSERT_EQ(Spec::kPageListSlots, codegen::cuda::page_list_slots(emitted));
    ASSERT_EQ(Spec::kCausal, spec.masks.has(MaskKind::Causal));
    ASSERT_EQ(Spec::kSlidingWindow, spec.masks.has(MaskKind::SlidingWindow));
    ASSERT_EQ(Spec::kPairWindow, spec.score == ScoreKind::RopeWindow);
    ASSERT_EQ(Spec::kDocument, spec.masks.has(MaskKind::Document));
    ASSERT_EQ(Spec::kBlockSparse, spec.masks.has(MaskKind::BlockSparse));
    ASSERT_EQ(spec.modifiers.size(), int{Spec::kAlibi} + int{Spec::kFeatures.softcap} + int{Spec::kBias});
    ASSERT_EQ(Spec::kBias, spec.needs_bias());
    ASSERT_EQ(Spec::kAlibi, spec.modifiers.has(ModifierKind::Alibi));
    if (Spec::kAlibi && spec.modifiers.size() > 1) {
      ASSERT_EQ(spec.modifiers[0], ModifierKind::Alibi);
    }
    if (Spec::kWgmma && Spec::kPairWindow) {  // neox pairs arrive interleaved, as gptj's are
      ASSERT_EQ(spec.scalars.rope.style == RopeStyle::Neox, codegen::cuda::interleaves_pairs(emitted));
      ASSERT_FALSE(Spec::kNeox);
    }
    if (Spec::kRotate) {
      ASSERT_EQ(Spec::kNeox, spec.scalars.rope.style == RopeStyle::Neox);
    }
    if (Spec::kPackGqa) {  // the decode tile's shape is the tile pass's for these rows
      // (Hopper's copy engine takes 128-key tiles from contiguous caches, pages of 64 rows or
      // more, and the produced small boxes: cuda_decode_wide_keys.)
      const bool wide = passes::cuda_decode_wide_keys(Spec::kTmaKV, Spec::kPagedKV,
                                                      page_size % 64 == 0 || Spec::kProducerWarp);
      // (Packed documents: the runtime sizes the tile from the mean queries per document.)
      const int64_t queries = Spec::kDocument ? (Nq + int64_t(docs.size()) - 1) / int64_t(docs.size()) : Nq;
      const TileConfig t = passes::cuda_decode_tile({.head_dim = D, .rows = int64_t{Hq / Hkv} * queries, .split = splits > 1,
                                                     .wide_keys = wide, .paged = Spec::kPagedKV,
                                                     .rotates = Spec::kRotate});
      ASSERT_EQ(Spec::kBlockM, t.block_q);
      ASSERT_EQ(Spec::kBlockN, t.block_k);
      ASSERT_EQ(Spec::kWarps, t.num_warps);
      ASSERT_EQ(Spec::kKeyWarps, t.key_warps);
      if (Spec::kTmaKV) {
        ASSERT_EQ(Spec::kStages, t.stages);
      }
    }
  }
  std::vector<E> q = random_elements<E>(size_t(B) * Hq * Nq * D, rng), k = random_elements<E>(size_t(B) * Hkv * Nk * D, rng),
                 v = random_elements<E>(size_t(B) * Hkv * Nk * D, rng);
  const E inf{static_cast<uint16_t>(std::is_same_v<E, bf16_t> ? 0x7f80 : 0x7c00)};
  for (const int32_t row : call.inf_v_rows) {
    ASSERT_TRUE(row >= 0 && row < Nk && !Spec::kPagedKV) << "key row " << row;
    for (int64_t bh = 0; bh < int64_t{B} * Hkv; ++bh)
      for (int d = 0; d < D; ++d) v[size_t((bh * Nk + row) * D + d)] = inf;
  }
  std::vector<E> o(size_t(B) * Hq * Nq * D, E{0x7fc1});  // poisoned (NaN)
  std::vector<float> lse(size_t(B) * Hq * Nq, std::numeric_limits<float>::quiet_NaN());

  AttentionArgs args;
  args.q = TensorView::contiguous(q.data(), kType, {B, Hq, Nq, D});
  args.k = TensorView::contiguous(k.data(), kType, {B, Hkv, Nk, D});
  args.v = TensorView::contiguous(v.data(), kType, {B, Hkv, Nk, D});
  args.out = TensorView::contiguous(o.data(), kType, {B, Hq, Nq, D});

  FwdParams p = contiguous_params(B, Hq, Hkv, Nq, Nk, D);
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.lse = lse.data();
  std::vector<int32_t> indices, indptr{0}, last;
  std::vector<E> k_pages, v_pages;
  if constexpr (Spec::kPagedKV) {
    ASSERT_GT(page_size, 0);
    int pages = 0;
    for (int b = 0; b < B; ++b) {
      const int len = Nk - 29 * b;
      ASSERT_GT(len, 0);
      pages += (len + page_size - 1) / page_size;
      indptr.push_back(pages);
      last.push_back(len - ((len + page_size - 1) / page_size - 1) * page_size);
    }
    const int pool = pages + 3;  // spare pages the table never names
    std::vector<int32_t> order(static_cast<size_t>(pool));
    for (int i = 0; i < pool; ++i) order[size_t(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    indices.assign(order.begin(), order.begin() + pages);
    k_pages = random_elements<E>(size_t(pool) * page_size * Hkv * D, rng);
    v_pages = random_elements<E>(size_t(pool) * page_size * Hkv * D, rng);
    PagedKV pk;
    pk.k_pages = TensorView::contiguous(k_pages.data(), kType, {pool, page_size, Hkv, D});
    pk.v_pages = TensorView::contiguous(v_pages.data(), kType, {pool, page_size, Hkv, D});
    pk.page_indices = indices, pk.page_indptr = indptr, pk.last_page_len = last;
    args.paged = pk;
    args.k = args.v = TensorView{};
    p.k = k_pages.data(), p.v = v_pages.data();
    const auto pks = pk.strides(pk.k_pages), pvs = pk.strides(pk.v_pages);
    for (int i = 0; i < 3; ++i) p.page_stride_k[i] = pks[size_t(i)], p.page_stride_v[i] = pvs[size_t(i)];
    p.page_indices = indices.data(), p.page_indptr = indptr.data(), p.last_page_len = last.data();
    p.page_size = page_size;
    p.page_shift = std::has_single_bit(unsigned(page_size)) ? std::countr_zero(unsigned(page_size)) : -1;
    p.len_k = 0;  // each sequence's own, from its pages
    p.page_table_settled = call.settled_table ? 1 : 0;
  }
  std::vector<int32_t> cu{0}, cu_k{0};
  if constexpr (Spec::kDocument) {
    const std::vector<int32_t>& key_docs = call.key_docs.empty() ? docs : call.key_docs;
    ASSERT_EQ(key_docs.size(), docs.size());
    for (size_t d = 0; d < docs.size(); ++d) cu.push_back(cu.back() + docs[d]), cu_k.push_back(cu_k.back() + key_docs[d]);
    ASSERT_EQ(cu.back(), Nq);
    ASSERT_EQ(cu_k.back(), Nk);
    args.cu_seqlens_q = SeqOffsetsView::contiguous(cu.data(), static_cast<int64_t>(cu.size()));
    args.cu_seqlens_k = SeqOffsetsView::contiguous(cu_k.data(), static_cast<int64_t>(cu_k.size()));
    p.cu_q = cu.data(), p.cu_k = cu_k.data();
    p.num_docs = static_cast<int>(docs.size());
  }
  // A BlockMask as the runtime uploads it (runtime/device_block_mask.cpp), in host memory, coarsened
  // to the tile where its blocks are finer (runtime::tile_block_mask); rows from its CSR (no
  // prefill work list). The reference reads the mask as given.
  std::vector<int32_t> bs_rows;
  std::vector<uint32_t> bs_state;
  runtime::SparseWork work;
  int64_t work_per_row = 0;
  if constexpr (Spec::kBlockSparse) {
    ASSERT_NE(mask, nullptr);
    args.block_mask = mask;
    mask = runtime::tile_block_mask(*mask, Spec::kBlockM, Spec::kBlockN);
    ASSERT_NE(mask, nullptr) << "the mask's blocks are neither multiples nor divisors of the tile";
    const BlockMask::Csr c = mask->csr();
    bs_rows.assign(c.row_ptr.begin(), c.row_ptr.end());
    bs_state = runtime::entry_states(*mask);
    p.bs_row_ptr = bs_rows.data(), p.bs_cols = c.cols.data(), p.bs_state = bs_state.data();
    p.bs_bits_ptr = reinterpret_cast<const long long*>(c.bitmap_ptr.data());
    p.bs_bits = reinterpret_cast<const unsigned long long*>(c.bitmap.data());
    p.bs_block_q = mask->block_q(), p.bs_block_k = mask->block_k();
    p.bs_nqb = static_cast<int>(mask->num_q_blocks());
    p.bs_batch = static_cast<int>(mask->batch()), p.bs_heads = static_cast<int>(mask->heads());
    if (call.sparse_parts > 0) {  // the work list as CudaKernel::plan makes it (cuda_plan.cpp)
      runtime::SparseWorkShape shape;
      shape.sub = static_cast<int>(mask->block_k() / Spec::kBlockN);
      shape.per_row = (mask->batch() == 1 ? B : 1) * (mask->heads() == 1 ? Hq : 1) * (mask->block_q() / Spec::kBlockM);
      shape.forced_parts = call.sparse_parts;
      work = runtime::build_sparse_work(c.row_ptr, shape);
      work_per_row = shape.per_row;
      p.bs_work = work.items.data();
    }
  }
  // An additive bias [bias_batches, Hq, Nq, Nk], fp32 or in the inputs' dtype, its strides as
  // cuda_launch.cpp sets them.
  std::vector<float> bias;
  std::vector<E> bias16;
  if constexpr (Spec::kBias) {
    ASSERT_TRUE(call.bias_batches == 1 || call.bias_batches == B);
    std::normal_distribution<float> val(0.f, 2.f);
    bias.resize(size_t(call.bias_batches) * Hq * Nq * Nk);
    for (float& x : bias) x = val(rng);
    const std::array<int64_t, 4> shape = {call.bias_batches, Hq, Nq, Nk};
    if (call.bias_16bit) {
      bias16.resize(bias.size());
      for (size_t i = 0; i < bias.size(); ++i) store_elem(bias16.data(), kType, int64_t(i), bias[i]);
      args.bias = TensorView::contiguous(bias16.data(), kType, shape);
      p.bias = bias16.data();
      p.bias_16bit = 1;
    } else {
      args.bias = TensorView::contiguous(bias.data(), DType::F32, shape);
      p.bias = bias.data();
    }
    p.bias_stride[0] = call.bias_batches == 1 ? 0 : int64_t{Hq} * Nq * Nk;
    p.bias_stride[1] = int64_t{Nq} * Nk, p.bias_stride[2] = Nk;
  }
  p.window = static_cast<int>(spec.scalars.window);
  p.softcap = static_cast<float>(spec.scalars.softcap);
  p.inv_softcap = spec.scalars.softcap > 0 ? static_cast<float>(1.0 / spec.scalars.softcap) : 0.f;
  // RoPE as cuda_launch.cpp sets it: where the lengths are device memory (paged caches and
  // documents), the kernel finds the call's length for dynamic and longrope, whose long set the
  // runtime places in device memory (here the host's).
  std::vector<unsigned long long> rope_long_set;
  if (Spec::kRotate || Spec::kPairWindow) {
    if (Spec::kPagedKV || Spec::kDocument) {
      const runtime::DeviceLengthRope& d = runtime::device_length_rope_args(spec.scalars.rope, Spec::kPairWindow, D);
      p.rope = d.args;
      p.rope_len = d.rule;
      rope_long_set = d.long_set;
      if (!rope_long_set.empty()) p.rope_len.long_set = rope_long_set.data();
    } else {
      p.rope = runtime::rope_args(spec.scalars.rope, Spec::kPairWindow, D, reference::rope_seq_len(args));
    }
  }
  // rope_window's wgmma form reads Q and K prerotated by the rotation kernel, each pair's two dims
  // side by side (codegen::cuda::interleaves_pairs), as the runtime's prerotate placement
  // launches it (cuda_launch.cpp); the kernel stages only the window limits.
  std::vector<E> q_rot, k_rot;
  if constexpr (Spec::kWgmma && Spec::kPairWindow) {
    prerotate_on_host<E, D, true, true>(p, q, k, q_rot, k_rot, B, Hq, Hkv, Nq, Nk);
    p.q = q_rot.data(), p.k = k_rot.data();
  }
  // Split parts: each block writes its rows' partial O and LSE, and the part that counts last
  // merges them (block_merge.cuh), on a zeroed counter per (slot, KV head, batch entry).
  const int G = Spec::kPackGqa ? Hq / Hkv : 1;
  // (A document's first tile sits at slot floor(G * cu_q[d] / kBM) + d: work.cuh.)
  const int slots = Spec::kDocument ? G * Nq / Spec::kBlockM + static_cast<int>(docs.size())
                                    : (G * Nq + Spec::kBlockM - 1) / Spec::kBlockM;
  const int heads = Spec::kPackGqa ? Hkv : Hq;
  const int64_t rows = int64_t{B} * Hq * Nq;
  std::vector<float> part_o(size_t(splits) * rows * D), part_lse(size_t(splits) * rows);
  std::vector<int> count(size_t(slots) * heads * B, 0);
  p.num_splits = splits;
  if (splits > 1) p.part_o = part_o.data(), p.part_lse = part_lse.data(), p.merge_count = count.data();
  // A block-sparse work list: a 1-D grid over its entries; cut rows write partial rows to their
  // slots of kBM rows, merged by the last part on a zeroed counter per slot (cuda_launch.cpp).
  // Bias specs put the batch entries in x, next to each other (CudaKernel::plan).
  attnfuse_host_cuda::Dim3 grid{unsigned(slots * splits), unsigned(heads), unsigned(B)};
  if (Spec::kBias) grid = {unsigned(slots * splits * B), unsigned(heads), 1};
  if (work_per_row > 0) {
    ASSERT_EQ(splits, 1);
    grid = {unsigned(work.num_items * work_per_row), 1, 1};
    const size_t part_rows = size_t(work.slots) * Spec::kBlockM;
    part_o.assign(part_rows * D, std::numeric_limits<float>::quiet_NaN());
    part_lse.assign(part_rows, std::numeric_limits<float>::quiet_NaN());
    count.assign(size_t(work.slots), 0);
    if (work.slots > 0) p.part_o = part_o.data(), p.part_lse = part_lse.data(), p.merge_count = count.data();
  }

  // Tensor maps as the runtime encodes them (cuda_launch.cpp): pages as [pages, Hkv, page_size,
  // D] in boxes of gcd(page_size, block_k) rows (at least 8), contiguous K/V in boxes of block_k.
  if (Spec::kTmaKV && call.tensor_maps) {
    if constexpr (Spec::kPagedKV) {
      const int box = std::gcd(page_size, Spec::kBlockN), pool = static_cast<int>(k_pages.size()) / (page_size * Hkv * D);
      p.tma_box_rows = box;
      p.tma_kv = box % 8 == 0 && host_tile_map(p.tma_k, p.k, pool, Hkv, page_size, D, p.page_stride_k, box) &&
                 host_tile_map(p.tma_v, p.v, pool, Hkv, page_size, D, p.page_stride_v, box);
    } else {
      p.tma_kv = host_tile_map(p.tma_k, p.k, B, Hkv, Nk, D, p.k_stride, Spec::kBlockN) &&
                 host_tile_map(p.tma_v, p.v, B, Hkv, Nk, D, p.v_stride, Spec::kBlockN);
    }
    ASSERT_TRUE(p.tma_kv) << "the copy engine refused the test's tensors";
    p.early_l2 = runtime::kEarlyL2DefaultTiles;  // as a programmatic dependent (the kernel takes it: kEarlyL2)
  }

  attnfuse_host_cuda::lag = call.lag;
  // ATTNFUSE_HOST_COPIES=flipped (a second ctest pass, tests/CMakeLists.txt): every copy lands at
  // the other end of its window than by default, tensor copies late and cp.async at issue (and
  // the threads start in descending order, kernel_host.hpp).
  const bool flipped = attnfuse_host_cuda::flipped_schedule();
  attnfuse_host_cuda::tma_lands_late = call.tma_late || flipped;
  attnfuse_host_cuda::cp_async_lands_early = call.cp_async_early || flipped;
  launch_forward<Spec>(p, grid);
  attnfuse_host_cuda::lag = {};
  attnfuse_host_cuda::tma_lands_late = attnfuse_host_cuda::cp_async_lands_early = false;

  const reference::Result want = reference::attention(spec, args);
  const reference::Result naive = reference::attention(spec, args, reference::Precision::Naive);
  double err = 0, naive_err = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    if (!call.inf_v_rows.empty()) {
      ASSERT_TRUE(std::isfinite(want.out[i])) << "the +Inf V rows reach output " << i;
    }
    ASSERT_TRUE(std::isfinite(to_double(o[i]))) << "O element " << i << " not written";
    err = std::max(err, std::abs(to_double(o[i]) - want.out[i]));
    naive_err = std::max(naive_err, std::abs(naive.out[i] - want.out[i]));
  }
  EXPECT_LE(err, 2 * naive_err + 1e-5) << "max abs error " << err << " vs naive " << naive_err;
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(want.lse[i])) ASSERT_EQ(lse[i], want.lse[i]) << "row " << i << " keeps no key";
    else ASSERT_NEAR(lse[i], want.lse[i], 1e-2 + 1e-3 * std::abs(want.lse[i])) << "row " << i;
  }
}

}  // namespace kernel_host_test
}  // namespace attnfuse
