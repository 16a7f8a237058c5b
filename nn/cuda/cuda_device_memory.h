// nn/device_memory.h on CUDA (cudaMalloc, cudaMemcpy, cudaMemset, cudaFree),
// registered with nn::set_device_memory when the CUDA backend's code is
// loaded (the plugin, or a test linking it).
#pragma once

#include "nn/backend.h"
#include "nn/device_memory.h"

namespace lockstep::nn {

DeviceMemory& cuda_device_memory();

// The host traffic of tensor copies (Tensor::copy_from, clone) through
// cuda_device_memory() since the process started, all threads: each copy
// with a side in device memory is one wait (cudaMemcpy is synchronous), and
// one read (device to host) or write (host to device) when the other side
// is host memory. Kept apart from
// Backend::host_traffic(), which counts the backend's own ops: a test
// checks both where no copy may hide (tests/test_cuda_gather.cpp).
HostTraffic cuda_tensor_copy_traffic();

}  // namespace lockstep::nn
