// Choosing the compute device for a rank (`device = cpu | cuda | auto`) and
// staging host batches on it. One GPU per local rank: local rank r uses
// visible device r; more local ranks than GPUs is an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "app/config.h"
#include "data/batch_loader.h"
#include "distributed/communicator.h"
#include "nn/backend.h"

namespace lockstep::app {

// The backend for this rank; throws InputError naming the key and rank when
// the device cannot be had.
std::unique_ptr<nn::Backend> make_backend(const TrainConfig& config,
                                          const distributed::Communicator& comm, int threads);

// The communicator for gradient buckets: NCCL, bootstrapped over `comm` on
// the backend's device (the local rank's), when every rank computes on a
// GPU, the job has more than one rank and engine (config key
// gradient_engine) is "auto" or "nccl"; null otherwise (gradients then go
// through `comm`, with host copies on a GPU). engine "nccl" when some rank
// has no GPU, or in a build without NCCL, throws InputError on every rank.
// Collective over `comm` when size > 1.
std::unique_ptr<distributed::Communicator> make_gradient_communicator(
    nn::Backend& backend, distributed::Communicator& comm, const std::string& engine);

// Host batches as the backend wants them: on the CPU the batch itself, on a
// GPU explicit copies into buffers that are reused batch after batch.
class BatchStager {
 public:
  explicit BatchStager(nn::Device device) : device_(device) {}
  const nn::Tensor& images(const data::Batch& batch);
  // int32 labels readable by the backend's kernels.
  const int32_t* labels(const data::Batch& batch);

 private:
  nn::Device device_;
  nn::Tensor images_, labels_, labels_host_;
};

}  // namespace lockstep::app
