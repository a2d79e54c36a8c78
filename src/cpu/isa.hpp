// The CPU kernel's instruction-set levels and the run-time choice between them. The kernel's
// sources (fused_kernel.cpp, unfused.cpp and the headers cpu/simd.hpp, cpu/rope_apply.hpp) are
// compiled once per level, each into its own namespace (CMakeLists.txt: one object per level,
// its symbols outside that namespace made local, so no definition is shared between levels).
// The process runs the best level its CPU supports, or the one ATTNFUSE_CPU_ISA names.
//
// On x86-64 the levels are those of the psABI: avx512 (x86-64-v4), avx2 (x86-64-v3) and baseline
// (x86-64, SSE2). Elsewhere the one level is baseline, built with the library's own flags.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "cpu/fused_kernel.hpp"

namespace attnfuse::cpu {

enum class CpuIsa { Baseline = 0, Avx2 = 1, Avx512 = 2 };

const char* isa_name(CpuIsa isa);                 // "baseline", "avx2", "avx512"
std::optional<CpuIsa> parse_isa(std::string_view name);  // the inverse of isa_name

// One level's entry points.
struct IsaKernels {
  CpuIsa isa;
  KernelFn (*select_kernel)(NormKind norm, const ModifierChain& modifiers, bool masked);
  void (*run_unfused)(const KernelSpec& spec, const AttentionArgs& args);
  void (*run_scores_softmax_fused)(const KernelSpec& spec, const AttentionArgs& args);
};

// The levels this build compiled, best first (never empty; the last is baseline).
std::span<const IsaKernels* const> compiled_isas();

// Whether this CPU, and the OS's saved register state, runs code of level `isa`.
bool cpu_supports(CpuIsa isa);

// The level to run: the one `request` names (ATTNFUSE_CPU_ISA's value; null or empty: none), else
// the best of `compiled` that `supported` accepts. Error(Unsupported) when the request names no
// level, one this build did not compile, or one the CPU does not run.
CpuIsa choose_isa(const char* request, std::span<const CpuIsa> compiled, bool (*supported)(CpuIsa));

// The process's level: chosen at first use from ATTNFUSE_CPU_ISA and the CPU (a failed choice
// throws on every use), then cached.
const IsaKernels& active_kernels();

// Switches the process to `isa` (tests and benchmarks comparing levels; not while a CPU call
// runs on another thread). Error(Unsupported) as choose_isa.
void use_isa(CpuIsa isa);

}  // namespace attnfuse::cpu

#ifdef ATTNFUSE_CPU_ISA_NS
// The entry points of the level being compiled (fused_kernel.cpp builds its IsaKernels).
namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS {
KernelFn select_kernel(NormKind norm, const ModifierChain& modifiers, bool masked);
void run_unfused(const KernelSpec& spec, const AttentionArgs& args);
void run_scores_softmax_fused(const KernelSpec& spec, const AttentionArgs& args);
const IsaKernels& kernels();
}  // namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS
#endif
