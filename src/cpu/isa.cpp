// The CPU kernel's run-time choice of instruction-set level (cpu/isa.hpp), and the entry points
// the rest of the library calls, each forwarding to the chosen level.
#include "cpu/isa.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "attnfuse/error.hpp"
#include "cpu/unfused.hpp"

namespace attnfuse::cpu {

// Defined by each compiled level's sources (CMake defines ATTNFUSE_CPU_HAVE_<LEVEL> for these).
#ifdef ATTNFUSE_CPU_HAVE_AVX512
namespace isa_avx512 { const IsaKernels& kernels(); }
#endif
#ifdef ATTNFUSE_CPU_HAVE_AVX2
namespace isa_avx2 { const IsaKernels& kernels(); }
#endif
namespace isa_baseline { const IsaKernels& kernels(); }

namespace {

const std::vector<const IsaKernels*>& compiled() {
  static const std::vector<const IsaKernels*> levels = {
#ifdef ATTNFUSE_CPU_HAVE_AVX512
      &isa_avx512::kernels(),
#endif
#ifdef ATTNFUSE_CPU_HAVE_AVX2
      &isa_avx2::kernels(),
#endif
      &isa_baseline::kernels(),
  };
  return levels;
}

const IsaKernels& kernels_of(CpuIsa isa) {
  for (const IsaKernels* k : compiled())
    if (k->isa == isa) return *k;
  throw Error(ErrorCode::Internal, fmt::format("the CPU kernel level {} was not compiled", isa_name(isa)));
}

std::vector<CpuIsa> compiled_levels() {
  std::vector<CpuIsa> out;
  for (const IsaKernels* k : compiled()) out.push_back(k->isa);
  return out;
}

std::string level_list(std::span<const CpuIsa> levels) {
  std::string s;
  for (CpuIsa l : levels) s += std::string(s.empty() ? "" : ", ") + isa_name(l);
  return s;
}

// Null until the first CPU call chose a level (or a test switched to one).
std::atomic<const IsaKernels*> g_active{nullptr};

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Baseline: return "baseline";
  }
  return "?";
}

std::optional<CpuIsa> parse_isa(std::string_view name) {
  for (CpuIsa l : {CpuIsa::Avx512, CpuIsa::Avx2, CpuIsa::Baseline})
    if (name == isa_name(l)) return l;
  return std::nullopt;
}

std::span<const IsaKernels* const> compiled_isas() { return compiled(); }

bool cpu_supports(CpuIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  // libgcc's CPU model also checks, with XGETBV, that the OS saves the ymm / zmm state.
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::Avx512: return __builtin_cpu_supports("x86-64-v4");
    case CpuIsa::Avx2: return __builtin_cpu_supports("x86-64-v3");
    case CpuIsa::Baseline: return true;
  }
  return false;
#else
  return isa == CpuIsa::Baseline;
#endif
}

CpuIsa choose_isa(const char* request, std::span<const CpuIsa> compiled, bool (*supported)(CpuIsa)) {
  if (request && *request) {
    const std::optional<CpuIsa> want = parse_isa(request);
    if (!want)
      throw Error(ErrorCode::Unsupported, fmt::format("ATTNFUSE_CPU_ISA='{}' names no CPU kernel level (this build "
                                                      "has: {})", request, level_list(compiled)));
    if (std::find(compiled.begin(), compiled.end(), *want) == compiled.end())
      throw Error(ErrorCode::Unsupported, fmt::format("ATTNFUSE_CPU_ISA={}: this build compiled the CPU kernel "
                                                      "for {} only", request, level_list(compiled)));
    if (!supported(*want))
      throw Error(ErrorCode::Unsupported, fmt::format("ATTNFUSE_CPU_ISA={}: {} is not supported by this CPU",
                                                      request, request));
    return *want;
  }
  for (CpuIsa l : compiled)
    if (supported(l)) return l;
  return CpuIsa::Baseline;
}

const IsaKernels& active_kernels() {
  if (const IsaKernels* k = g_active.load(std::memory_order_acquire)) return *k;
  const std::vector<CpuIsa> levels = compiled_levels();
  const IsaKernels& k = kernels_of(choose_isa(std::getenv("ATTNFUSE_CPU_ISA"), levels, &cpu_supports));
  g_active.store(&k, std::memory_order_release);
  return k;
}

void use_isa(CpuIsa isa) {
  const std::vector<CpuIsa> levels = compiled_levels();
  g_active.store(&kernels_of(choose_isa(isa_name(isa), levels, &cpu_supports)), std::memory_order_release);
}

// ---- The library's entry points into the CPU kernel -------------------------------------------

KernelFn select_kernel(NormKind norm, const ModifierChain& modifiers, bool masked) {
  return active_kernels().select_kernel(norm, modifiers, masked);
}

void run_unfused(const KernelSpec& spec, const AttentionArgs& args) { active_kernels().run_unfused(spec, args); }

void run_scores_softmax_fused(const KernelSpec& spec, const AttentionArgs& args) {
  active_kernels().run_scores_softmax_fused(spec, args);
}

}  // namespace attnfuse::cpu

namespace attnfuse {

const char* cpu_kernel_isa() { return cpu::isa_name(cpu::active_kernels().isa); }

}  // namespace attnfuse
