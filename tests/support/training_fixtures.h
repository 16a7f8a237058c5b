// Small models and synthetic batches for the DistributedOptimizer, loss
// scaling and SyncBatchNorm tests, single- and multi-rank: pixels and label
// of a sample are a fixed function of its id, so every rank (and a
// one-process reference) builds the same samples; a model's state flattened
// for comparisons.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"
#include "nn/model_zoo.h"
#include "nn/tensor.h"

namespace lockstep::distributed::testing {

// build_model("custom", layers) for 10 classes, its weights drawn from seed.
inline std::unique_ptr<nn::Model> custom_model(const std::vector<std::string>& layers,
                                               const nn::Shape& input, uint64_t seed,
                                               nn::Device device = nn::Device::kCpu) {
  auto m = nn::build_model("custom", layers, input, 10);
  m->reset_parameters(seed, device);
  return m;
}

// A small CNN on 1x8x8 images with every kind of parameterised layer.
inline std::unique_ptr<nn::Model> small_model(uint64_t seed, nn::Device device = nn::Device::kCpu) {
  return custom_model({"conv2d out=4 kernel=3", "relu", "max_pool2d kernel=2", "flatten",
                       "linear out=16", "relu", "linear out=10", "log_softmax"},
                      {1, 8, 8}, seed, device);
}

struct Batch {
  nn::Tensor x;                 // (ids, sample shape)
  std::vector<int32_t> labels;  // (7 id) % 10
  std::vector<int64_t> ids;
};

// Pixel i of sample id is sin(0.37 (id * sample size + i)) + offset.
inline Batch make_batch(const std::vector<int64_t>& ids, const nn::Shape& sample = {1, 8, 8},
                        float offset = 0.0f) {
  nn::Shape shape{static_cast<int64_t>(ids.size())};
  shape.insert(shape.end(), sample.begin(), sample.end());
  Batch b{nn::Tensor(shape), {}, ids};
  const int64_t size = b.x.numel() / std::max<int64_t>(1, static_cast<int64_t>(ids.size()));
  for (size_t n = 0; n < ids.size(); ++n) {
    for (int64_t i = 0; i < size; ++i) {
      b.x.data()[static_cast<int64_t>(n) * size + i] =
          std::sin(0.37f * static_cast<float>(ids[n] * size + i)) + offset;
    }
    b.labels.push_back(static_cast<int32_t>((ids[n] * 7) % 10));
  }
  return b;
}

inline std::vector<int64_t> range_ids(int64_t first, int64_t count) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < count; ++i) ids.push_back(first + i);
  return ids;
}

// The parameters' values (and the buffers' after them, with buffers), in order.
inline std::vector<float> values(const nn::Model& m, bool with_buffers = false) {
  std::vector<float> out;
  for (const nn::Parameter* p : m.parameters()) {
    out.insert(out.end(), p->value.data(), p->value.data() + p->value.numel());
  }
  if (!with_buffers) return out;
  for (const nn::Buffer* b : m.buffers()) {
    out.insert(out.end(), b->value.data(), b->value.data() + b->value.numel());
  }
  return out;
}

inline std::vector<float> grads(const nn::Model& m) {
  std::vector<float> out;
  for (const nn::Parameter* p : m.parameters()) {
    out.insert(out.end(), p->grad.data(), p->grad.data() + p->grad.numel());
  }
  return out;
}

}  // namespace lockstep::distributed::testing
