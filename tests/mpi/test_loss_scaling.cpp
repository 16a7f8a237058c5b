// Loss scaling across ranks: when one rank's local gradient holds inf/NaN,
// the reduced sums do on every rank, so every rank finds them and skips the
// same step, and the replicas stay identical (plain and fp16 wire).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "app/run/loss_scaling.h"
#include "distributed/distributed_optimizer.h"
#include "mpi/mpi_test_util.h"
#include "nn/model_zoo.h"
#include "support/training_fixtures.h"

namespace lockstep::distributed {
namespace {

using testing::make_test_comm;

std::vector<float> weights(const nn::Model& m) {
  std::vector<float> out;
  for (const nn::Parameter* p : m.parameters()) {
    out.insert(out.end(), p->value.data(), p->value.data() + p->value.numel());
  }
  return out;
}

// Rank r's 4 samples of step t; poison: an infinite pixel.
nn::Tensor batch_input(int rank, int64_t step, bool poison) {
  nn::Tensor x({4, 1, 8, 8});
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data()[i] = std::sin(0.37f * static_cast<float>(i + 1000 * rank + 97 * step));
  }
  if (poison) x.data()[5] = std::numeric_limits<float>::infinity();
  return x;
}

TEST(LossScalingMpi, OneRanksInfSkipsTheSameStepOnEveryRank) {
  auto comm = make_test_comm();
  const int rank = comm->rank(), size = comm->size();
  ASSERT_GE(size, 2);
  for (Compression compression : {Compression::kNone, Compression::kFp16}) {
    SCOPED_TRACE(to_string(compression));
    auto backend = nn::make_cpu_backend(1);
    auto model = testing::custom_model({"conv2d out=4 kernel=3", "relu", "max_pool2d kernel=2",
                                        "flatten", "linear out=16", "relu", "linear out=10"},
                                       {1, 8, 8}, 11);
    auto inner = nn::make_optimizer({.kind = "sgd", .momentum = 0.9f}, model->parameters(),
                                    nn::Device::kCpu);
    DistributedOptimizerConfig config;
    config.compression = compression;
    config.keep_non_finite = true;
    DistributedOptimizer dopt(*comm, *backend, model->parameters(), *inner, config);
    nn::GradScaler scaler({.init_scale = 256.0f, .growth_interval = 2});
    const std::vector<int32_t> labels = {1, 3, 5, 7};
    std::vector<int64_t> stepped;
    for (int64_t step = 0; step < 4; ++step) {
      // Step 1: only the last rank's input (so its local gradient) is not finite.
      const bool poison = step == 1 && rank == size - 1;
      nn::ForwardContext ctx{.training = true};
      const nn::Tensor x = batch_input(rank, step, poison);  // backward reads it
      model->forward(*backend, x, ctx);
      model->loss(*backend, labels.data(), scaler.loss_factor() / 4.0f, true);
      model->backward(*backend, dopt.grad_ready_callback());
      if (step != 1) {
        stepped.push_back(app::scaled_step(scaler, dopt, *inner, *backend, *comm,
                                           model->parameters(), 0.05f, nullptr));
        continue;
      }
      // The check itself, without the flag allreduce of scaled_step: the
      // reduced sums are not finite on every rank, the poisoned one or not.
      const std::vector<float> before = weights(*model);
      dopt.reduce_gradients();
      const bool found = nn::has_non_finite(*backend, model->parameters());
      EXPECT_TRUE(found) << "rank " << rank << " sees finite sums";
      stepped.push_back(scaler.update(found));
      EXPECT_TRUE(weights(*model) == before);
    }
    EXPECT_EQ(stepped, (std::vector<int64_t>{1, 0, 1, 1}));
    const std::vector<int64_t> all =
        comm->allgather_value(stepped[0] + 2 * stepped[1] + 4 * stepped[2] + 8 * stepped[3]);
    for (int r = 0; r < size; ++r) EXPECT_EQ(all[r], 13) << "rank " << r;
    EXPECT_EQ(scaler.scale(), 256.0f);  // 256, backoff to 128, two clean steps: 256
    EXPECT_EQ(scaler.state().growth_tracker, 0);
    // The replicas are still identical, and finite.
    const std::vector<float> mine = weights(*model);
    std::vector<float> root = mine;
    comm->broadcast_values(std::span<float>(root), 0);
    EXPECT_TRUE(mine == root) << "rank " << rank << " diverged from rank 0";
    for (float v : mine) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace lockstep::distributed
