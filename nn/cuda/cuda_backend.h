// The CUDA backend: nn/backend.h on one GPU through cuDNN, cuBLAS and a few
// kernels of our own (nn/cuda/kernels.h lists which op uses what). Only in
// builds with LOCKSTEP_HAVE_CUDA; callers guard with #if LOCKSTEP_HAVE_CUDA.
//
// Ops are queued on the backend's stream and return at once, except the
// losses, which return host values and so wait. Tensor copies (copy_from,
// zero) on the legacy default stream are ordered with that stream (it is a
// blocking stream), so reading a result back with copy_from needs no
// synchronize(); other streams (NCCL's) do need it.
//
// At fp32 (the default), results match the CPU backend to float32 rounding
// (float32 math, no TF32): max-pool, ReLU, dropout, row bias and column sums
// bit for bit; convolution, GEMM, softmax and the losses to the rounding of
// their sums. At bf16/fp16, convolutions and GEMMs round their inputs to 16
// bits and accumulate in float32.
#pragma once

#include <memory>
#include <string>

#include "nn/backend.h"
#include "nn/cuda/math_types.h"

namespace lockstep::nn {

// The number of CUDA devices this process can see; 0 when there is no
// driver, no device, or CUDA_VISIBLE_DEVICES hides them all. Never throws.
int cuda_device_count() noexcept;

// What `lockstep info` prints: the CUDA runtime, driver and cuDNN versions
// and one line per visible device, e.g.
//   CUDA: runtime 13.0, driver 13.0, cuDNN 9.19.0, 1 device visible
//   cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB, 132 SMs)
// or "CUDA: no device visible (<the runtime's reason>)". Never throws.
std::string cuda_devices_description();

// The backend on device `device_index` (0-based among the visible devices),
// which becomes the current device of the calling thread: tensors the
// thread allocates afterwards land on it. deterministic: convolutions use
// only deterministic cuDNN algorithms (chosen by heuristics, the same on
// every run); otherwise the fastest measured (cudnnFind). Every other op is
// deterministic either way. precision: the arithmetic of convolutions and
// GEMMs (nn/cuda/math_types.h; tensors stay float32). Throws InputError when
// the device is not visible, LibraryError when CUDA, cuDNN or cuBLAS cannot
// start on it.
// Copies `bytes` of host memory to device memory of `backend` (a CUDA
// backend), queued on its stream after the ops queued so far, through pinned
// staging buffers: `host` may be reused at once, and the DMA is a true
// asynchronous copy (Backend::upload). Throws Error when backend is not a
// CUDA backend.
void cuda_upload(Backend& backend, const void* host, void* device, size_t bytes);

std::unique_ptr<Backend> make_cuda_backend(int device_index, bool deterministic,
                                           Precision precision = Precision::kFp32);

}  // namespace lockstep::nn
