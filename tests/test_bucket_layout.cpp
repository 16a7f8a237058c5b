// BucketLayout (distributed/bucket_layout.h): which parameter goes to which
// bucket, in reverse order with a small first bucket and a cap.
#include <gtest/gtest.h>

#include "support/dopt_test_util.h"

namespace lockstep::distributed {
namespace {

using namespace testing;  // NOLINT: the helpers of dopt_test_util.h
using nn::Device;
using nn::Tensor;

TEST(GradientBuckets, ReverseOrderSmallFirstBucketAndCap) {
  // Limits: first 0.001 MiB = 262 floats, cap 0.01 MiB = 2621 floats.
  const std::vector<int64_t> numels{600, 10, 2000, 20, 5000, 30};
  auto buckets = assign_buckets(numels, 0.001, 0.01);
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{5}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{4}));  // alone: larger than the cap
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{3, 2, 1}));
  EXPECT_EQ(buckets[2].offsets, (std::vector<int64_t>{0, 20, 2020}));
  EXPECT_EQ(buckets[2].numel, 2030);
  EXPECT_EQ(buckets[3].params, (std::vector<size_t>{0}));
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t limit = b == 0 ? 1048 : 10485;
    if (buckets[b].params.size() > 1) {
      EXPECT_LE(buckets[b].bytes(), limit) << "bucket " << b;
    }
  }
}

TEST(GradientBuckets, CapZeroIsOneBucketPerParameterAndDefaultsFuse) {
  const std::vector<int64_t> numels{600, 10, 2000, 20};
  auto buckets = assign_buckets(numels, 1.0, 0.0);
  ASSERT_EQ(buckets.size(), 4u);
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(buckets[b].params, (std::vector<size_t>{3 - b}));

  // mnist_net (21840 floats, 85 KiB) fits in the 1 MiB first bucket.
  auto m = nn::build_model("mnist_net", {}, {1, 28, 28}, 10);
  m->reset_parameters(1, Device::kCpu);
  std::vector<int64_t> sizes;
  for (const nn::Parameter* p : m->parameters()) sizes.push_back(p->value.numel());
  DistributedOptimizerConfig defaults;
  EXPECT_EQ(defaults.first_bucket_mb, 1.0);
  EXPECT_EQ(defaults.bucket_cap_mb, 25.0);
  auto fused = assign_buckets(sizes, defaults.first_bucket_mb, defaults.bucket_cap_mb);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(fused[0].params, (std::vector<size_t>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(fused[0].numel, 21840);

  // The optimizer uses exactly this layout.
  auto backend = nn::make_cpu_backend(1);
  auto comm = make_single_communicator();
  auto sgd = nn::make_optimizer({}, m->parameters(), Device::kCpu);
  DistributedOptimizer dopt(*comm, *backend, m->parameters(), *sgd, {.bucket_cap_mb = 0});
  ASSERT_EQ(dopt.buckets().size(), 8u);
  EXPECT_EQ(dopt.buckets()[0].params, (std::vector<size_t>{7}));
}

}  // namespace
}  // namespace lockstep::distributed
