// Building a Problem from .npy files or random numbers, with the CLI's own checks (the ones that
// can name a file or a flag); validate() in the library checks everything else.
#include "problem.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "attnfuse/error.hpp"
#include "common/dtype.hpp"
#include "io/npy.hpp"

namespace attnfuse::cli {

// ---- HostTensor ---------------------------------------------------------------------------

void HostTensor::Free::operator()(std::byte* p) const { std::free(p); }

HostTensor::HostTensor(DType dtype, std::array<int64_t, 4> shape) : dtype_(dtype), shape_(shape) {
  const auto bytes = static_cast<size_t>(numel()) * static_cast<size_t>(dtype_size(dtype));
  // 64-byte aligned (a cache line, a full AVX-512 vector) like the buffers of a real framework,
  // so timings are not at the mercy of malloc's alignment.
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
  if (!p) throw std::bad_alloc();
  data_.reset(p);
}

TensorView HostTensor::view() const { return TensorView::contiguous(data_.get(), dtype_, shape_); }

void HostTensor::fill_from_f32(std::span<const float> values) {
  if (static_cast<int64_t>(values.size()) != numel())
    throw Error(ErrorCode::Internal, "HostTensor::fill_from_f32: size mismatch");
  if (dtype_ == DType::F32) {
    std::memcpy(data_.get(), values.data(), values.size_bytes());
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) store_elem(data_.get(), dtype_, static_cast<int64_t>(i), values[i]);
}

std::vector<float> HostTensor::to_f32() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_elem(data_.get(), dtype_, static_cast<int64_t>(i));
  return out;
}

void HostTensor::poison() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < numel(); ++i) store_elem(data_.get(), dtype_, i, nan);
}

// ---- Problem ------------------------------------------------------------------------------

AttentionArgs Problem::args() {
  AttentionArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = out.view();
  if (want_lse) a.lse = LseView::contiguous(lse.data(), {shape.batch, shape.heads_q, shape.len_q});
  if (bias) a.bias = bias->view();
  if (block_mask) a.block_mask = &*block_mask;
  if (cu_seqlens_q) a.cu_seqlens_q = cu_seqlens_q->view();
  if (cu_seqlens_k) a.cu_seqlens_k = cu_seqlens_k->view();
  a.q_offset = q_offset;
  if (paged) {
    a.k = a.v = TensorView{};
    a.paged = paged->view();
    a.paged->table_settled = paged_table_settled;
  }
  if (rope_tables)
    a.rope_tables = RopeTablesView{rope_tables->cos.data(), rope_tables->sin.data(), rope_tables->positions,
                                   rope_tables->pairs};
  return a;
}

void load_rope_tables(Problem& p, const FileInputs& files) {
  if (files.rope_cos.empty() && files.rope_sin.empty()) return;
  if (files.rope_cos.empty() || files.rope_sin.empty())
    throw UsageError("RoPE tables come in pairs: give both --rope-cos and --rope-sin");
  Problem::RopeTables t;
  std::array<int64_t, 2> dims{};
  for (const auto& [path, flag, values] : {std::tuple{&files.rope_cos, "--rope-cos", &t.cos},
                                            std::tuple{&files.rope_sin, "--rope-sin", &t.sin}}) {
    const io::NpyArray a = io::read_npy(*path);
    if (a.dtype != io::NpyDType::F32)
      throw Error(ErrorCode::DType, fmt::format("{}: {} must be float32, got {}", *path, flag,
                                                io::npy_dtype_name(a.dtype)));
    if (a.shape.size() != 2)
      throw Error(ErrorCode::Shape, fmt::format("{}: {} must be [positions, rotary_dim / 2], got shape {}", *path,
                                                flag, a.shape_string()));
    if (values == &t.sin && (a.shape[0] != dims[0] || a.shape[1] != dims[1]))
      throw Error(ErrorCode::Shape, fmt::format("{}: --rope-sin has shape {} but --rope-cos is ({}, {})", *path,
                                                a.shape_string(), dims[0], dims[1]));
    dims = {a.shape[0], a.shape[1]};
    values->resize(static_cast<size_t>(a.numel()));
    std::memcpy(values->data(), a.data.data(), values->size() * sizeof(float));
  }
  t.positions = dims[0];
  t.pairs = dims[1];
  p.rope_tables = std::move(t);
}

DType bias_dtype(DType compute) { return compute; }

namespace {

std::array<int64_t, 4> dims4(const std::vector<int64_t>& s) { return {s[0], s[1], s[2], s[3]}; }

// A float32 tensor of rank `rank` from `path`; `role` says which input it is in messages.
io::NpyArray load_f32(const std::string& path, const char* role, const char* layout, size_t rank) {
  io::NpyArray a = io::read_npy(path);
  if (a.dtype != io::NpyDType::F32)
    throw Error(ErrorCode::DType, fmt::format("{}: {} must be float32, got {} (save it with "
                                              "arr.astype(np.float32))", path, role,
                                              io::npy_dtype_name(a.dtype)));
  if (a.shape.size() != rank)
    throw Error(ErrorCode::Shape, fmt::format("{}: {} must have {} dimensions {}, got shape {}", path,
                                              role, rank, layout, a.shape_string()));
  return a;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void require_runtime_tensors(const KernelSpec& spec, bool have_bias, bool have_mask, bool have_docs_q,
                             bool have_docs_k) {
  if (spec.needs_bias() && !have_bias)
    throw Error(ErrorCode::MissingTensor, "the program uses additive_bias but no bias was given "
                                          "(pass --bias B.npy, shape [1|B, 1|Hq, Nq, Nk])");
  if (spec.needs_block_mask() && !have_mask)
    throw Error(ErrorCode::MissingTensor, "the program uses block_sparse but no block mask was given "
                                          "(pass --block-mask M.npy --block-size BQ,BK)");
  if (have_bias && !spec.needs_bias())
    throw UsageError("--bias was given but the program has no additive_bias");
  if (have_mask && !spec.needs_block_mask())
    throw UsageError("--block-mask was given but the program has no block_sparse mask");
  if (spec.needs_cu_seqlens() && !(have_docs_q && have_docs_k))
    throw Error(ErrorCode::MissingTensor,
                fmt::format("the program uses document but no {} was given (pass --cu-seqlens-q CQ.npy "
                            "--cu-seqlens-k CK.npy, int32/int64 [num_docs + 1]: FlashAttention's "
                            "cu_seqlens)",
                            !have_docs_q ? "--cu-seqlens-q" : "--cu-seqlens-k"));
  if ((have_docs_q || have_docs_k) && !spec.needs_cu_seqlens())
    throw UsageError("--cu-seqlens-q/--cu-seqlens-k were given but the program has no document mask");
}

// Document offsets from an int32/int64 .npy of shape [num_docs + 1] or [B, num_docs + 1]; the
// values themselves are checked by validate().
Offsets load_offsets(const std::string& path, const char* flag) {
  const io::NpyArray a = io::read_npy(path);
  if (a.dtype != io::NpyDType::I32 && a.dtype != io::NpyDType::I64)
    throw Error(ErrorCode::DType, fmt::format("{}: {} must be int32 or int64, got {}", path, flag,
                                              io::npy_dtype_name(a.dtype)));
  if (a.shape.size() != 1 && a.shape.size() != 2)
    throw Error(ErrorCode::Shape, fmt::format("{}: {} must be [num_docs + 1] or [B, num_docs + 1], got "
                                              "shape {}", path, flag, a.shape_string()));
  Offsets o;
  o.batch = a.shape.size() == 2 ? a.shape[0] : 1;
  o.length = a.shape.back();
  o.values.resize(static_cast<size_t>(a.numel()));
  for (size_t i = 0; i < o.values.size(); ++i) {
    if (a.dtype == io::NpyDType::I32) {
      int32_t x;
      std::memcpy(&x, a.data.data() + i * 4, 4);
      o.values[i] = x;
    } else {
      std::memcpy(&o.values[i], a.data.data() + i * 8, 8);
    }
  }
  return o;
}

// n documents over [0, len): n - 1 sorted uniform cut points.
Offsets random_offsets(std::mt19937_64& rng, int64_t n, int64_t len) {
  Offsets o;
  o.length = n + 1;
  o.values.assign(static_cast<size_t>(n + 1), 0);
  std::uniform_int_distribution<int64_t> cut(0, len);
  for (int64_t d = 1; d < n; ++d) o.values[size_t(d)] = cut(rng);
  o.values[size_t(n)] = len;
  std::sort(o.values.begin(), o.values.end());
  return o;
}

void allocate_outputs(Problem& p, bool want_lse) {
  const Shape& s = p.shape;
  p.out = HostTensor(p.dtype, {s.batch, s.heads_q, s.len_q, s.head_dim_v});
  p.want_lse = want_lse;
  if (want_lse) p.lse.assign(static_cast<size_t>(s.batch * s.heads_q * s.len_q), 0.0f);
}

std::mt19937_64 stream(uint64_t seed, uint64_t which) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(which)};
  return std::mt19937_64(seq);
}

HostTensor random_tensor(DType dtype, std::array<int64_t, 4> shape, uint64_t seed, uint64_t which) {
  HostTensor t(dtype, shape);
  std::vector<float> values(static_cast<size_t>(t.numel()));
  auto rng = stream(seed, which);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : values) x = normal(rng);
  t.fill_from_f32(values);
  return t;
}

// A page table entry list from an int32/int64 .npy of rank 1 (validate() checks the values).
std::vector<int32_t> load_index_list(const std::string& path, const char* flag) {
  const Offsets o = load_offsets(path, flag);
  if (o.batch != 1 && o.length > 0)
    throw Error(ErrorCode::Shape, fmt::format("{}: {} must be one-dimensional", path, flag));
  std::vector<int32_t> out;
  for (int64_t x : o.values) {
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
      throw Error(ErrorCode::Shape, fmt::format("{}: {} holds {}, beyond int32", path, flag, x));
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

PagedKV::Layout parse_kv_layout(const std::string& s) {
  if (s.empty() || s == "nhd") return PagedKV::Layout::NHD;
  if (s == "hnd") return PagedKV::Layout::HND;
  throw UsageError(fmt::format("--kv-layout must be nhd or hnd, got '{}'", s));
}

Problem load_paged_problem(const KernelSpec& spec, const FileInputs& files, DType dtype, bool want_lse);

}  // namespace

void check_fits_in_memory(const Shape& s, DType dtype, bool with_bias) {
  const long double elems = static_cast<long double>(s.batch) *
      (s.heads_q * s.len_q * (s.head_dim + s.head_dim_v) + s.heads_kv * s.len_kv * (s.head_dim + s.head_dim_v) +
       (with_bias ? static_cast<long double>(s.heads_q) * s.len_q * s.len_kv : 0.0L));
  // Random inputs are drawn in fp32, then converted: count 4 + dtype bytes per element.
  const long double bytes = elems * (4 + dtype_size(dtype));
  const long double phys = static_cast<long double>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  if (phys > 0 && bytes > 0.8L * phys)
    throw UsageError(fmt::format("shape {} needs about {:.1f} GiB of host memory for its tensors, "
                                 "more than this machine has ({:.1f} GiB)", describe(s),
                                 static_cast<double>(bytes / (1LL << 30)),
                                 static_cast<double>(phys / (1LL << 30))));
}

Problem load_problem(const KernelSpec& spec, const FileInputs& files, DType dtype, bool want_lse) {
  if (files.paged()) return load_paged_problem(spec, files, dtype, want_lse);
  require_runtime_tensors(spec, !files.bias.empty(), !files.block_mask.empty(), !files.cu_seqlens_q.empty(),
                          !files.cu_seqlens_k.empty());
  const io::NpyArray q = load_f32(files.q, "Q", "[B, Hq, Nq, D]", 4);
  const io::NpyArray k = load_f32(files.k, "K", "[B, Hkv, Nk, D]", 4);
  const io::NpyArray v = load_f32(files.v, "V", "[B, Hkv, Nk, Dv]", 4);

  Problem p;
  p.dtype = dtype;
  p.q_offset = files.q_offset;
  p.shape = Shape{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
  const Shape& s = p.shape;
  if (s.heads_kv > 0 && s.heads_q % s.heads_kv != 0)
    throw Error(ErrorCode::Shape,
                fmt::format("{} has Hq={} heads and {} has Hkv={}: grouped-query attention needs Hq "
                            "divisible by Hkv", files.q, s.heads_q, files.k, s.heads_kv));
  p.q = HostTensor(dtype, dims4(q.shape));
  p.q.fill_from_f32(q.f32());
  p.k = HostTensor(dtype, dims4(k.shape));
  p.k.fill_from_f32(k.f32());
  p.v = HostTensor(dtype, dims4(v.shape));
  p.v.fill_from_f32(v.f32());

  if (!files.bias.empty()) {
    io::NpyArray b = io::read_npy(files.bias);
    if (b.dtype != io::NpyDType::F32)
      throw Error(ErrorCode::DType, fmt::format("{}: the bias must be float32, got {}", files.bias,
                                                io::npy_dtype_name(b.dtype)));
    // NumPy broadcasting: a [Nq, Nk] or [Hq, Nq, Nk] bias gains leading 1s.
    if (b.shape.size() < 2 || b.shape.size() > 4)
      throw Error(ErrorCode::Shape, fmt::format("{}: the bias must be [1|B, 1|Hq, Nq, Nk], got shape {}",
                                                files.bias, b.shape_string()));
    while (b.shape.size() < 4) b.shape.insert(b.shape.begin(), 1);
    p.bias = HostTensor(bias_dtype(dtype), dims4(b.shape));
    p.bias->fill_from_f32(b.f32());
  }

  if (!files.block_mask.empty()) {
    const io::NpyArray m = io::read_npy(files.block_mask);
    const std::vector<uint8_t> grid = m.to_mask(files.block_mask);
    if (m.shape.size() != 2 && m.shape.size() != 4)
      throw Error(ErrorCode::Shape, fmt::format("{}: the block mask must be [nQblocks, nKblocks] or "
                                                "[1|B, 1|Hq, nQblocks, nKblocks], got shape {}",
                                                files.block_mask, m.shape_string()));
    const BlockSize bs = files.block_size.value_or(BlockSize{});
    const int64_t mb = m.shape.size() == 4 ? m.shape[0] : 1;
    const int64_t mh = m.shape.size() == 4 ? m.shape[1] : 1;
    const int64_t nqb = m.shape[m.shape.size() - 2], nkb = m.shape[m.shape.size() - 1];
    const int64_t want_q = ceil_div(s.len_q, bs.q), want_k = ceil_div(s.len_kv, bs.k);
    if (nqb != want_q || nkb != want_k)
      throw Error(ErrorCode::Shape,
                  fmt::format("{}: grid of {}x{} blocks, but Nq={} and Nk={} with --block-size {},{} "
                              "need {}x{}", files.block_mask, nqb, nkb, s.len_q, s.len_kv, bs.q, bs.k,
                              want_q, want_k));
    if ((mb != 1 && mb != s.batch) || (mh != 1 && mh != s.heads_q))
      throw Error(ErrorCode::Shape,
                  fmt::format("{}: leading dimensions {}x{} must be 1 or B={} and 1 or Hq={}",
                              files.block_mask, mb, mh, s.batch, s.heads_q));
    p.block_mask = BlockMask::from_dense(grid.data(), mb, mh, s.len_q, s.len_kv, bs.q, bs.k);
  }
  if (!files.cu_seqlens_q.empty()) p.cu_seqlens_q = load_offsets(files.cu_seqlens_q, "--cu-seqlens-q");
  if (!files.cu_seqlens_k.empty()) p.cu_seqlens_k = load_offsets(files.cu_seqlens_k, "--cu-seqlens-k");
  allocate_outputs(p, want_lse);
  return p;
}

Problem random_problem(const KernelSpec& spec, const Shape& s, uint64_t seed, DType dtype,
                       std::optional<BlockSize> block_size, std::optional<int64_t> q_offset,
                       bool want_lse, int64_t page_size) {
  check_fits_in_memory(s, dtype, spec.needs_bias());
  Problem p;
  p.shape = s;
  p.dtype = dtype;
  p.q_offset = q_offset;
  p.q = random_tensor(dtype, {s.batch, s.heads_q, s.len_q, s.head_dim}, seed, 1);
  p.k = random_tensor(dtype, {s.batch, s.heads_kv, s.len_kv, s.head_dim}, seed, 2);
  p.v = random_tensor(dtype, {s.batch, s.heads_kv, s.len_kv, s.head_dim_v}, seed, 3);
  if (spec.needs_bias())
    p.bias = random_tensor(bias_dtype(dtype), {s.batch, s.heads_q, s.len_q, s.len_kv}, seed, 4);
  if (spec.needs_block_mask()) {
    // Half the blocks active, drawn per (batch, head): sparse enough to matter, and some query
    // blocks may end up with no key block at all (those rows must give 0 / -inf).
    const BlockSize bs = block_size.value_or(BlockSize{});
    const int64_t nqb = ceil_div(s.len_q, bs.q), nkb = ceil_div(s.len_kv, bs.k);
    std::vector<uint8_t> grid(static_cast<size_t>(s.batch * s.heads_q * nqb * nkb));
    auto rng = stream(seed, 5);
    std::bernoulli_distribution coin(0.5);
    for (auto& g : grid) g = coin(rng) ? 1 : 0;
    p.block_mask = BlockMask::from_dense(grid.data(), s.batch, s.heads_q, s.len_q, s.len_kv, bs.q, bs.k);
  }
  if (spec.needs_cu_seqlens()) {
    auto rng = stream(seed, 6);
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 8)(rng);
    p.cu_seqlens_q = random_offsets(rng, n, s.len_q);
    p.cu_seqlens_k = s.len_q == s.len_kv ? *p.cu_seqlens_q : random_offsets(rng, n, s.len_kv);
  }
  if (page_size > 0) {
    // Every sequence Nk long, pages handed out in a shuffled order; k / v are then dropped.
    const std::vector<int64_t> lengths(static_cast<size_t>(s.batch), s.len_kv);
    p.paged = make_paged_cache(p.k.view(), p.v.view(), lengths, page_size, PagedKV::Layout::NHD, seed);
    p.k = HostTensor(), p.v = HostTensor();
  }
  allocate_outputs(p, want_lse);
  return p;
}

namespace {

Problem load_paged_problem(const KernelSpec& spec, const FileInputs& files, DType dtype, bool want_lse) {
  if (!files.k.empty() || !files.v.empty())
    throw UsageError("a paged cache (--k-pages ...) replaces --k/--v: give one or the other");
  // Programs that need them are refused by validate() (Error(Unsupported)) with the reason.
  if (!files.bias.empty() || !files.block_mask.empty() || !files.cu_seqlens_q.empty() || !files.cu_seqlens_k.empty())
    throw UsageError("--bias/--block-mask/--cu-seqlens-q/--cu-seqlens-k do not combine with a paged cache "
                     "(they need one key axis shared by the batch)");
  (void)spec;
  const std::pair<const std::string*, const char*> needed[] = {
      {&files.q, "--q"}, {&files.k_pages, "--k-pages"}, {&files.v_pages, "--v-pages"},
      {&files.page_indices, "--page-indices"}, {&files.page_indptr, "--page-indptr"},
      {&files.last_page_len, "--last-page-len"}};
  for (const auto& [path, flag] : needed)
    if (path->empty())
      throw UsageError(fmt::format("a paged run needs --q, --k-pages, --v-pages, --page-indices, "
                                   "--page-indptr and --last-page-len; {} is missing", flag));
  const PagedKV::Layout layout = parse_kv_layout(files.kv_layout);
  const char* page_dims = layout == PagedKV::Layout::NHD ? "[num_pages, page_size, Hkv, D]" : "[num_pages, Hkv, page_size, D]";
  const io::NpyArray q = load_f32(files.q, "Q", "[B, Hq, Nq, D]", 4);
  const io::NpyArray kp = load_f32(files.k_pages, "the K pages", page_dims, 4);
  const io::NpyArray vp = load_f32(files.v_pages, "the V pages", page_dims, 4);

  Problem p;
  p.dtype = dtype;
  p.q_offset = files.q_offset;
  p.q = HostTensor(dtype, dims4(q.shape));
  p.q.fill_from_f32(q.f32());
  PagedCache c;
  c.dtype = dtype, c.layout = layout;
  c.k_shape = dims4(kp.shape), c.v_shape = dims4(vp.shape);
  for (auto [a, dst] : {std::pair{&kp, &c.k_storage}, std::pair{&vp, &c.v_storage}}) {
    HostTensor t(dtype, dims4(a->shape));
    t.fill_from_f32(a->f32());
    const auto* bytes = static_cast<const std::byte*>(t.view().data);
    dst->assign(bytes, bytes + t.numel() * dtype_size(dtype));
  }
  c.page_indices = load_index_list(files.page_indices, "--page-indices");
  c.page_indptr = load_index_list(files.page_indptr, "--page-indptr");
  c.last_page_len = load_index_list(files.last_page_len, "--last-page-len");
  p.paged = std::move(c);
  // The shape shown and used for the outputs; validate() checks the page table before any run
  // (kv_len of an unchecked table is a wrong length, never an overflow).
  const PagedKV view = p.paged->view();
  int64_t longest = 0;
  if (std::ssize(view.page_indptr) == q.shape[0] + 1 && std::ssize(view.last_page_len) == q.shape[0])
    for (int64_t b = 0; b < q.shape[0]; ++b) longest = std::max(longest, view.kv_len(b));
  p.shape = Shape{q.shape[0], q.shape[1], view.heads(), q.shape[2], longest, q.shape[3], vp.shape[3]};
  allocate_outputs(p, want_lse);
  return p;
}

}  // namespace

}  // namespace attnfuse::cli
