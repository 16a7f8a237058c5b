// A batch a model can learn in a few steps, and mnist_net's losses while it
// does: noise with a bright band whose rows depend on the label, 30 SGD
// steps (momentum 0.9, lr 0.02, dropout on). The CPU test asserts the
// learning (tests/test_band_batch.cpp); the CUDA tests run the same steps at
// every precision against fp32 on the GPU (tests/test_cuda_precision.cpp),
// so their "it learns" bound has been seen to hold.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/backend.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"

namespace lockstep::testing {

struct BandBatch {
  nn::Tensor x;                 // (batch, 1, 28, 28), host
  std::vector<int32_t> labels;  // i % 10
  std::vector<int64_t> ids;     // i
};

// Sample i: noise plus 2 in rows 2 l + 4 and 2 l + 5 for its label l.
inline BandBatch band_batch(int64_t batch = 32) {
  BandBatch b{random_tensor({batch, 1, 28, 28}, 30), std::vector<int32_t>(batch),
              std::vector<int64_t>(batch)};
  for (int64_t i = 0; i < batch; ++i) {
    b.labels[i] = static_cast<int32_t>(i % 10), b.ids[i] = i;
    float* band = b.x.data() + i * 784 + (2 * b.labels[i] + 4) * 28;
    for (int64_t c = 0; c < 56; ++c) band[c] += 2.0f;
  }
  return b;
}

// The mean loss of each of 30 SGD steps of mnist_net (weights from seed 7)
// on one batch: x and labels in `device`'s memory, ids on the host.
inline std::vector<double> band_batch_losses(nn::Backend& backend, nn::Device device,
                                             const nn::Tensor& x, const int32_t* labels,
                                             const std::vector<int64_t>& ids) {
  const auto batch = static_cast<int64_t>(ids.size());
  auto model = nn::build_model("mnist_net", {}, {1, 28, 28}, 10);
  model->reset_parameters(7, device);
  nn::OptimizerConfig config;
  config.momentum = 0.9f;
  auto optimizer = nn::make_optimizer(config, model->parameters(), device);
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    nn::ForwardContext ctx;
    ctx.training = true, ctx.seed = 99, ctx.epoch = static_cast<uint64_t>(step);
    ctx.sample_ids = ids.data();
    model->forward(backend, x, ctx);
    losses.push_back(model->loss(backend, labels, 1.0f / static_cast<float>(batch), true).loss_sum /
                     static_cast<double>(batch));
    model->backward(backend);
    optimizer->step(backend, 0.02f);
  }
  return losses;
}

}  // namespace lockstep::testing
