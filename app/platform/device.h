// Choosing the compute device for a rank (`device = cpu | cuda | auto`) and
// staging host batches on it. A GPU run loads the CUDA plugin
// (app/platform/cuda_plugin_loader.h); the rank's GPU follows app/platform/placement.h's
// choose_gpu. `auto` is the GPU when the plugin, a driver and a device are all there and choose_gpu
// gives this rank one; else the CPU (local rank 0 of the node prints a note when the node has GPUs
// but too few for its ranks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "app/config/config.h"
#include "data/batch_loader.h"
#include "distributed/communicator.h"
#include "nn/backend.h"

namespace lockstep::app {

// The backend for this rank; throws InputError naming the key and rank when
// the device cannot be had (the one-line reason: no driver, no plugin,
// driver too old, no device, fewer GPUs than local ranks).
std::unique_ptr<nn::Backend> make_backend(const TrainConfig& config,
                                          const distributed::Communicator& comm, int threads);

// The communicator for gradient buckets: NCCL, bootstrapped over `comm` on
// the backend's device, when every rank computes on a GPU of its own, the
// job has more than one rank and engine (config key gradient_engine) is
// "auto" or "nccl"; null otherwise (gradients then go through `comm`, with
// host copies on a GPU). engine "nccl" when some rank has no GPU of its own
// throws InputError on every rank.
// Collective over `comm` when size > 1.
std::unique_ptr<distributed::Communicator> make_gradient_communicator(
    nn::Backend& backend, distributed::Communicator& comm, const std::string& engine);

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
