// Batches gathered in the backend's memory (Backend::gather_batch,
// app/run/train_batches.h) against the host loader (data/batch_loader.h):
// the same bits with and without crop/flip, the last partial batch, rows
// with a bad id, the choice between resident and host batches, and bad
// indices and labels named.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "app/run/train_batches.h"
#include "common/error.h"
#include "data/batch_loader.h"
#include "data/transform.h"
#include "nn/layers/dropout.h"
#include "support/counting_backend.h"
#include "support/cpu_backend.h"
#include "support/dataset_files.h"

namespace lockstep {
namespace {

// The (C, 256) table of the loader's transform.
std::vector<float> table_of(const data::PixelTransform& t, int64_t channels) {
  std::vector<float> table;
  for (int64_t c = 0; c < channels; ++c) {
    for (int v = 0; v < 256; ++v) table.push_back(t.value(c, static_cast<uint8_t>(v)));
  }
  return table;
}

nn::GatherGeometry geometry(const data::Dataset& ds, int64_t batch, const data::Augmentation& aug,
                            uint64_t seed, int64_t epoch) {
  return {.batch = batch,
          .samples = ds.size(),
          .channels = ds.channels,
          .height = ds.height,
          .width = ds.width,
          .crop_padding = aug.crop_padding,
          .horizontal_flip = aug.horizontal_flip,
          .seed = seed,
          .epoch = epoch};
}

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// 403 ids (repeats included) over 3 x 8 x 9 images, with the CIFAR crop and
// flip and without, on 1 and 3 threads (the latter splits the rows): the
// loader's images and labels, bit for bit.
TEST(GatherBatch, MatchesTheHostLoaderBitForBit) {
  const data::Dataset ds = testing::synthetic_dataset(40, 3, 8, 9, "synthetic/train");
  const data::Normalization norm{{0.4f, 0.5f, 0.6f}, {0.2f, 0.25f, 0.3f}};
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 403; ++i) ids.push_back((i * 17 + 5) % ds.size());
  for (const int threads : {1, 3}) {
    const auto backend = testing::test_cpu_backend(threads);
    for (const data::Augmentation aug : {data::Augmentation{}, data::cifar10_augmentation()}) {
      const data::PixelTransform transform(ds.channels, norm, aug);
      data::Batch want;
      data::fill_batch(ds, ids, transform, 11, 3, want);
      const std::vector<float> table = table_of(transform, ds.channels);
      nn::Tensor y(want.images.shape());
      std::vector<int32_t> labels(ids.size(), 99);
      backend->gather_batch(geometry(ds, static_cast<int64_t>(ids.size()), aug, 11, 3), ids.data(),
                            ds.images.data(), ds.labels.data(), table.data(), y.data(),
                            labels.data());
      const std::string what = std::to_string(threads) + " threads, crop " +
                               std::to_string(aug.crop_padding) + ", flip " +
                               std::to_string(aug.horizontal_flip);
      EXPECT_TRUE(same_bits(y.data(), want.images.data(), y.numel())) << what;
      EXPECT_EQ(labels, want.labels) << what;
    }
  }
}

// A row whose id is outside the data set reads nothing: the value of pixel
// 0 everywhere and label -1; the other rows are what they should be.
TEST(GatherBatch, RowWithABadIdGetsPaddingAndLabelMinusOne) {
  const data::Dataset ds = testing::synthetic_dataset(5, 2, 3, 4, "synthetic/train");
  const data::PixelTransform transform(2, {{0.1f, 0.2f}, {0.3f, 0.4f}});
  const std::vector<float> table = table_of(transform, 2);
  const std::vector<int64_t> ids = {-1, 2, 5, int64_t{1} << 40, 4};
  const auto backend = testing::test_cpu_backend(1);
  nn::Tensor y({5, 2, 3, 4});
  std::vector<int32_t> labels(5, 99);
  backend->gather_batch(geometry(ds, 5, {}, 0, 0), ids.data(), ds.images.data(), ds.labels.data(),
                        table.data(), y.data(), labels.data());
  EXPECT_EQ(labels, (std::vector<int32_t>{-1, ds.labels[2], -1, -1, ds.labels[4]}));
  data::Batch good;
  data::fill_batch(ds, std::vector<int64_t>{2, 4}, transform, 0, 0, good);
  for (const int64_t row : {0, 2, 3}) {
    for (int64_t c = 0; c < 2; ++c) {
      for (int64_t i = 0; i < 12; ++i) {
        EXPECT_EQ(y.data()[row * 24 + c * 12 + i], table[static_cast<size_t>(c * 256)])
            << "row " << row << " channel " << c << " pixel " << i;
      }
    }
  }
  EXPECT_TRUE(same_bits(y.data() + 24, good.images.data(), 24));
  EXPECT_TRUE(same_bits(y.data() + 4 * 24, good.images.data() + 24, 24));
}

app::TrainBatchOptions batch_options(int64_t batch_size) {
  app::TrainBatchOptions o;
  o.batch_size = batch_size;
  o.normalization = data::cifar10_normalization();
  o.augmentation = data::cifar10_augmentation();
  o.seed = 21;
  o.classes = 10;
  return o;
}

// Two epochs of 23 indices (repeats included) in batches of 8: 8, 8 and the
// last 7, the same images, labels and sample ids from resident and host
// batches; the resident ones also give the ids in backend memory, and ask
// nothing of the host.
TEST(TrainBatches, ResidentAndHostBatchesAreTheSameBits) {
  const data::Dataset ds = testing::synthetic_dataset(30, 3, 6, 7, "synthetic/train");
  const auto backend = testing::test_cpu_backend(2);
  const auto resident = app::make_train_batches(ds, *backend, batch_options(8), 1024);
  const auto host = app::make_train_batches(ds, *backend, batch_options(8), 0);
  ASSERT_NE(resident->describe().find("resident"), std::string::npos) << resident->describe();
  ASSERT_NE(host->describe().find("host"), std::string::npos) << host->describe();
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < 23; ++i) order.push_back((i * 7 + epoch * 3) % ds.size());
    order[22] = order[0];  // the sampler's padding repeats samples
    resident->start_epoch(order, epoch);
    host->start_epoch(order, epoch);
    for (const int64_t size : {8, 8, 7}) {
      const app::StepBatch r = resident->next(), h = host->next();
      ASSERT_EQ(r.size, size);
      ASSERT_EQ(h.size, size);
      ASSERT_EQ(r.images->shape(), h.images->shape());
      EXPECT_TRUE(same_bits(r.images->data(), h.images->data(), r.images->numel()))
          << "epoch " << epoch;
      EXPECT_EQ(std::vector<int32_t>(r.labels, r.labels + size),
                std::vector<int32_t>(h.labels, h.labels + size));
      EXPECT_EQ(std::vector<int64_t>(r.sample_ids, r.sample_ids + size),
                std::vector<int64_t>(h.sample_ids, h.sample_ids + size));
      ASSERT_NE(r.device_sample_ids, nullptr);
      EXPECT_EQ(std::vector<int64_t>(r.device_sample_ids, r.device_sample_ids + size),
                std::vector<int64_t>(h.sample_ids, h.sample_ids + size));
      EXPECT_TRUE(r.host_labels.empty());
      EXPECT_EQ(h.device_sample_ids, nullptr);
      EXPECT_EQ(h.host_labels.size(), static_cast<size_t>(size));
    }
    EXPECT_THROW(resident->next(), Error);
    EXPECT_THROW(host->next(), Error);
  }
}

// Resident: the data set, its labels and the table are uploaded once, each
// epoch uploads its order once, and a batch is one gather with no host
// traffic.
TEST(TrainBatches, ResidentUploadsOncePerEpochAndNothingPerBatch) {
  const data::Dataset ds = testing::synthetic_dataset(30, 3, 5, 5, "synthetic/train");
  testing::CountingBackend backend(testing::test_cpu_backend(1));
  const auto batches = app::make_train_batches(ds, backend, batch_options(4), 1024);
  EXPECT_EQ(backend.host_traffic(), (nn::HostTraffic{.writes = 3}));
  std::vector<int64_t> order(30);
  for (int64_t i = 0; i < 30; ++i) order[static_cast<size_t>(i)] = 29 - i;
  batches->start_epoch(order, 0);
  EXPECT_EQ(backend.host_traffic(), (nn::HostTraffic{.writes = 4}));
  for (int b = 0; b < 8; ++b) batches->next();
  EXPECT_EQ(backend.host_traffic(), (nn::HostTraffic{.writes = 4}));
}

TEST(TrainBatches, ResidentOnlyWhenTheDataSetFitsTheLimit) {
  const data::Dataset ds = testing::synthetic_dataset(30, 3, 6, 7, "synthetic/train");
  const auto backend = testing::test_cpu_backend(1);
  const double mib = app::resident_mib(ds);
  EXPECT_GT(mib * 1024 * 1024, 30.0 * (3 * 6 * 7 + 4 + 8));
  const auto off = app::make_train_batches(ds, *backend, batch_options(8), 0);
  EXPECT_NE(off->describe().find("resident_data_mb = 0"), std::string::npos) << off->describe();
  const auto over = app::make_train_batches(ds, *backend, batch_options(8), mib * 0.99);
  EXPECT_NE(over->describe().find("synthetic/train: 0.0"), std::string::npos) << over->describe();
  EXPECT_NE(over->describe().find(" MiB left of resident_data_mb"), std::string::npos)
      << over->describe();
  EXPECT_FALSE(over->resident());
  const auto fits = app::make_train_batches(ds, *backend, batch_options(8), mib);
  EXPECT_NE(fits->describe().find("resident data set"), std::string::npos) << fits->describe();
  EXPECT_TRUE(fits->resident());
}

TEST(TrainBatches, BadIndexOrLabelIsAnInputErrorNamingTheDataSet) {
  data::Dataset ds = testing::synthetic_dataset(30, 3, 4, 4, "synthetic/train");
  const auto backend = testing::test_cpu_backend(1);
  const auto batches = app::make_train_batches(ds, *backend, batch_options(8), 1024);
  try {
    batches->start_epoch({0, 30}, 0);
    ADD_FAILURE() << "index 30 of 30 samples accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("synthetic/train: sample index 30"), std::string::npos)
        << e.what();
  }
  ds.labels[7] = 12;
  try {
    app::make_train_batches(ds, *backend, batch_options(8), 1024);
    ADD_FAILURE() << "label 12 of a 10-class model accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("memory: label 12 of sample 7"), std::string::npos)
        << e.what();
  }
}

// Dropout with the batch's ids in backend memory: the same mask as with
// host ids, and no host write.
TEST(TrainBatches, DropoutWithDeviceIdsCopiesNothing) {
  testing::CountingBackend backend(testing::test_cpu_backend(1));
  const std::vector<int64_t> ids = {4, 9, 1};
  nn::Tensor x({3, 6}), y_host({3, 6}), y_device({3, 6});
  for (float& v : x.span()) v = 1.0f;
  nn::Dropout a(0.5f, false), b(0.5f, false);
  a.forward(backend, x, y_host,
            {.training = true, .seed = 5, .epoch = 1, .sample_ids = ids.data()});
  EXPECT_EQ(backend.host_traffic(), (nn::HostTraffic{.writes = 1}));
  b.forward(backend, x, y_device,
            {.training = true, .seed = 5, .epoch = 1, .device_sample_ids = ids.data()});
  EXPECT_EQ(backend.host_traffic(), (nn::HostTraffic{.writes = 1}));
  EXPECT_TRUE(same_bits(y_host.data(), y_device.data(), 18));
  int dropped = 0;
  for (float v : y_device.span()) dropped += v == 0.0f ? 1 : 0;
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, 18);
}

}  // namespace
}  // namespace lockstep
