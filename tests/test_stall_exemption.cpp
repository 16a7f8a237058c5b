// The trainer lifts the stall abort limit over its long local phases
// (app/run/trainer.h: arm_stall_abort): start-up (data decoding, the fingerprint
// check, the broadcast), the first training step (autotuning) and the first
// evaluation; every later collective runs under the configured limit. A
// communicator records the abort limit in force at each collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/run/trainer.h"
#include "support/dataset_files.h"

namespace lockstep {
namespace {

using distributed::Communicator;
using distributed::ReduceOp;

// One process; each collective is recorded with its stall label and the
// abort limit set at that moment.
class PolicyRecorder final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int node_count() const override { return 1; }
  std::string host_name() const override { return inner_->host_name(); }
  std::string describe() const override { return "policy recorder"; }
  void allreduce(std::span<float>, ReduceOp) override { record(); }
  void allreduce(std::span<double>, ReduceOp) override { record(); }
  void allreduce(std::span<int64_t>, ReduceOp) override { record(); }
  void allreduce_16bit(std::span<uint16_t>, distributed::Compression, ReduceOp) override {
    record();
  }
  void broadcast(std::span<std::byte>, int) override { record(); }
  void allgather(std::span<const std::byte> in, std::span<std::byte> out) override {
    std::copy(in.begin(), in.end(), out.begin());
    record();
  }
  void barrier() override { record(); }
  [[noreturn]] void abort(int code) noexcept override { std::_Exit(code); }
  void set_stall_policy(distributed::StallPolicy policy) override {
    abort_s_ = policy.abort_seconds;
  }
  void set_stall_label(std::string label) override { label_ = std::move(label); }
  // As MPI's: a second communicator with the policy in force now, recording
  // into the same list.
  std::unique_ptr<Communicator> duplicate() override {
    auto copy = std::make_unique<PolicyRecorder>(calls_);
    copy->abort_s_ = abort_s_;
    return copy;
  }

  PolicyRecorder() = default;
  explicit PolicyRecorder(std::vector<std::pair<std::string, double>>& shared) : calls_(shared) {}

  std::vector<std::pair<std::string, double>> calls;  // (label, abort limit)

 private:
  void record() { calls_.emplace_back(label_, abort_s_); }
  std::vector<std::pair<std::string, double>>& calls_ = calls;
  std::unique_ptr<Communicator> inner_ = distributed::make_single_communicator();
  std::string label_;
  double abort_s_ = -1.0;  // none set yet
};

// The abort limit of the first (or, last: the last) collective labelled `label`.
double limit_at(const PolicyRecorder& comm, const std::string& label, bool last = false) {
  double found = -2.0;  // no such collective
  for (const auto& [l, limit] : comm.calls) {
    if (l != label) continue;
    found = limit;
    if (!last) break;
  }
  return found;
}

// Two epochs on a small MNIST set in dir, abort limit 77 s, no files.
app::TrainConfig two_epochs(const testing::ScratchDir& dir) {
  testing::write_mnist_dir(dir.path(), 128, 40);
  app::TrainConfig config;
  config.dataset = "mnist";
  config.data_dir = dir.path();
  config.run_dir.clear();
  config.progress = "none";
  config.threads = 1;
  config.epochs = 2;
  config.stall_abort_s = 77.0;
  return config;
}

TEST(StallExemption, StartUpFirstStepAndFirstEvaluationRunWithoutTheAbortLimit) {
  testing::ScratchDir dir;
  const app::TrainConfig config = two_epochs(dir);
  PolicyRecorder comm;
  app::Trainer trainer(config, comm);
  trainer.run();
  EXPECT_EQ(limit_at(comm, "start-up fingerprint check"), 0.0);
  EXPECT_EQ(limit_at(comm, "epoch 1 step-count check"), 0.0);   // before the first step
  EXPECT_EQ(limit_at(comm, "epoch 1 training metrics"), 77.0);  // after it
  EXPECT_EQ(limit_at(comm, "evaluation metrics"), 0.0);         // the first evaluation
  EXPECT_EQ(limit_at(comm, "epoch 2 step-count check"), 77.0);
  EXPECT_EQ(limit_at(comm, "evaluation metrics", true), 77.0);  // the second
  // The last collective waits for rank 0's final writes under the limit
  // (MPI's end of the job waits without one).
  ASSERT_FALSE(comm.calls.empty());
  EXPECT_EQ(comm.calls.back(),
            std::make_pair(std::string("end of training: rank 0 writing its results"), 77.0));
  // Before the first step, no collective ran under the limit.
  for (const auto& [label, limit] : comm.calls) {
    if (label == "epoch 1 step-count check") break;
    EXPECT_EQ(limit, 0.0) << "start-up collective [" << label << "] under the abort limit";
  }
}

// SyncBatchNorm's collectives run on a duplicate of the communicator, made
// while start-up had lifted the limit: they too run under it after the
// first step.
TEST(StallExemption, SyncBatchNormCollectivesRunUnderTheLimitAfterTheFirstStep) {
  testing::ScratchDir dir;
  app::TrainConfig config = two_epochs(dir);
  config.model = "custom";
  config.layers = {"conv2d out=4 kernel=3", "batchnorm2d relu=true",
                   "max_pool2d kernel=2",   "flatten",
                   "linear out=10",         "log_softmax"};
  config.sync_batchnorm = true;
  PolicyRecorder comm;
  app::Trainer trainer(config, comm);
  trainer.run();
  int under_limit = 0;
  for (const auto& [label, limit] : comm.calls) {
    if (label.starts_with("sync_batchnorm ")) under_limit += limit == 77.0;
  }
  EXPECT_GT(under_limit, 0) << "no SyncBatchNorm collective ran under the abort limit";
}

}  // namespace
}  // namespace lockstep
