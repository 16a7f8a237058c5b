#include "nn/cuda/cuda_device_memory.h"

#include <cuda_runtime.h>

#include <atomic>

#include "common/error.h"

namespace lockstep::nn {
namespace {

void check(cudaError_t status, const char* what, size_t bytes) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // consumed here, not reported again by a later check
  throw LibraryError(
      detail::concat(what, " of ", bytes, " bytes failed: ", cudaGetErrorString(status)));
}

bool on_device(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // a plain host pointer on old runtimes
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

std::atomic<int64_t> copy_waits{0}, copy_reads{0}, copy_writes{0};

class CudaDeviceMemory final : public DeviceMemory {
 public:
  float* allocate(size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc", bytes);
    if (const cudaError_t status = cudaMemset(p, 0, bytes); status != cudaSuccess) {
      cudaFree(p);
      check(status, "cudaMemset", bytes);
    }
    return static_cast<float*>(p);
  }
  void release(float* p) noexcept override { cudaFree(p); }
  void copy(void* dst, const void* src, size_t bytes) override {
    const bool from_device = on_device(src), to_device = on_device(dst);
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy", bytes);
    if (!from_device && !to_device) return;
    copy_waits.fetch_add(1, std::memory_order_relaxed);  // cudaMemcpy is synchronous
    if (from_device != to_device) {
      (from_device ? copy_reads : copy_writes).fetch_add(1, std::memory_order_relaxed);
    }
  }
  void zero(void* p, size_t bytes) override { check(cudaMemset(p, 0, bytes), "cudaMemset", bytes); }
};

// Registered as soon as this code is loaded, so that tensors made before
// the first backend (and in tests that link the backend directly) work.
const bool registered = [] {
  set_device_memory(&cuda_device_memory());
  return true;
}();

}  // namespace

DeviceMemory& cuda_device_memory() {
  static CudaDeviceMemory memory;
  return memory;
}

HostTraffic cuda_tensor_copy_traffic() {
  return {.waits = copy_waits.load(std::memory_order_relaxed),
          .reads = copy_reads.load(std::memory_order_relaxed),
          .writes = copy_writes.load(std::memory_order_relaxed)};
}

}  // namespace lockstep::nn
