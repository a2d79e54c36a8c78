// Device resolution and dispatch for the CLI, including host <-> GPU copies for --device cuda.
#include "backend.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "attnfuse/error.hpp"
#include "codegen/cuda/emit.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/device_buffer.hpp"

namespace attnfuse::cli {

bool cuda_backend_available() { return runtime::cuda_available(); }

Target resolve_target(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::Cpu: return Target::Cpu;
    case DeviceChoice::Cuda: {
      std::string why;
      if (!runtime::cuda_available(&why))
        throw Error(ErrorCode::Device, "CUDA backend not available: " + why + "; use --device cpu");
      return Target::Cuda;
    }
    case DeviceChoice::Auto: return cuda_backend_available() ? Target::Cuda : Target::Cpu;
  }
  return Target::Cpu;
}

void check_cuda_supported(const KernelSpec& spec) { codegen::cuda::check_supported(spec); }

namespace {

using runtime::DeviceBuffer;

// Contiguous copy of a (possibly strided) host view, same dtype.
std::vector<char> pack(const TensorView& t) {
  const int64_t es = dtype_size(t.dtype);
  std::vector<char> out(static_cast<size_t>(t.numel() * es));
  char* dst = out.data();
  for (int64_t b = 0; b < t.shape[0]; ++b)
    for (int64_t h = 0; h < t.shape[1]; ++h)
      for (int64_t s = 0; s < t.shape[2]; ++s) {
        const char* src = static_cast<const char*>(t.data) + t.offset(b, h, s, 0) * es;
        std::copy(src, src + t.shape[3] * es, dst);
        dst += t.shape[3] * es;
      }
  return out;
}

}  // namespace

struct CudaResident::Impl {
  KernelSpec spec;
  AttentionArgs dev;
  DeviceBuffer q, k, v, out, lse, bias;
  DeviceBuffer k_pages, v_pages, page_indices, page_indptr, last_page_len, cu_q, cu_k;
  DeviceBuffer rope_cos, rope_sin;
};

CudaResident::CudaResident(const KernelSpec& spec, const AttentionArgs& host) : impl_(std::make_unique<Impl>()) {
  validate(spec, host);
  check_cuda_supported(spec);
  Impl& m = *impl_;
  m.spec = spec;
  m.dev = host;
  auto upload = [](const TensorView& t, DeviceBuffer& buf) {
    const std::vector<char> bytes = pack(t);
    buf = DeviceBuffer(bytes.size());
    buf.upload(bytes.data());
    return TensorView::contiguous(buf.get(), t.dtype, t.shape);
  };
  m.dev.q = upload(host.q, m.q);
  m.dev.k = upload(host.k, m.k);
  m.dev.v = upload(host.v, m.v);
  m.out = DeviceBuffer(static_cast<size_t>(host.out.numel() * dtype_size(host.out.dtype)));
  m.dev.out = TensorView::contiguous(m.out.get(), host.out.dtype, host.out.shape);
  if (host.lse) {
    m.lse = DeviceBuffer(static_cast<size_t>(host.q.shape[0] * host.q.shape[1] * host.q.shape[2]) * 4);
    m.dev.lse = LseView::contiguous(static_cast<float*>(m.lse.get()), {host.q.shape[0], host.q.shape[1], host.q.shape[2]});
  }
  if (host.paged) {
    // Pages and the page table go to the device (CUDA reads the index arrays there).
    const PagedKV& hp = *host.paged;
    PagedKV dp = hp;
    dp.k_pages = upload(hp.k_pages, m.k_pages);
    dp.v_pages = upload(hp.v_pages, m.v_pages);
    auto upload_ints = [](std::span<const int32_t> a, DeviceBuffer& buf) {
      buf = DeviceBuffer(a.size() * 4);
      if (!a.empty()) buf.upload(a.data());
      return std::span<const int32_t>(static_cast<const int32_t*>(buf.get()), a.size());
    };
    dp.page_indices = upload_ints(hp.page_indices, m.page_indices);
    dp.page_indptr = upload_ints(hp.page_indptr, m.page_indptr);
    dp.last_page_len = upload_ints(hp.last_page_len, m.last_page_len);
    m.dev.paged = dp;
  }
  if (host.cu_seqlens_q && host.cu_seqlens_k) {
    // Offsets go to the device as contiguous rows of one integer type.
    auto upload_offsets = [](const SeqOffsetsView& o, DeviceBuffer& buf) {
      std::vector<int64_t> rows(static_cast<size_t>(o.batch * o.length));
      for (int64_t b = 0; b < o.batch; ++b)
        for (int64_t d = 0; d < o.length; ++d) rows[size_t(b * o.length + d)] = o.at(b, d);
      buf = DeviceBuffer(rows.size() * 8);
      buf.upload(rows.data());
      return SeqOffsetsView{buf.get(), SeqOffsetsView::Type::I64, o.batch, o.length, o.length};
    };
    m.dev.cu_seqlens_q = upload_offsets(*host.cu_seqlens_q, m.cu_q);
    m.dev.cu_seqlens_k = upload_offsets(*host.cu_seqlens_k, m.cu_k);
  }
  if (host.rope_tables) {  // the caller's cos/sin tables, fp32 [positions, pairs]
    const RopeTablesView& t = *host.rope_tables;
    const size_t bytes = static_cast<size_t>(t.positions * t.pairs) * 4;
    m.rope_cos = DeviceBuffer(bytes);
    m.rope_sin = DeviceBuffer(bytes);
    if (bytes > 0) {
      m.rope_cos.upload(t.cos);
      m.rope_sin.upload(t.sin);
    }
    m.dev.rope_tables = RopeTablesView{static_cast<const float*>(m.rope_cos.get()),
                                       static_cast<const float*>(m.rope_sin.get()), t.positions, t.pairs};
  }
  if (host.bias) m.dev.bias = upload(*host.bias, m.bias);  // fp32 or the inputs' dtype, as the kernel reads it
}

CudaResident::~CudaResident() = default;

void CudaResident::launch() { runtime::run_cuda(impl_->spec, impl_->dev, nullptr, /*sync=*/true); }

void CudaResident::download(const AttentionArgs& host) const {
  const Impl& m = *impl_;
  // Outputs come back contiguous; scatter into the host views (the CLI's are contiguous too).
  std::vector<char> out(static_cast<size_t>(host.out.numel() * dtype_size(host.out.dtype)));
  m.out.download(out.data());
  const int64_t es = dtype_size(host.out.dtype);
  const char* src = out.data();
  for (int64_t b = 0; b < host.out.shape[0]; ++b)
    for (int64_t h = 0; h < host.out.shape[1]; ++h)
      for (int64_t s = 0; s < host.out.shape[2]; ++s) {
        char* dst = static_cast<char*>(host.out.data) + host.out.offset(b, h, s, 0) * es;
        std::copy(src, src + host.out.shape[3] * es, dst);
        src += host.out.shape[3] * es;
      }
  if (host.lse) {
    std::vector<float> lse(static_cast<size_t>(host.q.shape[0] * host.q.shape[1] * host.q.shape[2]));
    m.lse.download(lse.data());
    size_t i = 0;
    for (int64_t b = 0; b < host.lse->shape[0]; ++b)
      for (int64_t h = 0; h < host.lse->shape[1]; ++h)
        for (int64_t s = 0; s < host.lse->shape[2]; ++s)
          host.lse->data[b * host.lse->strides[0] + h * host.lse->strides[1] + s * host.lse->strides[2]] = lse[i++];
  }
}

std::string cuda_rope_placement_line(Target target, const KernelSpec& spec, const AttentionArgs& args) {
  if (target != Target::Cuda || spec.score == ScoreKind::ScaledDot) return "";
  const RopeMode mode = runtime::cuda_kernel(spec).plan(args, spec.scalars).rope_mode;
  return fmt::format("  rope placement: {} ({}{})\n", rope_mode_name(mode),
                     mode == RopeMode::Fused ? "Q and K rotated inside the attention kernel"
                                             : "a rotation kernel, then the attention kernel",
                     spec.rope_mode == RopeMode::Auto ? "; chosen by the rope_mode=auto cost model" : "");
}

std::string cuda_launch_line(Target target, const KernelSpec& spec, const AttentionArgs& args) {
  if (target != Target::Cuda) return "";
  const runtime::LaunchPlan pl = runtime::cuda_kernel(spec).plan(args, spec.scalars);
  const TileConfig& t = pl.module->spec.tile;
  const char* merge = pl.num_splits == 1     ? ""
                      : pl.merge_in_kernel ? " merged by each tile's last block"
                                           : " + combine kernel";
  return fmt::format("  cuda launch: {} variant{}, {}-row x {}-key tiles in {} stages, {} split{}{}, grid {}x{}x{}{}\n",
                     pl.decode ? "decode (GQA group packed per tile)" : "prefill",
                     pl.kv_layout != KvLayout::Paged ? ""
                     : args.paged && args.paged->table_settled ? ", paged K/V (settled table)"
                                                               : ", paged K/V",
                     t.block_q, t.block_k, t.stages,
                     pl.num_splits, pl.num_splits == 1 ? "" : "s", merge, pl.grid[0], pl.grid[1], pl.grid[2],
                     pl.dependent_launch ? ", programmatic dependent launch" : "");
}

void run_attention(Target target, const KernelSpec& spec, const AttentionArgs& args) {
  if (target == Target::Cpu) {
    run_cpu(spec, args);
    return;
  }
  CudaResident resident(spec, args);
  resident.launch();
  resident.download(args);
}

}  // namespace attnfuse::cli
