// CUDA_CHECK, CUDNN_CHECK, CUBLAS_CHECK: run a call of the CUDA runtime,
// cuDNN or cuBLAS and throw LibraryError when it fails, naming the call, the
// file and line, and the library's own error name and text, on one line.
// CUDA_CHECK_LAUNCH() checks the kernel launch just made.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "nn/error.h"

namespace lockstep::nn::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* expression,
                                          const char* file, int line) {
  const char* hint = status == cudaErrorMemoryAllocation
                         ? " ---> HINT: the GPU is out of memory; lower batch_size"
                         : "";
  throw LibraryError(detail::concat("CUDA call failed: ", expression, " (", file, ":", line,
                                    "): ", cudaGetErrorName(status), ": ",
                                    cudaGetErrorString(status), hint));
}

[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const char* expression,
                                           const char* file, int line) {
  // cuDNN 9 keeps a detailed message of the last failure on this thread.
  char last[512] = {};
  cudnnGetLastErrorString(last, sizeof(last));
  std::string detail_text(last);
  for (char& c : detail_text) c = (c == '\n' || c == '\r') ? ' ' : c;
  throw LibraryError(detail::concat("cuDNN call failed: ", expression, " (", file, ":", line,
                                    "): ", cudnnGetErrorString(status),
                                    detail_text.empty() ? "" : ": ", detail_text));
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* expression,
                                            const char* file, int line) {
  throw LibraryError(detail::concat("cuBLAS call failed: ", expression, " (", file, ":", line,
                                    "): ", cublasGetStatusName(status), ": ",
                                    cublasGetStatusString(status)));
}

}  // namespace lockstep::nn::cuda

#define CUDA_CHECK(expression)                                                             \
  do {                                                                                     \
    const cudaError_t lockstep_cuda_status_ = (expression);                                \
    if (lockstep_cuda_status_ != cudaSuccess) {                                            \
      ::lockstep::nn::cuda::throw_cuda_error(lockstep_cuda_status_, #expression, __FILE__, \
                                             __LINE__);                                    \
    }                                                                                      \
  } while (0)

#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUDNN_CHECK(expression)                                                              \
  do {                                                                                       \
    const cudnnStatus_t lockstep_cudnn_status_ = (expression);                               \
    if (lockstep_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                    \
      ::lockstep::nn::cuda::throw_cudnn_error(lockstep_cudnn_status_, #expression, __FILE__, \
                                              __LINE__);                                     \
    }                                                                                        \
  } while (0)

#define CUBLAS_CHECK(expression)                                                               \
  do {                                                                                         \
    const cublasStatus_t lockstep_cublas_status_ = (expression);                               \
    if (lockstep_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                    \
      ::lockstep::nn::cuda::throw_cublas_error(lockstep_cublas_status_, #expression, __FILE__, \
                                               __LINE__);                                      \
    }                                                                                          \
  } while (0)
