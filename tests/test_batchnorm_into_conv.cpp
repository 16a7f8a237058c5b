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
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/layers/batch_norm2d.h"
#include "nn/layers/conv2d.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "support/backend_checks.h"
#include "support/one_rank.h"
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

// Two SGD steps with momentum, each followed by an evaluation forward
// (which writes every BatchNorm's output: the next training step leaves
// them unallocated again).
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
    const Tensor e = testing::random_tensor({kBatch, 3, 16, 16}, 50 + static_cast<uint64_t>(step));
    run.values.push_back(floats(model->forward(backend, e, {.training = false})));
  }
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
    // Every convolution still runs once per forward: 19 in each of 4.
    EXPECT_EQ(count(mapped, "conv2d_forward") + count(mapped, "conv2d_forward_mapped"), 76);
    EXPECT_EQ(count(apart, "conv2d_forward"), 76);
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
  EXPECT_EQ(count(mapped, "conv2d_forward"), 8);  // 1 per training step, 3 per evaluation
}

// What a container gives a BatchNorm's forward (Layer::prepare_output): no
// memory where the convolution after it takes the apply pass, so the
// unwritten output costs nothing; an allocated output wherever it writes.
TEST(BatchNormIntoConv, AnOutputLeftToTheConvolutionHoldsNoMemory) {
  Counting maps(true, Precision::kFp32), apart(false, Precision::kFp32);
  BatchNorm2d bn(16, true);
  Conv2d conv(16, 16, 3, 1, 1, false);
  bn.set_name("layer1.0.bn1");
  bn.reset_parameters(1, Device::kCpu);
  conv.reset_parameters(2, Device::kCpu);
  bn.map_into(conv);
  const Tensor x = testing::random_tensor({4, 16, 8, 8}, 9);
  testing::OneRank ranks;
  const ForwardContext training{.training = true}, evaluation{.training = false},
      sync{.training = true, .batch_stats = &ranks};

  Tensor y = Tensor({4, 16, 8, 8});
  bn.prepare_output(maps, x, training, y);
  EXPECT_FALSE(y.allocated());
  EXPECT_EQ(y.data(), nullptr);
  EXPECT_EQ(y.shape(), x.shape());  // the next layer's input shape all the same
  // The smaller last batch keeps it so.
  const Tensor last = testing::random_tensor({3, 16, 8, 8}, 10);
  bn.prepare_output(maps, last, training, y);
  EXPECT_FALSE(y.allocated());
  EXPECT_EQ(y.shape(), last.shape());

  // Where the BatchNorm writes: evaluation, SyncBatchNorm, a backend that
  // maps nothing, a BatchNorm without a convolution after it.
  BatchNorm2d alone(16, true);
  alone.reset_parameters(1, Device::kCpu);
  for (const auto& [what, layer, backend, ctx] :
       {std::tuple{"evaluation", &bn, &maps, evaluation}, std::tuple{"sync", &bn, &maps, sync},
        std::tuple{"no map", &bn, &apart, training},
        std::tuple{"alone", &alone, &maps, training}}) {
    SCOPED_TRACE(what);
    Tensor out = Tensor::unallocated({4, 16, 8, 8}, Device::kCpu);
    layer->prepare_output(*backend, x, ctx, out);
    EXPECT_TRUE(out.allocated());
    EXPECT_EQ(out.shape(), x.shape());
  }

  // The mapped forward and backward run with y unallocated: the
  // convolution's output and the gradients are those of y written.
  const auto step = [&](Backend& backend) {
    Tensor b, c;
    bn.prepare_output(backend, x, training, b);
    bn.forward(backend, x, b, training);
    conv.prepare_output(backend, b, training, c);
    conv.forward(backend, b, c, training);
    const Tensor dc = testing::random_tensor(c.shape(), 11);
    Tensor db(b.shape()), dx(x.shape());
    conv.backward(backend, b, c, dc, &db);
    bn.backward(backend, x, b, db, &dx);
    return std::vector<std::vector<float>>{floats(c), floats(dx),
                                           floats(conv.parameters()[0]->grad),
                                           floats(bn.parameters()[0]->grad)};
  };
  const auto mapped_run = step(maps);
  EXPECT_EQ(maps.count("conv2d_forward_mapped"), 1);
  EXPECT_EQ(testing::differing_bits(step(apart), mapped_run), 0u);

  // Writing into an output prepared unwritten is refused, by name.
  Tensor none = Tensor::unallocated(x.shape(), Device::kCpu);
  try {
    bn.forward(maps, x, none, evaluation);
    FAIL() << "wrote into an unallocated tensor";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("layer1.0.bn1: an unallocated output"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockstep::nn
