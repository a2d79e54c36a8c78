// Shared option registration and setup of `run` and `bench`.
#include "setup.hpp"

#include <omp.h>

#include <CLI/CLI.hpp>
#include "attnfuse/error.hpp"
#include "backend.hpp"
#include <fmt/format.h>
#include "rope/apply_config.hpp"

namespace attnfuse::cli {

void add_problem_options(CLI::App& app, ProblemOptions& o) {
  app.add_option("PROGRAM", o.program, "the attention program (text, or @file to read it)")->required();
  app.add_option("--shape", o.shape, "B,Hq,Hkv,Nq,Nk,D: run on random normal(0,1) inputs");
  app.add_option("--seed", o.seed, "seed of the random inputs (default 0)");
  app.add_option("--q", o.files.q, "Q.npy, float32 [B, Hq, Nq, D]");
  app.add_option("--k", o.files.k, "K.npy, float32 [B, Hkv, Nk, D]");
  app.add_option("--v", o.files.v, "V.npy, float32 [B, Hkv, Nk, Dv]");
  app.add_option("--bias", o.files.bias,
                 "B.npy, float32 [1|B, 1|Hq, Nq, Nk] (additive_bias), rounded to --dtype as the run reads it");
  app.add_option("--block-mask", o.files.block_mask,
                 "M.npy, bool/uint8 [nQblocks, nKblocks] or [1|B, 1|Hq, nQ, nK] (block_sparse)");
  app.add_option("--block-size", o.block_size, "BQ,BK of the block mask (default 64,64)");
  app.add_option("--cu-seqlens-q", o.files.cu_seqlens_q,
                 "CQ.npy, int32/int64 [num_docs+1] or [B, num_docs+1]: where each document's queries "
                 "start, ending at Nq (document; FlashAttention's cu_seqlens_q). With --shape, a "
                 "document program gets 1-8 random documents from --seed instead (the same split "
                 "for queries and keys when Nq = Nk)");
  app.add_option("--cu-seqlens-k", o.files.cu_seqlens_k,
                 "CK.npy, the same for the keys, ending at Nk; document d of the queries attends to "
                 "document d of the keys, positions restart in each, aligned bottom-right");
  app.add_option("--k-pages", o.files.k_pages,
                 "KP.npy, float32 [num_pages, page_size, Hkv, D] (nhd) or [num_pages, Hkv, page_size, D] "
                 "(hnd): a paged KV cache instead of --k/--v (FlashInfer's conventions)");
  app.add_option("--v-pages", o.files.v_pages, "VP.npy, float32, the V pages, laid out like --k-pages");
  app.add_option("--page-indices", o.files.page_indices,
                 "PI.npy, int32/int64: the pages of every sequence, one after the other");
  app.add_option("--page-indptr", o.files.page_indptr,
                 "PP.npy, int32/int64 [B+1]: sequence b owns page_indices[indptr[b] .. indptr[b+1])");
  app.add_option("--last-page-len", o.files.last_page_len,
                 "PL.npy, int32/int64 [B]: valid rows (1..page_size) of each sequence's last page; its "
                 "KV length is (pages - 1) * page_size + last_page_len, queries aligned bottom-right to it");
  app.add_option("--rope-cos", o.files.rope_cos,
                 "C.npy, float32 [positions, rotary_dim/2]: your own RoPE cos table (row p rotates "
                 "position p; with --rope-sin)");
  app.add_option("--rope-sin", o.files.rope_sin, "S.npy, float32 [positions, rotary_dim/2]: the sin table");
  app.add_option("--kv-layout", o.files.kv_layout, "nhd | hnd: the layout of --k-pages/--v-pages (default nhd)");
  app.add_option("--page-size", o.page_size,
                 "with --shape: store the random K/V in a paged cache of this page size, pages in a "
                 "shuffled order")
      ->check(CLI::PositiveNumber);
  app.add_flag("--paged-table-settled", o.paged_table_settled,
               "with a paged cache: PagedKV::table_settled, the promise that the kernel ahead of "
               "the call does not write the page table, so a CUDA call may read it before that "
               "kernel ends (the CPU ignores it)");
  app.add_option_function<int64_t>(
      "--q-offset", [&o](const int64_t& v) { o.files.q_offset = v; },
      "position of query 0 (default Nk - Nq: bottom-right aligned)");
  app.add_option("--dtype", o.dtype, "fp32 | bf16 | fp16: round the inputs to it and run in it");
  app.add_option("--device", o.device, "cpu | cuda | auto (default auto: CUDA when available)");
  app.add_option("--threads", o.threads, "CPU threads (default: OpenMP's, i.e. OMP_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
  add_rope_config_option(app, o.rope_config);
  add_rope_mode_option(app, o.rope_mode);
}

void add_rope_mode_option(CLI::App& app, std::string& mode) {
  app.add_option("--rope-mode", mode,
                 "auto | fused | prerotate: where a CUDA rope/rope_window kernel rotates Q and K "
                 "(auto: the tile pass's cost model picks per call; the CPU always fuses)");
}

void add_rope_config_option(CLI::App& app, std::string& path) {
  app.add_option("--rope-config", path,
                 "a Hugging Face config.json: rope/rope_window take their RoPE parameters from it "
                 "(rope_theta -> base, partial_rotary_factor -> rotary_dim, rope_scaling or "
                 "rope_parameters -> rope_type and its factors). A parameter written in the program "
                 "text wins over the config; when the program writes a rope_type other than the "
                 "config's, the config's scaling factors are not used. rope_window's k and the scale "
                 "always stay the program's. An error if the program has no rope.");
}

std::optional<rope::HfRopeConfig> load_rope_config(const std::string& path) {
  if (path.empty()) return std::nullopt;
  return rope::load_hf_config(path);
}

KernelSpec compile_with_rope(const Program& program, const CompileOptions& options,
                             const std::optional<rope::HfRopeConfig>& config,
                             const std::string& config_path) {
  KernelSpec spec = program.compile(options);
  if (!config) return spec;
  try {
    rope::apply_hf_rope(spec, *config, program);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("--rope-config {}: {}", config_path, e.what()));
  }
  return spec;
}

Prepared prepare(const ProblemOptions& o, bool want_lse) {
  Prepared p;
  p.dtype = parse_dtype(o.dtype);
  const DeviceChoice device = parse_device(o.device, /*allow_auto=*/true);
  const bool any_file = !o.files.q.empty() || !o.files.k.empty() || !o.files.v.empty() ||
                        !o.files.bias.empty() || !o.files.block_mask.empty() ||
                        !o.files.cu_seqlens_q.empty() || !o.files.cu_seqlens_k.empty() || o.files.paged();
  p.random = !o.shape.empty();
  p.seed = o.seed;
  if (p.random && any_file)
    throw UsageError("--shape makes random inputs: do not combine it with "
                     "--q/--k/--v/--bias/--block-mask/--cu-seqlens-q/--cu-seqlens-k/--k-pages...");
  if (!p.random && o.page_size > 0)
    throw UsageError("--page-size pages the random inputs of --shape; with files, give the pages "
                     "themselves (--k-pages ...)");
  if (!p.random && !o.files.paged() && (o.files.q.empty() || o.files.k.empty() || o.files.v.empty()))
    throw UsageError("give the inputs as --q Q.npy --k K.npy --v V.npy, or --shape B,Hq,Hkv,Nq,Nk,D "
                     "for random ones");
  std::optional<BlockSize> block_size;
  if (!o.block_size.empty()) block_size = parse_block_size(o.block_size);
  const std::optional<Shape> shape = p.random ? std::optional<Shape>(parse_shape(o.shape)) : std::nullopt;

  p.text = load_program_text(o.program);
  p.program = Program::parse(p.text);
  const std::optional<rope::HfRopeConfig> rope_config = load_rope_config(o.rope_config);
  p.rope_config = o.rope_config;
  const auto compile = [&](Target target, int head_dim) {
    return compile_with_rope(*p.program, CompileOptions{target, p.dtype, head_dim, parse_rope_mode(o.rope_mode)},
                             rope_config, o.rope_config);
  };
  p.target = resolve_target(device);
  // The problem is built from the program's roles, which do not depend on the target; the CUDA
  // kernel is specialized on the head dim, so it is compiled below once D is known.
  p.spec = compile(Target::Cpu, 0);

  if (o.threads > 0) omp_set_num_threads(o.threads);
  p.threads = omp_get_max_threads();

  if (p.random) {
    p.problem = random_problem(p.spec, *shape, o.seed, p.dtype, block_size, o.files.q_offset, want_lse,
                               o.page_size);
  } else {
    FileInputs files = o.files;
    files.block_size = block_size;
    p.problem = load_problem(p.spec, files, p.dtype, want_lse);
  }
  load_rope_tables(p.problem, o.files);
  if (o.paged_table_settled && !p.problem.paged)
    throw UsageError("--paged-table-settled needs a paged cache (--page-size, or --k-pages and its table)");
  p.problem.paged_table_settled = o.paged_table_settled;
  if (rope_config && p.spec.scalars.rope.rotary_dim > p.problem.shape.head_dim)
    throw Error(ErrorCode::Shape,
                fmt::format("--rope-config {}: the model rotates rotary_dim = {} dims (head_dim {}) but "
                            "the inputs have head dim {}; use the model's head dim (or write rotary_dim "
                            "in the program)", o.rope_config, p.spec.scalars.rope.rotary_dim,
                            rope_config->head_dim, p.problem.shape.head_dim));
  if (p.target == Target::Cuda) {
    try {
      p.spec = compile(Target::Cuda, static_cast<int>(p.problem.shape.head_dim));
      check_cuda_supported(p.spec);
    } catch (const Error& e) {
      // --device auto prefers the GPU but never fails for want of it: fall back, and say why.
      if (device != DeviceChoice::Auto || e.code() != ErrorCode::Unsupported) throw;
      fmt::print(stderr, "attnfuse: note: running on the CPU: {}\n", e.what());
      p.target = Target::Cpu;
      p.spec = compile(Target::Cpu, 0);
    }
  }
  return p;
}

std::string one_line(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string part = text.substr(start, nl - start);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\r' || part.back() == '\t')) part.pop_back();
    size_t lead = part.find_first_not_of(" \t");
    if (lead != std::string::npos) {
      if (!out.empty()) out += " / ";
      out += part.substr(lead);
    }
    start = nl + 1;
  }
  return out;
}

std::string describe_problem(const Prepared& p) {
  const Shape& sh = p.problem.shape;
  const int64_t q_offset = p.problem.q_offset.value_or(sh.len_kv - sh.len_q);  // DESIGN §2 default
  // Documents align bottom-right each on its own: there is no single q_offset to show.
  const std::string alignment =
      p.problem.paged ? fmt::format("paged KV ({} pages of {}, {}), {}", p.problem.paged->view().num_pages(),
                                    p.problem.paged->view().page_size(),
                                    p.problem.paged->layout == PagedKV::Layout::NHD ? "NHD" : "HND",
                                    p.problem.q_offset ? fmt::format("q_offset {} for every sequence", *p.problem.q_offset)
                                                       : std::string("bottom-right per sequence"))
      : p.problem.cu_seqlens_q ? fmt::format("{} documents (bottom-right each)", p.problem.cu_seqlens_q->documents())
                             : fmt::format("q_offset {}", q_offset);
  // The CPU kernel's instruction-set level (ATTNFUSE_CPU_ISA or the best this CPU runs).
  const std::string device = p.target == Target::Cpu ? fmt::format("cpu ({})", cpu_kernel_isa())
                                                     : std::string(target_name(p.target));
  std::string s = fmt::format("{}, dtype {}, device {}, threads {}, {}", describe(p.problem.shape),
                              dtype_name(p.dtype), device, p.threads, alignment);
  if (p.random) s += fmt::format(", seed {}", p.seed);
  if (!p.rope_config.empty())
    s += fmt::format(", RoPE from {} (base {}, rope_type {})", p.rope_config, p.spec.scalars.rope.base,
                     rope_scaling_name(p.spec.scalars.rope.rope_type));
  if (p.problem.block_mask)
    s += fmt::format(", block {}x{} (density {:.3f})", p.problem.block_mask->block_q(),
                     p.problem.block_mask->block_k(), p.problem.block_mask->density());
  return s;
}

}  // namespace attnfuse::cli
