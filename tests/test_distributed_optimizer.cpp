// DistributedOptimizer in one process: config errors, equality with the
// wrapped optimizer at size 1, gradient accumulation, and errors from the
// communication thread (with a fake communicator that plays identical
// ranks). Bucket assignment: test_bucket_layout.cpp; averaging and
// compression: test_host_reduction.cpp.
#include <gtest/gtest.h>

#include "support/dopt_test_util.h"

namespace lockstep::distributed {
namespace {

using namespace testing;  // NOLINT: the helpers of dopt_test_util.h
using nn::Device;
using nn::Tensor;

TEST(GradientBuckets, RefusesBadConfigs) {
  EXPECT_THROW(assign_buckets({1}, -1.0, 25.0), InputError);
  EXPECT_THROW(assign_buckets({1}, 1.0, std::nan("")), InputError);
  auto m = small_model(1);
  auto backend = nn::make_cpu_backend(1);
  auto comm = make_single_communicator();
  auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
  auto make = [&](DistributedOptimizerConfig c) {
    return error_of([&] { DistributedOptimizer(*comm, *backend, m->parameters(), *sgd, c); });
  };
  EXPECT_NE(make({.op = ReduceOp::kMax}).find("op max is not allowed"), std::string::npos);
  EXPECT_NE(
      make({.op = ReduceOp::kSum, .gradient_predivide_factor = 2.0}).find("needs op = average"),
      std::string::npos);
  EXPECT_NE(make({.backward_passes_per_step = 0}).find("backward_passes_per_step"),
            std::string::npos);
  EXPECT_NE(make({.allreduce_chunk_mb = -1.0}).find("allreduce_chunk_mb = -1 must be >= 0"),
            std::string::npos);
  EXPECT_THROW(parse_compression("fp8"), InputError);
  EXPECT_EQ(parse_compression("bf16"), Compression::kBf16);
}

// --- size 1: the wrapped optimizer, exactly ---------------------------------------

class SizeOne : public ::testing::TestWithParam<DistributedOptimizerConfig> {};

// The single communicator takes the pass-through path (nothing reduced); two
// fake identical ranks take the whole path (pack, sum, halve, unpack), which
// is exact too because halving a doubled float is.
TEST_P(SizeOne, StepGivesExactlyTheInnerOptimizersWeights) {
  auto backend = nn::make_cpu_backend(1);
  auto single = make_single_communicator();
  FakeCommunicator twins(2);
  for (Communicator* comm : {single.get(), static_cast<Communicator*>(&twins)}) {
    auto plain = small_model(3), wrapped = small_model(3);
    nn::OptimizerConfig oc{
        .kind = nn::OptimizerKind::kSgd, .momentum = 0.9f, .weight_decay = 1e-4f};
    auto plain_sgd = nn::make_optimizer(oc, plain->parameters(), Device::kCpu);
    auto inner = nn::make_optimizer(oc, wrapped->parameters(), Device::kCpu);
    DistributedOptimizerConfig config = GetParam();
    if (comm == &twins) config.op = ReduceOp::kAverage;
    DistributedOptimizer dopt(*comm, *backend, wrapped->parameters(), *inner, config);
    for (int step = 0; step < 4; ++step) {
      Batch b = make_batch(range_ids(step * 8, 8));
      backward(*plain, *backend, b, 1.0f / 8);
      plain_sgd->step(*backend, 0.05f);
      backward(*wrapped, *backend, b, 1.0f / 8, dopt.grad_ready_callback());
      dopt.step(0.05f);
    }
    EXPECT_EQ(values(*plain), values(*wrapped)) << comm->size() << " rank(s)";  // bit for bit
    EXPECT_EQ(inner->steps(), 4);
    const auto stats = dopt.stats();
    EXPECT_EQ(stats.steps, 4);
    const int64_t reductions = comm == &twins ? 4 : 0;
    EXPECT_EQ(stats.allreduces, reductions * static_cast<int64_t>(dopt.buckets().size()));
    EXPECT_EQ(stats.bytes_reduced, reductions * wrapped->parameter_count() * 4);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, SizeOne,
    ::testing::Values(DistributedOptimizerConfig{}, DistributedOptimizerConfig{.bucket_cap_mb = 0},
                      DistributedOptimizerConfig{.first_bucket_mb = 0.0001, .bucket_cap_mb = 0.002},
                      DistributedOptimizerConfig{.overlap = false},
                      DistributedOptimizerConfig{.op = ReduceOp::kSum}));

TEST(DistributedOptimizer, BackwardWithoutCallbackStillReduces) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(2);
  auto m = small_model(3);
  auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
  DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd, {.op = ReduceOp::kSum});
  backward(*m, *backend, make_batch(range_ids(0, 4)), 0.25f);
  const float g = m->parameters()[0]->grad.data()[0];
  dopt.synchronize();
  EXPECT_EQ(m->parameters()[0]->grad.data()[0], 2 * g);
  EXPECT_EQ(comm.calls.size(), dopt.buckets().size());
}

// --- accumulation -------------------------------------------------------------------

TEST(DistributedOptimizer, ThreePassesEqualOnePassWithThreeTimesTheBatch) {
  auto backend = nn::make_cpu_backend(1);
  auto comm = make_single_communicator();
  auto big = small_model(5), accumulated = small_model(5);
  nn::OptimizerConfig oc{.kind = nn::OptimizerKind::kSgd, .momentum = 0.9f};
  auto big_sgd = nn::make_optimizer(oc, big->parameters(), Device::kCpu);
  auto inner = nn::make_optimizer(oc, accumulated->parameters(), Device::kCpu);
  DistributedOptimizer dopt(*comm, *backend, accumulated->parameters(), *inner,
                            {.bucket_cap_mb = 0.001, .backward_passes_per_step = 3});
  for (int step = 0; step < 3; ++step) {
    backward(*big, *backend, make_batch(range_ids(step * 12, 12)), 1.0f / 12);
    big_sgd->step(*backend, 0.1f);
    for (int pass = 0; pass < 3; ++pass) {
      EXPECT_EQ(dopt.will_reduce(), pass == 2);
      backward(*accumulated, *backend, make_batch(range_ids(step * 12 + pass * 4, 4)), 1.0f / 12,
               dopt.grad_ready_callback());
      EXPECT_EQ(dopt.passes_done(), pass + 1);
    }
    dopt.step(0.1f);
  }
  const auto a = values(*big), b = values(*accumulated);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(b[i], a[i], 1e-5 * std::max(1.0f, std::fabs(a[i]))) << "value " << i;
  }
  // Communication only on the reducing pass.
  EXPECT_EQ(dopt.stats().allreduces, 3 * static_cast<int64_t>(dopt.buckets().size()));
}

// An epoch's last, shorter group: set_step_passes(2) on k = 3 makes one step
// of two passes (each scaled 1 / 8) equal one pass over the 8 samples; the
// next step takes 3 passes again.
TEST(DistributedOptimizer, AShorterStepEqualsOnePassOverItsBatches) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(2);
  auto big = small_model(5), accumulated = small_model(5);
  nn::OptimizerConfig oc{.kind = nn::OptimizerKind::kSgd, .momentum = 0.9f};
  auto big_sgd = nn::make_optimizer(oc, big->parameters(), Device::kCpu);
  auto inner = nn::make_optimizer(oc, accumulated->parameters(), Device::kCpu);
  DistributedOptimizer dopt(comm, *backend, accumulated->parameters(), *inner,
                            {.backward_passes_per_step = 3});
  const int passes[3] = {3, 2, 3};
  int64_t first = 0;
  for (int step = 0; step < 3; ++step) {
    const int n = passes[step];
    backward(*big, *backend, make_batch(range_ids(first, 4 * n)), 1.0f / (4 * n));
    big_sgd->step(*backend, 0.1f);
    if (n != 3) dopt.set_step_passes(n);
    for (int pass = 0; pass < n; ++pass) {
      EXPECT_EQ(dopt.will_reduce(), pass == n - 1) << "step " << step;
      backward(*accumulated, *backend, make_batch(range_ids(first + 4 * pass, 4)), 1.0f / (4 * n),
               dopt.grad_ready_callback());
    }
    if (n != 3) {
      EXPECT_NE(error_of([&] {
                  backward(*accumulated, *backend, make_batch(range_ids(0, 4)), 0.125f,
                           dopt.grad_ready_callback());
                }).find("more than the 2 backward passes set for this step"),
                std::string::npos);
    }
    dopt.step(0.1f);
    first += 4 * n;
  }
  const auto a = values(*big), b = values(*accumulated);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(b[i], a[i], 1e-5 * std::max(1.0f, std::fabs(a[i]))) << "value " << i;
  }
  EXPECT_EQ(comm.calls.size(), 3 * dopt.buckets().size());  // one reduction per step
  EXPECT_NE(error_of([&] { dopt.set_step_passes(4); }).find("1 to backward_passes_per_step = 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dopt.set_step_passes(0); }).find("1 to backward_passes_per_step = 3"),
            std::string::npos);
  backward(*accumulated, *backend, make_batch(range_ids(0, 4)), 0.125f, dopt.grad_ready_callback());
  EXPECT_NE(error_of([&] { dopt.set_step_passes(1); }).find("before the step's first pass"),
            std::string::npos);
}

TEST(DistributedOptimizer, RefusesTooManyOrTooFewPasses) {
  auto backend = nn::make_cpu_backend(1);
  auto comm = make_single_communicator();
  auto m = small_model(5);
  auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
  DistributedOptimizer dopt(*comm, *backend, m->parameters(), *sgd,
                            {.backward_passes_per_step = 2});
  Batch b = make_batch(range_ids(0, 4));
  backward(*m, *backend, b, 0.125f, dopt.grad_ready_callback());
  EXPECT_NE(error_of([&] { dopt.step(0.1f); }).find("after 1 of 2 backward passes"),
            std::string::npos);
  backward(*m, *backend, b, 0.125f, dopt.grad_ready_callback());
  EXPECT_NE(error_of([&] {
              backward(*m, *backend, b, 0.125f, dopt.grad_ready_callback());
            }).find("more than backward_passes_per_step = 2"),
            std::string::npos);
  dopt.step(0.1f);  // the two complete passes still step
  EXPECT_EQ(sgd->steps(), 1);
}

// --- the communication thread -------------------------------------------------------------

class ReductionThread : public ::testing::TestWithParam<bool> {};

TEST_P(ReductionThread, ErrorIsRethrownFromSynchronizeAndTheNextStepWorks) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(2);
  comm.fail_call = 2;  // the second bucket's allreduce
  auto m = small_model(9);
  auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
  DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd,
                            {.bucket_cap_mb = 0, .overlap = GetParam()});
  Batch b = make_batch(range_ids(0, 4));
  backward(*m, *backend, b, 0.25f, dopt.grad_ready_callback());
  try {
    dopt.step(0.1f);
    FAIL() << "no error";
  } catch (const LibraryError& e) {
    EXPECT_STREQ(e.what(), "MPI_Allreduce failed: fake network down");
  }
  EXPECT_EQ(sgd->steps(), 0);
  backward(*m, *backend, b, 0.25f, dopt.grad_ready_callback());
  dopt.step(0.1f);
  EXPECT_EQ(sgd->steps(), 1);
}

TEST_P(ReductionThread, BucketsAreReducedInIndexOrderWhateverTheAnnounceOrder) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(2);
  auto m = small_model(9);
  auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
  DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd,
                            {.bucket_cap_mb = 0, .overlap = GetParam()});
  backward(*m, *backend, make_batch(range_ids(0, 4)), 0.25f);
  for (size_t i = 0; i < m->parameters().size(); ++i) dopt.on_grad_ready(i);  // forward order
  dopt.synchronize();
  std::vector<size_t> expected;
  for (const GradientBucket& bucket : dopt.buckets()) expected.push_back(bucket.numel);
  EXPECT_EQ(comm.calls, expected);
  EXPECT_EQ(comm.labels.front(), "step 1 bucket 0");
  EXPECT_EQ(comm.labels.back(), "step 1 bucket " + std::to_string(expected.size() - 1));
}

INSTANTIATE_TEST_SUITE_P(OverlapOnAndOff, ReductionThread, ::testing::Bool());

}  // namespace
}  // namespace lockstep::distributed
