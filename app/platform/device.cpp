#include "app/platform/device.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "app/platform/cpu_isa_env.h"
#include "app/platform/cuda_plugin_loader.h"
#include "app/platform/placement.h"
#include "common/error.h"

namespace lockstep::app {

// Each rank's record for the device plan, gathered as JSON.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankGpu, host, node, device, shared, bus_id, problem,
                                   cuda_usable)

namespace {

std::unique_ptr<nn::Backend> cpu_backend(const TrainConfig& config, int threads) {
  nn::check_cpu_precision(config.precision, "config key precision");
  return nn::make_cpu_backend(cpu_backend_options(threads, config.precision));
}

// What this rank finds by itself: the plugin, its GPU and that GPU's bus id.
RankGpu this_rank_gpu(const TrainConfig& config, const distributed::Communicator& comm) {
  RankGpu mine;
  mine.host = comm.host_name();
  mine.node = node_key(mine.host);
  const CudaAvailability cuda = cuda_availability();
  if (cuda.plugin == nullptr) {
    mine.cuda_usable = false;
    mine.problem = "rank " + std::to_string(comm.rank()) + " on " + mine.host +
                   " cannot start a GPU run: " + cuda.why;
    return mine;
  }
  const GpuChoice gpu =
      choose_gpu(comm.local_rank(), comm.local_size(), cuda.devices, config.gpu_share, mine.host);
  if (gpu.device < 0) {
    mine.problem = gpu.error;
    return mine;
  }
  mine.device = gpu.device;
  mine.shared = gpu.shared;
  mine.bus_id = gpu_bus_id(*cuda.plugin, gpu.device);
  return mine;
}

// The plugin of a rank the device plan put on a GPU.
const LockstepCudaPlugin& planned_plugin() {
  const CudaAvailability cuda = cuda_availability();
  LOCKSTEP_CHECK(cuda.plugin != nullptr, "the device plan gives this rank a GPU but ", cuda.why);
  return *cuda.plugin;
}

}  // namespace

DevicePlan plan_device(const TrainConfig& config, distributed::Communicator& comm) {
  if (config.device == "cpu") return {};
  // (A problem line from dlerror may hold bytes that are not UTF-8.)
  const std::string record = nlohmann::json(this_rank_gpu(config, comm))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  comm.set_stall_label("device plan: each rank's GPU");
  std::vector<RankGpu> ranks;
  for (const std::string& text : comm.allgather_string(record))
    ranks.push_back(nlohmann::json::parse(text).get<RankGpu>());
  DevicePlan plan = plan_devices(config.device == "cuda", config.gpu_share, ranks, comm.rank());
  if (!plan.error.empty()) fail_input(plan.error);
  if (!plan.note.empty() && comm.rank() == 0)
    std::fprintf(stderr, "lockstep: rank 0: note: %s\n", plan.note.c_str());
  return plan;
}

std::unique_ptr<nn::Backend> make_backend(const TrainConfig& config, const DevicePlan& plan,
                                          int threads) {
  if (!plan.gpu) return cpu_backend(config, threads);
  return std::unique_ptr<nn::Backend>(static_cast<nn::Backend*>(planned_plugin().make_backend(
      plan.device, config.deterministic, static_cast<int>(config.precision))));
}

std::unique_ptr<distributed::Communicator> make_gradient_communicator(
    const DevicePlan& plan, distributed::Communicator& comm, const TrainConfig& config) {
  const GradientEngineChoice engine =
      choose_gradient_engine(config.gradient_engine, plan, comm.size(), config.compression);
  if (!engine.error.empty()) fail_input(engine.error);
  if (!engine.nccl) return nullptr;
  const LockstepCudaPlugin& plugin = planned_plugin();
  comm.set_stall_label("NCCL start-up");
  return std::unique_ptr<distributed::Communicator>(
      static_cast<distributed::Communicator*>(plugin.make_nccl_communicator(&comm, plan.device)));
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
