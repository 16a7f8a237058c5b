// LOCKSTEP_HOST_DEVICE: marks a function that both backends compile, the
// CPU's as host code and CUDA's (under nvcc) as host and device code.
#pragma once

#if defined(__CUDACC__)
#define LOCKSTEP_HOST_DEVICE __host__ __device__
#else
#define LOCKSTEP_HOST_DEVICE
#endif
