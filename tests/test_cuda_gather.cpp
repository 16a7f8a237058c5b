// The training set resident on the GPU (Backend::gather_batch,
// app/run/train_batches.h) against the CPU: gathered batches (crop, flip,
// normalisation, labels, rows with a bad id) and dropout masks from ids in
// device memory are the CPU's bits and make no host traffic; steady
// training steps of mnist_net and resnet20 on resident batches make no host
// wait, no read and no write.
//
// Without a visible GPU every test here skips and says why.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#if LOCKSTEP_HAVE_CUDA

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "app/run/train_batches.h"
#include "data/transform.h"
#include "nn/backend.h"
#include "nn/cuda/cuda_device_memory.h"
#include "nn/loss_totals.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "nn/tensor.h"
#include "support/cuda_test_util.h"
#include "support/dataset_files.h"

namespace lockstep::nn {
namespace {

using namespace cuda_test;  // support/cuda_test_util.h

// `bytes` of host memory in a new device tensor.
Tensor device_bytes(Backend& gpu, const void* host, size_t bytes) {
  Tensor t({static_cast<int64_t>((bytes + 3) / 4) + 1}, Device::kCuda);
  gpu.upload(host, t.data(), bytes);
  return t;
}

// 37 rows over 40 samples of 3 x 32 x 32 with the CIFAR crop and flip, two
// of them with ids outside the set: the CPU's images and labels, bit for
// bit, with no host traffic.
TEST_F(CudaBackendTest, GatheredBatchIsTheCpuBitsWithoutHostTraffic) {
  const data::Dataset ds = lockstep::testing::synthetic_dataset(40, 3, 32, 32, "synthetic/train");
  const data::PixelTransform transform(3, data::cifar10_normalization(),
                                       data::cifar10_augmentation());
  std::vector<float> table;
  for (int64_t c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) table.push_back(transform.value(c, static_cast<uint8_t>(v)));
  }
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 37; ++i) ids.push_back((i * 13 + 3) % ds.size());
  ids[4] = -1, ids[20] = ds.size();
  const GatherGeometry g{.batch = 37,
                         .samples = ds.size(),
                         .channels = 3,
                         .height = 32,
                         .width = 32,
                         .crop_padding = 4,
                         .horizontal_flip = true,
                         .seed = 17,
                         .epoch = 2};
  Tensor y({37, 3, 32, 32});
  std::vector<int32_t> labels(37);
  cpu().gather_batch(g, ids.data(), ds.images.data(), ds.labels.data(), table.data(), y.data(),
                     labels.data());
  const Tensor images_d = device_bytes(gpu(), ds.images.data(), ds.images.size());
  const Tensor labels_d = device_bytes(gpu(), ds.labels.data(), ds.labels.size() * 4);
  const Tensor table_d = device_bytes(gpu(), table.data(), table.size() * 4);
  const Tensor ids_d = device_bytes(gpu(), ids.data(), ids.size() * 8);
  Tensor yd({37, 3, 32, 32}, Device::kCuda), labels_out({37}, Device::kCuda);
  const HostTraffic before = gpu().host_traffic();
  gpu().gather_batch(g, reinterpret_cast<const int64_t*>(ids_d.data()),
                     reinterpret_cast<const uint8_t*>(images_d.data()),
                     reinterpret_cast<const int32_t*>(labels_d.data()), table_d.data(), yd.data(),
                     reinterpret_cast<int32_t*>(labels_out.data()));
  EXPECT_EQ(gpu().host_traffic() - before, HostTraffic{});
  expect_close(y, yd, kExact, "gathered images");
  std::vector<int32_t> got(37);
  gpu().download(labels_out.data(), got.data(), got.size() * 4);
  EXPECT_EQ(got, labels);
  EXPECT_EQ(got[4], -1);
  EXPECT_EQ(got[20], -1);
}

// Dropout with the ids in device memory: the CPU's mask and output, and no
// copy of the ids (dropout_forward with host ids makes one write).
TEST_F(CudaBackendTest, DropoutWithDeviceIdsIsTheCpuBitsWithoutAWrite) {
  const DropoutGeometry g{
      .batch = 5, .channels = 6, .spatial = 4, .p = 0.4f, .seed = 3, .stream = 9};
  const std::vector<int64_t> ids = {7, 1, 30, 2, 7};
  const Tensor x = random_tensor({5, 6, 2, 2}, 4);
  Tensor y({5, 6, 2, 2}), mask({5, 6});
  cpu().dropout_forward(g, ids.data(), x.data(), y.data(), mask.data());
  const Tensor xd = to_device(x);
  const Tensor ids_d = device_bytes(gpu(), ids.data(), ids.size() * 8);
  Tensor yd({5, 6, 2, 2}, Device::kCuda), maskd({5, 6}, Device::kCuda);
  const HostTraffic before = gpu().host_traffic();
  gpu().dropout_forward_device_ids(g, reinterpret_cast<const int64_t*>(ids_d.data()), xd.data(),
                                   yd.data(), maskd.data());
  EXPECT_EQ(gpu().host_traffic() - before, HostTraffic{});
  expect_close(mask, maskd, kExact, "mask");
  expect_close(y, yd, kExact, "y");
}

// Four SGD steps of a zoo model on resident batches as the trainer runs
// them (app/run/train_batches.h; dropout reads the ids in device memory):
// from the second step on, no host wait, no read and no write.
void expect_resident_steps_copy_nothing(Backend& gpu, const std::string& name) {
  const data::Dataset ds = lockstep::testing::synthetic_dataset(100, 1, 28, 28, "synthetic/train");
  app::TrainBatchOptions options;
  options.batch_size = 16;
  options.normalization = data::mnist_normalization();
  options.seed = 5;
  options.classes = 10;
  auto batches = app::make_train_batches(ds, gpu, options, 1024);
  ASSERT_NE(batches->describe().find("resident"), std::string::npos) << batches->describe();
  auto model = build_model(name, {}, {1, 28, 28}, 10);
  model->reset_parameters(7, Device::kCuda);
  OptimizerConfig config;
  config.momentum = 0.9f;
  auto optimizer = make_optimizer(config, model->parameters(), Device::kCuda);
  Tensor totals({kLossTotalsFloats}, Device::kCuda);
  gpu.fill(kLossTotalsFloats, 0.0f, totals.data());
  std::vector<int64_t> order(64);
  for (int64_t i = 0; i < 64; ++i) order[static_cast<size_t>(i)] = (i * 37) % ds.size();
  batches->start_epoch(order, 0);
  HostTraffic last = gpu.host_traffic(), last_copies = cuda_tensor_copy_traffic();
  for (int step = 0; step < 4; ++step) {
    const app::StepBatch b = batches->next();
    ForwardContext ctx;
    ctx.training = true, ctx.seed = 99, ctx.epoch = 0;
    ctx.sample_ids = b.sample_ids, ctx.device_sample_ids = b.device_sample_ids;
    model->forward(gpu, *b.images, ctx);
    model->accumulate_loss(gpu, b.labels, 1.0f / static_cast<float>(b.size),
                           reinterpret_cast<LossTotals*>(totals.data()));
    model->backward(gpu);
    optimizer->step(gpu, 0.05f);
    const HostTraffic now = gpu.host_traffic(), d = now - last;
    const HostTraffic copies = cuda_tensor_copy_traffic(), dc = copies - last_copies;
    last = now, last_copies = copies;
    if (step == 0) continue;  // the first step chooses algorithms and grows buffers
    EXPECT_EQ(d.waits, 0) << name << " step " << step + 1;
    EXPECT_EQ(d.reads, 0) << name << " step " << step + 1;
    EXPECT_EQ(d.writes, 0) << name << " step " << step + 1;
    EXPECT_EQ(dc, HostTraffic{}) << name << " step " << step + 1 << ": a tensor copy";
  }
  LossTotals got;
  gpu.download(totals.data(), &got, sizeof(got));
  EXPECT_EQ(got.count, 64.0) << name;
  EXPECT_EQ(got.bad_labels, 0.0) << name;
  EXPECT_EQ(got.first_non_finite, 0.0) << name;
}

TEST_F(CudaBackendTest, ResidentTrainingStepsWaitReadAndCopyNothing) {
  expect_resident_steps_copy_nothing(gpu(), "mnist_net");
  expect_resident_steps_copy_nothing(gpu(), "resnet20");
}

}  // namespace
}  // namespace lockstep::nn

#else  // !LOCKSTEP_HAVE_CUDA

TEST(CudaGather, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("toolkit, cuDNN or NCCL not found, or LOCKSTEP_CUDA=OFF");
}

#endif
