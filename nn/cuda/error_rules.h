// When to read and clear the CUDA runtime's per-thread "last error", as a
// rule over an abstract runtime so that it is tested without a GPU
// (tests/test_cuda_rules.cpp, against a scripted fake).
//
// The runtime records every failed call as the thread's last error;
// cudaGetLastError returns it and resets it to success. A kernel launch
// reports its own failure only there. So a failure must be consumed where it
// is reported, or the next launch check reports it instead (a stale error,
// on one rank only). Sticky errors (the context is lost: illegal address,
// launch failure, ...) cannot be cleared: every later call fails anyway.
//
// Runtime requirements (nn/cuda/cuda_check.h has the real one):
//   using Status = ...;          Runtime::kSuccess
//   Status get_last_error();     returns and resets the last error
//   bool is_sticky(Status);
#pragma once

namespace lockstep::nn::cuda {

// Called when a runtime call failed with `status`, before throwing: consumes
// the last error that call set. Returns the status to report (the call's).
template <typename Runtime>
typename Runtime::Status consume_failure(Runtime& runtime, typename Runtime::Status status) {
  runtime.get_last_error();
  return status;
}

// The status of the kernel launch just made (consumed).
template <typename Runtime>
typename Runtime::Status launch_status(Runtime& runtime) {
  return runtime.get_last_error();
}

// After a library call that probes the runtime and may leave non-sticky
// failures behind (cuDNN's algorithm searches try allocations and kernels):
// clears them and returns success, or returns a sticky error to report.
template <typename Runtime>
typename Runtime::Status discard_probe_errors(Runtime& runtime) {
  const typename Runtime::Status status = runtime.get_last_error();
  return runtime.is_sticky(status) ? status : Runtime::kSuccess;
}

}  // namespace lockstep::nn::cuda
