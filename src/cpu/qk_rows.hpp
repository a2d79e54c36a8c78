// The QK product of tiles with few query rows (decoding: one query, or a GQA group's rows), with
// the head dimension across the SIMD lanes. The blocked product of simd.hpp puts 16 query rows in
// the lanes, so a decode tile of 1-8 rows leaves most of them idle and pays one FMA per (key,
// dim). Here one FMA covers kNativeLanes dims of one (key, row), K rows are read in their stored
// type and widened in registers (no fp32 copy of the chunk), and each (key, row) sum is reduced
// across the lanes once, kQkSums of them together. Part of the per-level kernel sources (simd.hpp).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>

#include "common/dtype.hpp"
#include "cpu/simd.hpp"

namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS::simd {

// The most query rows a tile may have to take this product (it pays where they would leave most
// of the blocked product's 16 lanes idle).
constexpr int kQkRowsMax = 8;
// (key, row) sums accumulated and reduced together: 16 of AVX-512's 32 registers, 8 of the 16
// of AVX2 and SSE2, leaving room for the query rows' operands and a K vector.
constexpr int kQkSums = kNativeLanes == 16 ? 16 : 8;
static_assert(kQkSums % kNativeLanes == 0 && kQkSums >= kQkRowsMax, "whole reduced vectors, one key at least");

// One level of the lane reduction: in each block of 2H lanes, the first H lanes get a's pairs
// (lane l and l + H) added, the last H lanes b's (l - H and l).
template <int H, size_t... L>
inline NVec fold_pair(NVec a, NVec b, std::index_sequence<L...>) {
  constexpr int kN = kNativeLanes;
  const NVec x = __builtin_shufflevector(a, b, (int(L) % (2 * H) < H ? int(L) : kN + int(L))...);
  const NVec y = __builtin_shufflevector(a, b, (int(L) % (2 * H) < H ? int(L) + H : kN + int(L) - H)...);
  return x + y;
}
// v[0 .. N) -> v[0 .. N / 2) at level H, then the levels below.
template <int H, int N>
inline void fold_levels(NVec (&v)[kQkSums]) {
#pragma GCC unroll 16
  for (int p = 0; p < N / 2; ++p) v[p] = fold_pair<H>(v[2 * p], v[2 * p + 1], std::make_index_sequence<kNativeLanes>{});
  if constexpr (H > 1) fold_levels<H / 2, N / 2>(v);
}
// Which input's sum each lane of the reduced vectors holds (lane l of vector f at f * lanes + l),
// by running the folds on labels.
constexpr std::array<int, kQkSums> reduced_order() {
  int lab[kQkSums][kNativeLanes] = {};
  for (int s = 0; s < kQkSums; ++s)
    for (int l = 0; l < kNativeLanes; ++l) lab[s][l] = s;
  int n = kQkSums;
  for (int h = kNativeLanes / 2; h >= 1; h /= 2, n /= 2)
    for (int p = 0; p < n / 2; ++p)
      for (int l = 0; l < kNativeLanes; ++l) lab[p][l] = l % (2 * h) < h ? lab[2 * p][l] : lab[2 * p + 1][l];
  std::array<int, kQkSums> order{};
  for (int f = 0; f < n; ++f)
    for (int l = 0; l < kNativeLanes; ++l) order[size_t(f * kNativeLanes + l)] = lab[f][l];
  return order;
}

// S^T[k][r] (row stride kStride) = sum_d K[k][d] * Q[r][d] for R query rows (row-major, stride D,
// scaled) and kQkSums / R keys stored as T (Row: const float* for fp32 rows, else const void*), of
// which the first `valid` are stored. D is a multiple of kNativeLanes.
template <int R, DType T, class Row>
inline void qk_rows_micro(const float* __restrict q, const Row* krow, int64_t D, int valid, float* __restrict st) {
  constexpr int KB = kQkSums / R;
  // The query rows stay in registers where they fit beside the sums and a K vector (else GCC
  // reads them as memory operands of the FMAs).
  constexpr bool kPinQ = R + kQkSums < (kNativeLanes == 16 ? 32 : 16);
  NVec acc[kQkSums] = {};  // (key k, row r) at k * R + r
  for (int64_t d = 0; d < D; d += kNativeLanes) {
    NVec qv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      qv[r] = load_u(q + r * D + d);
      if constexpr (kPinQ) pin(qv[r]);  // one load per step, shared by the block's keys
    }
#pragma GCC unroll 16
    for (int k = 0; k < KB; ++k) {
      const NVec kv = load_k<T>(krow[k], d);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[k * R + r] += qv[r] * kv;
    }
  }
  fold_levels<kNativeLanes / 2, kQkSums>(acc);
  alignas(64) float sums[kQkSums];
  std::memcpy(sums, acc, sizeof sums);  // the kQkSums / kNativeLanes reduced vectors
  static constexpr std::array<int, kQkSums> kOrder = reduced_order();
#pragma GCC unroll 16
  for (int i = 0; i < kQkSums; ++i) {
    const int k = kOrder[size_t(i)] / R, r = kOrder[size_t(i)] % R;
    if (k < valid) st[k * kStride + r] = sums[i];
  }
}

// S^T[j][0 .. R) for the n keys of a chunk (rows beyond R are not written); krow: the K rows in
// their stored type T.
template <int R, DType T, class Row>
inline void qk_rows(const float* q, const Row* krow, int n, int64_t D, float* st) {
  constexpr int KB = kQkSums / R;
  int j = 0;
  for (; j + KB <= n; j += KB) qk_rows_micro<R, T>(q, krow + j, D, KB, st + j * kStride);
  if (j < n) {  // the last keys, with the last row standing in for the missing ones
    Row tail[KB];
    for (int k = 0; k < KB; ++k) tail[k] = krow[j + (j + k < n ? k : n - 1 - j)];
    qk_rows_micro<R, T>(q, tail, D, n - j, st + j * kStride);
  }
}

// The rows R a tile of m <= kQkRowsMax rows takes: the next power of two.
constexpr int qk_rows_block(int m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

template <DType T, class Row>
inline void qk_rows_dispatch(int m, const float* q, const Row* krow, int n, int64_t D, float* st) {
  switch (qk_rows_block(m)) {
    case 1: qk_rows<1, T>(q, krow, n, D, st); break;
    case 2: qk_rows<2, T>(q, krow, n, D, st); break;
    case 4: qk_rows<4, T>(q, krow, n, D, st); break;
    default: qk_rows<8, T>(q, krow, n, D, st); break;
  }
}

// S^T[j][0 .. qk_rows_block(m)) of a chunk for m <= kQkRowsMax query rows, K rows stored as t.
// Every (key, row) sum is the same chain of FMAs and the same reduction whatever the block, so a
// query gets the same bits in a packed GQA tile and alone.
inline void qk_few_rows(int m, DType t, const float* q, const void* const* krow, int n, int64_t D, float* st) {
  switch (t) {
    case DType::F32: qk_rows_dispatch<DType::F32>(m, q, krow, n, D, st); break;
    case DType::BF16: qk_rows_dispatch<DType::BF16>(m, q, krow, n, D, st); break;
    case DType::F16: qk_rows_dispatch<DType::F16>(m, q, krow, n, D, st); break;
  }
}
// The same over fp32 rows held as floats (the chunk's RoPE-rotated copies of K).
inline void qk_few_rows(int m, const float* q, const float* const* krow, int n, int64_t D, float* st) {
  qk_rows_dispatch<DType::F32>(m, q, krow, n, D, st);
}

}  // namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS::simd
