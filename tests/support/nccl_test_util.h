// Helpers of the multi-rank NCCL tests (tests/mpi/test_nccl*.cpp): a gate
// that skips, on every rank alike and saying why, unless every rank has a
// GPU of its own; an NCCL communicator with a watchdog; device copies of
// host values. CUDA builds only.
#pragma once

#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#if LOCKSTEP_HAVE_CUDA

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/cuda/nccl_communicator.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/tensor.h"
#include "support/cuda_test_util.h"  // queue_long_work

namespace lockstep::distributed::testing {

// Empty when every rank has a device of its own, else why not; the same
// answer on every rank (collective, so that all skip together).
inline std::string missing_devices(Communicator& mpi) {
  const int devices = nn::cuda_device_count();
  int64_t enough = devices >= mpi.local_size() ? 1 : 0;
  mpi.allreduce(std::span<int64_t>(&enough, 1), ReduceOp::kMin);
  if (enough) return "";
  if (devices == 0) return "here " + nn::cuda_devices_description();
  return "a node has fewer GPUs than ranks (here " + std::to_string(devices) + " for " +
         std::to_string(mpi.local_size()) + " ranks)";
}

// One GPU per rank (the local rank's), with make_test_comm's watchdog, so
// that ranks thrown out of step by a failed ASSERT end the job, not hang it.
inline std::unique_ptr<Communicator> make_test_nccl(Communicator& mpi) {
  auto nccl = make_nccl_communicator(mpi, mpi.local_rank());
  StallPolicy stall;
  stall.warning_seconds = 20.0;
  stall.abort_seconds = 120.0;
  nccl->set_stall_policy(stall);
  return nccl;
}

inline nn::Tensor device_copy(const std::vector<float>& values) {
  nn::Tensor host({static_cast<int64_t>(values.size())});
  std::memcpy(host.data(), values.data(), values.size() * sizeof(float));
  nn::Tensor device(host.shape(), nn::Device::kCuda);
  device.copy_from(host);
  return device;
}

inline std::vector<float> host_copy(const nn::Tensor& device) {
  nn::Tensor host(device.shape());
  host.copy_from(device);
  return {host.data(), host.data() + host.numel()};
}

}  // namespace lockstep::distributed::testing

// Skips the test on every rank alike unless every rank has a GPU of its own.
#define SKIP_WITHOUT_DEVICES(mpi)                                                     \
  if (const std::string why = ::lockstep::distributed::testing::missing_devices(mpi); \
      !why.empty()) {                                                                 \
    LOCKSTEP_SKIP_NO_DEVICE("not one GPU for every rank: " << why);                   \
  }

#endif  // LOCKSTEP_HAVE_CUDA
