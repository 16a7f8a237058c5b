#include "app/bench.h"

#include <chrono>

#include "distributed/distributed_optimizer.h"
#include "nn/counter_rng.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"

namespace lockstep::app {

std::vector<BenchCase> default_bench_cases() {
  return {{"mnist_net", 64, 1},
          {"mnist_net", 64, 2},
          {"alexnet_cifar", 128, 1},
          {"alexnet_cifar", 128, 2}};
}

BenchResult run_bench(const BenchCase& bench, distributed::Communicator& comm, double min_seconds) {
  const nn::Shape input = bench.model == "mnist_net" ? nn::Shape{1, 28, 28} : nn::Shape{3, 32, 32};
  auto backend = nn::make_cpu_backend(bench.threads);
  auto model = nn::build_model(bench.model, {}, input, 10);
  model->reset_parameters(42, nn::Device::kCpu);
  auto optimizer =
      nn::make_optimizer({.kind = "sgd", .momentum = 0.5f}, model->parameters(), nn::Device::kCpu);
  distributed::DistributedOptimizer dopt(comm, *backend, model->parameters(), *optimizer);
  dopt.broadcast_parameters(0);

  // Synthetic, normalised-looking inputs and labels, different per rank.
  nn::Tensor x({bench.batch, input[0], input[1], input[2]});
  const uint64_t key = nn::hash_combine(42, static_cast<uint64_t>(comm.rank()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data()[i] = 4.0f * nn::counter_uniform(key, static_cast<uint64_t>(i)) - 1.0f;
  }
  std::vector<int32_t> labels(static_cast<size_t>(bench.batch));
  std::vector<int64_t> ids(static_cast<size_t>(bench.batch));
  for (int64_t i = 0; i < bench.batch; ++i) {
    labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
    ids[static_cast<size_t>(i)] = i + comm.rank() * bench.batch;
  }

  auto step = [&](int64_t s) {
    nn::ForwardContext ctx{
        .training = true, .seed = 42, .epoch = static_cast<uint64_t>(s), .sample_ids = ids.data()};
    model->forward(*backend, x, ctx);
    model->loss(*backend, labels.data(), 1.0f / static_cast<float>(bench.batch), true);
    model->backward(*backend, dopt.grad_ready_callback());
    dopt.step(0.01f);
  };
  for (int64_t s = 0; s < 3; ++s) step(s);  // warm caches, buffers and threads

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  BenchResult r;
  r.bench = bench;
  double elapsed = 0.0;
  // Every rank runs the same number of steps: rank 0 decides when to stop.
  for (int64_t done = 0;;) {
    for (int i = 0; i < 5; ++i) step(done++);
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    int64_t stop = elapsed >= min_seconds ? 1 : 0;
    comm.broadcast_values(std::span<int64_t>(&stop, 1), 0);
    if (stop) {
      r.steps = done;
      break;
    }
  }
  r.seconds_per_step = elapsed / static_cast<double>(r.steps);
  r.images_per_second = static_cast<double>(bench.batch * comm.size()) / r.seconds_per_step;
  return r;
}

}  // namespace lockstep::app
