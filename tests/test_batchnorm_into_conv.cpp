// A BatchNorm2d followed by the Conv2d that alone reads its output (the
// next layer of a Sequential, as in every residual block, or of a model)
// leaves its apply pass to the convolution where the backend maps its input
// (Backend::conv2d_maps_input): training gives the bits of the two passes
// apart (outputs, losses, every parameter, gradient and running
// statistic), the mapped ops run where the pairs are, and evaluation does
// not map.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "support/backend_checks.h"
#include "support/op_names.h"

namespace lockstep::nn {
namespace {

// The CPU backend, naming its ops; `maps` false: it maps no convolution's
// input, so every BatchNorm writes its output.
class Counting final : public testing::OpNames {
 public:
  Counting(bool maps, Precision precision)
      : OpNames(make_cpu_backend({.threads = 2, .precision = precision})), maps_(maps) {}
  bool conv2d_maps_input(const Conv2dGeometry& g) const override {
    return maps_ && OpNames::conv2d_maps_input(g);
  }

 private:
  bool maps_;
};

struct Training {
  std::vector<std::vector<float>> values;  // outputs, then every parameter, gradient, buffer
  std::vector<std::string> ops;
};

std::vector<float> floats(const Tensor& t) {
  return {t.data(), t.data() + t.numel()};
}

// Two SGD steps with momentum, then an evaluation forward.
Training train(const std::string& name, const std::vector<std::string>& specs, bool maps,
               Precision precision) {
  Counting backend(maps, precision);
  auto model = build_model(name, specs, {3, 16, 16}, 10);
  model->reset_parameters(5, Device::kCpu);
  OptimizerConfig oc;
  oc.momentum = 0.9f;
  auto optimizer = make_optimizer(oc, model->parameters(), Device::kCpu);
  constexpr int64_t kBatch = 6;
  std::vector<int32_t> labels(kBatch);
  std::vector<int64_t> ids(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) {
    labels[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % 10);
    ids[static_cast<size_t>(i)] = i;
  }
  Training run;
  for (int step = 0; step < 2; ++step) {
    const Tensor x = testing::random_tensor({kBatch, 3, 16, 16}, 40 + static_cast<uint64_t>(step));
    run.values.push_back(floats(model->forward(
        backend, x, {.training = true, .seed = 3, .epoch = 0, .sample_ids = ids.data()})));
    const double loss =
        model->loss(backend, labels.data(), 1.0f / static_cast<float>(kBatch), true).loss_sum;
    run.values.push_back({static_cast<float>(loss)});
    model->backward(backend);
    optimizer->step(backend, 0.05f);
  }
  const Tensor x = testing::random_tensor({kBatch, 3, 16, 16}, 50);
  run.values.push_back(floats(model->forward(backend, x, {.training = false})));
  for (const Parameter* p : model->parameters()) {
    run.values.push_back(floats(p->value));
    run.values.push_back(floats(p->grad));
  }
  for (const Buffer* b : model->buffers()) run.values.push_back(floats(b->value));
  run.ops = backend.ops();
  return run;
}

int count(const Training& r, const std::string& op) {
  return static_cast<int>(std::count(r.ops.begin(), r.ops.end(), op));
}

TEST(BatchNormIntoConv, ResNetTrainsToTheSameBitsWithTheApplyInTheConvolution) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(to_string(precision));
    const Training apart = train("resnet20", {}, false, precision);
    const Training mapped = train("resnet20", {}, true, precision);
    EXPECT_EQ(testing::differing_bits(apart.values, mapped.values), 0u);
    // resnet20: 9 blocks, each bn1 (+ReLU) into conv2; 2 training steps.
    EXPECT_EQ(count(mapped, "conv2d_forward_mapped"), 18);
    EXPECT_EQ(count(mapped, "conv2d_backward_filter_mapped"), 18);
    EXPECT_EQ(count(apart, "conv2d_forward_mapped"), 0);
    // Every convolution still runs once per forward: 19 in each of 3.
    EXPECT_EQ(count(mapped, "conv2d_forward") + count(mapped, "conv2d_forward_mapped"), 57);
    EXPECT_EQ(count(apart, "conv2d_forward"), 57);
  }
}

// At a model's top level too, with and without the ReLU; a BatchNorm
// before something else (pooling) writes its output.
TEST(BatchNormIntoConv, AModelsConsecutiveLayersPairAsASequentialsDo) {
  const std::vector<std::string> specs = {"conv2d out=16 kernel=3 pad=1 bias=false",
                                          "batchnorm2d relu=true",
                                          "conv2d out=16 kernel=3 pad=1",
                                          "batchnorm2d",
                                          "conv2d out=16 kernel=3 pad=1 bias=false",
                                          "batchnorm2d relu=true",
                                          "max_pool2d kernel=2",
                                          "flatten",
                                          "linear out=10"};
  const Training apart = train("custom", specs, false, Precision::kFp32);
  const Training mapped = train("custom", specs, true, Precision::kFp32);
  EXPECT_EQ(testing::differing_bits(apart.values, mapped.values), 0u);
  EXPECT_EQ(count(mapped, "conv2d_forward_mapped"), 4);  // 2 pairs, 2 steps
  EXPECT_EQ(count(mapped, "conv2d_backward_filter_mapped"), 4);
  EXPECT_EQ(count(mapped, "conv2d_forward"), 5);  // 1 per training step, 3 in evaluation
}

}  // namespace
}  // namespace lockstep::nn
