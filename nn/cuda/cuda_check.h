// CUDA_CHECK, CUDNN_CHECK, CUBLAS_CHECK: run a call of the CUDA runtime,
// cuDNN or cuBLAS and throw LibraryError when it fails, naming the call, the
// file and line, and the library's own error name and text, on one line.
// CUDA_CHECK_LAUNCH() checks the kernel launch just made. A failure is
// consumed where it is thrown (nn/cuda/error_rules.h), so it never resurfaces
// at a later launch check; CUDA_CLEAR_PROBE_ERRORS() clears what a cuDNN
// algorithm search left behind, throwing only on a sticky error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "common/error.h"
#include "nn/cuda/error_rules.h"

namespace lockstep::nn::cuda {

// The CUDA runtime as nn/cuda/error_rules.h sees it.
struct CudaRuntime {
  using Status = cudaError_t;
  static constexpr Status kSuccess = cudaSuccess;
  Status get_last_error() const { return cudaGetLastError(); }
  // Errors after which the context is unusable (the CUDA runtime API's
  // "sticky" errors): every later call in the process fails.
  bool is_sticky(Status status) const {
    switch (status) {
      case cudaErrorIllegalAddress:
      case cudaErrorLaunchFailure:
      case cudaErrorHardwareStackError:
      case cudaErrorIllegalInstruction:
      case cudaErrorMisalignedAddress:
      case cudaErrorInvalidAddressSpace:
      case cudaErrorInvalidPc:
      case cudaErrorLaunchTimeout:
      case cudaErrorECCUncorrectable:
      case cudaErrorAssert:
      case cudaErrorContextIsDestroyed:
        return true;
      default:
        return false;
    }
  }
};

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* expression,
                                          const char* file, int line) {
  CudaRuntime runtime;
  status = consume_failure(runtime, status);
  const char* hint = status == cudaErrorMemoryAllocation
                         ? " ---> HINT: the GPU is out of memory; lower batch_size"
                         : "";
  fail_library_call("CUDA", expression, file, line, cudaGetErrorName(status), ": ",
                    cudaGetErrorString(status), hint);
}

[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const char* expression,
                                           const char* file, int line) {
  CudaRuntime runtime;
  consume_failure(runtime, cudaSuccess);  // a runtime failure inside cuDNN, if any
  // cuDNN 9 keeps a detailed message of the last failure on this thread.
  char last[512] = {};
  cudnnGetLastErrorString(last, sizeof(last));
  std::string detail_text(last);
  for (char& c : detail_text) c = (c == '\n' || c == '\r') ? ' ' : c;
  fail_library_call("cuDNN", expression, file, line, cudnnGetErrorString(status),
                    detail_text.empty() ? "" : ": ", detail_text);
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* expression,
                                            const char* file, int line) {
  CudaRuntime runtime;
  consume_failure(runtime, cudaSuccess);  // a runtime failure inside cuBLAS, if any
  fail_library_call("cuBLAS", expression, file, line, cublasGetStatusName(status), ": ",
                    cublasGetStatusString(status));
}

}  // namespace lockstep::nn::cuda

#define CUDA_CHECK(expression)                                 \
  LOCKSTEP_LIBRARY_CHECK(expression, #expression, cudaSuccess, \
                         ::lockstep::nn::cuda::throw_cuda_error)

#define CUDA_CHECK_LAUNCH()                                             \
  do {                                                                  \
    ::lockstep::nn::cuda::CudaRuntime lockstep_runtime_;                \
    CUDA_CHECK(::lockstep::nn::cuda::launch_status(lockstep_runtime_)); \
  } while (0)

#define CUDA_CLEAR_PROBE_ERRORS()                                              \
  do {                                                                         \
    ::lockstep::nn::cuda::CudaRuntime lockstep_runtime_;                       \
    CUDA_CHECK(::lockstep::nn::cuda::discard_probe_errors(lockstep_runtime_)); \
  } while (0)

#define CUDNN_CHECK(expression)                                         \
  LOCKSTEP_LIBRARY_CHECK(expression, #expression, CUDNN_STATUS_SUCCESS, \
                         ::lockstep::nn::cuda::throw_cudnn_error)

#define CUBLAS_CHECK(expression)                                         \
  LOCKSTEP_LIBRARY_CHECK(expression, #expression, CUBLAS_STATUS_SUCCESS, \
                         ::lockstep::nn::cuda::throw_cublas_error)
