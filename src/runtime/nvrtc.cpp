// NVRTC through dlopen, so attnfuse builds and starts where the CUDA toolkit is absent.
#include "runtime/nvrtc.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "attnfuse/error.hpp"
#include "codegen/cuda/emit.hpp"
#include "runtime/cuda_knobs.hpp"
#include "runtime/kernel_sources.hpp"

namespace attnfuse::runtime {
namespace {

using nvrtcProgram = struct _nvrtcProgram*;
using nvrtcResult = int;

struct NvrtcApi {
  nvrtcResult (*version)(int*, int*);
  const char* (*get_error_string)(nvrtcResult);
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                        const char* const*);
  nvrtcResult (*destroy)(nvrtcProgram*);
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*log_size)(nvrtcProgram, size_t*);
  nvrtcResult (*log)(nvrtcProgram, char*);
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*);
  nvrtcResult (*cubin)(nvrtcProgram, char*);
  nvrtcResult (*ptx_size)(nvrtcProgram, size_t*);
  nvrtcResult (*ptx)(nvrtcProgram, char*);
  std::string error;
  int major = 0, minor = 0;
};

NvrtcApi load() {
  NvrtcApi a{};
  void* lib = nullptr;
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("ATTNFUSE_NVRTC_PATH")) candidates.emplace_back(p);
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) candidates.emplace_back(n);
  for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"})
    for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      candidates.emplace_back(fmt::format("{}/{}", dir, n));
  for (const auto& c : candidates)
    if ((lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
  if (!lib) {
    a.error = "NVRTC not found (install the CUDA toolkit or set ATTNFUSE_NVRTC_PATH)";
    return a;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && a.error.empty()) a.error = fmt::format("NVRTC lacks {}", name);
  };
  sym(a.version, "nvrtcVersion");
  sym(a.get_error_string, "nvrtcGetErrorString");
  sym(a.create, "nvrtcCreateProgram");
  sym(a.destroy, "nvrtcDestroyProgram");
  sym(a.compile, "nvrtcCompileProgram");
  sym(a.log_size, "nvrtcGetProgramLogSize");
  sym(a.log, "nvrtcGetProgramLog");
  sym(a.cubin_size, "nvrtcGetCUBINSize");
  sym(a.cubin, "nvrtcGetCUBIN");
  sym(a.ptx_size, "nvrtcGetPTXSize");
  sym(a.ptx, "nvrtcGetPTX");
  if (a.error.empty()) a.version(&a.major, &a.minor);
  return a;
}

const NvrtcApi& api() {
  static const NvrtcApi a = load();
  if (!a.error.empty()) throw Error(ErrorCode::Device, fmt::format("CUDA codegen unavailable: {}", a.error));
  return a;
}

// Keeps the source of a failed compile where the user can open it.
std::string save_failed_source(const std::string& source, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec) / "attnfuse-failed";
  fs::create_directories(dir, ec);
  fs::path path = dir / (name + ".cu");
  std::ofstream(path) << source;
  return path.string();
}

int sum_matches(const std::string& log, const std::regex& re) {
  int total = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it)
    total = (total < 0 ? 0 : total) + std::stoi((*it)[1].str());
  return total;
}

int max_match(const std::string& log, const std::regex& re) {
  int best = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it)
    best = std::max(best, std::stoi((*it)[1].str()));
  return best;
}

}  // namespace

bool nvrtc_available(std::string* why_not) {
  try {
    api();
    return true;
  } catch (const Error& e) {
    if (why_not) *why_not = e.what();
    return false;
  }
}

std::string nvrtc_version() {
  const auto& a = api();
  return fmt::format("{}.{}", a.major, a.minor);
}

std::vector<std::string> nvrtc_options(int arch, NvrtcOutput output) {
  // sm_90 builds target sm_90a so Hopper-only instructions are available to the templates.
  const std::string suffix = arch == 90 ? "a" : "";
  std::vector<std::string> opts = {
      fmt::format("--gpu-architecture={}_{}{}", output == NvrtcOutput::Cubin ? "sm" : "compute",
                  arch, suffix),
      "-std=c++17", "--device-as-default-execution-space", "-DNDEBUG"};
  if (output == NvrtcOutput::Cubin) opts.emplace_back("--ptxas-options=-v");
  // Source lines in the cubin, so compute-sanitizer and Nsight name the template line of a
  // report instead of an offset. Part of the options, hence of the cache key.
  if (nvrtc_lineinfo_enabled()) opts.emplace_back("--generate-line-info");
  return opts;
}

NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, int arch,
                          NvrtcOutput output) {
  const auto& a = api();
  const auto start = std::chrono::steady_clock::now();
  const auto& headers = kernel_sources();
  std::vector<const char*> header_src, header_names;
  for (const auto& h : headers) {
    header_src.push_back(h.source);
    header_names.push_back(h.name);
  }
  nvrtcProgram prog = nullptr;
  const std::string file = name + ".cu";
  if (nvrtcResult r = a.create(&prog, source.c_str(), file.c_str(), static_cast<int>(headers.size()),
                               header_src.data(), header_names.data()))
    throw Error(ErrorCode::Device, fmt::format("nvrtcCreateProgram failed: {}", a.get_error_string(r)));
  const auto opts = nvrtc_options(arch, output);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  const nvrtcResult rc = a.compile(prog, static_cast<int>(copts.size()), copts.data());

  NvrtcResult out;
  size_t log_size = 0;
  a.log_size(prog, &log_size);
  out.log.resize(log_size);
  if (log_size) a.log(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  if (rc != 0) {
    a.destroy(&prog);
    const std::string path = save_failed_source(source, name);
    throw Error(ErrorCode::Device,
                fmt::format("NVRTC failed to compile {} for sm_{} ({}); generated source saved to {}\n{}",
                            name, arch, a.get_error_string(rc), path, out.log));
  }
  size_t size = 0;
  if (output == NvrtcOutput::Cubin) {
    a.cubin_size(prog, &size);
    out.binary.resize(size);
    a.cubin(prog, out.binary.data());
    static const std::regex regs(R"(Used (\d+) registers)");
    static const std::regex spill_st(R"((\d+) bytes spill stores)");
    static const std::regex spill_ld(R"((\d+) bytes spill loads)");
    out.registers = max_match(out.log, regs);  // a module holds several kernels: the largest
    const int st = sum_matches(out.log, spill_st), ld = sum_matches(out.log, spill_ld);
    out.spill_bytes = (st < 0 && ld < 0) ? -1 : std::max(st, 0) + std::max(ld, 0);
  } else {
    a.ptx_size(prog, &size);
    out.binary.resize(size);
    a.ptx(prog, out.binary.data());
  }
  a.destroy(&prog);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace attnfuse::runtime
