// RoPE in the fused CPU kernel: the per-call plan (scaled frequencies turned into cos/sin tables,
// the rope_window limits) and the fp32 rotation of Q rows per tile. The per-key work (rotating K
// rows on load, rope_window's split QK product) is cpu/rope_apply.hpp, built per instruction set.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::cpu {

// cos/sin of position p are composed from two tables, p = p0 + c * kRopeFine + f:
// angle(p) = angle(p0 + c * kRopeFine) + angle(f). Both parts are evaluated in float64 (exact
// argument reduction even at positions of 128k and beyond) and rounded to float, so the composed
// value is within a few float ulps of cos(p θ_r), and the tables stay small: a few floats per
// 64 positions instead of one row per position.
constexpr int kRopeFine = 64;

// The coarse half of the tables for one range of positions [p0, p0 + count).
struct PositionTable {
  int64_t p0 = 0;
  std::vector<float> cos, sin;  // [count / kRopeFine + 1][half], times the attention factor
};

struct RopePlan {
  RopeStyle style = RopeStyle::Neox;
  int rotary_dim = 0;  // even, <= D; 0 for D = 0 (nothing to rotate)
  int half = 0;        // rotated pairs
  std::vector<float> fine_cos, fine_sin;  // [kRopeFine][half]: cos/sin(f θ_r)
  PositionTable keys;     // positions 0 .. Nk-1
  PositionTable queries;  // positions q_offset .. q_offset + Nq - 1
  // rope_window: pair r keeps the cells with |Δ| <= limits[r] (rope::window_limits); empty for
  // plain rope.
  std::vector<int64_t> limits;
  // Caller-supplied tables (AttentionArgs::rope_tables): when set, position p's cos/sin are read
  // from row p ([positions][half]) instead of composed from the tables above.
  const float* user_cos = nullptr;
  const float* user_sin = nullptr;

  bool windowed() const { return !limits.empty(); }

  // Rotate with the caller's tables from now on; query positions start at first_query (Error(Shape)
  // when that is negative and there are queries: tables have no negative rows). validate() checked
  // the upper end.
  void use_tables(const RopeTablesView& t, int64_t first_query, int64_t queries);

  // c[r], s[r] = attention_factor * cos/sin(p θ_r) for r < half; p must lie in t's range.
  void angles(const PositionTable& t, int64_t p, float* c, float* s) const;

  // Rotates the rotated dims of x (a row of at least rotary_dim floats, stride `stride` between
  // dims) by the angles of angles(); dims >= rotary_dim are untouched.
  void rotate(const float* c, const float* s, float* x, int64_t stride) const;
};

// rope_window in one (query tile, key chunk): which dims enter the QK product for every cell and
// which pairs straddle their window inside the tile.
struct WindowSplit {
  // The dims kept for every cell (unrotated dims and both dims of each pair in window
  // everywhere) as ascending contiguous ranges [first, second): the product runs range by range
  // on the rows in place, so pruned dims are neither gathered nor multiplied.
  std::vector<std::pair<int, int>> ranges;
  std::vector<int> boundary;  // pairs kept in some cells of the tile and pruned in others
  // Pairs below first_pair are pruned for every cell: K rotates only the pairs from first_pair
  // on (rows are still copied whole: a bulk copy of a row costs less than picking its pieces).
  int first_pair = 0;
  bool all = true;            // every pair is in window everywhere: nothing to prune
  std::vector<char> keep;     // scratch: per dim, 0 pruned or boundary, 1 kept
};

// Splits the pairs for a tile whose cells have Δ in [delta_lo, delta_hi]: a pair whose window
// holds every |Δ| is kept in the product, one whose window holds none is dropped from it (its
// dims are neither multiplied nor gathered), the rest are boundary pairs.
void split_window(const RopePlan& plan, int64_t D, int64_t delta_lo, int64_t delta_hi,
                  WindowSplit& out);

// The plan of one call: frequencies of rope::rope_frequencies(params, D, seq_len) (seq_len is
// reference::rope_seq_len of the call), tables for key positions [0, Nk) and query positions
// [q_offset, q_offset + Nq) (with document masks: the range the documents' queries span, since
// positions restart per document), and the integer window limits when `windowed`. D = 0 gives an empty
// plan. Throws Error(Verify) for invalid parameters (as rope_frequencies).
RopePlan make_rope_plan(const RopeParams& params, int64_t D, int64_t seq_len, bool windowed,
                        int64_t Nk, int64_t q_offset, int64_t Nq);

}  // namespace attnfuse::cpu
