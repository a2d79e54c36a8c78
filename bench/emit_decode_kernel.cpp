// Compiles one decode variant of a program to an sm_90a cubin with NVRTC and prints its registers
// and spills, so that the SASS of a decode kernel can be read and compared across kernel
// directories (ATTNFUSE_KERNEL_DIR) without a GPU: `attnfuse compile --emit ptx` builds the
// prefill tile only. The tile is the one the runtime picks on Hopper (CudaKernel::resolved):
// GQA-packed rows, K/V by TMA, 128-key tiles over contiguous caches and 64-row page boxes.
//   emit_decode_kernel --out k.cubin [--paged] [--split] [--large-boxes] [--producer] [--rows N]
//   cuobjdump -sass k.cubin     (the CUDA toolkit's, or the one in NVIDIA's pip wheels)
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <fstream>

#include "attnfuse/program.hpp"
#include "codegen/cuda/emit.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/nvrtc.hpp"

using namespace attnfuse;

int main(int argc, char** argv) {
  CLI::App app{"One decode variant's sm_90a cubin, for reading its SASS"};
  std::string program = "softmax(causal(scaled_dot_product(Q, K))) @ V", out;
  int head_dim = 128, rows = 4;
  bool paged = false, split = false, large_boxes = false, producer = false;
  app.add_option("--program", program, "the attention program (default: causal decode)");
  app.add_option("--out", out, "where to write the cubin")->required();
  app.add_option("--head-dim", head_dim, "head dim (default 128)");
  app.add_option("--rows", rows, "decode rows per KV head: query heads per group x Nq (default 4)");
  app.add_flag("--paged", paged, "paged K/V");
  app.add_flag("--split", split, "the split-KV tile (three stages; two with fused RoPE over a contiguous cache)");
  app.add_flag("--large-boxes", large_boxes, "paged: pages a multiple of 64 rows (128-key tiles)");
  app.add_flag("--producer", producer, "the decode producer warp");
  CLI11_PARSE(app, argc, argv);

  std::string why;
  if (!runtime::nvrtc_available(&why)) {
    fmt::print("NVRTC not available: {}\n", why);
    return 77;  // ctest's skip code (tests/CMakeLists.txt)
  }
  KernelSpec spec = Program::parse(program).compile({Target::Cuda, DType::BF16, head_dim, RopeMode::Auto});
  const bool tma = head_dim % 64 == 0 && head_dim <= 128 && spec.score != ScoreKind::RopeWindow &&
                   !spec.masks.has(MaskKind::Document);
  spec.tile = passes::cuda_decode_tile({.head_dim = head_dim,
                                        .rows = rows,
                                        .split = split,
                                        .wide_keys = passes::cuda_decode_wide_keys(tma, paged, large_boxes),
                                        .paged = paged,
                                        .rotates = !paged && codegen::cuda::rotates_in_kernel(spec)});
  if (paged) spec.kv_layout = KvLayout::Paged;
  spec.tile = passes::cuda_arch_tile(spec, 90);
  spec.tile.tma_kv = tma;
  spec.tile.producer_warp = tma && producer;
  const runtime::NvrtcResult r =
      runtime::nvrtc_compile(codegen::cuda::emit_forward(spec), "decode", 90, runtime::NvrtcOutput::Cubin);
  std::ofstream(out, std::ios::binary).write(r.binary.data(), static_cast<std::streamsize>(r.binary.size()));
  fmt::print("tile {}x{}, {} stages{}: {} registers, {} spill bytes -> {}\n", spec.tile.block_q, spec.tile.block_k,
             spec.tile.stages, tma ? ", TMA" : "", r.registers, r.spill_bytes, out);
  return 0;
}
