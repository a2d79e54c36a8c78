// The reference decomposition (seed 003): S = scores with modifiers, P = masks then normalization,
// O = P V, each materialized, in float64 (the oracle) or in the naive same-precision form.
#include "reference/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <limits>
#include <type_traits>

#include "attnfuse/error.hpp"
#include "common/documents.hpp"
#include "common/paged.hpp"
#include "common/dtype.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The validated dimensions of one call.
struct Dims {
  int64_t B = 0, Hq = 0, Hkv = 0, Nq = 0, Nk = 0, D = 0, Dv = 0, group = 1, q_offset = 0;
  double scale = 1.0;
  bool documents = false;  // document(): positions and keys per document (common/documents.hpp)
  // rope / rope_window only (rotary_dim 0 otherwise, and for D = 0: nothing to rotate).
  int rotary_dim = 0;
  rope::RopeFrequencies freqs;    // θ_r after scaling, at rope_seq_len, and the attention factor
  std::vector<float> inv_freq_f;  // the naive form's fp32 θ_r (Hugging Face keeps inv_freq in fp32)
  std::vector<int64_t> limits;    // rope_window: pair r is kept where |Δ| <= limits[r]
  const RopeTablesView* tables = nullptr;  // the caller's cos/sin tables, if given
};

[[noreturn]] void shape_error(const std::string& msg) { throw Error(ErrorCode::Shape, msg); }

std::string shape_str(const std::array<int64_t, 4>& s) {
  return fmt::format("[{}, {}, {}, {}]", s[0], s[1], s[2], s[3]);
}

void check_view(const TensorView& t, const char* name) {
  for (int64_t s : t.shape)
    if (s < 0) shape_error(fmt::format("{} has a negative dimension: {}", name, shape_str(t.shape)));
  if (t.numel() > 0 && t.data == nullptr) shape_error(fmt::format("{} has no data pointer", name));
}

// rope_len: the length RoPE frequencies are computed at (-1: rope_seq_len(a)); a paged call's
// entries are computed one by one at the batch's length.
Dims check(const KernelSpec& spec, const AttentionArgs& a, int64_t rope_len = -1) {
  check_view(a.q, "Q");
  check_view(a.k, "K");
  check_view(a.v, "V");
  Dims d;
  d.B = a.q.shape[0], d.Hq = a.q.shape[1], d.Nq = a.q.shape[2], d.D = a.q.shape[3];
  d.Hkv = a.k.shape[1], d.Nk = a.k.shape[2], d.Dv = a.v.shape[3];
  if (a.k.shape[0] != d.B || a.k.shape[3] != d.D)
    shape_error(fmt::format("K {} does not fit Q {}: K must be [B, Hkv, Nk, D] with Q's B and D",
                            shape_str(a.k.shape), shape_str(a.q.shape)));
  if (a.v.shape[0] != d.B || a.v.shape[1] != d.Hkv || a.v.shape[2] != d.Nk)
    shape_error(fmt::format("V {} does not fit K {}: V must be [B, Hkv, Nk, Dv]",
                            shape_str(a.v.shape), shape_str(a.k.shape)));
  if (d.Hq > 0 && (d.Hkv == 0 || d.Hq % d.Hkv != 0))
    shape_error(fmt::format("query heads ({}) must be a multiple of key/value heads ({})", d.Hq, d.Hkv));
  d.group = d.Hkv > 0 ? std::max<int64_t>(1, d.Hq / d.Hkv) : 1;
  if (spec.head_dim != 0 && spec.head_dim != d.D)
    shape_error(fmt::format("the kernel was compiled for head dim {} but Q has head dim {}",
                            spec.head_dim, d.D));
  d.q_offset = a.resolved_q_offset();
  // D = 0 has no 1/sqrt(D): use 1 so an empty contraction gives zero scores, not NaN.
  d.scale = spec.scalars.scale ? *spec.scalars.scale : (d.D > 0 ? 1.0 / std::sqrt(double(d.D)) : 1.0);

  if (spec.needs_bias()) {
    if (!a.bias)
      throw Error(ErrorCode::MissingTensor,
                  "the program uses additive_bias but no bias tensor was given");
    check_view(*a.bias, "bias");
    const auto& s = a.bias->shape;
    if ((s[0] != 1 && s[0] != d.B) || (s[1] != 1 && s[1] != d.Hq) || s[2] != d.Nq || s[3] != d.Nk)
      shape_error(fmt::format("bias {} must be [1|B, 1|Hq, Nq, Nk] = [1|{}, 1|{}, {}, {}]",
                              shape_str(s), d.B, d.Hq, d.Nq, d.Nk));
  }
  if (spec.needs_block_mask()) {
    const BlockMask* m = a.block_mask;
    if (!m)
      throw Error(ErrorCode::MissingTensor,
                  "the program uses block_sparse but no BlockMask was given");
    if (m->q_len() != d.Nq || m->kv_len() != d.Nk)
      shape_error(fmt::format("the BlockMask was built for lengths (q {}, kv {}) but the call has "
                              "(q {}, kv {}); rebuild it for these lengths",
                              m->q_len(), m->kv_len(), d.Nq, d.Nk));
    if ((m->batch() != 1 && m->batch() != d.B) || (m->heads() != 1 && m->heads() != d.Hq))
      shape_error(fmt::format("the BlockMask has batch {} and heads {}; they must be 1 or the "
                              "call's batch {} and query heads {}",
                              m->batch(), m->heads(), d.B, d.Hq));
  }
  if (spec.needs_cu_seqlens()) {
    check_documents(a);
    d.documents = true;
  } else if (a.cu_seqlens_q || a.cu_seqlens_k) {
    throw Error(ErrorCode::Unsupported, "document offsets (cu_seqlens) were given but the program "
                                        "has no document mask");
  }
  if (spec.modifiers.has(ModifierKind::Alibi) && spec.scalars.alibi == AlibiSlopes::Custom) {
    const auto n = static_cast<int64_t>(spec.scalars.alibi_slopes.size());
    if (n != 1 && n != d.Hq)
      shape_error(fmt::format("alibi has {} custom slopes but the call has {} query heads", n, d.Hq));
  }
  if (spec.score != ScoreKind::ScaledDot && d.D > 0) {
    const RopeParams& rp = spec.scalars.rope;
    d.rotary_dim = rp.rotary_dim > 0 ? rp.rotary_dim : static_cast<int>(d.D);
    if (d.rotary_dim % 2 != 0 || d.rotary_dim > d.D)
      shape_error(fmt::format("rotary_dim {} must be even and at most the head dim {}",
                              d.rotary_dim, d.D));
    // The RoPE library validates the rest (Error(Verify) naming the parameter) and applies the
    // Hugging Face scaling; kernels compute the same frequencies at the same length.
    d.freqs = rope::rope_frequencies(rp, static_cast<int>(d.D), rope_len >= 0 ? rope_len : rope_seq_len(a));
    d.inv_freq_f.assign(d.freqs.inv_freq.begin(), d.freqs.inv_freq.end());
    if (spec.score == ScoreKind::RopeWindow) d.limits = rope::window_limits(d.freqs, rp.window_k);
    if (a.rope_tables) {
      d.tables = &*a.rope_tables;
      if (d.tables->pairs != d.rotary_dim / 2 || (d.tables->positions > 0 && (!d.tables->cos || !d.tables->sin)))
        shape_error(fmt::format("the RoPE tables must hold rotary_dim / 2 = {} pairs per position (they hold {})",
                                d.rotary_dim / 2, d.tables->pairs));
    }
  }
  return d;
}

// Rounding of the naive form: float results are rounded to the input dtype; double is exact.
inline double rnd(DType, double x) { return x; }
inline float rnd(DType t, float x) { return round_to(t, x); }

// RoPE of one row at position `pos`, in place. The oracle is the RoPE library's float64 rotation
// (scaled θ_r, cos and sin times the attention factor). The naive form follows what a
// same-precision model does (Hugging Face): θ_r and angles in fp32, cos/sin times the attention
// factor in fp32 then rounded to the dtype, each product and sum rounded.
template <class T>
void rotate(const RopeParams& rp, const Dims& d, int64_t pos, DType rt, T* x) {
  if (d.rotary_dim == 0) return;
  if (d.tables) {  // the caller's tables, exact in double, rounded to the dtype in the naive form
    if (pos < 0 || pos >= d.tables->positions)
      shape_error(fmt::format("position {} is outside the RoPE tables' [0, {})", pos, d.tables->positions));
    const int half = d.rotary_dim / 2;
    for (int r = 0; r < half; ++r) {
      const rope::PairDims pd = rope::pair_dims(rp.style, d.rotary_dim, r);
      T c = static_cast<T>(d.tables->cos[pos * half + r]), s = static_cast<T>(d.tables->sin[pos * half + r]);
      if constexpr (!std::is_same_v<T, double>) c = rnd(rt, c), s = rnd(rt, s);
      const T a = x[pd.a], b = x[pd.b];
      if constexpr (std::is_same_v<T, double>) {
        x[pd.a] = a * c - b * s;
        x[pd.b] = b * c + a * s;
      } else {
        x[pd.a] = rnd(rt, rnd(rt, a * c) - rnd(rt, b * s));
        x[pd.b] = rnd(rt, rnd(rt, b * c) + rnd(rt, a * s));
      }
    }
    return;
  }
  if constexpr (std::is_same_v<T, double>) {
    rope::rotate(rp, d.freqs, pos, x, static_cast<int>(d.D));
  } else {
    const float af = static_cast<float>(d.freqs.attention_factor);
    for (int r = 0; r < d.rotary_dim / 2; ++r) {
      const rope::PairDims pd = rope::pair_dims(rp.style, d.rotary_dim, r);
      const float angle = float(pos) * d.inv_freq_f[size_t(r)];
      const T c = rnd(rt, std::cos(angle) * af), s = rnd(rt, std::sin(angle) * af);
      const T a = x[pd.a], b = x[pd.b];
      x[pd.a] = rnd(rt, rnd(rt, a * c) - rnd(rt, b * s));
      x[pd.b] = rnd(rt, rnd(rt, b * c) + rnd(rt, a * s));
    }
  }
}

// Everything one worker needs, shared read-only.
struct Ctx {
  const KernelSpec& spec;
  const AttentionArgs& args;
  const Dims& d;
  DType rt;  // the dtype the naive form rounds to
  const Documents* docs = nullptr;  // document(): the documents of the batch entry at hand
};

// Where the cells of query row i live: the keys its document holds and the frame of its
// positions (common/documents.hpp). Without documents: every key, q_offset, origin 0.
struct RowFrame {
  int64_t q_offset = 0;      // Δ(i, j) = i + q_offset - j
  int64_t k_lo = 0, k_hi = 0;  // keys of the row's document
  int64_t origin = 0;        // the position of key j is j - origin
};

RowFrame frame_of(const Ctx& c, int64_t i) {
  if (!c.docs) return {c.d.q_offset, 0, c.d.Nk, 0};
  const Documents& docs = *c.docs;
  const int64_t doc = docs.doc_of_query(i);
  return {docs.shift(doc), docs.k[size_t(doc)], docs.k[size_t(doc + 1)], docs.k[size_t(doc)]};
}

// The position of key j: j, or j counted from the start of its document.
int64_t key_position(const Ctx& c, int64_t j) {
  return c.docs ? j - c.docs->k[size_t(c.docs->doc_of_key(j))] : j;
}

// K (transposed to [D, Nk], rotated when the score op is rope) and V ([Nk, Dv]) of one
// (b, kv head), converted once so the inner loops are contiguous and vectorize.
template <class T>
struct KvHead {
  std::vector<T> kt, v;
};

template <class T>
KvHead<T> load_kv(const Ctx& c, int64_t b, int64_t hkv) {
  const Dims& d = c.d;
  KvHead<T> kv;
  kv.kt.resize(static_cast<size_t>(d.D * d.Nk));
  kv.v.resize(static_cast<size_t>(d.Nk * d.Dv));
  std::vector<T> row(static_cast<size_t>(d.D));
  for (int64_t j = 0; j < d.Nk; ++j) {
    for (int64_t x = 0; x < d.D; ++x)
      row[size_t(x)] = load_elem(c.args.k.data, c.args.k.dtype, c.args.k.offset(b, hkv, j, x));
    rotate(c.spec.scalars.rope, d, key_position(c, j), c.rt, row.data());
    for (int64_t x = 0; x < d.D; ++x) kv.kt[size_t(x * d.Nk + j)] = row[size_t(x)];
    for (int64_t x = 0; x < d.Dv; ++x)
      kv.v[size_t(j * d.Dv + x)] = load_elem(c.args.v.data, c.args.v.dtype, c.args.v.offset(b, hkv, j, x));
  }
  return kv;
}

// Keys [lo, hi) that causal, sliding_window and document leave to row i (all keys when none
// applies).
std::pair<int64_t, int64_t> key_interval(const KernelSpec& spec, const RowFrame& f, int64_t i) {
  const int64_t pq = i + f.q_offset;
  int64_t lo = f.k_lo, hi = f.k_hi;
  if (spec.masks.has(MaskKind::Causal)) hi = std::min(hi, pq + 1);
  if (spec.masks.has(MaskKind::SlidingWindow)) {
    lo = std::max(lo, pq - spec.scalars.window + 1);
    hi = std::min(hi, pq + spec.scalars.window);
  }
  return {lo, std::max(lo, hi)};
}

// S rows [i0, i1) of (b, hq): the score op, then the modifiers in program order. With
// `all_cells` false, cells outside the causal/window interval are left 0 (the oracle never
// reads them); the public scores() materializes every cell, as an unfused op would.
template <class T>
void score_rows(const Ctx& c, const KvHead<T>& kv, int64_t b, int64_t hq, int64_t i0, int64_t i1, T* S,
                bool all_cells) {
  const Dims& d = c.d;
  const KernelSpec& spec = c.spec;
  const int64_t Nk = d.Nk, D = d.D, rows = i1 - i0;
  const double slope = spec.modifiers.has(ModifierKind::Alibi) ? alibi_slope(spec.scalars, hq, d.Hq) : 0.0;
  std::vector<T> q(static_cast<size_t>(rows * D));
  std::vector<std::pair<int64_t, int64_t>> range(static_cast<size_t>(rows));
  std::vector<RowFrame> frame(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    T* qr = q.data() + r * D;
    const RowFrame& f = frame[size_t(r)] = frame_of(c, i0 + r);
    for (int64_t x = 0; x < D; ++x) qr[x] = load_elem(c.args.q.data, c.args.q.dtype, c.args.q.offset(b, hq, i0 + r, x));
    rotate(spec.scalars.rope, d, i0 + r + f.q_offset - f.origin, c.rt, qr);
    range[size_t(r)] = all_cells ? std::pair<int64_t, int64_t>{0, Nk} : key_interval(spec, f, i0 + r);
  }
  std::fill(S, S + rows * Nk, T(0));
  // rope_window (ATFlash): pair r contributes only where |Δ| <= k * λ_r, compared as the
  // integer limits of rope::window_limits so every backend prunes exactly the same cells; dims
  // past rotary_dim (and every dim of the other score ops) contribute to every cell.
  const bool windowed = spec.score == ScoreKind::RopeWindow && d.rotary_dim > 0;
  const int half = windowed ? d.rotary_dim / 2 : 0;
  const RopeParams& rp = spec.scalars.rope;
  // Q K^T over blocks of 256 keys: the K^T block (D x 256) stays in L2 while every row reads it.
  constexpr int64_t kBlock = 256;
  for (int64_t j0 = 0; j0 < Nk; j0 += kBlock)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t ja = std::max(range[size_t(r)].first, j0), jb = std::min(range[size_t(r)].second, j0 + kBlock);
      const T* qr = q.data() + r * D;
      T* s = S + r * Nk;
      for (int64_t x = windowed ? d.rotary_dim : 0; x < D; ++x) {
        const T qx = qr[x];
        const T* kx = kv.kt.data() + x * Nk;
        for (int64_t j = ja; j < jb; ++j) s[j] += qx * kx[j];
      }
      const int64_t pq = i0 + r + frame[size_t(r)].q_offset;
      for (int p = 0; p < half; ++p) {
        // Keys j with pq - w <= j <= pq + w, clipped to [ja, jb); w < 0 keeps none.
        const int64_t w = d.limits[size_t(p)];
        if (w < 0 || ja >= jb) continue;
        const int64_t jlo = pq - ja > w ? pq - w : ja;
        const int64_t jhi = jb - 1 - pq > w ? pq + w + 1 : jb;
        const rope::PairDims pd = rope::pair_dims(rp.style, d.rotary_dim, p);
        const T qa = qr[pd.a], qb = qr[pd.b];
        const T *ka = kv.kt.data() + pd.a * Nk, *kb = kv.kt.data() + pd.b * Nk;
        for (int64_t j = jlo; j < jhi; ++j) s[j] += qa * ka[j] + qb * kb[j];
      }
    }
  const T scale = T(d.scale), cap = T(spec.scalars.softcap);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r, pq = i + frame[size_t(r)].q_offset;
    const auto [lo, hi] = range[size_t(r)];
    T* s = S + r * Nk;
    for (int64_t j = lo; j < hi; ++j) s[j] = rnd(c.rt, scale * s[j]);
    for (int m = 0; m < spec.modifiers.size(); ++m) {
      switch (spec.modifiers[m]) {
        case ModifierKind::Alibi:
          for (int64_t j = lo; j < hi; ++j) s[j] = rnd(c.rt, s[j] + T(-slope * std::abs(double(pq - j))));
          break;
        case ModifierKind::AdditiveBias: {
          const TensorView& bias = *c.args.bias;
          const int64_t bb = bias.shape[0] == 1 ? 0 : b, bh = bias.shape[1] == 1 ? 0 : hq;
          for (int64_t j = lo; j < hi; ++j)
            s[j] = rnd(c.rt, s[j] + T(load_elem(bias.data, bias.dtype, bias.offset(bb, bh, i, j))));
          break;
        }
        case ModifierKind::Softcap:
          // Three rounded ops in the naive form (divide, tanh, multiply), as FlashAttention's
          // same-precision reference does.
          for (int64_t j = lo; j < hi; ++j) s[j] = rnd(c.rt, cap * rnd(c.rt, std::tanh(rnd(c.rt, s[j] / cap))));
          break;
      }
    }
  }
}

// Which keys row i keeps (1/0 per key), every mask applied.
void kept_row(const Ctx& c, int64_t b, int64_t hq, int64_t i, uint8_t* keep) {
  const Dims& d = c.d;
  const auto [lo, hi] = key_interval(c.spec, frame_of(c, i), i);
  std::fill(keep, keep + d.Nk, uint8_t{0});
  if (lo >= hi) return;
  if (!c.spec.masks.has(MaskKind::BlockSparse)) {
    std::fill(keep + lo, keep + hi, uint8_t{1});
    return;
  }
  const BlockMask& bm = *c.args.block_mask;
  const int64_t qb = i / bm.block_q();
  auto cols = bm.kv_blocks(b, hq, qb);
  auto full = bm.full_flags(b, hq, qb);
  for (size_t e = 0; e < cols.size(); ++e) {
    const int64_t k0 = std::max(lo, int64_t{cols[e]} * bm.block_k());
    const int64_t k1 = std::min(hi, (int64_t{cols[e]} + 1) * bm.block_k());
    for (int64_t j = k0; j < k1; ++j) keep[j] = full[e] ? 1 : (bm.keeps(b, hq, i, j) ? 1 : 0);
  }
}

// In place S -> P for rows [i0, i1); lse (may be null) gets one value per row.
template <class T>
void normalize_rows(const Ctx& c, int64_t b, int64_t hq, int64_t i0, int64_t i1, T* S, T* lse) {
  const int64_t Nk = c.d.Nk;
  std::vector<uint8_t> keep(static_cast<size_t>(Nk));
  for (int64_t i = i0; i < i1; ++i) {
    T* s = S + (i - i0) * Nk;
    kept_row(c, b, hq, i, keep.data());
    int64_t count = 0;
    T m = T(kNegInf);
    for (int64_t j = 0; j < Nk; ++j) {
      if (!keep[size_t(j)]) continue;
      ++count;
      if (std::isnan(s[j]) || s[j] > m) m = std::isnan(m) ? m : s[j];  // NaN sticks
    }
    // No kept key, or every kept score is -inf (e.g. a -inf bias): no key carries weight, so the
    // row is O = 0 and LSE = -inf rather than 0/0.
    const bool empty = count == 0 ||
                       (c.spec.norm == NormKind::Softmax && m == T(kNegInf));
    T row_lse;
    if (empty) {
      std::fill(s, s + Nk, T(0));
      row_lse = T(kNegInf);
    } else if (c.spec.norm == NormKind::Softmax) {
      T sum = 0;
      for (int64_t j = 0; j < Nk; ++j) {
        s[j] = keep[size_t(j)] ? std::exp(s[j] - m) : T(0);
        sum += s[j];
      }
      for (int64_t j = 0; j < Nk; ++j) s[j] = rnd(c.rt, s[j] / sum);
      row_lse = m + std::log(sum);
    } else {
      // relu_attention: p = max(s, 0) / L_i (NaN propagates); its LSE is log L_i, the log of
      // the normalizer, so a split-KV combine can weight partial rows by their key counts.
      const T L = T(count);
      for (int64_t j = 0; j < Nk; ++j) {
        const T x = s[j];
        s[j] = keep[size_t(j)] ? rnd(c.rt, (std::isnan(x) || x > 0 ? x : T(0)) / L) : T(0);
      }
      row_lse = std::log(L);
    }
    if (lse) lse[i - i0] = row_lse;
  }
}

// O rows [i0, i1) = P V. A zero weight contributes nothing (masked keys are not selected), so
// NaN/Inf in V at masked keys does not propagate; at kept keys with nonzero weight it does.
template <class T>
void pv_rows(int64_t Nk, int64_t Dv, const T* v, int64_t rows, const T* P, T* out, DType rt) {
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out + r * Dv;
    std::fill(o, o + Dv, T(0));
    const T* p = P + r * Nk;
    for (int64_t j = 0; j < Nk; ++j) {
      const T w = p[j];
      if (w == T(0)) continue;
      const T* vj = v + j * Dv;
      for (int64_t x = 0; x < Dv; ++x) o[x] += w * vj[x];
    }
    for (int64_t x = 0; x < Dv; ++x) o[x] = rnd(rt, o[x]);
  }
}

template <class T>
void run(const Ctx& call, Result& res) {
  const Dims& d = call.d;
  // Rows per task: bounded so the materialized S of one task stays within ~8 MB.
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(256, (int64_t{1} << 20) / std::max<int64_t>(1, d.Nk)));
  const int64_t chunks = (d.Nq + rows - 1) / rows;
  for (int64_t b = 0; b < d.B; ++b) {
    const Documents docs = d.documents ? read_documents(call.args, b) : Documents{};
    const Ctx c{call.spec, call.args, d, call.rt, d.documents ? &docs : nullptr};
    for (int64_t hkv = 0; hkv < d.Hkv; ++hkv) {
      if (d.Nq == 0) continue;
      const KvHead<T> kv = load_kv<T>(c, b, hkv);
      const int64_t tasks = d.group * chunks;
      std::exception_ptr failure;
      // Threads only pay off past ~1M multiply-adds; below that, waking them costs more (and a
      // loaded machine makes the wake-up barrier slow).
      const bool parallel = tasks > 1 && d.group * d.Nq * d.Nk * (d.D + d.Dv) > (int64_t{1} << 20);
#pragma omp parallel if (parallel)
      {
        std::vector<T> S, lse, out;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; ++t) {
          try {
            const int64_t hq = hkv * d.group + t / chunks;
            const int64_t i0 = (t % chunks) * rows, i1 = std::min(d.Nq, i0 + rows);
            S.resize(static_cast<size_t>((i1 - i0) * d.Nk));
            lse.resize(static_cast<size_t>(i1 - i0));
            out.resize(static_cast<size_t>((i1 - i0) * d.Dv));
            score_rows(c, kv, b, hq, i0, i1, S.data(), false);
            normalize_rows(c, b, hq, i0, i1, S.data(), lse.data());
            pv_rows(d.Nk, d.Dv, kv.v.data(), i1 - i0, S.data(), out.data(), c.rt);
            const int64_t row0 = (b * d.Hq + hq) * d.Nq;
            std::copy(out.begin(), out.end(), res.out.begin() + (row0 + i0) * d.Dv);
            std::copy(lse.begin(), lse.end(), res.lse.begin() + row0 + i0);
          } catch (...) {
#pragma omp critical(attnfuse_reference_failure)
            if (!failure) failure = std::current_exception();
          }
        }
      }
      if (failure) std::rethrow_exception(failure);
    }
  }
}

Result contiguous_attention(const KernelSpec& spec, const AttentionArgs& args, Precision precision,
                            int64_t rope_len = -1) {
  const Dims d = check(spec, args, rope_len);
  Result res;
  res.out.assign(static_cast<size_t>(d.B * d.Hq * d.Nq * d.Dv), 0.0);
  res.lse.assign(static_cast<size_t>(d.B * d.Hq * d.Nq), kNegInf);
  const Ctx c{spec, args, d, args.q.dtype};
  if (precision == Precision::F64)
    run<double>(c, res);
  else
    run<float>(c, res);
  return res;
}

// A paged cache: each batch entry's pages gathered into a contiguous [1, Hkv, Nk_b, D] K / V of
// the same dtype (exact copies), then computed as its own call with its own length, the explicit
// q_offset if any, and the batch's RoPE length.
Result paged_attention(const KernelSpec& spec, const AttentionArgs& args, Precision precision) {
  check_view(args.q, "Q");
  check_paged(spec, args);
  const PagedKV& pk = *args.paged;
  const int64_t B = args.q.shape[0], Hq = args.q.shape[1], Nq = args.q.shape[2], D = args.q.shape[3];
  const int64_t Hkv = pk.heads(), Dv = pk.v_pages.shape[3], ps = pk.page_size();
  const int64_t rope_len = paged_rope_seq_len(args);
  const auto es = static_cast<size_t>(dtype_size(args.q.dtype));
  Result res;
  res.out.assign(static_cast<size_t>(B * Hq * Nq * Dv), 0.0);
  res.lse.assign(static_cast<size_t>(B * Hq * Nq), kNegInf);
  const auto ks = pk.strides(pk.k_pages), vs = pk.strides(pk.v_pages);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nk = pk.kv_len(b);
    std::vector<std::byte> kb(size_t(Hkv * nk * D) * es + 1), vb(size_t(Hkv * nk * Dv) * es + 1);
    const TensorView k = TensorView::contiguous(kb.data(), args.q.dtype, {1, Hkv, nk, D});
    const TensorView v = TensorView::contiguous(vb.data(), args.q.dtype, {1, Hkv, nk, Dv});
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t page = pk.page_indices[size_t(pk.page_indptr[size_t(b)] + j / ps)], slot = j % ps;
        const auto* ksrc = static_cast<const std::byte*>(pk.k_pages.data) + size_t(page * ks[0] + h * ks[1] + slot * ks[2]) * es;
        const auto* vsrc = static_cast<const std::byte*>(pk.v_pages.data) + size_t(page * vs[0] + h * vs[1] + slot * vs[2]) * es;
        std::copy(ksrc, ksrc + size_t(D) * es, kb.data() + size_t(k.offset(0, h, j, 0)) * es);
        std::copy(vsrc, vsrc + size_t(Dv) * es, vb.data() + size_t(v.offset(0, h, j, 0)) * es);
      }
    AttentionArgs one;
    one.q = args.q;
    one.q.shape[0] = 1;
    one.q.data = static_cast<std::byte*>(args.q.data) + size_t(b * args.q.strides[0]) * es;
    one.k = k, one.v = v;
    one.q_offset = args.q_offset;
    const Result r = contiguous_attention(spec, one, precision, rope_len);
    std::copy(r.out.begin(), r.out.end(), res.out.begin() + b * Hq * Nq * Dv);
    std::copy(r.lse.begin(), r.lse.end(), res.lse.begin() + b * Hq * Nq);
  }
  return res;
}

}  // namespace

Result attention(const KernelSpec& spec, const AttentionArgs& args, Precision precision) {
  return args.paged ? paged_attention(spec, args, precision) : contiguous_attention(spec, args, precision);
}

template <class T>
void scores(const KernelSpec& spec, const AttentionArgs& args, int64_t b, int64_t hq, T* S) {
  const Dims d = check(spec, args);
  const Documents docs = d.documents ? read_documents(args, b) : Documents{};
  const Ctx c{spec, args, d, args.q.dtype, d.documents ? &docs : nullptr};
  const KvHead<T> kv = load_kv<T>(c, b, hq / d.group);
  score_rows(c, kv, b, hq, 0, d.Nq, S, true);
}

template <class T>
void normalize(const KernelSpec& spec, const AttentionArgs& args, int64_t b, int64_t hq, T* S, T* lse) {
  const Dims d = check(spec, args);
  const Documents docs = d.documents ? read_documents(args, b) : Documents{};
  const Ctx c{spec, args, d, args.q.dtype, d.documents ? &docs : nullptr};
  normalize_rows(c, b, hq, 0, d.Nq, S, lse);
}

template <class T>
void pv(const AttentionArgs& args, int64_t b, int64_t hq, const T* P, T* out) {
  const TensorView& v = args.v;
  const int64_t Hq = args.q.shape[1], Nq = args.q.shape[2], Hkv = v.shape[1], Nk = v.shape[2], Dv = v.shape[3];
  if (Hkv <= 0 || Hq % Hkv != 0)
    shape_error(fmt::format("query heads ({}) must be a multiple of key/value heads ({})", Hq, Hkv));
  const int64_t hkv = hq / (Hq / Hkv);
  std::vector<T> vv(static_cast<size_t>(Nk * Dv));
  for (int64_t j = 0; j < Nk; ++j)
    for (int64_t x = 0; x < Dv; ++x) vv[size_t(j * Dv + x)] = load_elem(v.data, v.dtype, v.offset(b, hkv, j, x));
  pv_rows(Nk, Dv, vv.data(), Nq, P, out, args.q.dtype);
}

template void scores<double>(const KernelSpec&, const AttentionArgs&, int64_t, int64_t, double*);
template void scores<float>(const KernelSpec&, const AttentionArgs&, int64_t, int64_t, float*);
template void normalize<double>(const KernelSpec&, const AttentionArgs&, int64_t, int64_t, double*, double*);
template void normalize<float>(const KernelSpec&, const AttentionArgs&, int64_t, int64_t, float*, float*);
template void pv<double>(const AttentionArgs&, int64_t, int64_t, const double*, double*);
template void pv<float>(const AttentionArgs&, int64_t, int64_t, const float*, float*);

int64_t rope_seq_len(const AttentionArgs& args) {
  if (args.paged) return paged_rope_seq_len(args);  // the longest sequence of the batch
  if (args.cu_seqlens_k) return longest_key_document(args);  // positions restart per document
  const int64_t Nq = args.q.shape[2], Nk = args.k.shape[2];
  return std::max(Nk, Nq > 0 ? args.resolved_q_offset() + Nq : 0);
}

bool keeps(const KernelSpec& spec, const AttentionArgs& args, int64_t b, int64_t hq, int64_t i, int64_t j) {
  int64_t delta = i + args.resolved_q_offset() - j;
  if (spec.masks.has(MaskKind::Document)) {
    check_documents(args);
    const Documents docs = read_documents(args, b);
    const int64_t doc = docs.doc_of_query(i);
    if (docs.doc_of_key(j) != doc) return false;
    delta = i + docs.shift(doc) - j;
  }
  if (spec.masks.has(MaskKind::Causal) && delta < 0) return false;
  if (spec.masks.has(MaskKind::SlidingWindow) && std::abs(delta) >= spec.scalars.window) return false;
  if (spec.masks.has(MaskKind::BlockSparse)) {
    if (!args.block_mask)
      throw Error(ErrorCode::MissingTensor, "the program uses block_sparse but no BlockMask was given");
    if (!args.block_mask->keeps(b, hq, i, j)) return false;
  }
  return true;
}

double alibi_slope(const ScalarArgs& scalars, int64_t h, int64_t num_heads) {
  if (scalars.alibi == AlibiSlopes::Custom) {
    const auto& s = scalars.alibi_slopes;
    if (s.size() == 1) return s[0];
    if (static_cast<int64_t>(s.size()) != num_heads || h < 0 || h >= num_heads)
      shape_error(fmt::format("alibi has {} custom slopes but the call has {} query heads", s.size(), num_heads));
    return s[static_cast<size_t>(h)];
  }
  if (num_heads <= 0 || h < 0 || h >= num_heads)
    shape_error(fmt::format("alibi slope of head {} asked for {} heads", h, num_heads));
  // ALiBi (Press et al.): for n a power of two, slope_h = 2^(-8(h+1)/n). Otherwise take the n'
  // slopes of the closest lower power of two n', then every other slope of the 2n' sequence
  // (2^(-8(2k+1)/(2n')), k = 0, 1, ...) for the remaining heads.
  int64_t p = 1;
  while (p * 2 <= num_heads) p *= 2;
  if (h < p) return std::exp2(-8.0 * double(h + 1) / double(p));
  const int64_t k = h - p;
  return std::exp2(-8.0 * double(2 * k + 1) / double(2 * p));
}

}  // namespace attnfuse::reference
