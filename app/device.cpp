#include "app/device.h"

#include <cstring>

#include "app/cpu_isa_env.h"
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
  const int gpus = visible_gpus();
  const bool cuda = config.device == "cuda" || (config.device == "auto" && gpus > 0);
  const nn::Precision precision = nn::parse_precision(config.precision, "config key precision");
  if (!cuda) return nn::make_cpu_backend(cpu_backend_options(threads, precision));
  if (precision != nn::Precision::kFp32) {
    fail_input("config key precision = \"", config.precision,
               "\" is implemented on the CPU only, and device = \"auto\" found a GPU; set ",
               "device = \"cpu\" or precision = \"fp32\"");
  }
  if (!LOCKSTEP_HAVE_CUDA) {
    fail_input(
        "config key device is \"cuda\" but this lockstep was built without CUDA "
        "(see `lockstep info`); use device = \"cpu\"");
  }
  if (comm.local_rank() >= gpus) {
    fail_input("config key device is \"", config.device, "\": rank ", comm.rank(),
               " is local rank ", comm.local_rank(), " of ", comm.local_size(), " on ",
               comm.host_name(), " but only ", gpus,
               " GPU(s) are visible there; start at most one rank per GPU");
  }
#if LOCKSTEP_HAVE_CUDA
  return nn::make_cuda_backend(comm.local_rank(), config.deterministic);
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

const nn::Tensor& BatchStager::images(const data::Batch& batch) {
  if (device_ == nn::Device::kCpu) return batch.images;
  if (images_.device() != device_) images_ = nn::Tensor({0}, device_);
  images_.resize(batch.images.shape());
  images_.copy_from(batch.images);
  return images_;
}

const int32_t* BatchStager::labels(const data::Batch& batch) {
  if (device_ == nn::Device::kCpu) return batch.labels.data();
  // Tensors hold 4-byte floats; the labels travel as their int32 bit patterns
  // and the kernels read them back as int32.
  static_assert(sizeof(float) == sizeof(int32_t));
  const nn::Shape shape{batch.size()};
  labels_host_.resize(shape);
  std::memcpy(labels_host_.data(), batch.labels.data(), batch.labels.size() * sizeof(int32_t));
  if (labels_.device() != device_) labels_ = nn::Tensor({0}, device_);
  labels_.resize(shape);
  labels_.copy_from(labels_host_);
  return reinterpret_cast<const int32_t*>(labels_.data());
}

}  // namespace lockstep::app
