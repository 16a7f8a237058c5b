// Loss scaling across ranks: when one rank's local gradient holds inf/NaN,
// the reduced sums do on every rank, so every rank finds them and skips the
// same step; when one rank alone sees inf after the reduction, the flag
// allreduce of DistributedOptimizer::step makes every rank skip too; the replicas stay identical
// (plain and fp16 wire).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "distributed/distributed_optimizer.h"
#include "mpi/mpi_test_util.h"
#include "nn/grad_scaler.h"
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

// The gradient communicator, through which the bucket sums come back; when
// armed, the next bucket sum of rank `victim` comes back with an infinity in
// it (as from a fault on that rank alone): only that rank sees inf after
// the reduction, and only the flag allreduce of DistributedOptimizer::step tells the others.
class InfOnOneRank final : public Communicator {
 public:
  InfOnOneRank(Communicator& comm, int victim) : comm_(comm), victim_(victim) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  int local_rank() const override { return comm_.local_rank(); }
  int local_size() const override { return comm_.local_size(); }
  int node_count() const override { return comm_.node_count(); }
  std::string host_name() const override { return comm_.host_name(); }
  std::string describe() const override { return "inf on rank " + std::to_string(victim_); }
  void allreduce(std::span<float> data, ReduceOp op) override {
    comm_.allreduce(data, op);
    if (take()) data[0] = std::numeric_limits<float>::infinity();
  }
  void allreduce(std::span<double> data, ReduceOp op) override { comm_.allreduce(data, op); }
  void allreduce(std::span<int64_t> data, ReduceOp op) override { comm_.allreduce(data, op); }
  void allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) override {
    comm_.allreduce_16bit(data, format, op);
    if (take()) data[0] = 0x7c00u;  // fp16 +inf
  }
  void broadcast(std::span<std::byte> data, int root) override { comm_.broadcast(data, root); }
  void allgather(std::span<const std::byte> in, std::span<std::byte> out) override {
    comm_.allgather(in, out);
  }
  void barrier() override { comm_.barrier(); }
  [[noreturn]] void abort(int code) noexcept override {
    comm_.abort(code);
    std::_Exit(code);
  }

  std::atomic<bool> armed{false};

 private:
  bool take() { return comm_.rank() == victim_ && armed.exchange(false); }
  Communicator& comm_;
  int victim_;
};

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
    auto inner = nn::make_optimizer({.kind = nn::OptimizerKind::kSgd, .momentum = 0.9f},
                                    model->parameters(), nn::Device::kCpu);
    nn::GradScaler scaler({.init_scale = 256.0f, .growth_interval = 2});
    InfOnOneRank gradient_comm(*comm, size - 1);
    DistributedOptimizerConfig config;
    config.compression = compression;
    config.grad_scaler = &scaler;
    config.gradient_comm = &gradient_comm;
    DistributedOptimizer dopt(*comm, *backend, model->parameters(), *inner, config);
    const std::vector<int32_t> labels = {1, 3, 5, 7};
    std::vector<int64_t> stepped;
    for (int64_t step = 0; step < 5; ++step) {
      // Step 1: only the last rank's input (so its local gradient) is not finite.
      // Step 2: only the last rank's sums are (InfOnOneRank).
      const bool poison = step == 1 && rank == size - 1;
      gradient_comm.armed = step == 2;
      nn::ForwardContext ctx{.training = true};
      const nn::Tensor x = batch_input(rank, step, poison);  // backward reads it
      model->forward(*backend, x, ctx);
      model->loss(*backend, labels.data(), scaler.loss_factor() / 4.0f, true);
      model->backward(*backend, dopt.grad_ready_callback());
      if (step != 1) {
        stepped.push_back(dopt.step(0.05));
        continue;
      }
      // The check itself, without the flag allreduce of step(): the
      // reduced sums are not finite on every rank, the poisoned one or not.
      const std::vector<float> before = weights(*model);
      dopt.reduce_gradients();
      const bool found = nn::has_non_finite(*backend, model->parameters());
      EXPECT_TRUE(found) << "rank " << rank << " sees finite sums";
      stepped.push_back(scaler.update(found));
      EXPECT_TRUE(weights(*model) == before);
    }
    EXPECT_EQ(stepped, (std::vector<int64_t>{1, 0, 0, 1, 1}));
    int64_t pattern = 0;
    for (size_t i = 0; i < stepped.size(); ++i) pattern += stepped[i] << i;
    const std::vector<int64_t> all = comm->allgather_value(pattern);
    for (int r = 0; r < size; ++r) EXPECT_EQ(all[r], 25) << "rank " << r;
    EXPECT_EQ(scaler.scale(), 128.0f);  // 256, two backoffs to 64, two clean steps: 128
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
