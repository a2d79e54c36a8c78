// The CUDA backend's environment knobs (cuda_knobs.hpp).
#include "runtime/cuda_knobs.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "attnfuse/error.hpp"

namespace attnfuse::runtime {
namespace {

bool empty(const char* text) { return text == nullptr || *text == '\0'; }

// True unless the environment sets `name` to 0.
bool knob_on(const char* name) {
  const char* env = std::getenv(name);
  return !(env && std::string(env) == "0");
}

// An experiment's switch: on only when set to 1.
bool knob_opted_in(const char* name) {
  const char* env = std::getenv(name);
  return env && std::string(env) == "1";
}

// An integer knob from lo to hi (`what` names it in the error: "a split count from 1 to 128").
std::optional<int> parse_int_knob(const char* text, const char* knob, int lo, int hi, const char* what) {
  if (empty(text)) return std::nullopt;
  int n = 0;
  char tail = 0;
  if (std::sscanf(text, "%d%c", &n, &tail) != 1 || n < lo || n > hi)
    throw Error(ErrorCode::Unsupported, fmt::format("{}='{}' is not {}", knob, text, what));
  return n;
}

}  // namespace

std::optional<TileConfig> parse_tile_knob(const char* text) {
  if (empty(text)) return std::nullopt;
  TileConfig c;
  c.stages = 2;
  char tail = 0;
  if (std::sscanf(text, "%d,%d,%d%c", &c.block_q, &c.block_k, &c.num_warps, &tail) != 3 || c.num_warps <= 0 ||
      c.block_q <= 0 || c.block_q % (16 * c.num_warps) != 0 || c.block_k <= 0 || c.block_k % 16 != 0)
    throw Error(ErrorCode::Unsupported,
                fmt::format("ATTNFUSE_CUDA_TILE='{}' is not block_q,block_k,num_warps with block_q a "
                            "multiple of 16*num_warps and block_k a multiple of 16", text));
  return c;
}

std::optional<TileConfig> parse_decode_tile_knob(const char* text) {
  if (empty(text)) return std::nullopt;
  TileConfig c;
  c.pack_gqa = true;
  c.key_warps = 1;
  char tail = 0;
  // block_q,block_k,num_warps,stages[,key_warps]: key_warps warps share each 16-row atom, each
  // taking block_k / key_warps keys of every tile (the narrow decode tile: 16,64,4,2,4).
  const int n = std::sscanf(text, "%d,%d,%d,%d,%d%c", &c.block_q, &c.block_k, &c.num_warps, &c.stages,
                            &c.key_warps, &tail);
  const bool shape_ok = (n == 4 || n == 5) && c.num_warps > 0 && c.key_warps > 0 && c.num_warps % c.key_warps == 0 &&
                        c.block_q > 0 && c.block_q % (16 * (c.num_warps / c.key_warps)) == 0 && c.block_k > 0 &&
                        c.block_k % (16 * c.key_warps) == 0 && c.stages >= 2;
  if (!shape_ok)
    throw Error(ErrorCode::Unsupported,
                fmt::format("ATTNFUSE_CUDA_DECODE_TILE='{}' is not block_q,block_k,num_warps,stages[,key_warps] with "
                            "num_warps a multiple of key_warps, block_q a multiple of 16*num_warps/key_warps, "
                            "block_k of 16*key_warps and stages >= 2",
                            text));
  return c;
}

std::optional<int> parse_decode_splits_knob(const char* text) {
  return parse_int_knob(text, "ATTNFUSE_CUDA_DECODE_SPLITS", 1, 128, "a split count from 1 to 128");
}

std::optional<int64_t> parse_paged_deep_max_tiles_knob(const char* text) {
  if (empty(text)) return std::nullopt;
  long long n = 0;
  char tail = 0;
  if (std::sscanf(text, "%lld%c", &n, &tail) != 1 || n < 1)
    throw Error(ErrorCode::Unsupported,
                fmt::format("ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES='{}' is not a tile count of 1 or more", text));
  return n;
}

std::optional<int> parse_early_l2_knob(const char* text) {
  static_assert(kEarlyL2DefaultTiles == 16, "the default is the most a call may ask for, which the message names");
  return parse_int_knob(text, "ATTNFUSE_CUDA_EARLY_L2", 0, kEarlyL2DefaultTiles,
                        "a tile count from 0 (no hints) to 16");
}

std::optional<int> parse_tma_l2_promotion_knob(const char* text) {
  if (empty(text)) return std::nullopt;
  const std::string v(text);
  if (v == "none") return 0;
  if (v == "64") return 1;
  if (v == "128") return 2;
  if (v == "256") return 3;
  throw Error(ErrorCode::Unsupported,
              fmt::format("ATTNFUSE_CUDA_TMA_L2_PROMOTE='{}' is not one of none, 64, 128, 256", text));
}

std::optional<WgmmaTileKnob> parse_wgmma_tile_knob(const char* text) {
  if (empty(text)) return std::nullopt;
  int bk = 0, mb = 0, st = 0, bq = 0, used = 0;
  const int n = std::sscanf(text, "%d,%d%n,%d%n,%d%n", &bk, &mb, &used, &st, &used, &bq, &used);
  if (n < 2 || text[used] != '\0' || (bk != 64 && bk != 128) || mb < 1 || mb > 3 || (n >= 3 && st != 3 && st != 4) ||
      (n == 4 && bq != 128 && bq != 192))
    throw Error(ErrorCode::Unsupported,
                fmt::format("ATTNFUSE_CUDA_WGMMA_TILE='{}' is not block_k,min_blocks[,stages[,block_q]] with block_k "
                            "64 or 128, min_blocks 1-3, stages 3 or 4 and block_q 128 or 192",
                            text));
  return WgmmaTileKnob{bk, mb, n >= 3 ? st : 0, n == 4 ? bq : 0};
}

const std::optional<TileConfig>& tile_override() {
  static const std::optional<TileConfig> t = parse_tile_knob(std::getenv("ATTNFUSE_CUDA_TILE"));
  return t;
}

const std::optional<TileConfig>& decode_tile_override() {
  static const std::optional<TileConfig> t = parse_decode_tile_knob(std::getenv("ATTNFUSE_CUDA_DECODE_TILE"));
  return t;
}

const std::optional<int>& decode_splits_override() {
  static const std::optional<int> n = parse_decode_splits_knob(std::getenv("ATTNFUSE_CUDA_DECODE_SPLITS"));
  return n;
}

const std::optional<int64_t>& paged_deep_max_tiles_override() {
  static const std::optional<int64_t> n =
      parse_paged_deep_max_tiles_knob(std::getenv("ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES"));
  return n;
}

const std::optional<WgmmaTileKnob>& wgmma_tile_override() {
  static const std::optional<WgmmaTileKnob> t = parse_wgmma_tile_knob(std::getenv("ATTNFUSE_CUDA_WGMMA_TILE"));
  return t;
}

bool wgmma_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_WGMMA");
  return on;
}

bool tma_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_TMA");
  return on;
}

bool decode_tma_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_DECODE_TMA");
  return on;
}

bool paged_tma_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_PAGED_TMA");
  return on;
}

bool decode_producer_enabled() {
  static const bool on = knob_opted_in("ATTNFUSE_CUDA_DECODE_PRODUCER");
  return on;
}

bool merge_half_entry_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_MERGE_HALF");
  return on;
}

bool wgmma_producer_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_WGMMA_PRODUCER");
  return on;
}

bool dependent_launch_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_PDL");
  return on;
}

int early_l2_tiles() {
  static const int tiles = parse_early_l2_knob(std::getenv("ATTNFUSE_CUDA_EARLY_L2")).value_or(kEarlyL2DefaultTiles);
  return tiles;
}

bool nvrtc_lineinfo_enabled() {
  static const bool on = knob_opted_in("ATTNFUSE_NVRTC_LINEINFO");
  return on;
}

bool paged_tma_unsplit_enabled() {
  static const bool on = knob_on("ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT");
  return on;
}

Sparse64Rows parse_sparse_64_rows_knob(const char* text) {
  if (text == nullptr || *text == '\0') return Sparse64Rows::Auto;
  const std::string v(text);
  if (v == "0") return Sparse64Rows::Off;
  if (v == "1") return Sparse64Rows::Auto;
  if (v == "all") return Sparse64Rows::All;
  throw Error(ErrorCode::Unsupported, fmt::format("ATTNFUSE_CUDA_SPARSE_64_ROWS='{}' is not one of 0, 1, all", text));
}

Sparse64Rows sparse_64_rows_mode() {
  static const Sparse64Rows v = parse_sparse_64_rows_knob(std::getenv("ATTNFUSE_CUDA_SPARSE_64_ROWS"));
  return v;
}

const std::optional<int>& tma_l2_promotion_override() {
  static const std::optional<int> v = parse_tma_l2_promotion_knob(std::getenv("ATTNFUSE_CUDA_TMA_L2_PROMOTE"));
  return v;
}

}  // namespace attnfuse::runtime
