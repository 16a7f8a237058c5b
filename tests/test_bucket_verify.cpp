// The debug check that TSan cannot make (it does not see MPI's reads:
// tests/tsan.supp): with verify_buckets, a gradient bucket written after
// backward announced it and before its reduction ended throws, naming the
// bucket. A planted early write, made while the reduction is certainly
// running (the allreduce waits for the test), is caught with the
// communication thread and without; a clean step passes and gives the
// sums of the unchecked reduction.
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "app/run/train_settings.h"
#include "distributed/distributed_optimizer.h"
#include "support/dopt_test_util.h"
#include "support/scoped_env.h"

namespace lockstep::distributed {
namespace {

using namespace testing;  // NOLINT: the helpers of dopt_test_util.h

// Identical ranks whose first float allreduce tells the test it has begun
// and then waits until the test lets it go on.
class GatedCommunicator final : public IdenticalRanks {
 public:
  explicit GatedCommunicator(int size) : IdenticalRanks(size) {}
  std::string describe() const override { return "gated"; }
  void allreduce(std::span<float> data, ReduceOp op) override {
    if (first_) {
      first_ = false;
      entered.set_value();
      release.get_future().wait();
    }
    if (op == ReduceOp::kSum) {
      for (float& v : data) v *= static_cast<float>(size_);
    }
  }
  void allreduce_16bit(std::span<uint16_t>, Compression, ReduceOp) override {}
  void allreduce(std::span<double>, ReduceOp) override {}
  void allreduce(std::span<int64_t>, ReduceOp) override {}
  void set_stall_label(std::string) override {}

  std::promise<void> entered, release;

 private:
  bool first_ = true;  // only the communication thread (or finish()) calls
};

DistributedOptimizerConfig verify_config(bool overlap) {
  return {.first_bucket_mb = 0.0001,
          .bucket_cap_mb = 0.002,
          .verify_buckets = true,
          .overlap = overlap};
}

// The parameter whose gradient lies first in bucket 0 (the last parameter).
nn::Parameter& first_of_bucket_zero(const DistributedOptimizer& dopt,
                                    const std::vector<nn::Parameter*>& params) {
  return *params[dopt.buckets()[0].params[0]];
}

// Overlap on: the thread is inside bucket 0's allreduce when the test writes
// one value of that bucket, as a layer touching a gradient it had announced.
TEST(DistributedOptimizerVerify, WriteDuringTheAllreduceThrowsNamingTheBucket) {
  auto backend = nn::make_cpu_backend(1);
  GatedCommunicator comm(2);
  auto m = small_model(3);
  auto sgd = nn::make_optimizer({}, m->parameters(), nn::Device::kCpu);
  DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd, verify_config(true));
  ASSERT_GT(dopt.buckets().size(), 1u);
  backward(*m, *backend, make_batch(range_ids(0, 4)), 0.25f, dopt.grad_ready_callback());
  comm.entered.get_future().wait();
  nn::Parameter& p = first_of_bucket_zero(dopt, m->parameters());
  ASSERT_TRUE(p.grad.is_view()) << "the gradient lives in its bucket";
  p.grad.data()[0] += 1.0f;  // the planted early write
  comm.release.set_value();
  const std::string error = error_of([&] { dopt.synchronize(); });
  EXPECT_NE(error.find("gradient bucket 0 (step 1, "), std::string::npos) << error;
  EXPECT_NE(error.find("changed after it was handed to the reduction and before the reduction "
                       "ended"),
            std::string::npos)
      << error;
}

// Overlap off: the write lands between the hand-off and finish().
TEST(DistributedOptimizerVerify, WriteBeforeTheReductionThrowsWithoutTheThread) {
  auto backend = nn::make_cpu_backend(1);
  GatedCommunicator comm(2);
  comm.release.set_value();
  auto m = small_model(3);
  auto sgd = nn::make_optimizer({}, m->parameters(), nn::Device::kCpu);
  DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd, verify_config(false));
  backward(*m, *backend, make_batch(range_ids(0, 4)), 0.25f, dopt.grad_ready_callback());
  nn::Parameter& p = first_of_bucket_zero(dopt, m->parameters());
  p.grad.data()[p.grad.numel() - 1] *= 2.0f;
  const std::string error = error_of([&] { dopt.synchronize(); });
  EXPECT_NE(error.find("gradient bucket 0 (step 1, "), std::string::npos) << error;
}

// No write: the check passes, and the sums are those of the unchecked path.
TEST(DistributedOptimizerVerify, CleanStepsPassWithTheSameSums) {
  auto backend = nn::make_cpu_backend(1);
  std::vector<std::vector<float>> sums;
  for (bool verify : {false, true}) {
    for (bool overlap : {false, true}) {
      GatedCommunicator comm(2);
      comm.release.set_value();
      auto m = small_model(3);
      auto sgd = nn::make_optimizer({}, m->parameters(), nn::Device::kCpu);
      DistributedOptimizerConfig config = verify_config(overlap);
      config.verify_buckets = verify;
      DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd, config);
      for (int step = 0; step < 2; ++step) {
        backward(*m, *backend, make_batch(range_ids(4 * step, 4)), 0.25f,
                 dopt.grad_ready_callback());
        EXPECT_EQ(error_of([&] { dopt.synchronize(); }), "no error");
      }
      sums.push_back(grads(*m));
    }
  }
  for (size_t i = 1; i < sums.size(); ++i) EXPECT_EQ(sums[i], sums[0]) << "run " << i;
}

// The lockstep command turns the check on from LOCKSTEP_VERIFY_BUCKETS.
TEST(DistributedOptimizerVerify, TheTrainerTakesItFromTheEnvironment) {
  lockstep::testing::ScopedEnv env("LOCKSTEP_VERIFY_BUCKETS", "1");  // the TSan lane sets it
  EXPECT_TRUE(app::dopt_config(app::TrainConfig{}).verify_buckets);
  env.set(nullptr);
  EXPECT_FALSE(app::dopt_config(app::TrainConfig{}).verify_buckets);
}

}  // namespace
}  // namespace lockstep::distributed
