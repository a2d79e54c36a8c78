// The forward attention kernel of attention_fwd.cuh, its mma.sync form, run as a whole grid on
// the host (codegen/kernel_host.hpp: a block's threads on std::threads, mma.sync, ldmatrix and
// the warp collectives emulated at a barrier of the warp's 32 lanes) against the float64
// reference under DESIGN §3's rule. CI has no GPU: this runs the kernel's own code for the
// tiles every pre-Hopper GPU and every decode call use (the GQA-packed decode tile with its key
// warps and in-kernel split merge, the prefill tile, the fused RoPE rotation), so a change to
// that code is checked before a device runs it. The emulation is slow (every MMA is two
// meetings of 32 threads), so the shapes are small, with odd lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <limits>
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
#include "runtime/device_block_mask.hpp"
#include "runtime/rope_args.hpp"
// Last: it defines the CUDA keywords as macros.
#include "codegen/kernel_host.hpp"
#include "codegen/cuda/kernels/attention_fwd.cuh"

namespace attnfuse {
namespace {

using attnfuse_kernels::bf16_t;
using attnfuse_kernels::f16_t;
using attnfuse_kernels::FwdKernel;
using attnfuse_kernels::FwdParams;

// A Spec as codegen emits one (codegen/cuda/emit.cpp) for the programs below, which have no
// modifiers: the tile, and which features the kernel compiles in (checked against the emitter's
// choices for the program in check_kernel).
struct Tile {
  int bm, bn, warps, stages, key_warps;
  bool pack;  // the GQA-packed decode variant
};
struct Features {
  bool rotate = false, window = false, neox = true, paged = false;
  int rope_half = 0, page_slots = 0;
  bool pair_window = false;   // rope_window
  bool alibi = false, softcap = false;  // score modifiers, alibi first where both
  bool document = false;                // packed sequences (cu_seqlens)
  bool block_sparse = false;            // a BlockMask's active blocks
};
constexpr Tile kDecode{16, 64, 4, 2, 4, true}, kDecodeSplit{16, 64, 4, 3, 4, true}, kPrefill64{64, 64, 4, 2, 1, false};

template <class E, int kD, Tile kT, Features kF = Features{}>
struct HostSpec {
  using Element = E;
  static constexpr int kHeadDim = kD, kBlockM = kT.bm, kBlockN = kT.bn, kWarps = kT.warps, kStages = kT.stages;
  static constexpr int kKeyWarps = kT.key_warps;
  static constexpr bool kCausal = true, kSlidingWindow = kF.window, kAlibi = kF.alibi, kBias = false;
  static constexpr bool kHasModifiers = kF.alibi || kF.softcap, kRelu = false;
  static constexpr bool kRotate = kF.rotate, kPairWindow = kF.pair_window, kNeox = kF.neox;
  static constexpr int kRopeHalf = kF.rope_half;
  static constexpr bool kDocument = kF.document, kPagedKV = kF.paged, kBlockSparse = kF.block_sparse;
  static constexpr bool kPackGqa = kT.pack;
  static constexpr int kPageListSlots = kF.page_slots;
  static constexpr bool kWgmma = false, kTmaKV = false, kProducerWarp = false, kSkipRowGroups = false;
  static constexpr Features kFeatures = kF;
  // The hook's lines as codegen::cuda::emit_forward writes them for each modifier.
  static float modify(float s, const FwdParams& p, const attnfuse_kernels::CellCtx& c) {
    if constexpr (kF.alibi) s -= c.slope * (float)abs(c.delta);
    if constexpr (kF.softcap) s = p.softcap * attnfuse_kernels::fast_tanh(s * p.inv_softcap);
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

// Spec's kernel over `grid`, with 256 KB of shared memory aligned as the wgmma form would want.
template <class Spec>
void launch_forward(const FwdParams& p, attnfuse_host_cuda::Dim3 grid) {
  using K = FwdKernel<Spec>;
  std::vector<char> smem(256 * 1024 + 1024);
  char* base = smem.data() + (1024 - reinterpret_cast<uintptr_t>(smem.data()) % 1024) % 1024;
  attnfuse_host_cuda::launch_grid_on_host(grid, K::kThreads, base, [&] { K::run(p, base); });
}

// The parameters of a call over contiguous [B, H, N, D] Q, K, V, O and [B, Hq, Nq] LSE (the
// pointers are the caller's to set): causal rows bottom-right, the default scale, one split.
FwdParams contiguous_params(int B, int Hq, int Hkv, int Nq, int Nk, int D) {
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
template <class Spec>
void check_kernel(const std::string& program, int B, int Hq, int Hkv, int Nq, int Nk, int splits, std::mt19937& rng,
                  int page_size = 0, const std::vector<int32_t>& docs = {}, const BlockMask* mask = nullptr) {
  using E = typename Spec::Element;
  constexpr int D = Spec::kHeadDim;
  constexpr DType kType = std::is_same_v<E, bf16_t> ? DType::BF16 : DType::F16;
  SCOPED_TRACE(::testing::Message() << program << " D " << D << " B " << B << " Hq " << Hq << " Hkv " << Hkv << " Nq "
                                    << Nq << " Nk " << Nk << " splits " << splits << " tile " << Spec::kBlockM << "x"
                                    << Spec::kBlockN);
  const KernelSpec spec = Program::parse(program).compile({Target::Cuda, kType, D});
  {  // the Spec is the one codegen emits for this program in the fused placement
    KernelSpec emitted = spec;
    emitted.rope_mode = RopeMode::Fused;
    emitted.tile = {.block_q = Spec::kBlockM, .block_k = Spec::kBlockN, .num_warps = Spec::kWarps,
                    .stages = Spec::kStages, .pack_gqa = Spec::kPackGqa, .key_warps = Spec::kKeyWarps};
    if (Spec::kPagedKV) emitted.kv_layout = KvLayout::Paged;
    ASSERT_EQ(Spec::kRotate, codegen::cuda::rotates_in_kernel(emitted));
    ASSERT_EQ(Spec::kRopeHalf, codegen::cuda::rope_half_in_kernel(emitted));
    ASSERT_EQ(Spec::kPageListSlots, codegen::cuda::page_list_slots(emitted));
    ASSERT_EQ(Spec::kSlidingWindow, spec.masks.has(MaskKind::SlidingWindow));
    ASSERT_EQ(Spec::kPairWindow, spec.score == ScoreKind::RopeWindow);
    ASSERT_EQ(Spec::kDocument, spec.masks.has(MaskKind::Document));
    ASSERT_EQ(Spec::kBlockSparse, spec.masks.has(MaskKind::BlockSparse));
    ASSERT_EQ(spec.modifiers.size(), int{Spec::kAlibi} + int{Spec::kFeatures.softcap});
    ASSERT_EQ(Spec::kAlibi, spec.modifiers.has(ModifierKind::Alibi));
    if (Spec::kAlibi && spec.modifiers.size() > 1) {
      ASSERT_EQ(spec.modifiers[0], ModifierKind::Alibi);
    }
    if (Spec::kRotate) {
      ASSERT_EQ(Spec::kNeox, spec.scalars.rope.style == RopeStyle::Neox);
    }
    if (Spec::kPackGqa) {  // the decode tile's shape is the tile pass's for these rows
      const TileConfig t = passes::cuda_decode_tile({.head_dim = D, .rows = int64_t{Hq / Hkv} * Nq, .split = splits > 1});
      ASSERT_EQ(Spec::kBlockM, t.block_q);
      ASSERT_EQ(Spec::kBlockN, t.block_k);
      ASSERT_EQ(Spec::kWarps, t.num_warps);
      ASSERT_EQ(Spec::kKeyWarps, t.key_warps);
    }
  }
  std::vector<E> q = random_elements<E>(size_t(B) * Hq * Nq * D, rng), k = random_elements<E>(size_t(B) * Hkv * Nk * D, rng),
                 v = random_elements<E>(size_t(B) * Hkv * Nk * D, rng);
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
  }
  std::vector<int32_t> cu{0};
  if constexpr (Spec::kDocument) {
    for (int32_t len : docs) cu.push_back(cu.back() + len);
    ASSERT_EQ(cu.back(), Nq);
    ASSERT_EQ(Nq, Nk);
    args.cu_seqlens_q = args.cu_seqlens_k = SeqOffsetsView::contiguous(cu.data(), static_cast<int64_t>(cu.size()));
    p.cu_q = p.cu_k = cu.data();
    p.num_docs = static_cast<int>(docs.size());
  }
  // A BlockMask as the runtime uploads it (runtime/device_block_mask.cpp), in host memory; rows
  // from its CSR (no prefill work list).
  std::vector<int32_t> bs_rows;
  std::vector<uint32_t> bs_state;
  if constexpr (Spec::kBlockSparse) {
    ASSERT_NE(mask, nullptr);
    const BlockMask::Csr c = mask->csr();
    bs_rows.assign(c.row_ptr.begin(), c.row_ptr.end());
    bs_state = runtime::entry_states(*mask);
    args.block_mask = mask;
    p.bs_row_ptr = bs_rows.data(), p.bs_cols = c.cols.data(), p.bs_state = bs_state.data();
    p.bs_bits_ptr = reinterpret_cast<const long long*>(c.bitmap_ptr.data());
    p.bs_bits = reinterpret_cast<const unsigned long long*>(c.bitmap.data());
    p.bs_block_q = mask->block_q(), p.bs_block_k = mask->block_k();
    p.bs_nqb = static_cast<int>(mask->num_q_blocks());
    p.bs_batch = static_cast<int>(mask->batch()), p.bs_heads = static_cast<int>(mask->heads());
  }
  p.window = static_cast<int>(spec.scalars.window);
  p.softcap = static_cast<float>(spec.scalars.softcap);
  p.inv_softcap = spec.scalars.softcap > 0 ? static_cast<float>(1.0 / spec.scalars.softcap) : 0.f;
  if (Spec::kRotate)
    p.rope = runtime::rope_args(spec.scalars.rope, Spec::kPairWindow, D, reference::rope_seq_len(args));
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

  launch_forward<Spec>(p, {unsigned(slots * splits), unsigned(heads), unsigned(B)});

  const reference::Result want = reference::attention(spec, args);
  const reference::Result naive = reference::attention(spec, args, reference::Precision::Naive);
  double err = 0, naive_err = 0;
  for (size_t i = 0; i < o.size(); ++i) {
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

constexpr const char* kCausal = "softmax(causal(scaled_dot_product(Q, K))) @ V";
constexpr const char* kRope = "softmax(causal(rope(Q, K, base=500000))) @ V";
constexpr const char* kWindow = "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 45)) @ V";

// The narrow decode tile (tile_sizes.hpp cuda_decode_tile): a GQA group's queries packed into 16
// rows, four warps each taking 16 keys of every 64-key tile and merged through shared memory.
TEST(AttentionKernelOnHost, DecodeTilePacksTheGroupAndMergesKeyWarps) {
  std::mt19937 rng(2026);
  using Decode64 = HostSpec<bf16_t, 64, kDecode>;
  check_kernel<Decode64>(kCausal, 1, 8, 2, 1, 203, 1, rng);   // one token, a 4-head group
  check_kernel<Decode64>(kCausal, 2, 4, 1, 3, 130, 1, rng);   // three draft tokens: 12 of 16 rows
  check_kernel<HostSpec<f16_t, 128, kDecodeSplit>>(kCausal, 1, 4, 2, 1, 77, 1, rng);
  check_kernel<HostSpec<bf16_t, 256, kDecode>>(kCausal, 1, 2, 1, 1, 100, 1, rng);  // Gemma's head
  check_kernel<Decode64>(kCausal, 1, 4, 2, 1, 1, 1, rng);  // a one-key cache
  // Three queries over two keys, bottom-right: query 0 sits before every key and keeps none
  // (O = 0, LSE = -inf), in the unsplit call and through the split merge.
  check_kernel<Decode64>(kCausal, 2, 4, 1, 3, 2, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit>>(kCausal, 2, 4, 1, 3, 2, 2, rng);
  // Wide groups of speculative decoding (more than 16 rows): the 64-row tile, one key warp.
  check_kernel<HostSpec<bf16_t, 64, Tile{64, 64, 4, 2, 1, true}>>(kCausal, 1, 8, 2, 16, 180, 2, rng);
}

// Score modifiers in the cell loop (the hook after the scale), and rope_window's per-tile pair
// plan (dead pairs' dims zeroed in the Q fragments and their K chunks not loaded, boundary
// pairs corrected per cell, far tiles at a compile-time pruning level), exact per cell.
TEST(AttentionKernelOnHost, ModifiersAndRopeWindowPerCell) {
  std::mt19937 rng(31);
  constexpr Features kMods{.alibi = true, .softcap = true};
  const std::string mods = "softmax(softcap(alibi(causal(scaled_dot_product(Q, K))), 20)) @ V";
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kMods>>(mods, 1, 4, 2, 97, 120, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit, kMods>>(mods, 1, 8, 2, 1, 257, 2, rng);
  constexpr Features kWin{.rotate = true, .rope_half = 32, .pair_window = true};
  for (const char* k : {"0.25", "1", "8"}) {
    const std::string win = std::string("softmax(causal(rope_window(Q, K, k=") + k + "))) @ V";
    check_kernel<HostSpec<bf16_t, 64, kPrefill64, kWin>>(win, 1, 2, 1, 150, 300, 1, rng);
    check_kernel<HostSpec<f16_t, 64, kDecode, kWin>>(win, 1, 4, 1, 2, 333, 2, rng);
  }
}

// Packed documents (cu_seqlens): no attention across them, each aligned bottom-right with its
// own positions, tiles straddling two documents, one-token documents, a window inside them.
TEST(AttentionKernelOnHost, DocumentsNeverAttendAcrossEachOther) {
  std::mt19937 rng(41);
  constexpr Features kDocs{.document = true};
  const std::vector<int32_t> docs{70, 1, 129, 33};
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, kDocs>>("softmax(document(causal(scaled_dot_product(Q, K)))) @ V", 1, 2,
                                                        1, 233, 233, 1, rng, 0, docs);
  check_kernel<HostSpec<f16_t, 64, kPrefill64, Features{.window = true, .document = true}>>(
      "softmax(document(sliding_window(causal(scaled_dot_product(Q, K)), 50))) @ V", 1, 4, 2, 233, 233, 1, rng, 0, docs);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.rotate = true, .rope_half = 32, .document = true}>>(
      "softmax(document(causal(rope(Q, K)))) @ V", 1, 2, 1, 233, 233, 1, rng, 0, docs);
}

// Block-sparse: only a BlockMask row's active blocks are visited, full ones without a cell test,
// partial ones through their cell bitmaps; random grids with empty rows, under causal, per head.
TEST(AttentionKernelOnHost, BlockSparseVisitsOnlyActiveBlocks) {
  std::mt19937 rng(53);
  const int N = 300;
  for (int block : {64, 128}) {
    // Per (head, 64-block pair): empty, full or a random cell pattern; query block 1 keeps nothing.
    std::vector<int> kind(size_t(2 * 5 * 5));
    for (int& k : kind) k = static_cast<int>(rng() % 3);
    const uint32_t salt = rng();
    const BlockMask mask = BlockMask::from_predicate(
        [&](int64_t, int64_t h, int64_t q, int64_t kv) {
          if (q / 64 == 1) return false;
          const int c = kind[size_t((h * 5 + q / 64) * 5 + kv / 64)];
          return c == 1 || (c == 2 && ((q * 7 + kv * 13 + salt) % 5) < 2);
        },
        1, 2, N, N, block, block);
    check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.block_sparse = true}>>(
        "softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V", 1, 2, 1, N, N, 1, rng, 0, {}, &mask);
  }
}

// The two RoPE placements give the same bits (README, RoPE on the GPU): the rotation kernel
// then the plain kernel, against the kernel that rotates Q and each K tile itself, on the same
// tile. Both rotate with the same routines, so the MMAs see identical operands and every
// later step is the same code. (This holds for the source, on the host; whether ptxas compiles
// both alike is the GPU's to show.)
template <class E, int D, Tile kT, int kHalf>
void check_placements_agree(int B, int Hq, int Hkv, int Nq, int Nk, std::mt19937& rng) {
  using Fused = HostSpec<E, D, kT, Features{.rotate = true, .rope_half = kHalf}>;
  using Plain = HostSpec<E, D, kT>;
  constexpr DType kType = std::is_same_v<E, bf16_t> ? DType::BF16 : DType::F16;
  const KernelSpec spec = Program::parse("softmax(causal(rope(Q, K, base=500000))) @ V").compile({Target::Cuda, kType, D});
  const std::vector<E> q = random_elements<E>(size_t(B) * Hq * Nq * D, rng),
                       k = random_elements<E>(size_t(B) * Hkv * Nk * D, rng),
                       v = random_elements<E>(size_t(B) * Hkv * Nk * D, rng);
  std::vector<E> o_fused(q.size(), E{0x7fc1}), o_pre(q.size(), E{0x7fc1}), q_rot(q.size(), E{0x7fc1}),
      k_rot(k.size(), E{0x7fc1});
  std::vector<float> lse_fused(size_t(B) * Hq * Nq), lse_pre(lse_fused.size());
  FwdParams p = contiguous_params(B, Hq, Hkv, Nq, Nk, D);
  p.v = v.data();
  p.rope = runtime::rope_args(spec.scalars.rope, false, D, Nk);
  const int G = kT.pack ? Hq / Hkv : 1;
  const attnfuse_host_cuda::Dim3 grid{unsigned((G * Nq + kT.bm - 1) / kT.bm), unsigned(kT.pack ? Hkv : Hq), unsigned(B)};
  // Fused: the kernel rotates.
  p.q = q.data(), p.k = k.data(), p.o = o_fused.data(), p.lse = lse_fused.data();
  launch_forward<Fused>(p, grid);
  // Prerotate: the rotation kernel writes rotated copies (as the runtime launches it,
  // cuda_launch.cpp), which the plain kernel reads.
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
                                     [&] { attnfuse_kernels::RotateKernel<E, D, true>::run(r); });
  p.q = q_rot.data(), p.k = k_rot.data(), p.o = o_pre.data(), p.lse = lse_pre.data();
  p.rope = {};
  launch_forward<Plain>(p, grid);
  for (size_t i = 0; i < o_fused.size(); ++i) ASSERT_EQ(o_fused[i].bits, o_pre[i].bits) << "O element " << i;
  for (size_t i = 0; i < lse_fused.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(lse_fused[i]), std::bit_cast<uint32_t>(lse_pre[i])) << "LSE row " << i;
  ASSERT_TRUE(std::isfinite(to_double(o_fused[0])));
}

TEST(AttentionKernelOnHost, BothRopePlacementsGiveTheSameBits) {
  std::mt19937 rng(61);
  check_placements_agree<bf16_t, 64, kPrefill64, 32>(1, 4, 2, 130, 130, rng);
  check_placements_agree<bf16_t, 128, kDecode, 64>(2, 8, 2, 1, 333, rng);
  check_placements_agree<f16_t, 96, kDecode, 48>(1, 4, 1, 2, 200, rng);
}

// Paged K/V (FlashInfer's layout and indptr conventions): sequences of their own lengths, pages
// in shuffled order, the block's page ids staged in shared memory; split and unsplit, page sizes
// that are and are not powers of two, against the same reference as a contiguous cache.
TEST(AttentionKernelOnHost, PagedDecodeReadsEachSequencesPages) {
  std::mt19937 rng(16);
  constexpr Features kPaged{.paged = true, .page_slots = 256};
  check_kernel<HostSpec<bf16_t, 64, kDecode, kPaged>>(kCausal, 3, 8, 2, 1, 150, 1, rng, 16);
  check_kernel<HostSpec<bf16_t, 64, kDecodeSplit, kPaged>>(kCausal, 2, 4, 1, 2, 301, 3, rng, 12);
  // Pages of one key: a part of 300 pages exceeds the 256 staged ids, so the block looks its
  // pages up in the global table instead.
  check_kernel<HostSpec<bf16_t, 64, kDecode, kPaged>>(kCausal, 1, 4, 1, 1, 300, 1, rng, 1);
  check_kernel<HostSpec<f16_t, 64, kDecode, Features{.rotate = true, .paged = true, .rope_half = 32, .page_slots = 256}>>(
      kRope, 2, 4, 2, 1, 99, 1, rng, 32);
}

// A split call: each part's block writes partial rows and the last one merges them by LSE.
TEST(AttentionKernelOnHost, SplitDecodeMergesItsPartsInTheKernel) {
  std::mt19937 rng(7);
  using Decode64 = HostSpec<bf16_t, 64, kDecodeSplit>;
  check_kernel<Decode64>(kCausal, 1, 8, 2, 1, 389, 3, rng);  // 7 tiles over 3 parts
  check_kernel<Decode64>(kCausal, 1, 4, 1, 2, 97, 4, rng);   // more parts than tiles: empty parts
}

// The prefill tiles: causal tiles on the diagonal masked per cell, the others without masks.
TEST(AttentionKernelOnHost, PrefillTilesMaskTheDiagonalAndTheWindow) {
  std::mt19937 rng(11);
  check_kernel<HostSpec<f16_t, 64, kPrefill64>>(kCausal, 1, 2, 1, 131, 131, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64>>(kCausal, 1, 2, 2, 37, 150, 1, rng);  // chunked
  // The sm_80 tile at D = 128 (128 rows over 8 warps, three stages) with a sliding window, whose
  // lower edge leaves tiles behind the diagonal and masks cells in them.
  check_kernel<HostSpec<bf16_t, 128, Tile{128, 64, 8, 3, 1, false}, Features{.window = true}>>(kWindow, 1, 2, 1, 200,
                                                                                           200, 1, rng);
}

// Fused RoPE: Q rotated once per tile, each K tile on arrival, in the fixed-unit form: whole
// heads (D = 96's 24 units on 120 of the tile's 128 threads) and power-of-two partial spans.
TEST(AttentionKernelOnHost, FusedRopeRotatesQAndEachKeyTile) {
  std::mt19937 rng(5);
  check_kernel<HostSpec<bf16_t, 64, kDecode, Features{.rotate = true, .rope_half = 32}>>(kRope, 1, 4, 1, 1, 150, 2, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.rotate = true, .rope_half = 32}>>(kRope, 1, 2, 1, 100, 100, 1,
                                                                                             rng);
  check_kernel<HostSpec<f16_t, 64, kDecode, Features{.rotate = true, .neox = false, .rope_half = 8}>>(
      "softmax(causal(rope(Q, K, style=gptj, rotary_dim=16))) @ V", 1, 4, 2, 2, 170, 1, rng);
  check_kernel<HostSpec<bf16_t, 64, kPrefill64, Features{.rotate = true, .rope_half = 16}>>(
      "softmax(causal(rope(Q, K, rotary_dim=32))) @ V", 1, 2, 1, 90, 90, 1, rng);
  check_kernel<HostSpec<bf16_t, 96, kDecode, Features{.rotate = true, .rope_half = 48}>>(kRope, 1, 8, 2, 1, 140, 1, rng);
}

}  // namespace
}  // namespace attnfuse
