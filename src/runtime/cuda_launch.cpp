// CudaKernel::launch: checks a call, fills the kernel's parameters (tensor maps, paged and
// block-sparse views, split workspaces) and launches the forward kernel, with the rotation kernel
// before it (prerotated rope) and the combine kernel after it where they apply (cuda_backend.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "attnfuse/error.hpp"
#include "codegen/cuda/emit.hpp"
#include "codegen/cuda/kernels/params.cuh"
#include "reference/reference.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_backend_internal.hpp"
#include "runtime/cuda_knobs.hpp"
#include "runtime/device_block_mask.hpp"
#include "runtime/device_constants.hpp"
#include "runtime/rope_args.hpp"
#include "runtime/sparse_work.hpp"
#include "runtime/stream_workspace.hpp"
#include "runtime/tma.hpp"

namespace attnfuse::runtime {

namespace {

void check_rows_16b(const TensorView& t, const char* name, std::initializer_list<int> dims) {
  bool ok = reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
  for (int d : dims) ok = ok && t.strides[size_t(d)] % 8 == 0;
  if (!ok)
    throw Error(ErrorCode::Shape,
                fmt::format("{} must be 16-byte aligned with strides (other than the last) that are multiples "
                            "of 8 elements on CUDA (strides {}, {}, {})",
                            name, t.strides[0], t.strides[1], t.strides[2]));
}

}  // namespace

void CudaKernel::launch(const AttentionArgs& args, const ScalarArgs& scalars, CUstream stream,
                        const LaunchTuning& tuning) const {
  validate(spec_, scalars, args, IndexMemory::Device);  // spec_'s own scalars are the first program's
  if (args.q.dtype != spec_.dtype)
    throw Error(ErrorCode::DType, fmt::format("kernel compiled for {} but Q is {}", dtype_name(spec_.dtype),
                                              dtype_name(args.q.dtype)));
  const TensorView& kv_v = args.paged ? args.paged->v_pages : args.v;
  if (args.q.shape[3] != spec_.head_dim || kv_v.shape[3] != spec_.head_dim)
    throw Error(ErrorCode::Shape, fmt::format("kernel compiled for head dim {} but Q has {} and V has {}",
                                              spec_.head_dim, args.q.shape[3], kv_v.shape[3]));
  const CallShape c = call_shape(args);
  const int64_t B = c.B, Hq = c.Hq, Nq = c.Nq, Hkv = c.Hkv;
  const int64_t Nk = args.paged ? static_cast<int64_t>(args.paged->page_indices.size()) * args.paged->page_size()
                                : args.k.shape[2];
  if (B == 0 || Hq == 0 || Nq == 0) return;
  if (Nq > INT32_MAX || Nk > INT32_MAX || Hq > 65535 || B > 65535)
    throw Error(ErrorCode::Shape, "the CUDA backend takes up to 2^31-1 rows and 65535 heads/batches");
  // Tiles move with 16-byte cp.async copies: every row of Q, K and V must start 16-byte aligned.
  check_rows_16b(args.q, "Q", {0, 1, 2});
  if (args.paged) {
    check_rows_16b(args.paged->k_pages, "k_pages", {0, 1, 2});
    check_rows_16b(args.paged->v_pages, "v_pages", {0, 1, 2});
  } else {
    check_rows_16b(args.k, "K", {0, 1, 2});
    check_rows_16b(args.v, "V", {0, 1, 2});
  }
  // O is stored two dims per 32-bit store at b * s0 + h * s1 + i * s2 (the epilogue and the split
  // merge), so every row must start 4-byte aligned: the base and all three strides.
  if (args.out.strides[0] % 2 || args.out.strides[1] % 2 || args.out.strides[2] % 2 ||
      reinterpret_cast<uintptr_t>(args.out.data) % 4 != 0)
    throw Error(ErrorCode::Shape, fmt::format("O must be 4-byte aligned with even strides on CUDA (strides {}, {}, {})",
                                              args.out.strides[0], args.out.strides[1], args.out.strides[2]));
  // The kernel computes positions in 32 bits (one register per cell): every query position
  // i + q_offset and every key position must fit.
  const int64_t q_offset = args.paged ? args.q_offset.value_or(0) : args.resolved_q_offset();
  if (q_offset + Nq > INT32_MAX || q_offset < -int64_t{INT32_MAX} + Nk)
    throw Error(ErrorCode::Shape, fmt::format("q_offset {} puts query positions outside the 32-bit range "
                                              "the CUDA kernel uses", q_offset));
  // rope_window's per-cell window test compares Δ ± limit in 32 bits (fwd_wgmma.cuh
  // correct_window): positions strictly within ±2^29 keep every |Δ| and limit it compares below
  // 2^30.
  constexpr int64_t kWindowPositions = int64_t{1} << 29;
  if (spec_.score == ScoreKind::RopeWindow &&
      (q_offset <= -kWindowPositions || q_offset + Nq > kWindowPositions || Nk > kWindowPositions))
    throw Error(ErrorCode::Unsupported,
                fmt::format("rope_window on CUDA takes query and key positions within ±2^29 (q_offset {}, Nq {}, "
                            "Nk {}); run it on the CPU",
                            q_offset, Nq, Nk));
  const bool rope = spec_.score != ScoreKind::ScaledDot;
  const bool device_lengths = args.paged || args.cu_seqlens_k;  // lengths the host cannot read

  const LaunchPlan pl = plan(args, scalars, tuning);
  const LoadedModule& m = *pl.module;

  attnfuse_kernels::FwdParams p{};
  p.q = args.q.data;
  p.o = args.out.data;
  p.lse = args.lse ? args.lse->data : nullptr;
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = args.q.strides[i];
    p.o_stride[i] = args.out.strides[i];
  }
  if (args.paged) {
    const PagedKV& pk = *args.paged;
    p.k = pk.k_pages.data;
    p.v = pk.v_pages.data;
    const auto ks = pk.strides(pk.k_pages), vs = pk.strides(pk.v_pages);
    for (int i = 0; i < 3; ++i) p.page_stride_k[i] = ks[size_t(i)], p.page_stride_v[i] = vs[size_t(i)];
    p.page_indices = pk.page_indices.data();
    p.page_indptr = pk.page_indptr.data();
    p.last_page_len = pk.last_page_len.data();
    p.page_size = static_cast<int>(pk.page_size());
    const auto ps = static_cast<unsigned>(p.page_size);
    p.page_shift = std::has_single_bit(ps) ? std::countr_zero(ps) : -1;
    p.q_offset_given = args.q_offset.has_value();
    p.page_table_settled = pk.table_settled;
  } else {
    p.k = args.k.data;
    p.v = args.v.data;
    for (int i = 0; i < 3; ++i) p.k_stride[i] = args.k.strides[i], p.v_stride[i] = args.v.strides[i];
  }
  if (args.lse) {
    p.lse_stride[0] = args.lse->strides[0];
    p.lse_stride[1] = args.lse->strides[1];
  }
  if (spec_.needs_bias()) {
    const TensorView& bias = *args.bias;
    p.bias = bias.data;
    p.bias_16bit = bias.dtype != DType::F32;  // validate: fp32 or the inputs' dtype
    p.bias_stride[0] = bias.shape[0] == 1 ? 0 : bias.strides[0];
    p.bias_stride[1] = bias.shape[1] == 1 ? 0 : bias.strides[1];
    p.bias_stride[2] = bias.strides[2];
  }
  if (args.cu_seqlens_q) {
    const SeqOffsetsView &cq = *args.cu_seqlens_q, &ck = *args.cu_seqlens_k;
    if (cq.type != ck.type || cq.batch != ck.batch || cq.batch_stride != ck.batch_stride)
      throw Error(ErrorCode::Unsupported, "on CUDA cu_seqlens_q and cu_seqlens_k must share their integer type, "
                                          "batch rows and batch stride");
    p.cu_q = cq.data;
    p.cu_k = ck.data;
    p.cu_is_i64 = cq.type == SeqOffsetsView::Type::I64;
    p.num_docs = static_cast<int>(cq.length - 1);
    p.cu_batch_stride = cq.batch == 1 ? 0 : cq.batch_stride;
  }
  if (const BlockMask* given = args.block_mask) {
    const int bm = m.spec.tile.block_q, bn = m.spec.tile.block_k;
    // Prefill takes masks finer than its tile through their coarsening to it; the decode tile
    // needs one query block over all of its rows.
    const BlockMask* mask = pl.decode ? given : tile_block_mask(*given, bm, bn);
    const bool rows_fit = mask && (pl.decode ? mask->block_q() >= Nq && mask->block_q() % bm == 0 : mask->block_q() % bm == 0);
    if (!rows_fit || mask->block_k() % bn != 0)
      throw Error(ErrorCode::Unsupported,
                  fmt::format("the BlockMask's blocks ({} x {}) must be multiples or divisors of the CUDA "
                              "kernel's tile ({} x {}) for this program{}; build the mask with block sizes that "
                              "are (128 x 128 always works)", given->block_q(), given->block_k(), bm, bn,
                              pl.decode ? " (the decode tile: multiples, with one query block over every query)" : ""));
    const DeviceBlockMask& dm = upload_block_mask(*mask);
    p.bs_row_ptr = dm.row_ptr;
    p.bs_cols = dm.cols;
    p.bs_state = dm.state;
    p.bs_bits_ptr = reinterpret_cast<const af_i64*>(dm.bits_ptr);
    p.bs_bits = reinterpret_cast<const unsigned long long*>(dm.bits);
    p.bs_block_q = mask->block_q();
    p.bs_block_k = mask->block_k();
    p.bs_nqb = static_cast<int>(mask->num_q_blocks());
    p.bs_batch = static_cast<int>(mask->batch());
    p.bs_heads = static_cast<int>(mask->heads());
    p.bs_work = pl.sparse_work ? reinterpret_cast<const int*>(pl.sparse_work->items) : nullptr;
  }
  p.batch = static_cast<int>(B);
  p.heads_q = static_cast<int>(Hq);
  p.heads_kv = static_cast<int>(Hkv);
  p.len_q = static_cast<int>(Nq);
  p.len_k = static_cast<int>(args.paged ? 0 : Nk);
  p.head_ratio = static_cast<int>(Hq / Hkv);
  p.q_offset = q_offset;
  const double scale = scalars.scale ? *scalars.scale : 1.0 / std::sqrt(double(spec_.head_dim));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  p.softcap = static_cast<float>(scalars.softcap);
  p.inv_softcap = scalars.softcap > 0 ? static_cast<float>(1.0 / scalars.softcap) : 0.f;
  p.window = static_cast<int>(std::min<int64_t>(scalars.window, INT32_MAX));
  // Standard slopes are computed in the kernel from the head (work.cuh standard_alibi_slope);
  // custom ones are read from a device copy made on the set's first launch (device_constants.hpp).
  if (spec_.modifiers.has(ModifierKind::Alibi) && scalars.alibi == AlibiSlopes::Custom) {
    std::vector<float> slopes(static_cast<size_t>(Hq));
    for (int64_t h = 0; h < Hq; ++h) slopes[size_t(h)] = static_cast<float>(reference::alibi_slope(scalars, h, Hq));
    p.alibi_slopes = device_alibi_slopes(slopes);
  }
  if (rope) {
    const bool windowed = spec_.score == ScoreKind::RopeWindow;
    if (device_lengths) {
      // Dynamic and longrope depend on the call's length, which the kernel finds (FwdParams::rope_len).
      const DeviceLengthRope& d = device_length_rope_args(scalars.rope, windowed, spec_.head_dim);
      p.rope = d.args;
      p.rope_len = d.rule;
      if (!d.long_set.empty()) p.rope_len.long_set = device_rope_set(d.long_set);
    } else {
      p.rope = rope_args(scalars.rope, windowed, spec_.head_dim, reference::rope_seq_len(args));
    }
    if (const auto& t = args.rope_tables) {  // device memory, [positions, half]
      p.rope.cos_table = t->cos;
      p.rope.sin_table = t->sin;
      p.rope.table_positions = static_cast<int>(std::min<int64_t>(t->positions, INT32_MAX));
    }
  }

  if (rope && pl.rope_mode == RopeMode::Prerotate) {
    // Rotate Q and K once into contiguous copies, then run the plain kernel on them.
    const int64_t D = spec_.head_dim;
    const int64_t q_rows = B * Hq * Nq, k_rows = B * Hkv * Nk;
    const size_t q_bytes = static_cast<size_t>(q_rows * D * 2);
    char* ws = static_cast<char*>(
        stream_workspace(stream, kRopeWorkspace, q_bytes + static_cast<size_t>(k_rows * D * 2)));
    attnfuse_kernels::RotateParams r{};
    r.src[0] = args.q.data;
    r.src[1] = args.k.data;
    r.dst[0] = ws;
    r.dst[1] = ws + q_bytes;
    for (int i = 0; i < 3; ++i) {
      r.src_stride[0][i] = args.q.strides[i];
      r.src_stride[1][i] = args.k.strides[i];
    }
    r.heads[0] = static_cast<int>(Hq);
    r.heads[1] = static_cast<int>(Hkv);
    r.len[0] = static_cast<int>(Nq);
    r.len[1] = static_cast<int>(Nk);
    r.rows[0] = q_rows;
    r.rows[1] = k_rows;
    r.pos0[0] = q_offset;
    r.pos0[1] = 0;
    r.rope = p.rope;
    // The 16-byte path needs whole pairs in every 8-element chunk and aligned rows.
    const bool neox = spec_.scalars.rope.style == RopeStyle::Neox;
    const int half = r.rope.half;
    auto aligned = [](const TensorView& t) {
      return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.strides[0] % 8 == 0 && t.strides[1] % 8 == 0 &&
             t.strides[2] % 8 == 0;
    };
    r.vec = half % (neox ? 8 : 4) == 0 && (D - 2 * half) % 8 == 0 && aligned(args.q) && aligned(args.k);
    const int64_t units = r.vec ? (B * Nq + B * Nk) * D / 8 : (q_rows + k_rows) * D / 2;
    const int64_t max_blocks = int64_t{device_info().multiprocessors} * 16;
    const auto blocks = static_cast<unsigned>(
        std::clamp<int64_t>((units + codegen::cuda::kRotateThreads - 1) / codegen::cuda::kRotateThreads, 1, max_blocks));
    void* rparams[] = {&r};
    launch_kernel(m.rotate, {blocks, 1, 1}, codegen::cuda::kRotateThreads, 0, stream, rparams, pl.dependent_launch,
                  "cuLaunchKernel (rope rotation)");
    p.q = r.dst[0];
    p.k = r.dst[1];
    p.q_stride[0] = Hq * Nq * D, p.q_stride[1] = Nq * D, p.q_stride[2] = D;
    p.k_stride[0] = Hkv * Nk * D, p.k_stride[1] = Nk * D, p.k_stride[2] = D;
  }

  if (codegen::cuda::uses_tma(m.spec) && tma_enabled()) {
    const int bn = m.spec.tile.block_k;
    // The decode stream reads each K/V byte once, so the L2 fetching 256 bytes around a request
    // only adds fills where a D = 128 row's two 128-byte boxes arrive apart: with no promotion the
    // H200 decodes 1.2-3.7% faster (8B B1 / 32k 0.0397 -> 0.0389 ms, B32 / 32k 0.9965 -> 0.9614,
    // bench/results/2026-12-02-h200-session15/call1/). The wgmma prefill tile, which rereads K/V
    // across query tiles, keeps the 256 bytes it was tuned with.
    const auto l2 = static_cast<TmaL2Promotion>(tma_l2_promotion_override().value_or(
        static_cast<int>(m.spec.tile.wgmma ? TmaL2Promotion::Bytes256 : TmaL2Promotion::None)));
    if (args.paged) {
      // The page tensors as [pages, Hkv, page_size, D] (page_stride_* is page, head, row), read
      // in boxes that never straddle a page: gcd(page_size, block_k) rows, at least 8 so that
      // every box lands on a whole swizzle atom.
      const int64_t pages = args.paged->num_pages(), ps = args.paged->page_size();
      const int box = static_cast<int>(std::gcd(ps, int64_t{bn}));
      p.tma_box_rows = box;
      p.tma_kv = box % 8 == 0 &&
                 encode_tile_map(p.tma_k, p.k, spec_.dtype, pages, Hkv, ps, spec_.head_dim, p.page_stride_k, box, l2) &&
                 encode_tile_map(p.tma_v, p.v, spec_.dtype, pages, Hkv, ps, spec_.head_dim, p.page_stride_v, box, l2);
    } else {
      p.tma_kv = encode_tile_map(p.tma_k, p.k, spec_.dtype, B, Hkv, Nk, spec_.head_dim, p.k_stride, bn, l2) &&
                 encode_tile_map(p.tma_v, p.v, spec_.dtype, B, Hkv, Nk, spec_.head_dim, p.v_stride, bn, l2);
    }
  }
  // Early L2 hints pay only where the block waits for a kernel ahead: as a programmatic dependent.
  p.early_l2 = p.tma_kv && pl.dependent_launch ? early_l2_tiles() : 0;
  p.num_splits = pl.num_splits;
  const int64_t rows = B * Hq * Nq;
  // Partial rows (O and LSE) and merge counters: split-KV's S x rows with a counter per tile when
  // the kernel merges, or the cut block-sparse rows' slots of block_q rows with one per slot.
  size_t part_rows = 0, counters = 0;
  if (pl.sparse_work && pl.sparse_work->slots > 0) {
    counters = static_cast<size_t>(pl.sparse_work->slots);
    part_rows = counters * static_cast<size_t>(m.spec.tile.block_q);
  } else if (pl.num_splits > 1) {
    part_rows = static_cast<size_t>(pl.num_splits * rows);
    if (pl.merge_in_kernel)
      counters = size_t{pl.grid[0] / static_cast<unsigned>(pl.num_splits)} * pl.grid[1] * pl.grid[2];
  }
  if (part_rows > 0) {
    const size_t o_floats = part_rows * static_cast<size_t>(spec_.head_dim);
    float* ws = static_cast<float*>(stream_workspace(stream, kSplitWorkspace, (o_floats + part_rows) * 4));
    p.part_o = ws;
    p.part_lse = ws + o_floats;
  }
  if (counters > 0) p.merge_count = static_cast<int*>(stream_workspace(stream, kMergeCounters, counters * sizeof(int)));
  void* params[] = {&p};
  launch_kernel(m.fwd, {pl.grid[0], pl.grid[1], pl.grid[2]}, static_cast<unsigned>(m.threads),
                static_cast<unsigned>(m.smem), stream, params, pl.dependent_launch, "cuLaunchKernel");
  if (pl.num_splits > 1 && !pl.merge_in_kernel) {
    attnfuse_kernels::CombineParams cp{};
    cp.part_o = p.part_o;
    cp.part_lse = p.part_lse;
    cp.o = p.o;
    cp.lse = p.lse;
    for (int i = 0; i < 3; ++i) cp.o_stride[i] = p.o_stride[i];
    cp.lse_stride[0] = p.lse_stride[0];
    cp.lse_stride[1] = p.lse_stride[1];
    cp.heads_q = p.heads_q;
    cp.len_q = p.len_q;
    cp.rows = rows;
    cp.num_splits = pl.num_splits;
    constexpr int kRowsPerBlock = codegen::cuda::kCombineThreads / 32;
    void* cparams[] = {&cp};
    launch_kernel(m.combine, {static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), 1, 1},
                  codegen::cuda::kCombineThreads, 0, stream, cparams, pl.dependent_launch,
                  "cuLaunchKernel (split-KV combine)");
  }
}

}  // namespace attnfuse::runtime
