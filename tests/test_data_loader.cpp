// BatchLoader: order, last partial batch, values, resume, errors from the
// worker, early destruction, speed.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "common/error.h"
#include "data/batch_loader.h"
#include "data/catalog.h"
#include "data/sampler.h"
#include "support/dataset_files.h"

namespace lockstep::data {
namespace {

// 0, 1, ..., n - 1.
std::vector<int64_t> first_indices(int64_t n) {
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), 0);
  return indices;
}

TEST(LoaderBatches, CoverIndicesInOrderWithValuesAndPartialLastBatch) {
  const Dataset ds = testing::synthetic_dataset(50, 1, 6, 5);
  const std::vector<int64_t> indices = {7, 3, 49, 0, 0, 12, 25, 8, 30, 41, 2};
  BatchLoaderOptions options;
  options.batch_size = 4;
  options.normalization = mnist_normalization();
  BatchLoader loader(ds, indices, options);
  EXPECT_EQ(loader.num_batches(), 3);
  const PixelTransform t(1, mnist_normalization());
  Batch batch;
  std::vector<int64_t> seen;
  std::vector<int64_t> sizes;
  while (loader.next(batch)) {
    EXPECT_EQ(batch.index, static_cast<int64_t>(sizes.size()));
    sizes.push_back(batch.size());
    ASSERT_EQ(batch.images.shape(), (nn::Shape{batch.size(), 1, 6, 5}));
    ASSERT_EQ(batch.sample_ids.size(), batch.labels.size());
    for (int64_t i = 0; i < batch.size(); ++i) {
      const int64_t id = batch.sample_ids[static_cast<size_t>(i)];
      seen.push_back(id);
      EXPECT_EQ(batch.labels[static_cast<size_t>(i)], ds.labels[static_cast<size_t>(id)]);
      for (int64_t p = 0; p < 30; ++p) {
        ASSERT_FLOAT_EQ(batch.images.data()[i * 30 + p], t.value(0, ds.image(id)[p]));
      }
    }
  }
  EXPECT_EQ(seen, indices);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 3}));
  EXPECT_FALSE(loader.next(batch));  // stays at the end
}

TEST(LoaderBatches, DropLastBatchAndResumeMidEpoch) {
  const Dataset ds = testing::synthetic_dataset(20, 1, 2, 2);
  const std::vector<int64_t> indices = first_indices(20);
  BatchLoaderOptions options;
  options.batch_size = 6;
  options.drop_last_batch = true;
  options.start_batch = 1;
  BatchLoader loader(ds, indices, options);
  EXPECT_EQ(loader.num_batches(), 3);
  Batch batch;
  std::vector<int64_t> firsts;
  while (loader.next(batch)) {
    EXPECT_EQ(batch.size(), 6);
    firsts.push_back(batch.sample_ids[0]);
  }
  EXPECT_EQ(firsts, (std::vector<int64_t>{6, 12}));
  options.start_batch = 0;
  BatchLoader empty(ds, {}, options);
  EXPECT_EQ(empty.num_batches(), 0);
  EXPECT_FALSE(empty.next(batch));
  options.start_batch = 4;
  EXPECT_THROW(BatchLoader(ds, indices, options), InputError);
}

TEST(LoaderBatches, AugmentationIndependentOfBatchPosition) {
  const Dataset ds = testing::synthetic_dataset(16, 3, 8, 8);
  BatchLoaderOptions options;
  options.normalization = cifar10_normalization();
  options.augmentation = cifar10_augmentation();
  options.seed = 11;
  options.epoch = 4;
  const int64_t pixels = ds.image_bytes();
  // Sample 5 alone, and sample 5 in the middle of a bigger batch.
  options.batch_size = 1;
  BatchLoader alone(ds, {5}, options);
  options.batch_size = 3;
  BatchLoader inside(ds, {9, 2, 5, 1}, options);
  Batch a, b;
  ASSERT_TRUE(alone.next(a));
  ASSERT_TRUE(inside.next(b));
  for (int64_t p = 0; p < pixels; ++p)
    EXPECT_EQ(a.images.data()[p], b.images.data()[2 * pixels + p]);
  // And it equals the transform with the keyed draw.
  const PixelTransform t(3, cifar10_normalization(), cifar10_augmentation());
  std::vector<float> expect(static_cast<size_t>(pixels));
  t.apply(ds.image(5), 8, 8, 11, 4, 5, expect.data());
  for (int64_t p = 0; p < pixels; ++p)
    EXPECT_EQ(a.images.data()[p], expect[static_cast<size_t>(p)]);
}

TEST(LoaderErrors, WorkerExceptionIsRethrownByNext) {
  const Dataset ds = testing::synthetic_dataset(10, 1, 2, 2);
  BatchLoaderOptions options;
  options.batch_size = 2;
  BatchLoader loader(ds, {0, 1, 2, 99, 4}, options);
  Batch batch;
  ASSERT_TRUE(loader.next(batch));  // batch 0 is fine
  EXPECT_TRUE(testing::throws_input_error([&] { loader.next(batch); },
                                          {"synthetic", "sample index 99", "10 samples"}));
}

TEST(LoaderLifetime, EarlyDestructionDoesNotHang) {
  const Dataset ds = testing::synthetic_dataset(200, 1, 28, 28);
  const std::vector<int64_t> indices = first_indices(200);
  BatchLoaderOptions options;
  options.batch_size = 3;
  for (int stop_after = 0; stop_after < 4; ++stop_after) {
    BatchLoader loader(ds, indices, options);
    Batch batch;
    for (int k = 0; k < stop_after; ++k) ASSERT_TRUE(loader.next(batch));
  }  // destructors join while the worker waits for a free buffer
  options.prefetch = 0;
  EXPECT_THROW(BatchLoader(ds, indices, options), InputError);
  options.prefetch = 1;
  options.batch_size = 0;
  EXPECT_THROW(BatchLoader(ds, indices, options), InputError);
}

// A full epoch of an MNIST-sized set: every sample delivered exactly once,
// in the sampler's order. The time is printed, not asserted (it says
// nothing on a loaded machine).
TEST(LoaderThroughput, SixtyThousandMnistImagesEachDeliveredOnceInOrder) {
  const Dataset ds = testing::synthetic_dataset(60000, 1, 28, 28);
  DistributedSampler sampler(ds.size(), 0, 1, true, 1);
  BatchLoaderOptions options;
  options.batch_size = 64;
  options.normalization = mnist_normalization();
  const auto start = std::chrono::steady_clock::now();
  BatchLoader loader(ds, sampler.indices(), options);
  Batch batch;
  std::vector<int64_t> delivered;
  double checksum = 0.0;
  while (loader.next(batch)) {
    delivered.insert(delivered.end(), batch.sample_ids.begin(), batch.sample_ids.end());
    checksum += batch.images.data()[0];
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(delivered, sampler.indices());
  EXPECT_NE(checksum, 0.0);
  RecordProperty("loader_seconds", std::to_string(seconds));
  std::printf("[ info ] 60000 MNIST images through the loader in %.3f s\n", seconds);
}

}  // namespace
}  // namespace lockstep::data
