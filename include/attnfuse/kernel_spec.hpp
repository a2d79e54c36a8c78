// The typed description of one fused attention kernel: roles (structure, compile time) plus the
// program's scalars (run-time kernel arguments, so changing a value never recompiles).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnfuse/tensor.hpp"

namespace attnfuse {

// ---- Roles: what the kernel is made of (compile-time structure) ----------------------------

enum class ScoreKind { ScaledDot, Rope, RopeWindow };
// `full` is the empty set. Document: packed sequences, cells (i, j) of one document only, with
// positions counted inside each document (attention.hpp, AttentionArgs::cu_seqlens_q).
enum class MaskKind { Causal, SlidingWindow, BlockSparse, Document };
enum class ModifierKind { Alibi, AdditiveBias, Softcap };
enum class NormKind { Softmax, ReluAttention };
enum class Target { Cpu, Cuda };

const char* score_kind_name(ScoreKind k);
const char* mask_kind_name(MaskKind k);
const char* modifier_kind_name(ModifierKind k);
const char* norm_kind_name(NormKind k);
const char* target_name(Target t);

// The set of masks a program applies (a cell is kept iff every mask keeps it).
class MaskSet {
 public:
  constexpr MaskSet() = default;
  constexpr bool has(MaskKind k) const { return (bits_ >> static_cast<unsigned>(k)) & 1u; }
  constexpr void add(MaskKind k) { bits_ |= 1u << static_cast<unsigned>(k); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr unsigned bits() const { return bits_; }
  friend constexpr bool operator==(MaskSet, MaskSet) = default;

 private:
  unsigned bits_ = 0;
};

// Score modifiers in program order (innermost first). Each kind appears at most once.
class ModifierChain {
 public:
  static constexpr int kMax = 3;
  constexpr int size() const { return n_; }
  constexpr ModifierKind operator[](int i) const { return kinds_[static_cast<size_t>(i)]; }
  constexpr bool has(ModifierKind k) const {
    for (int i = 0; i < n_; ++i)
      if (kinds_[static_cast<size_t>(i)] == k) return true;
    return false;
  }
  constexpr void push(ModifierKind k) { kinds_[static_cast<size_t>(n_++)] = k; }
  // Dense code of the ordered chain: base-4 digits (kind+1), innermost first. Used to pick a
  // compile-time specialization.
  constexpr unsigned code() const {
    unsigned c = 0;
    for (int i = n_ - 1; i >= 0; --i) c = c * 4u + static_cast<unsigned>(kinds_[static_cast<size_t>(i)]) + 1u;
    return c;
  }
  friend constexpr bool operator==(const ModifierChain& a, const ModifierChain& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.kinds_[static_cast<size_t>(i)] != b.kinds_[static_cast<size_t>(i)]) return false;
    return true;
  }

 private:
  std::array<ModifierKind, kMax> kinds_{};
  int n_ = 0;
};

// ---- Scalars: run-time kernel arguments taken from the program text ------------------------

enum class RopeStyle { Neox, Gptj };
enum class RopeScaling { None, Linear, Dynamic, Yarn, Llama3, Longrope };

const char* rope_style_name(RopeStyle s);

// Where a CUDA rope / rope_window kernel rotates Q and K: in the attention kernel as tiles
// arrive (fused), in a rotation kernel that writes rotated copies first (prerotate), or chosen
// per call from the shapes by the tile pass's cost model (auto; passes/rope_placement.hpp).
// The CPU backend always fuses.
enum class RopeMode { Auto, Fused, Prerotate };

// Where a CUDA call's K and V live: strided [B, Hkv, Nk, D] tensors, or a paged cache
// (AttentionArgs::paged). Like the rope placement it is resolved per call; each layout is its
// own compiled variant, so contiguous calls carry no page-table code.
enum class KvLayout { Contiguous, Paged };
const char* rope_mode_name(RopeMode m);
const char* rope_scaling_name(RopeScaling s);

// RoPE parameters with Hugging Face names (rope_scaling / rope_parameters). Fields that a
// scaling does not use are ignored by it.
struct RopeParams {
  double base = 10000.0;
  RopeStyle style = RopeStyle::Neox;
  int rotary_dim = 0;  // 0: the head dim
  RopeScaling rope_type = RopeScaling::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;  // yarn
  double beta_slow = 1.0;   // yarn
  std::optional<double> attention_factor = {};  // yarn / longrope
  double mscale = 0.0;          // yarn (DeepSeek variant); 0 = unused
  double mscale_all_dim = 0.0;  // yarn (DeepSeek variant); 0 = unused
  std::vector<double> long_factor = {};   // longrope, rotary_dim/2 entries
  std::vector<double> short_factor = {};  // longrope, rotary_dim/2 entries
  double window_k = 0.0;  // rope_window: keep pair r where |delta| <= k * lambda_r
  friend bool operator==(const RopeParams&, const RopeParams&) = default;
};

enum class AlibiSlopes { Standard, Custom };

struct ScalarArgs {
  std::optional<double> scale;  // unset: 1/sqrt(D)
  int64_t window = 0;           // sliding_window: keep |delta| < window
  double softcap = 0.0;         // softcap: s = c * tanh(s / c)
  AlibiSlopes alibi = AlibiSlopes::Standard;
  std::vector<double> alibi_slopes;  // Custom: one per query head (or a single value for all)
  RopeParams rope;
  friend bool operator==(const ScalarArgs&, const ScalarArgs&) = default;
};

// ---- Tiling: chosen by the tile pass for a target -----------------------------------------

struct TileConfig {
  int block_q = 64;   // query rows per tile
  int block_k = 64;   // keys per tile
  int num_warps = 0;  // CUDA only
  int stages = 0;     // CUDA only: cp.async pipeline depth
  // CUDA only, the decode variant: the query heads of one GQA group share a tile's rows (row r
  // is head r / Nq of the group, query r % Nq), so each K/V tile is read once per KV head.
  bool pack_gqa = false;
  // CUDA only: warps sharing the same rows, each taking a slice of every key tile (the narrow
  // decode tile; 1 elsewhere).
  int key_warps = 1;
  // CUDA only, Hopper (sm_90a): the template's warpgroup-MMA form (wgmma on swizzled tiles) of
  // the prefill tile (128 rows, or 192 at D = 64); the runtime sets it for the device it compiles
  // for (passes::cuda_arch_tile).
  bool wgmma = false;
  // CUDA only: blocks per SM the kernel is compiled to keep resident (__launch_bounds__'s
  // second argument, so the compiler caps registers at 64K / (threads * min_blocks)). Two
  // lets one block's prologue and epilogue overlap another's MMAs where tiles are short.
  int min_blocks = 1;
  // CUDA only, Hopper: the decode tiles take their K/V tiles by the copy engine (TMA, issued by
  // thread 0, or by warp 0 for paged K/V, completing on a per-stage mbarrier) into 128-byte
  // swizzled stages, instead of cp.async from every thread into padded ones. Set by the runtime
  // (CudaKernel::resolved).
  bool tma_kv = false;
  // CUDA only, Hopper, where the tile copies K/V by TMA (a decode tile with tma_kv, or the wgmma
  // prefill tile): one more warp issues those copies while the num_warps warps compute
  // (attention_fwd.cuh, FwdKernel::producer; a warpgroup for the wgmma tile, which
  // passes::cuda_arch_tile gives one). The decode tiles' is an experiment, off unless
  // ATTNFUSE_CUDA_DECODE_PRODUCER=1; ATTNFUSE_CUDA_WGMMA_PRODUCER=0 takes the wgmma tile's away.
  bool producer_warp = false;
  // CUDA only, Hopper, the wgmma prefill tile of a block-sparse program: each warpgroup skips
  // the mask blocks that keep none of its 64 rows' cells and reads those that keep all of them
  // unmasked (a mask finer than the tile, coarsened to it, lists a block for every row of the
  // tile that has one). Set per call by the runtime (CudaKernel::plan) where the mask's blocks
  // have such rows (runtime::entry_states): the skipping loop costs masks that never skip.
  bool skip_row_groups = false;
  friend bool operator==(const TileConfig&, const TileConfig&) = default;
};

// ---- The spec -------------------------------------------------------------------------------

struct KernelSpec {
  // roles
  ScoreKind score = ScoreKind::ScaledDot;
  MaskSet masks;
  ModifierChain modifiers;
  NormKind norm = NormKind::Softmax;
  // target and tiling
  Target target = Target::Cpu;
  TileConfig tile;
  DType dtype = DType::F32;  // element type of Q/K/V/O
  int head_dim = 0;          // 0: any (the CPU kernel takes D at run time)
  RopeMode rope_mode = RopeMode::Auto;  // rope / rope_window on CUDA (see RopeMode)
  KvLayout kv_layout = KvLayout::Contiguous;  // CUDA: resolved per call (see KvLayout)
  // run-time arguments with the program's values
  ScalarArgs scalars;

  bool needs_bias() const { return modifiers.has(ModifierKind::AdditiveBias); }
  bool needs_block_mask() const { return masks.has(MaskKind::BlockSparse); }
  bool needs_cu_seqlens() const { return masks.has(MaskKind::Document); }
};

// Canonical multi-line printout (`attnfuse compile --emit spec`), stable for golden tests.
std::string to_string(const KernelSpec& spec);

}  // namespace attnfuse
