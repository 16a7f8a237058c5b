#include "app/platform/device.h"

#include <cstdio>

#include "app/platform/cpu_isa_env.h"
#include "app/platform/cuda_plugin_loader.h"
#include "app/platform/placement.h"
#include "common/error.h"

namespace lockstep::app {
namespace {

// The GPU this rank takes among the `visible` ones (app/platform/placement.h).
GpuChoice gpu_for_rank(const distributed::Communicator& comm, int visible, bool allow_share) {
  return choose_gpu(comm.local_rank(), comm.local_size(), visible, allow_share, comm.host_name());
}

std::unique_ptr<nn::Backend> cpu_backend(const TrainConfig& config,
                                         const distributed::Communicator& comm, int threads) {
  nn::check_cpu_precision(config.precision, "config key precision");
  return nn::make_cpu_backend(cpu_backend_options(threads, config.precision));
}

}  // namespace

std::unique_ptr<nn::Backend> make_backend(const TrainConfig& config,
                                          const distributed::Communicator& comm, int threads) {
  if (config.device == "cpu") return cpu_backend(config, comm, threads);
  const CudaAvailability cuda = cuda_availability();
  if (cuda.plugin == nullptr) {
    if (config.device == "auto") return cpu_backend(config, comm, threads);
    fail_input("config key device is \"cuda\" but rank ", comm.rank(), " on ", comm.host_name(),
               " cannot start a GPU run: ", cuda.why, "; use device = \"cpu\" (or \"auto\")");
  }
  const GpuChoice gpu = gpu_for_rank(comm, cuda.devices, config.gpu_share);
  if (gpu.device < 0) {
    if (config.device == "cuda") fail_input("config key device is \"cuda\": ", gpu.error);
    // auto: the CPU for every rank of a node whose ranks outnumber its GPUs.
    if (comm.local_rank() == 0) {
      std::fprintf(stderr, "lockstep: rank %d: note: device auto runs on the CPU: %s\n",
                   comm.rank(), gpu.error.c_str());
    }
    return cpu_backend(config, comm, threads);
  }
  return std::unique_ptr<nn::Backend>(static_cast<nn::Backend*>(cuda.plugin->make_backend(
      gpu.device, config.deterministic, static_cast<int>(config.precision))));
}

std::unique_ptr<distributed::Communicator> make_gradient_communicator(
    nn::Backend& backend, distributed::Communicator& comm, const std::string& engine) {
  if (comm.size() == 1 || engine == "mpi") return nullptr;
  // The backend's GPU, found again by the same rule; NCCL takes one rank per
  // GPU, so ranks sharing a GPU (gpu_share) reduce through MPI.
  const CudaAvailability cuda =
      backend.device() == nn::Device::kCuda ? cuda_availability() : CudaAvailability{};
  const GpuChoice gpu = gpu_for_rank(comm, cuda.devices, true);
  // Every rank must take the same branch: NCCL's start-up is collective.
  int64_t nccl = cuda.plugin != nullptr && gpu.device >= 0 && !gpu.shared ? 1 : 0;
  comm.allreduce(std::span<int64_t>(&nccl, 1), distributed::ReduceOp::kMin);
  if (nccl == 0) {
    if (engine == "nccl") {
      fail_input(
          "config key gradient_engine = \"nccl\" needs every rank on a GPU of its own, "
          "and ",
          backend.device() == nn::Device::kCuda && !gpu.shared ? "another rank" : "this rank",
          " has none (use gradient_engine = \"auto\" or \"mpi\")");
    }
    return nullptr;
  }
  return std::unique_ptr<distributed::Communicator>(static_cast<distributed::Communicator*>(
      cuda.plugin->make_nccl_communicator(&comm, gpu.device)));
}

void BatchStager::upload(const void* host, nn::Tensor& device_tensor) {
  backend_.upload(host, device_tensor.data(),
                  static_cast<size_t>(device_tensor.numel()) * sizeof(float));
}

const nn::Tensor& BatchStager::images(const data::Batch& batch) {
  if (images_.device() != device_) images_ = nn::Tensor({0}, device_);
  images_.resize(batch.images.shape());
  upload(batch.images.data(), images_);
  return images_;
}

const int32_t* BatchStager::labels(const data::Batch& batch) {
  // Tensors hold 4-byte floats; the labels travel as their int32 bit patterns
  // and the kernels read them back as int32.
  static_assert(sizeof(float) == sizeof(int32_t));
  if (labels_.device() != device_) labels_ = nn::Tensor({0}, device_);
  labels_.resize({batch.size()});
  upload(batch.labels.data(), labels_);
  return reinterpret_cast<const int32_t*>(labels_.data());
}

}  // namespace lockstep::app
