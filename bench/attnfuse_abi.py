"""ctypes mirrors of the C ABI (include/attnfuse/attnfuse.h) shared by the GPU benchmarks.

attnfuse_args must be mirrored in full: the library reads every field, so a shorter structure
would hand it whatever follows in memory. `python3 bench/gpu_decode.py --selfcheck` compiles a C
program against the header and compares every size and offset with these structures.
"""
import ctypes

OK, MISSING_TENSOR = 0, 5
DEVICE_CPU, DEVICE_CUDA = 0, 1
FP32, BF16, FP16 = 0, 1, 2
PAGED_NHD, PAGED_HND = 0, 1
BLOCK_INACTIVE, BLOCK_FULL, BLOCK_PARTIAL = 0, 1, 2

# attnfuse_block_classify_fn and attnfuse_block_fill_fn (attnfuse_block_mask_from_block_cells).
# Keep a reference to each wrapped Python function until the build returns.
BlockClassifyFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_int64] * 6)
BlockFillFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_int64] * 6, ctypes.POINTER(ctypes.c_uint8))


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * 4), ("strides", ctypes.c_int64 * 4)]


class State(ctypes.Structure):
    """attnfuse_state: one partial result for attnfuse_merge_states."""
    _fields_ = [("o", Tensor), ("dtype", ctypes.c_int), ("lse", ctypes.c_void_p), ("lse_strides", ctypes.c_int64 * 3)]


class Offsets(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("is_int64", ctypes.c_int), ("batch", ctypes.c_int64),
                ("length", ctypes.c_int64), ("batch_stride", ctypes.c_int64)]


class PagedKV(ctypes.Structure):
    _fields_ = [("k_pages", Tensor), ("v_pages", Tensor), ("layout", ctypes.c_int),
                ("page_indices", ctypes.c_void_p), ("num_page_indices", ctypes.c_int64),
                ("page_indptr", ctypes.c_void_p), ("last_page_len", ctypes.c_void_p)]


class Args(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("out", Tensor),
                ("lse", ctypes.c_void_p), ("lse_strides", ctypes.c_int64 * 3),
                ("bias", ctypes.POINTER(Tensor)), ("has_q_offset", ctypes.c_int), ("q_offset", ctypes.c_int64),
                ("cu_seqlens_q", ctypes.POINTER(Offsets)), ("cu_seqlens_k", ctypes.POINTER(Offsets)),
                ("paged", ctypes.POINTER(PagedKV)), ("block_mask", ctypes.c_void_p),
                ("rope_cos", ctypes.c_void_p), ("rope_sin", ctypes.c_void_p),
                ("rope_positions", ctypes.c_int64), ("rope_pairs", ctypes.c_int64),
                ("paged_table_settled", ctypes.c_int), ("bias_dtype", ctypes.c_int)]


def raw_tensor(ptr, shape, strides):
    return Tensor(ptr, (ctypes.c_int64 * 4)(*shape), (ctypes.c_int64 * 4)(*strides))
