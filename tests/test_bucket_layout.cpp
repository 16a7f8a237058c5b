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

// Three parameters of 2, 3 and 4 values, one bucket each, all values i + 1.
struct ThreeParams {
  nn::Parameter a{"a", Tensor({2}), Tensor({2})}, b{"b", Tensor({3}), Tensor({3})},
      c{"c", Tensor({4}), Tensor({4})};
  std::vector<nn::Parameter*> list{&a, &b, &c};
  ThreeParams() {
    for (nn::Parameter* p : list) {
      for (int64_t i = 0; i < p->grad.numel(); ++i) p->grad.data()[i] = static_cast<float>(i + 1);
    }
  }
};

TEST(BucketLayout, ViewsPutGradientsInTheirSlotsAndGiveThemBack) {
  ThreeParams p;
  {
    BucketLayout layout(p.list, Device::kCpu, 1.0, 0.0, /*buffers=*/true, /*views=*/true);
    ASSERT_EQ(layout.size(), 3u);
    EXPECT_EQ(layout.bucket_of(2), 0u);  // reverse order
    EXPECT_EQ(layout.bucket_of(0), 2u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(layout.in_bucket(i)) << i;
      EXPECT_EQ(p.list[i]->grad.data(), layout.slot(i)) << i;
    }
    EXPECT_EQ(layout.buffer(0).data()[3], 4.0f);  // values moved in with the gradient
    EXPECT_EQ(layout.names(1).allreduce, "allreduce bucket 1");
    p.b.grad.data()[0] = 9.0f;  // writes land in the bucket
    EXPECT_EQ(layout.buffer(1).data()[0], 9.0f);
  }
  EXPECT_FALSE(p.b.grad.is_view());
  EXPECT_EQ(p.b.grad.data()[0], 9.0f);
  EXPECT_EQ(p.c.grad.data()[3], 4.0f);
}

TEST(BucketLayout, PackCopiesThenAddsAndUnpackFillsEveryCopy) {
  ThreeParams p;
  auto backend = nn::make_cpu_backend(1);
  BucketLayout layout(p.list, Device::kCpu, 1.0, 25.0, /*buffers=*/true, /*views=*/false);
  ASSERT_EQ(layout.size(), 1u);  // c, b, a at offsets 0, 4, 7
  EXPECT_EQ(layout.bucket(0).offsets, (std::vector<int64_t>{0, 4, 7}));
  EXPECT_FALSE(layout.in_bucket(0));
  for (size_t i = 0; i < 3; ++i) layout.pack(i, /*first_pass=*/true, *backend);
  for (size_t i = 0; i < 3; ++i) layout.pack(i, /*first_pass=*/false, *backend);
  const std::vector<float> packed(layout.buffer(0).data(), layout.buffer(0).data() + 9);
  EXPECT_EQ(packed, (std::vector<float>{2, 4, 6, 8, 2, 4, 6, 2, 4}));
  std::vector<float> sums(9);
  for (size_t k = 0; k < 9; ++k) sums[k] = 10.0f * static_cast<float>(k);
  layout.unpack_on_host(0, sums.data());
  EXPECT_EQ(p.c.grad.data()[3], 30.0f);
  EXPECT_EQ(p.b.grad.data()[0], 40.0f);
  EXPECT_EQ(p.a.grad.data()[1], 80.0f);
  layout.unpack_on_device(0, *backend);  // the buffer, through the backend
  EXPECT_EQ(p.a.grad.data()[1], 4.0f);
}

TEST(BucketLayout, WithoutBuffersOnlyTheAssignment) {
  ThreeParams p;
  BucketLayout layout(p.list, Device::kCpu, 1.0, 0.0, /*buffers=*/false, /*views=*/true);
  EXPECT_EQ(layout.size(), 3u);
  EXPECT_EQ(layout.slot(1), nullptr);
  EXPECT_FALSE(layout.in_bucket(1));
  EXPECT_FALSE(p.a.grad.is_view());
}

}  // namespace
}  // namespace lockstep::distributed
