// The C ABI over the C++ library: errors become status codes plus a thread-local message.
#include "attnfuse/attnfuse.h"

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/block_mask.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/merge_states.hpp"
#include "attnfuse/program.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/merge_states_cuda.hpp"

// A block mask handed across the ABI (immutable once built; the CUDA runtime keeps its upload with
// the BlockMask itself).
struct attnfuse_block_mask {
  attnfuse::BlockMask mask;
};

struct attnfuse_kernel {
  attnfuse::KernelSpec spec;
  attnfuse_device device;
  const attnfuse::runtime::CudaKernel* cuda = nullptr;  // resolved at compile time
};

namespace {

thread_local std::string g_last_error;

attnfuse_status fail(attnfuse_status s, const std::string& msg) {
  g_last_error = msg;
  return s;
}

// A fault in what the C caller gave (a callback's return, a grid value), found inside a build and
// returned as ATTNFUSE_ERROR_INVALID_ARGUMENT with its message.
struct CallerError {
  std::string message;
};

template <class F>
attnfuse_status guarded(F&& f) {
  try {
    f();
    g_last_error.clear();
    return ATTNFUSE_OK;
  } catch (const CallerError& e) {
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, e.message);
  } catch (const attnfuse::Error& e) {
    return fail(static_cast<attnfuse_status>(e.code()), e.what());
  } catch (const std::exception& e) {
    return fail(ATTNFUSE_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(ATTNFUSE_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

// The BlockMask of a C fill callback (and a classifier, or null). fill's first nonzero return stops
// the build and names the block in the caller's error.
attnfuse_status mask_from_fill(const char* who, const attnfuse::BlockMask::BlockClassifier* classify,
                               attnfuse_block_fill_fn fill, void* user, int64_t batch, int64_t heads, int64_t q_len,
                               int64_t kv_len, int block_q, int block_k, attnfuse_block_mask** out) {
  const attnfuse::BlockMask::BlockFiller filler = [=](int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0,
                                                      int64_t kv1, uint8_t* keep) {
    if (!fill) throw CallerError{std::string(who) + ": fill must not be NULL when a block is partial"};
    if (const int code = fill(user, b, h, q0, q1, kv0, kv1, keep); code != 0)
      throw CallerError{std::string(who) + ": fill returned " + std::to_string(code) + " for the block at b=" +
                        std::to_string(b) + " h=" + std::to_string(h) + " q0=" + std::to_string(q0) +
                        " kv0=" + std::to_string(kv0)};
  };
  return guarded([&] {
    *out = new attnfuse_block_mask{
        classify
            ? attnfuse::BlockMask::from_block_cells(*classify, filler, batch, heads, q_len, kv_len, block_q, block_k)
            : attnfuse::BlockMask::from_block_cells(filler, batch, heads, q_len, kv_len, block_q, block_k)};
  });
}

// The error of a grid of block kinds whose entry i holds `value`, outside 0-2.
std::string bad_kind(const char* who, int64_t i, int value) {
  return std::string(who) + ": kinds[" + std::to_string(i) + "] is " + std::to_string(value) +
         ", not 0 (inactive), 1 (full) or 2 (partial)";
}

attnfuse::BlockMask::BlockKind kind_of(int value) {
  switch (value) {
    case ATTNFUSE_BLOCK_INACTIVE: return attnfuse::BlockMask::BlockKind::Inactive;
    case ATTNFUSE_BLOCK_FULL: return attnfuse::BlockMask::BlockKind::Full;
    default: return attnfuse::BlockMask::BlockKind::Partial;
  }
}

// The integer a C caller put in an enum argument or field. C lets an enum object hold any int;
// C++ reading one outside the range of its enumerators is undefined behaviour (UBSan's `enum`
// check caught the validations below doing it): take the bits, compare integers.
template <class E>
int raw(const E& e) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int), "a C enum of the ABI");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

bool is_dtype(int t) { return t == ATTNFUSE_FP32 || t == ATTNFUSE_BF16 || t == ATTNFUSE_FP16; }

attnfuse::DType to_dtype(int t) {  // checked by the caller (is_dtype)
  switch (t) {
    case ATTNFUSE_BF16: return attnfuse::DType::BF16;
    case ATTNFUSE_FP16: return attnfuse::DType::F16;
    default: return attnfuse::DType::F32;
  }
}

attnfuse::TensorView to_view(const attnfuse_tensor& t, attnfuse::DType dtype) {
  attnfuse::TensorView v;
  v.data = t.data;
  v.dtype = dtype;
  for (int i = 0; i < 4; ++i) {
    v.shape[static_cast<size_t>(i)] = t.shape[i];
    v.strides[static_cast<size_t>(i)] = t.strides[i];
  }
  return v;
}

attnfuse::SeqOffsetsView to_offsets(const attnfuse_offsets& o) {
  attnfuse::SeqOffsetsView v;
  v.data = o.data;
  v.type = o.is_int64 ? attnfuse::SeqOffsetsView::Type::I64 : attnfuse::SeqOffsetsView::Type::I32;
  v.batch = o.batch;
  v.length = o.length;
  v.batch_stride = o.batch_stride;
  return v;
}

// A paged cache's page table as spans: B = Q's batch, page_indptr B + 1 entries, last_page_len
// B. The pointers are host memory on the CPU, device memory on CUDA; nothing is read here.
attnfuse::PagedKV to_paged(const attnfuse_paged_kv& p, int64_t batch, attnfuse::DType dtype) {
  attnfuse::PagedKV v;
  v.k_pages = to_view(p.k_pages, dtype);
  v.v_pages = to_view(p.v_pages, dtype);
  v.layout = raw(p.layout) == ATTNFUSE_PAGED_HND ? attnfuse::PagedKV::Layout::HND : attnfuse::PagedKV::Layout::NHD;
  v.page_indices = {p.page_indices, static_cast<size_t>(p.num_page_indices)};
  v.page_indptr = {p.page_indptr, static_cast<size_t>(batch + 1)};
  v.last_page_len = {p.last_page_len, static_cast<size_t>(batch)};
  return v;
}

// What the spans of to_paged need before they can be formed (validate() checks the rest); a
// status other than OK means the call is refused with that message.
attnfuse_status check_paged_pointers(const attnfuse_paged_kv& p, int64_t batch) {
  if (const int layout = raw(p.layout); layout != ATTNFUSE_PAGED_NHD && layout != ATTNFUSE_PAGED_HND)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT,
                "paged->layout must be ATTNFUSE_PAGED_NHD or ATTNFUSE_PAGED_HND (got " + std::to_string(layout) + ")");
  if (batch < 0)
    return fail(ATTNFUSE_ERROR_SHAPE, "Q has a negative batch dimension (" + std::to_string(batch) + ")");
  if (p.num_page_indices < 0)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT,
                "paged->num_page_indices must be >= 0 (got " + std::to_string(p.num_page_indices) + ")");
  if (p.page_indptr == nullptr)
    return fail(ATTNFUSE_ERROR_MISSING_TENSOR, "paged->page_indptr is NULL; it needs B + 1 = " +
                                                   std::to_string(batch + 1) + " entries");
  if (p.last_page_len == nullptr && batch > 0)
    return fail(ATTNFUSE_ERROR_MISSING_TENSOR,
                "paged->last_page_len is NULL; it needs B = " + std::to_string(batch) + " entries");
  if (p.page_indices == nullptr && p.num_page_indices > 0)
    return fail(ATTNFUSE_ERROR_MISSING_TENSOR, "paged->page_indices is NULL but num_page_indices is " +
                                                   std::to_string(p.num_page_indices));
  return ATTNFUSE_OK;
}

}  // namespace

static_assert(static_cast<int>(attnfuse::PagedKV::Layout::NHD) == ATTNFUSE_PAGED_NHD &&
                  static_cast<int>(attnfuse::PagedKV::Layout::HND) == ATTNFUSE_PAGED_HND,
              "the C enum mirrors attnfuse::PagedKV::Layout");
static_assert(static_cast<int>(attnfuse::RopeMode::Auto) == ATTNFUSE_ROPE_AUTO &&
                  static_cast<int>(attnfuse::RopeMode::Fused) == ATTNFUSE_ROPE_FUSED &&
                  static_cast<int>(attnfuse::RopeMode::Prerotate) == ATTNFUSE_ROPE_PREROTATE,
              "the C enum mirrors attnfuse::RopeMode");

extern "C" {

attnfuse_status attnfuse_compile(const char* program, attnfuse_device device, attnfuse_dtype dtype,
                                 int head_dim, attnfuse_kernel** out) {
  return attnfuse_compile_rope(program, device, dtype, head_dim, ATTNFUSE_ROPE_AUTO, out);
}

attnfuse_status attnfuse_compile_rope(const char* program, attnfuse_device device, attnfuse_dtype dtype,
                                      int head_dim, attnfuse_rope_mode rope_mode, attnfuse_kernel** out) {
  if (!program || !out) return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "program and out must not be NULL");
  *out = nullptr;
  const int dev = raw(device), dt = raw(dtype), mode = raw(rope_mode);
  if (dev != ATTNFUSE_DEVICE_CPU && dev != ATTNFUSE_DEVICE_CUDA)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT,
                "device must be ATTNFUSE_DEVICE_CPU or ATTNFUSE_DEVICE_CUDA (got " + std::to_string(dev) + ")");
  if (!is_dtype(dt))
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT,
                "dtype must be ATTNFUSE_FP32, ATTNFUSE_BF16 or ATTNFUSE_FP16 (got " + std::to_string(dt) + ")");
  if (mode < ATTNFUSE_ROPE_AUTO || mode > ATTNFUSE_ROPE_PREROTATE)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT,
                "rope_mode must be ATTNFUSE_ROPE_AUTO, _FUSED or _PREROTATE (got " + std::to_string(mode) + ")");
  return guarded([&] {
    const bool cuda = dev == ATTNFUSE_DEVICE_CUDA;
    const attnfuse::Target target = cuda ? attnfuse::Target::Cuda : attnfuse::Target::Cpu;
    auto k = std::make_unique<attnfuse_kernel>();
    k->spec = attnfuse::Program::parse(program).compile(
        {target, to_dtype(dt), head_dim, static_cast<attnfuse::RopeMode>(mode)});
    k->device = cuda ? ATTNFUSE_DEVICE_CUDA : ATTNFUSE_DEVICE_CPU;
    if (cuda) k->cuda = &attnfuse::runtime::cuda_kernel(k->spec);
    *out = k.release();
  });
}

attnfuse_status attnfuse_launch(const attnfuse_kernel* kernel, const attnfuse_args* args, void* stream) {
  if (!kernel || !args) return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "kernel and args must not be NULL");
  if (args->paged) {
    const attnfuse_status st = check_paged_pointers(*args->paged, args->q.shape[0]);
    if (st != ATTNFUSE_OK) return st;
  }
  return guarded([&] {
    const attnfuse::DType dt = kernel->spec.dtype;
    attnfuse::AttentionArgs a;
    a.q = to_view(args->q, dt);
    a.k = to_view(args->k, dt);
    a.v = to_view(args->v, dt);
    a.out = to_view(args->out, dt);
    if (args->lse) {
      attnfuse::LseView l;
      l.data = args->lse;
      l.shape = {args->q.shape[0], args->q.shape[1], args->q.shape[2]};
      l.strides = {args->lse_strides[0], args->lse_strides[1], args->lse_strides[2]};
      a.lse = l;
    }
    if (args->bias) {
      const int bt = raw(args->bias_dtype);
      if (!is_dtype(bt))
        throw attnfuse::Error(attnfuse::ErrorCode::DType, "bias_dtype must be ATTNFUSE_FP32, ATTNFUSE_BF16 or "
                                                          "ATTNFUSE_FP16 (got " + std::to_string(bt) + ")");
      a.bias = to_view(*args->bias, to_dtype(bt));  // validate() takes fp32 or the kernel's dtype
    }
    if (args->has_q_offset) a.q_offset = args->q_offset;
    if (args->cu_seqlens_q) a.cu_seqlens_q = to_offsets(*args->cu_seqlens_q);
    if (args->cu_seqlens_k) a.cu_seqlens_k = to_offsets(*args->cu_seqlens_k);
    if (args->paged) {
      a.paged = to_paged(*args->paged, args->q.shape[0], dt);
      a.paged->table_settled = args->paged_table_settled != 0;
    }
    if (args->block_mask) a.block_mask = &args->block_mask->mask;
    if (args->rope_cos || args->rope_sin)
      a.rope_tables = attnfuse::RopeTablesView{args->rope_cos, args->rope_sin, args->rope_positions, args->rope_pairs};
    if (kernel->device == ATTNFUSE_DEVICE_CUDA)
      kernel->cuda->launch(a, kernel->spec.scalars, static_cast<attnfuse::runtime::CUstream>(stream));
    else
      attnfuse::run_cpu(kernel->spec, a);
  });
}

void attnfuse_kernel_free(attnfuse_kernel* kernel) { delete kernel; }

attnfuse_status attnfuse_merge_states(attnfuse_device device, const attnfuse_state* states, int64_t num_states,
                                      const attnfuse_state* out, void* stream) {
  if (!states || !out)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "attnfuse_merge_states: states and out must not be NULL");
  if (num_states < 1)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT,
                "attnfuse_merge_states: num_states must be >= 1 (got " + std::to_string(num_states) + ")");
  const int dev = raw(device);
  if (dev != ATTNFUSE_DEVICE_CPU && dev != ATTNFUSE_DEVICE_CUDA)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "attnfuse_merge_states: device must be ATTNFUSE_DEVICE_CPU or "
                                                 "ATTNFUSE_DEVICE_CUDA (got " + std::to_string(dev) + ")");
  // The C state as the C++ one; a dtype outside the enum is the caller's argument error.
  const auto state_of = [](const attnfuse_state& s, const std::string& name) {
    const int dt = raw(s.dtype);
    if (!is_dtype(dt))
      throw CallerError{"attnfuse_merge_states: " + name + ".dtype must be ATTNFUSE_FP32, ATTNFUSE_BF16 or "
                        "ATTNFUSE_FP16 (got " + std::to_string(dt) + ")"};
    attnfuse::AttentionState a;
    a.o = to_view(s.o, to_dtype(dt));
    a.lse.data = s.lse;
    a.lse.shape = {s.o.shape[0], s.o.shape[1], s.o.shape[2]};
    a.lse.strides = {s.lse_strides[0], s.lse_strides[1], s.lse_strides[2]};
    return a;
  };
  return guarded([&] {
    std::vector<attnfuse::AttentionState> in;
    in.reserve(static_cast<size_t>(num_states));
    for (int64_t k = 0; k < num_states; ++k) in.push_back(state_of(states[k], "states[" + std::to_string(k) + "]"));
    const attnfuse::AttentionState o = state_of(*out, "out");
    if (dev == ATTNFUSE_DEVICE_CUDA)
      attnfuse::runtime::merge_states_cuda(in, o, static_cast<attnfuse::runtime::CUstream>(stream));
    else
      attnfuse::merge_states(in, o);
  });
}

attnfuse_status attnfuse_block_mask_from_dense(const uint8_t* grid, int64_t batch, int64_t heads, int64_t q_len,
                                               int64_t kv_len, int block_q, int block_k,
                                               attnfuse_block_mask** out) {
  if (!out) return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    *out = new attnfuse_block_mask{
        attnfuse::BlockMask::from_dense(grid, batch, heads, q_len, kv_len, block_q, block_k)};
  });
}

attnfuse_status attnfuse_block_mask_from_block_cells(attnfuse_block_classify_fn classify, attnfuse_block_fill_fn fill,
                                                     void* user, int64_t batch, int64_t heads, int64_t q_len,
                                                     int64_t kv_len, int block_q, int block_k,
                                                     attnfuse_block_mask** out) {
  if (!out) return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "out must not be NULL");
  *out = nullptr;
  if (!fill)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "attnfuse_block_mask_from_block_cells: fill must not be NULL");
  // Any value but INACTIVE and FULL means "ask the cells".
  const attnfuse::BlockMask::BlockClassifier classifier = [classify, user](int64_t b, int64_t h, int64_t q0,
                                                                           int64_t q1, int64_t kv0, int64_t kv1) {
    return kind_of(classify(user, b, h, q0, q1, kv0, kv1));
  };
  return mask_from_fill("attnfuse_block_mask_from_block_cells", classify ? &classifier : nullptr, fill, user, batch,
                        heads, q_len, kv_len, block_q, block_k, out);
}

attnfuse_status attnfuse_block_mask_from_block_kinds(const uint8_t* kinds, attnfuse_block_fill_fn fill, void* user,
                                                     int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                                                     int block_q, int block_k, attnfuse_block_mask** out) {
  constexpr const char* who = "attnfuse_block_mask_from_block_kinds";
  if (!out) return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "out must not be NULL");
  *out = nullptr;
  // The build checks the dimensions before it asks about any block; only then is the grid read.
  const int64_t nqb = block_q > 0 ? (q_len + block_q - 1) / block_q : 0;
  const int64_t nkb = block_k > 0 ? (kv_len + block_k - 1) / block_k : 0;
  const attnfuse::BlockMask::BlockClassifier classifier = [=](int64_t b, int64_t h, int64_t q0, int64_t, int64_t kv0,
                                                              int64_t) {
    if (!kinds) throw CallerError{std::string(who) + ": the kinds pointer is null"};
    const int64_t i = ((b * heads + h) * nqb + q0 / block_q) * nkb + kv0 / block_k;
    if (kinds[i] > ATTNFUSE_BLOCK_PARTIAL) throw CallerError{bad_kind(who, i, kinds[i])};
    return kind_of(kinds[i]);
  };
  return mask_from_fill(who, &classifier, fill, user, batch, heads, q_len, kv_len, block_q, block_k, out);
}

attnfuse_status attnfuse_block_mask_from_partial_cells(const uint8_t* kinds, const uint8_t* cells, int64_t num_partial,
                                                       int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len,
                                                       int block_q, int block_k, attnfuse_block_mask** out) {
  constexpr const char* who = "attnfuse_block_mask_from_partial_cells";
  if (!out) return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, "out must not be NULL");
  *out = nullptr;
  // Dimensions the build would refuse: no grid is read, and the build reports them (as from_dense).
  const bool dims_ok = block_q > 0 && block_k > 0 && batch >= 0 && heads >= 0 && q_len >= 0 && kv_len >= 0;
  const int64_t nqb = dims_ok ? (q_len + block_q - 1) / block_q : 0;
  const int64_t nkb = dims_ok ? (kv_len + block_k - 1) / block_k : 0;
  const int64_t rows = batch * heads * nqb;
  // The grid is read once before any block is built: its values are checked, the count of partial
  // blocks is checked against num_partial (so no slab is read past the caller's array), and each
  // block row's first slab is found. Within a row a block's slab is found by counting the partial
  // entries before it: at most nkb bytes, fewer than the block_q x block_k bytes it then copies.
  std::vector<int64_t> row_slab(static_cast<size_t>(dims_ok && nkb > 0 ? rows + 1 : 1), 0);
  if (dims_ok && rows > 0 && nkb > 0) {
    if (!kinds) return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, std::string(who) + ": the kinds pointer is null");
    for (int64_t r = 0; r < rows; ++r) {
      int64_t partial = 0;
      for (int64_t j = 0; j < nkb; ++j) {
        const uint8_t kind = kinds[r * nkb + j];
        if (kind > ATTNFUSE_BLOCK_PARTIAL)
          return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, bad_kind(who, r * nkb + j, kind));
        partial += kind == ATTNFUSE_BLOCK_PARTIAL;
      }
      row_slab[r + 1] = row_slab[r] + partial;
    }
  }
  if (dims_ok && row_slab.back() != num_partial)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, std::string(who) + ": kinds holds " + std::to_string(row_slab.back()) +
                                                     " partial blocks, num_partial is " + std::to_string(num_partial));
  if (dims_ok && num_partial > 0 && !cells)
    return fail(ATTNFUSE_ERROR_INVALID_ARGUMENT, std::string(who) + ": the cells pointer is null");
  const attnfuse::BlockMask::BlockClassifier classifier = [=](int64_t b, int64_t h, int64_t q0, int64_t, int64_t kv0,
                                                              int64_t) {
    return kind_of(kinds[((b * heads + h) * nqb + q0 / block_q) * nkb + kv0 / block_k]);
  };
  const attnfuse::BlockMask::BlockFiller filler = [&](int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0,
                                                      int64_t kv1, uint8_t* keep) {
    const int64_t row = (b * heads + h) * nqb + q0 / block_q;
    const uint8_t* entry = kinds + row * nkb;
    int64_t slab = row_slab[row];
    for (int64_t j = 0; j < kv0 / block_k; ++j) slab += entry[j] == ATTNFUSE_BLOCK_PARTIAL;
    const uint8_t* src = cells + slab * block_q * block_k;
    for (int64_t q = 0; q < q1 - q0; ++q) std::memcpy(keep + q * (kv1 - kv0), src + q * block_k, kv1 - kv0);
  };
  return guarded([&] {
    *out = new attnfuse_block_mask{
        attnfuse::BlockMask::from_block_cells(classifier, filler, batch, heads, q_len, kv_len, block_q, block_k)};
  });
}

void attnfuse_block_mask_free(attnfuse_block_mask* mask) { delete mask; }

const char* attnfuse_last_error(void) { return g_last_error.c_str(); }

int attnfuse_cuda_available(void) { return attnfuse::runtime::cuda_available() ? 1 : 0; }

const char* attnfuse_cpu_kernel_isa(void) {
  const char* name = nullptr;
  return guarded([&] { name = attnfuse::cpu_kernel_isa(); }) == ATTNFUSE_OK ? name : nullptr;
}

}  // extern "C"
