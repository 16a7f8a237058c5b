// DistributedOptimizer in one process, with a fake communicator that plays
// identical ranks: gradients kept in the buckets, averaging (deferred into
// the update), predivision, fp16/bf16 compression (16-bit values handed to
// the communicator, rounding) and its overflow errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "distributed/host_reduction.h"
#include "support/dopt_test_util.h"
#include "support/forwarding_backend.h"

namespace lockstep::distributed {
namespace {

using namespace testing;  // NOLINT: the helpers of dopt_test_util.h
using nn::Device;
using nn::Tensor;

// --- gradients in the buckets -------------------------------------------------------

std::vector<float> times(std::vector<float> v, float k) {
  for (float& x : v) x *= k;
  return v;
}

// Backward writes into the bucket buffers and the allreduce runs there: no
// copy either way. The gradients get their own memory back, values kept.
TEST(DistributedOptimizer, GradientsLiveInTheirBucketsUntilDestruction) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(2);
  auto m = small_model(3);
  const std::vector<nn::Parameter*>& params = m->parameters();
  auto sgd = nn::make_optimizer({}, params, Device::kCpu);
  backward(*m, *backend, make_batch(range_ids(0, 4)), 0.25f);
  const std::vector<float> before = grads(*m);
  std::vector<float> sums;
  {
    // Overlap off: `local` below is read before any bucket is reduced in
    // place (with the thread, a bucket may be summed while it is read).
    DistributedOptimizer dopt(
        comm, *backend, params, *sgd,
        {.first_bucket_mb = 0.0001, .bucket_cap_mb = 0.002, .overlap = false});
    ASSERT_GT(dopt.buckets().size(), 1u);
    EXPECT_EQ(grads(*m), before);  // moved with their values
    for (const GradientBucket& b : dopt.buckets()) {
      const float* start = params[b.params[0]]->grad.data();
      for (size_t j = 0; j < b.params.size(); ++j) {
        const nn::Tensor& g = params[b.params[j]]->grad;
        EXPECT_TRUE(g.is_view()) << params[b.params[j]]->name;
        EXPECT_EQ(g.data(), start + b.offsets[j]) << params[b.params[j]]->name;
      }
    }
    // This rank's own gradients, from a twin model: reading m's while the
    // communication thread reduces the buckets already announced would race.
    auto twin = small_model(3);
    backward(*twin, *backend, make_batch(range_ids(4, 4)), 0.25f);
    const std::vector<float> local = grads(*twin);
    backward(*m, *backend, make_batch(range_ids(4, 4)), 0.25f, dopt.grad_ready_callback());
    EXPECT_EQ(dopt.reduce_gradients(), 0.5f);  // the average's factor, left to the update
    sums = grads(*m);
    EXPECT_EQ(sums, times(local, 2.0f));  // two identical ranks
    ASSERT_EQ(comm.addresses.size(), dopt.buckets().size());
    for (size_t b = 0; b < dopt.buckets().size(); ++b) {
      EXPECT_EQ(comm.addresses[b], params[dopt.buckets()[b].params[0]]->grad.data()) << b;
    }
  }
  for (const nn::Parameter* p : params) EXPECT_FALSE(p->grad.is_view()) << p->name;
  EXPECT_EQ(grads(*m), sums);
}

// A gradient tensor replaced after construction is packed and unpacked by
// copying; the result is the same.
TEST(DistributedOptimizer, AGradientReplacedAfterConstructionIsStillReduced) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(2);
  auto m = small_model(3);
  nn::Parameter& first = *m->parameters()[0];
  auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
  DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd, {.op = ReduceOp::kSum});
  first.grad = Tensor(first.value.shape());
  auto twin = small_model(3);  // m's own gradients, read without racing the reduction
  backward(*twin, *backend, make_batch(range_ids(0, 4)), 0.25f);
  const std::vector<float> local = grads(*twin);
  backward(*m, *backend, make_batch(range_ids(0, 4)), 0.25f, dopt.grad_ready_callback());
  dopt.synchronize();
  EXPECT_FALSE(first.grad.is_view());
  EXPECT_NE(first.grad.data()[0], 0.0f);
  EXPECT_EQ(grads(*m), times(local, 2.0f));
}

// step() applies the average inside the update; synchronize() then the
// plain update gives the same weights (3 ranks: 1/3 is inexact, so close).
TEST(DistributedOptimizer, StepFoldsTheAverageIntoTheUpdate) {
  for (nn::OptimizerKind kind : {nn::OptimizerKind::kSgd, nn::OptimizerKind::kAdam}) {
    auto backend = nn::make_cpu_backend(1);
    FakeCommunicator comm(3);
    nn::OptimizerConfig oc{.kind = kind, .momentum = 0.9f, .weight_decay = 1e-3f};
    if (oc.kind == nn::OptimizerKind::kAdam) oc.momentum = 0.0f;
    auto folded = small_model(3), separate = small_model(3);
    auto opt1 = nn::make_optimizer(oc, folded->parameters(), Device::kCpu);
    auto opt2 = nn::make_optimizer(oc, separate->parameters(), Device::kCpu);
    DistributedOptimizer d1(comm, *backend, folded->parameters(), *opt1);
    DistributedOptimizer d2(comm, *backend, separate->parameters(), *opt2);
    for (int step = 0; step < 3; ++step) {
      Batch b = make_batch(range_ids(step * 8, 8));
      backward(*folded, *backend, b, 1.0f / 8, d1.grad_ready_callback());
      d1.step(0.01f);
      backward(*separate, *backend, b, 1.0f / 8, d2.grad_ready_callback());
      d2.synchronize();
      opt2->step(*backend, 0.01f);
    }
    const std::vector<float> a = values(*folded), c = values(*separate);
    ASSERT_EQ(a.size(), c.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], c[i], 1e-6f * (1.0f + std::fabs(c[i])))
          << nn::to_string(kind) << " value " << i;
    }
    EXPECT_NE(values(*folded), values(*small_model(3))) << nn::to_string(kind);
  }
}

// --- averaging, predivision, compression -------------------------------------------------

// One parameter whose gradient the test sets by hand.
struct HandParam {
  nn::Parameter p;
  std::vector<nn::Parameter*> list;
  std::unique_ptr<nn::Optimizer> sgd;
  // p initialised, not assigned: GCC 12 warns (-Wrestrict, a false positive)
  // on the inlined assignment of the name.
  HandParam(int64_t n, float g) : p{"w", Tensor({n}), Tensor({n})} {
    for (float& v : p.grad.span()) v = g;
    list = {&p};
    sgd = nn::make_optimizer({}, list, Device::kCpu);
  }
};

float reduce_once(int size, DistributedOptimizerConfig c, float g) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(size);
  HandParam w(37, g);
  DistributedOptimizer dopt(comm, *backend, w.list, *w.sgd, c);
  dopt.on_grad_ready(0);
  dopt.synchronize();
  return w.p.grad.data()[36];
}

TEST(DistributedOptimizer, AverageSumAndPredivide) {
  EXPECT_EQ(reduce_once(4, {}, 0.75f), 0.75f);  // 4 identical ranks: mean = g
  EXPECT_EQ(reduce_once(4, {.op = ReduceOp::kSum}, 0.75f), 3.0f);
  EXPECT_EQ(reduce_once(4, {.gradient_predivide_factor = 4.0}, 0.75f), 0.75f);
  EXPECT_EQ(reduce_once(4, {.gradient_predivide_factor = 2.0}, 0.75f), 0.75f);
}

TEST(DistributedOptimizer, CompressionRoundsLikeTheWireFormat) {
  EXPECT_EQ(reduce_once(1, {.compression = Compression::kFp16}, 0.1f), 0.0999755859375f);
  EXPECT_EQ(reduce_once(1, {.compression = Compression::kBf16}, 0.1f), 0.10009765625f);
  EXPECT_EQ(reduce_once(1, {.compression = Compression::kBf16}, 70000.0f), 70144.0f);
  // Two ranks of 40000 sum past 65504, unless predivided.
  EXPECT_EQ(reduce_once(2, {.gradient_predivide_factor = 2.0, .compression = Compression::kFp16},
                        40000.0f),
            40000.0f);
}

TEST(DistributedOptimizer, Fp16OverflowIsAnErrorNotNaNWeights) {
  const std::string local = error_of(
      [] { reduce_once(1, {.bucket_cap_mb = 0, .compression = Compression::kFp16}, 70000.0f); });
  EXPECT_EQ(local,
            "fp16 gradient overflow in bucket 0 (max |g| = 70000 > 65504): use bf16, "
            "gradient_predivide_factor, or a smaller lr");
  const std::string sum =
      error_of([] { reduce_once(2, {.compression = Compression::kFp16}, 40000.0f); });
  EXPECT_EQ(sum,
            "fp16 gradient overflow in bucket 0 (in the sum over 2 ranks: a rank's gradient or "
            "the sum exceeds 65504; max |g| on this rank = 40000): use bf16, "
            "gradient_predivide_factor, or a smaller lr");
  const std::string nan =
      error_of([] { reduce_once(1, {.compression = Compression::kBf16}, std::nanf("")); });
  EXPECT_EQ(nan,
            "non-finite gradient in bucket 0 (bf16 compression, max |g| = nan on this rank): the "
            "loss diverged; lower the learning rate");
}

// The bucket goes to the communicator as 16-bit values: half the bytes.
// A bucket of 1000 values with pieces of 1600 bytes: 400 floats per
// allreduce (or 800 16-bit values), consecutive, every value reduced once;
// 0: one allreduce. Counted as one bucket allreduce either way.
TEST(DistributedOptimizer, BucketsAreReducedInPiecesOfAtMostTheChunk) {
  auto backend = nn::make_cpu_backend(1);
  const double chunk_mb = 1600.0 / (1024 * 1024);
  struct Case {
    Compression compression;
    double chunk_mb;
    std::vector<size_t> float_calls, calls_16bit;
  };
  for (const Case& c : {Case{Compression::kNone, chunk_mb, {400, 400, 200}, {}},
                        Case{Compression::kNone, 0.0, {1000}, {}},
                        Case{Compression::kFp16, chunk_mb, {}, {800, 200}}}) {
    SCOPED_TRACE(::testing::Message() << to_string(c.compression) << " chunk " << c.chunk_mb);
    FakeCommunicator comm(2);
    HandParam w(1000, 0.75f);
    DistributedOptimizer dopt(
        comm, *backend, w.list, *w.sgd,
        {.op = ReduceOp::kSum, .allreduce_chunk_mb = c.chunk_mb, .compression = c.compression});
    dopt.on_grad_ready(0);
    dopt.synchronize();
    EXPECT_EQ(comm.calls, c.float_calls);
    EXPECT_EQ(comm.calls_16bit, c.calls_16bit);
    for (size_t k = 1; k < comm.addresses.size(); ++k) {
      EXPECT_EQ(comm.addresses[k], comm.addresses[k - 1] + c.float_calls[k - 1]);
    }
    for (float v : w.p.grad.span()) ASSERT_EQ(v, 1.5f);
    EXPECT_EQ(dopt.stats().allreduces, 1);
  }
}

TEST(DistributedOptimizer, CompressionSendsTwoBytesPerValue) {
  auto backend = nn::make_cpu_backend(1);
  for (Compression c : {Compression::kNone, Compression::kFp16, Compression::kBf16}) {
    FakeCommunicator comm(3);
    auto m = small_model(3);
    auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
    DistributedOptimizer dopt(comm, *backend, m->parameters(), *sgd,
                              {.bucket_cap_mb = 0.001, .compression = c});
    backward(*m, *backend, make_batch(range_ids(0, 4)), 0.25f, dopt.grad_ready_callback());
    dopt.synchronize();
    std::vector<size_t> numels;
    for (const GradientBucket& bucket : dopt.buckets()) numels.push_back(bucket.numel);
    ASSERT_GT(numels.size(), 1u);
    const bool compressed = c != Compression::kNone;
    EXPECT_EQ(comm.calls_16bit, compressed ? numels : std::vector<size_t>{}) << to_string(c);
    EXPECT_EQ(comm.calls, compressed ? std::vector<size_t>{} : numels) << to_string(c);
    const int64_t values = m->parameter_count();
    EXPECT_EQ(dopt.stats().bytes_reduced, values * (compressed ? 2 : 4)) << to_string(c);
  }
}

// Three identical ranks: the average is the 16-bit sum scaled in fp32 (not
// rounded to 16 bits again).
TEST(DistributedOptimizer, CompressedAverageIsTheSixteenBitSumScaled) {
  // fp16 0.1 = 0.0999755859375; times 3 = 0.2999267578125, a tie between
  // fp16 neighbours (ulp 2^-12 there) that rounds to even: 0.2998046875.
  EXPECT_EQ(reduce_once(3, {.op = ReduceOp::kSum, .compression = Compression::kFp16}, 0.1f),
            0.2998046875f);
  EXPECT_EQ(reduce_once(3, {.compression = Compression::kFp16}, 0.1f),
            0.2998046875f * static_cast<float>(1.0 / 3));
}

// --- the strategy on its own ----------------------------------------------------

TEST(HostReduction, ChunkValuesFollowTheChunkSize) {
  EXPECT_EQ(HostReduction::chunk_values(1.0, sizeof(float)), 262144u);
  EXPECT_EQ(HostReduction::chunk_values(1.0, sizeof(uint16_t)), 524288u);
  EXPECT_EQ(HostReduction::chunk_values(0.0, sizeof(float)), std::numeric_limits<size_t>::max());
  EXPECT_EQ(HostReduction::chunk_values(1e-9, sizeof(float)), 1u);
}

class HostStrategy : public ::testing::TestWithParam<bool> {};

// Buckets handed over in any order are summed in index order, labelled with
// the step, prescaled, and left in Parameter::grad.
TEST_P(HostStrategy, SumsEveryBucketInIndexOrder) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(3);
  nn::Parameter a{"a", Tensor({2}), Tensor({2})}, b{"b", Tensor({3}), Tensor({3})};
  std::vector<nn::Parameter*> list{&a, &b};
  BucketLayout layout(list, Device::kCpu, 1.0, 0.0, /*buffers=*/true, /*views=*/true);
  HostReduction host(layout, comm, *backend,
                     {.overlap = GetParam(), .allreduce_chunk_mb = 1.0, .prescale = 0.5f});
  for (int64_t step = 1; step <= 2; ++step) {
    for (float& v : a.grad.span()) v = 2.0f;
    for (float& v : b.grad.span()) v = -4.0f;
    host.bucket_ready(1, step);
    host.bucket_ready(0, step);
    host.finish(step);
    EXPECT_EQ(a.grad.data()[1], 3.0f);  // 2 * 0.5 * 3 ranks
    EXPECT_EQ(b.grad.data()[2], -6.0f);
  }
  EXPECT_EQ(comm.calls, (std::vector<size_t>{3, 2, 3, 2}));  // bucket 0 holds b
  EXPECT_EQ(comm.labels, (std::vector<std::string>{"step 1 bucket 0", "step 1 bucket 1",
                                                   "step 2 bucket 0", "step 2 bucket 1"}));
  EXPECT_EQ(host.stats().allreduces, 4);
  EXPECT_EQ(host.stats().bytes_reduced, 2 * 5 * 4);
}

TEST_P(HostStrategy, AFailedAllreduceIsThrownByFinishAndTheNextStepWorks) {
  auto backend = nn::make_cpu_backend(1);
  FakeCommunicator comm(2);
  comm.fail_call = 1;
  nn::Parameter a{"a", Tensor({2}), Tensor({2})}, b{"b", Tensor({3}), Tensor({3})};
  std::vector<nn::Parameter*> list{&a, &b};
  BucketLayout layout(list, Device::kCpu, 1.0, 0.0, /*buffers=*/true, /*views=*/false);
  HostReduction host(layout, comm, *backend, {.overlap = GetParam()});
  host.bucket_ready(0, 1);
  host.bucket_ready(1, 1);
  EXPECT_EQ(error_of([&] { host.finish(1); }), "MPI_Allreduce failed: fake network down");
  for (float& v : a.grad.span()) v = 1.0f;
  layout.pack(0, true, *backend);
  layout.pack(1, true, *backend);
  host.bucket_ready(0, 2);
  host.bucket_ready(1, 2);
  host.finish(2);
  EXPECT_EQ(a.grad.data()[0], 2.0f);
}

INSTANTIATE_TEST_SUITE_P(OverlapOnAndOff, HostStrategy, ::testing::Bool());

// A CPU backend that records the threads bind_thread() was called on; any
// op besides the copies and updates a host reduction makes fails the test.
class BindRecordingBackend final : public lockstep::testing::ForwardingBackend {
 public:
  BindRecordingBackend() : ForwardingBackend(nn::make_cpu_backend(1)) {}
  std::vector<std::thread::id> bound;
  void bind_thread() override { bound.push_back(std::this_thread::get_id()); }

 protected:
  void on_op(std::string_view op) override {
    static constexpr std::string_view kHostOps[] = {"copy", "axpy", "scale", "fill", "synchronize"};
    if (std::ranges::find(kHostOps, op) == std::end(kHostOps)) {
      ADD_FAILURE() << "a host reduction called the compute op " << op;
    }
  }
};

// Issue 16: the communication thread binds the backend's device before its
// first communicator call (NCCL's pointer check would otherwise create a
// context on GPU 0), and every reduction off the caller's thread runs there.
TEST(HostReduction, TheCommunicationThreadBindsTheBackendFirst) {
  BindRecordingBackend backend;
  FakeCommunicator comm(2);
  nn::Parameter a{"a", Tensor({2}), Tensor({2})}, b{"b", Tensor({3}), Tensor({3})},
      c{"c", Tensor({4}), Tensor({4})};
  std::vector<nn::Parameter*> list{&a, &b, &c};
  BucketLayout layout(list, Device::kCpu, 1.0, 0.0, /*buffers=*/true, /*views=*/true);
  {
    HostReduction host(layout, comm, backend, {.overlap = true, .compression = Compression::kFp16});
    for (size_t bucket = 0; bucket < 3; ++bucket) host.bucket_ready(bucket, 1);
    host.finish(1);
  }
  ASSERT_EQ(backend.bound.size(), 1u);
  EXPECT_NE(backend.bound[0], std::this_thread::get_id());
  EXPECT_EQ(comm.calls_16bit, (std::vector<size_t>{4, 3, 2}));
  EXPECT_EQ(comm.threads_16bit.front(), backend.bound[0]);  // bucket 0: always the thread's
}

}  // namespace
}  // namespace lockstep::distributed
