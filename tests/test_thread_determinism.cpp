// Training results do not depend on the thread count: two SGD steps of the
// zoo's models (dropout included) on 1, 2 and 3 threads give bit-identical
// weights and gradients, in fp32 and in bf16.
#include <gtest/gtest.h>

#include <vector>

#include "nn/backend.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "support/backend_checks.h"

namespace lockstep::nn {
namespace {

struct Case {
  const char* model;
  Shape input;  // one sample (C, H, W)
  int64_t batch;
};

// Values of every parameter and gradient after two steps on `threads`.
std::vector<std::vector<float>> two_steps(const Case& c, int threads, Precision precision) {
  auto backend = make_cpu_backend({.threads = threads, .precision = precision});
  auto model = build_model(c.model, {}, c.input, 10);
  model->reset_parameters(5, Device::kCpu);
  OptimizerConfig oc;
  oc.momentum = 0.9f;
  auto optimizer = make_optimizer(oc, model->parameters(), Device::kCpu);
  Shape shape{c.batch};
  shape.insert(shape.end(), c.input.begin(), c.input.end());
  std::vector<int32_t> labels(static_cast<size_t>(c.batch));
  std::vector<int64_t> ids(static_cast<size_t>(c.batch));
  for (int64_t i = 0; i < c.batch; ++i) {
    labels[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % 10);
    ids[static_cast<size_t>(i)] = i;
  }
  for (int step = 0; step < 2; ++step) {
    const Tensor x = testing::random_tensor(shape, 40 + static_cast<uint64_t>(step));
    model->forward(*backend, x,
                   {.training = true, .seed = 3, .epoch = 0, .sample_ids = ids.data()});
    model->loss(*backend, labels.data(), 1.0f / static_cast<float>(c.batch), true);
    model->backward(*backend);
    optimizer->step(*backend, 0.05f);
  }
  std::vector<std::vector<float>> out;
  for (const Parameter* p : model->parameters()) {
    out.emplace_back(p->value.data(), p->value.data() + p->value.numel());
    out.emplace_back(p->grad.data(), p->grad.data() + p->grad.numel());
  }
  return out;
}

TEST(ThreadDeterminism, ZooModelsTrainBitIdenticallyOnOneTwoAndThreeThreads) {
  for (const Case& c : {Case{"mnist_net", {1, 28, 28}, 64}, Case{"alexnet_cifar", {3, 32, 32}, 16},
                        Case{"resnet20", {3, 32, 32}, 6}}) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
      const auto one = two_steps(c, 1, precision);
      for (int threads : {2, 3}) {
        EXPECT_EQ(testing::differing_bits(one, two_steps(c, threads, precision)), 0u)
            << c.model << " (" << to_string(precision) << "): values differ between 1 and "
            << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::nn
