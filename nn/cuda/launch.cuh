// Launch helpers for the backend's own kernels (included by .cu files only).
// Every kernel is a grid-stride loop over int64 indices, so any size runs
// with a bounded grid; launch() skips empty launches and checks the launch.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nn/cuda/cuda_check.h"
#include "nn/cuda/host_rules.h"

namespace lockstep::nn::cuda {

// kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(args...), checked;
// nothing when n == 0.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), int64_t n, cudaStream_t stream, Args... args) {
  if (n <= 0) return;
  kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(args...);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep::nn::cuda

// for (i = this thread's first index; i < n; i += all threads)
#define CUDA_KERNEL_LOOP(i, n)                                                           \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
