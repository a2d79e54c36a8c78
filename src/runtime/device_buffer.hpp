// One device allocation through the dlopen'ed driver, freed on scope exit: the host-side helper
// the CLI and the GPU tests use to stage tensors (the library itself only takes caller pointers).
#pragma once

#include <cstddef>
#include <utility>

#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_) check(driver().cuMemAlloc(&ptr_, bytes_), "cuMemAlloc");
  }
  ~DeviceBuffer() {
    if (ptr_) driver().cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, 0)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;  // o frees what this held
  }

  void* get() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* src) { check(driver().cuMemcpyHtoD(ptr_, src, bytes_), "cuMemcpyHtoD"); }
  void download(void* dst) const { check(driver().cuMemcpyDtoH(dst, ptr_, bytes_), "cuMemcpyDtoH"); }
  // 0xFF bytes: NaN in fp32, bf16 and fp16, so an element a kernel forgets to write shows.
  void poison() { check(driver().cuMemsetD8(ptr_, 0xFF, bytes_), "cuMemsetD8"); }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace attnfuse::runtime
