// nn/device_memory.h on CUDA (cudaMalloc, cudaMemcpy, cudaMemset, cudaFree),
// registered with nn::set_device_memory when the CUDA backend's code is
// loaded (the plugin, or a test linking it).
#pragma once

#include "nn/device_memory.h"

namespace lockstep::nn {

DeviceMemory& cuda_device_memory();

}  // namespace lockstep::nn
