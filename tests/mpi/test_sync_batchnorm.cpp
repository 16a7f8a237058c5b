// SyncBatchNorm across ranks: N ranks, each holding rows r, r+N, ... of a
// global batch, with BatchNorm statistics reduced through
// CommBatchStatsReducer, end with the weights and running statistics of one
// process trained on the whole global batch, including a last step whose
// batch does not divide evenly over the ranks. Also: per-rank running
// statistics averaged across ranks (app/run/model_buffers.h). The statistics'
// collectives overlap the gradient thread's bucket reductions.
#include <gtest/gtest.h>

#include <cmath>

#include "app/run/model_buffers.h"
#include "distributed/comm_batch_stats_reducer.h"
#include "distributed/distributed_optimizer.h"
#include "mpi/mpi_test_util.h"
#include "nn/model_zoo.h"
#include "support/training_fixtures.h"

namespace lockstep::distributed {
namespace {

using nn::Device;
using nn::Tensor;
using testing::make_test_comm;

// conv, BatchNorm+ReLU, a residual block with a 1x1 conv + BN shortcut.
std::unique_ptr<nn::Model> bn_model(uint64_t seed) {
  return testing::custom_model(
      {"conv1: conv2d out=4 kernel=3 pad=1 bias=false", "bn1: batchnorm2d relu=true",
       "layer1.0: basic_block out=6 stride=2", "avgpool: global_avg_pool2d",
       "linear: linear out=10"},
      {2, 6, 6}, seed);
}

void train_pass(nn::Model& m, nn::Backend& backend, const testing::Batch& b, float grad_scale,
                nn::BatchStatsReducer* reducer, const std::function<void(size_t)>& ready = {}) {
  m.forward(backend, b.x, {.training = true, .batch_stats = reducer});
  m.loss(backend, b.labels.data(), grad_scale, true);
  m.backward(backend, ready);
}

// Parameters, then buffers (running statistics).
std::vector<float> state(const nn::Model& m) {
  return testing::values(m, true);
}

// Samples of 2x6x6 pixels around 0.5.
testing::Batch bn_batch(const std::vector<int64_t>& ids) {
  return testing::make_batch(ids, {2, 6, 6}, 0.5f);
}

TEST(SyncBatchNorm, NRanksAtBatchBMatchOneProcessAtBatchNB) {
  auto comm = make_test_comm();
  const int size = comm->size(), rank = comm->rank();
  auto backend = nn::make_cpu_backend(1);
  const nn::OptimizerConfig sgd{.kind = nn::OptimizerKind::kSgd, .momentum = 0.9f};
  auto reference = bn_model(3);
  auto reference_sgd = nn::make_optimizer(sgd, reference->parameters(), Device::kCpu);
  auto replica = bn_model(3 + 100 * static_cast<uint64_t>(rank));
  auto inner = nn::make_optimizer(sgd, replica->parameters(), Device::kCpu);
  // One bucket per parameter, reduced on the gradient thread while backward
  // runs: SyncBatchNorm's backward collectives overlap the bucket reductions.
  DistributedOptimizer dopt(*comm, *backend, replica->parameters(), *inner,
                            {.bucket_cap_mb = 0.0, .overlap = true});
  dopt.broadcast_parameters(0);
  app::broadcast_buffers(*comm, *replica, 0);
  CommBatchStatsReducer reducer(*comm, nullptr);
  const std::vector<float> initial = state(*reference);
  ASSERT_EQ(state(*replica), initial);

  // Global batches of 4 per rank, then an uneven last one (2 N + 1 rows).
  const std::vector<int64_t> globals = {4L * size, 4L * size, 4L * size, 2L * size + 1};
  int64_t first = 0;
  for (const int64_t global : globals) {
    std::vector<int64_t> all, mine;
    for (int64_t j = 0; j < global; ++j) all.push_back(first + j);
    for (int64_t j = rank; j < global; j += size) mine.push_back(first + j);
    first += global;
    train_pass(*reference, *backend, bn_batch(all), 1.0f / static_cast<float>(global), nullptr);
    reference_sgd->step(*backend, 0.05f);
    // The optimizer averages over ranks: size / global makes that a mean
    // over the global batch whatever this rank's share.
    train_pass(*replica, *backend, bn_batch(mine),
               static_cast<float>(size) / static_cast<float>(global), &reducer,
               dopt.grad_ready_callback());
    dopt.step(0.05f);
  }
  const std::vector<float> got = state(*replica), want = state(*reference);
  ASSERT_EQ(got.size(), want.size());
  double moved = 0.0, worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    moved = std::max<double>(moved, std::fabs(want[i] - initial[i]));
    worst = std::max<double>(worst, std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i])));
  }
  EXPECT_GT(moved, 1e-2) << "training must move the weights";
  EXPECT_LT(worst, 2e-5) << "rank " << rank << " of " << size;
}

TEST(SyncBatchNorm, PerRankRunningStatisticsAreAveragedAcrossRanks) {
  auto comm = make_test_comm();
  const int size = comm->size(), rank = comm->rank();
  auto backend = nn::make_cpu_backend(1);
  auto model = bn_model(5);
  // Per-rank statistics: each rank sees other samples.
  train_pass(*model, *backend, bn_batch({rank * 10L, rank * 10L + 1}), 0.5f, nullptr);
  std::vector<float> mine = state(*model), mean = mine;
  comm->allreduce(std::span<float>(mean), ReduceOp::kSum);
  app::average_running_statistics(*comm, *model);
  const std::vector<float> got = state(*model);
  const size_t first_buffer = got.size() - [&] {
    size_t n = 0;
    for (const nn::Buffer* b : model->buffers()) n += static_cast<size_t>(b->value.numel());
    return n;
  }();
  for (size_t i = first_buffer; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], mean[i] / static_cast<float>(size), 1e-6) << i;
  }
  EXPECT_EQ(got.back(), 1.0f) << "num_batches_tracked is the same on every rank";
}

}  // namespace
}  // namespace lockstep::distributed
