#include "app/device.h"

#include <cstdio>

#include "app/device_choice.h"
#include "nn/error.h"
#if LOCKSTEP_HAVE_CUDA
#include "distributed/cuda/nccl_communicator.h"
#include "nn/cuda/cuda_backend.h"
#endif

namespace lockstep::app {
namespace {

int visible_gpus() {
#if LOCKSTEP_HAVE_CUDA
  return nn::cuda_device_count();
#else
  return 0;
#endif
}

}  // namespace

std::unique_ptr<nn::Backend> make_backend(const TrainConfig& config,
                                          const distributed::Communicator& comm, int threads) {
  const DeviceChoice choice = choose_device({.requested = config.device,
                                             .cuda_built = LOCKSTEP_HAVE_CUDA != 0,
                                             .gpus = config.device == "cpu" ? 0 : visible_gpus(),
                                             .rank = comm.rank(),
                                             .local_rank = comm.local_rank(),
                                             .local_size = comm.local_size(),
                                             .host = comm.host_name()});
  if (!choice.error.empty()) fail_input(choice.error);
  if (!choice.note.empty() && comm.local_rank() == 0) {
    std::fprintf(stderr, "lockstep: rank %d: note: %s\n", comm.rank(), choice.note.c_str());
  }
  if (!choice.cuda) {
    if (config.precision != "fp32") {
      fail_input("config key precision = \"", config.precision, "\": rank ", comm.rank(),
                 " computes on the CPU, which has fp32 kernels only; use precision = \"fp32\" ",
                 "or give every rank a GPU");
    }
    return nn::make_cpu_backend(threads);
  }
#if LOCKSTEP_HAVE_CUDA
  const auto precision = nn::cuda::parse_precision(config.precision);
  LOCKSTEP_CHECK(precision.has_value(), "precision ", config.precision, " passed validation");
  return nn::make_cuda_backend(choice.device_index, config.deterministic, *precision);
#else
  return nullptr;
#endif
}

std::unique_ptr<distributed::Communicator> make_gradient_communicator(
    nn::Backend& backend, distributed::Communicator& comm, const std::string& engine) {
  if (comm.size() == 1 || engine == "mpi") return nullptr;
  // Every rank must take the same branch: NCCL's start-up is collective.
  int64_t gpu = backend.device() == nn::Device::kCuda ? 1 : 0;
  comm.allreduce(std::span<int64_t>(&gpu, 1), distributed::ReduceOp::kMin);
  if (gpu == 0) {
    if (engine == "nccl") {
      fail_input("config key gradient_engine = \"nccl\" needs every rank on a GPU, and ",
                 backend.device() == nn::Device::kCuda ? "another rank" : "this rank",
                 " has none (use gradient_engine = \"auto\" or \"mpi\")");
    }
    return nullptr;
  }
#if LOCKSTEP_HAVE_CUDA
  return distributed::make_nccl_communicator(comm, comm.local_rank());
#else
  if (engine == "nccl") fail_input("config key gradient_engine = \"nccl\": this build has no NCCL");
  return nullptr;
#endif
}

void BatchStager::upload(const void* host, nn::Tensor& device_tensor) {
#if LOCKSTEP_HAVE_CUDA
  nn::cuda_upload(backend_, host, device_tensor.data(),
                  static_cast<size_t>(device_tensor.numel()) * sizeof(float));
#else
  LOCKSTEP_CHECK(false, "BatchStager on ", backend_.name(), " in a build without CUDA");
#endif
}

const nn::Tensor& BatchStager::images(const data::Batch& batch) {
  if (device_ == nn::Device::kCpu) return batch.images;
  if (images_.device() != device_) images_ = nn::Tensor({0}, device_);
  images_.resize(batch.images.shape());
  upload(batch.images.data(), images_);
  return images_;
}

const int32_t* BatchStager::labels(const data::Batch& batch) {
  if (device_ == nn::Device::kCpu) return batch.labels.data();
  // Tensors hold 4-byte floats; the labels travel as their int32 bit patterns
  // and the kernels read them back as int32.
  static_assert(sizeof(float) == sizeof(int32_t));
  if (labels_.device() != device_) labels_ = nn::Tensor({0}, device_);
  labels_.resize({batch.size()});
  upload(batch.labels.data(), labels_);
  return reinterpret_cast<const int32_t*>(labels_.data());
}

}  // namespace lockstep::app
