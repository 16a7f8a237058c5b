// Choosing the compute device for a rank (`device = cpu | cuda | auto`) and
// staging host batches on it. A GPU run loads the CUDA plugin
// (app/platform/cuda_plugin_loader.h); the rank's GPU follows
// app/platform/placement.h's choose_gpu, and the job decides together
// (plan_devices): every rank on a GPU, or every rank on the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "app/config/config.h"
#include "app/platform/placement.h"
#include "data/batch_loader.h"
#include "distributed/communicator.h"
#include "nn/backend.h"

namespace lockstep::app {

// This rank's part of the job's device plan (app/platform/placement.h's
// plan_devices): each rank's GPU and its PCI bus id, gathered from every
// rank. Throws InputError (the same line on every rank) when device = "cuda"
// and some rank cannot have a GPU of its own (or, without gpu_share, ranks
// of a host meet on one GPU); with device = "auto" rank 0 prints a note when
// the job falls back to the CPU. Collective over `comm` unless device =
// "cpu".
DevicePlan plan_device(const TrainConfig& config, distributed::Communicator& comm);

// The backend the plan gives this rank.
std::unique_ptr<nn::Backend> make_backend(const TrainConfig& config, const DevicePlan& plan,
                                          int threads);

// The communicator for gradient buckets: NCCL, bootstrapped over `comm` on
// the plan's device, when choose_gradient_engine says so (more than one
// rank, every rank on a GPU of its own, no compression, gradient_engine
// "auto" or "nccl"); null otherwise (gradients then go through `comm`, with
// host copies on a GPU). Throws InputError on every rank when
// gradient_engine = "nccl" cannot be had. Collective over `comm` when it
// makes the NCCL communicator.
std::unique_ptr<distributed::Communicator> make_gradient_communicator(
    const DevicePlan& plan, distributed::Communicator& comm, const TrainConfig& config);

// Host batches as the backend wants them: explicit copies (Backend::upload:
// on a GPU through pinned staging, on the backend's stream; on the CPU a
// memcpy) into buffers that are reused batch after batch, so that the CPU
// makes, and a counting backend counts, the copies a GPU makes. backend
// must outlive it.
class BatchStager {
 public:
  explicit BatchStager(nn::Backend& backend) : backend_(backend), device_(backend.device()) {}
  const nn::Tensor& images(const data::Batch& batch);
  // int32 labels readable by the backend's kernels.
  const int32_t* labels(const data::Batch& batch);

 private:
  void upload(const void* host, nn::Tensor& device_tensor);

  nn::Backend& backend_;
  nn::Device device_;
  nn::Tensor images_, labels_;
};

}  // namespace lockstep::app
