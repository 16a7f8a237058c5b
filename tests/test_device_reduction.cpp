// The DistributedOptimizer's device-reduction path (a gradient communicator
// with a DeviceReducer, as NCCL's on GPUs), run on the CPU with a fake
// reducer that plays identical ranks: the order of marks, enqueues and the
// final wait, the reduced values, errors from the asynchronous side, and
// that compression keeps the host path. The NCCL reducer itself needs GPUs
// (tests/mpi/test_nccl_reducer.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "distributed/bucket_layout.h"
#include "distributed/device_reducer.h"
#include "distributed/device_reduction.h"
#include "distributed/distributed_optimizer.h"
#include "nn/model_zoo.h"
#include "support/dopt_test_util.h"

namespace lockstep::distributed {
namespace {

using nn::Device;
using nn::Tensor;

// `size` identical ranks; records every call in order. enqueue_allreduce
// sums at once (a CPU "device"); finish() throws when fail_finish is set.
class FakeReducer final : public testing::IdenticalRanks, public DeviceReducer {
 public:
  explicit FakeReducer(int size) : IdenticalRanks(size) {}
  std::string describe() const override { return "fake reducer"; }
  void allreduce(std::span<float>, ReduceOp) override { log("host allreduce"); }
  void allreduce(std::span<double>, ReduceOp) override {}
  void allreduce(std::span<int64_t>, ReduceOp) override {}
  void allreduce_16bit(std::span<uint16_t> data, Compression, ReduceOp) override {
    log("host allreduce_16bit " + std::to_string(data.size()));
  }
  DeviceReducer* device_reducer() override { return this; }

  void mark_ready(size_t slot, void* stream) override {
    log("mark " + std::to_string(slot) + (stream == nullptr ? "" : " with a stream"));
  }
  void enqueue_allreduce(size_t slot, std::span<float> data, ReduceOp op) override {
    log("enqueue " + std::to_string(slot) + " " + std::to_string(data.size()));
    if (op == ReduceOp::kSum) {
      for (float& v : data) v *= static_cast<float>(size_);
    }
  }
  void finish(void*) override {
    log("finish");
    if (fail_finish) {
      throw DistributedError("rank 0: NCCL allreduce #3 failed: remote process exited");
    }
  }

  std::vector<std::string> calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  bool fail_finish = false;

 private:
  void log(std::string call) {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
  }
  std::mutex mutex_;
  std::vector<std::string> calls_;
};

// Two parameters (forward order), one bucket each (bucket_cap_mb = 0):
// backward announces parameter 1 first, so bucket 0 holds parameter 1.
// The CPU backend and one MPI rank (the gradient communicator is a reducer).
struct TwoParams {
  std::unique_ptr<nn::Backend> backend = nn::make_cpu_backend(1);
  std::unique_ptr<Communicator> mpi = make_single_communicator();
  nn::Parameter a{"a", Tensor({3}), Tensor({3})}, b{"b", Tensor({5}), Tensor({5})};
  std::vector<nn::Parameter*> list{&a, &b};
  std::unique_ptr<nn::Optimizer> sgd = nn::make_optimizer({}, list, Device::kCpu);
  void set_grads(float ga, float gb) {
    for (float& v : a.grad.span()) v = ga;
    for (float& v : b.grad.span()) v = gb;
  }
};

class DevicePath : public ::testing::TestWithParam<bool> {};

TEST_P(DevicePath, MarksEachBucketThenEnqueuesInOrderThenWaitsOnce) {
  FakeReducer reducer(4);
  TwoParams p;
  DistributedOptimizer dopt(*p.mpi, *p.backend, p.list, *p.sgd,
                            {.bucket_cap_mb = 0, .overlap = GetParam(), .gradient_comm = &reducer});
  for (int step = 0; step < 2; ++step) {
    p.set_grads(0.5f, -1.5f);
    dopt.on_grad_ready(1);
    dopt.on_grad_ready(0);
    dopt.synchronize();
    EXPECT_EQ(p.a.grad.data()[2], 0.5f);  // average over 4 identical ranks
    EXPECT_EQ(p.b.grad.data()[4], -1.5f);
  }
  const std::vector<std::string> calls = reducer.calls();
  ASSERT_EQ(calls.size(), 10u);
  for (size_t step = 0; step < 2; ++step) {
    const auto first = calls.begin() + static_cast<std::ptrdiff_t>(step * 5);
    const std::vector<std::string> one(first, first + 5);
    // Each enqueue follows its bucket's mark; one wait at the end.
    const auto at = [&](const std::string& call) {
      return std::find(one.begin(), one.end(), call) - one.begin();
    };
    EXPECT_LT(at("mark 0"), at("enqueue 0 5"));
    EXPECT_LT(at("mark 1"), at("enqueue 1 3"));
    EXPECT_LT(at("enqueue 0 5"), at("enqueue 1 3"));
    EXPECT_EQ(one.back(), "finish");
  }
  const auto stats = dopt.stats();
  EXPECT_EQ(stats.allreduces, 4);
  EXPECT_EQ(stats.bytes_reduced, 2 * 8 * 4);
}

TEST_P(DevicePath, PrescaleAndSumReduceOnTheDevice) {
  FakeReducer reducer(4);
  TwoParams p;
  DistributedOptimizer dopt(
      *p.mpi, *p.backend, p.list, *p.sgd,
      {.gradient_predivide_factor = 4.0, .overlap = GetParam(), .gradient_comm = &reducer});
  p.set_grads(3.0f, 1.0f);
  dopt.on_grad_ready(1);
  dopt.on_grad_ready(0);
  dopt.synchronize();
  EXPECT_EQ(p.a.grad.data()[0], 3.0f);  // 3/4 summed over 4 ranks, times 4/4
  DistributedOptimizer sum(
      *p.mpi, *p.backend, p.list, *p.sgd,
      {.op = ReduceOp::kSum, .overlap = GetParam(), .gradient_comm = &reducer});
  p.set_grads(3.0f, 1.0f);
  sum.synchronize();  // backward without the callback
  EXPECT_EQ(p.a.grad.data()[0], 12.0f);
  EXPECT_EQ(p.b.grad.data()[0], 4.0f);
}

TEST_P(DevicePath, AsynchronousErrorIsRethrownAndTheStepIsNotTaken) {
  FakeReducer reducer(2);
  reducer.fail_finish = true;
  TwoParams p;
  DistributedOptimizer dopt(*p.mpi, *p.backend, p.list, *p.sgd,
                            {.overlap = GetParam(), .gradient_comm = &reducer});
  p.set_grads(1.0f, 1.0f);
  dopt.on_grad_ready(1);
  dopt.on_grad_ready(0);
  try {
    dopt.step(0.1f);
    FAIL() << "no error";
  } catch (const DistributedError& e) {
    EXPECT_STREQ(e.what(), "rank 0: NCCL allreduce #3 failed: remote process exited");
  }
  EXPECT_EQ(p.sgd->steps(), 0);
}

// fp16/bf16 conversions run on the host: compression keeps the host path.
TEST_P(DevicePath, CompressionUsesTheHostPath) {
  FakeReducer reducer(2);
  TwoParams p;
  DistributedOptimizer dopt(
      *p.mpi, *p.backend, p.list, *p.sgd,
      {.compression = Compression::kBf16, .overlap = GetParam(), .gradient_comm = &reducer});
  p.set_grads(1.0f, 1.0f);
  dopt.on_grad_ready(1);
  dopt.on_grad_ready(0);
  dopt.synchronize();
  EXPECT_EQ(reducer.calls(), std::vector<std::string>{"host allreduce_16bit 8"});
}

INSTANTIATE_TEST_SUITE_P(OverlapOnAndOff, DevicePath, ::testing::Bool());

// --- the strategy on its own ----------------------------------------------------

TEST_P(DevicePath, StrategyPrescalesMarksEnqueuesInOrderAndUnpacks) {
  FakeReducer reducer(3);
  TwoParams p;
  BucketLayout layout(p.list, Device::kCpu, 1.0, 0.0, /*buffers=*/true, /*views=*/false);
  DeviceReduction device(layout, reducer, reducer, *p.backend, GetParam(), 0.5f);
  p.set_grads(2.0f, -4.0f);
  layout.pack(1, true, *p.backend);
  device.bucket_ready(0, 7);  // bucket 0 holds b
  layout.pack(0, true, *p.backend);
  device.bucket_ready(1, 7);
  device.finish(7);
  EXPECT_EQ(p.a.grad.data()[2], 3.0f);  // 2 * 0.5 * 3 ranks
  EXPECT_EQ(p.b.grad.data()[4], -6.0f);
  // With overlap, bucket 0 may be queued before bucket 1 is marked.
  const std::vector<std::string> calls = reducer.calls();
  EXPECT_TRUE(calls == (std::vector<std::string>{"mark 0", "mark 1", "enqueue 0 5", "enqueue 1 3",
                                                 "finish"}) ||
              (GetParam() && calls == (std::vector<std::string>{"mark 0", "enqueue 0 5", "mark 1",
                                                                "enqueue 1 3", "finish"})))
      << ::testing::PrintToString(calls);
  EXPECT_EQ(device.stats().allreduces, 2);
}

}  // namespace
}  // namespace lockstep::distributed
