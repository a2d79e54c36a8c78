// NVRTC, loaded with dlopen: compiles one generated translation unit (plus the embedded kernel
// headers) to a cubin or PTX for one architecture, and reports registers and spills.
#pragma once

#include <string>
#include <vector>

namespace attnfuse::runtime {

enum class NvrtcOutput { Cubin, Ptx };

struct NvrtcResult {
  std::vector<char> binary;  // cubin bytes, or PTX text (NUL-terminated)
  std::string log;           // compiler log (ptxas -v lines included)
  int registers = -1;        // per thread of the module's largest kernel, from the ptxas report (cubin only)
  int spill_bytes = -1;      // spill stores + loads, from the ptxas report (cubin only)
  double seconds = 0.0;
};

bool nvrtc_available(std::string* why_not = nullptr);
// "major.minor" of the loaded NVRTC; throws Error(Device) when unavailable.
std::string nvrtc_version();

// Compile options for `arch` (e.g. 80, 90): part of the kernel-cache key.
std::vector<std::string> nvrtc_options(int arch, NvrtcOutput output);

// Compiles `source` (named `name` in diagnostics). On failure throws Error(Device) with the
// NVRTC log and the path where the source was saved for inspection.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, int arch,
                          NvrtcOutput output);

}  // namespace attnfuse::runtime
