#include "nn/cuda/cuda_device_memory.h"

#include <cuda_runtime.h>

#include "common/error.h"

namespace lockstep::nn {
namespace {

void check(cudaError_t status, const char* what, size_t bytes) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // consumed here, not reported again by a later check
  throw LibraryError(
      detail::concat(what, " of ", bytes, " bytes failed: ", cudaGetErrorString(status)));
}

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
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy", bytes);
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

}  // namespace lockstep::nn
