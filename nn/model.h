// Model: a sequence of layers (each may be a tree: nn/layers/sequential.h,
// residual_block.h) and a loss. It owns the activations of the last
// forward and runs backward last layer first, announcing each parameter's
// gradient as soon as it is ready: that is what lets communication (in
// distributed/, which nn/ knows nothing of) overlap the rest of backward.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/backend.h"
#include "nn/layer.h"

namespace lockstep::nn {

enum class LossKind {
  kNll,           // the model ends in log-softmax; loss = -logp[label]
  kCrossEntropy,  // the model ends in raw logits; fused softmax cross-entropy
};

std::string to_string(LossKind loss);

class Model {
 public:
  // input_shape is one sample's (C, H, W).
  Model(std::string name, Shape input_shape, std::vector<std::unique_ptr<Layer>> layers,
        LossKind loss);

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }
  LossKind loss_kind() const { return loss_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Every parameter, in forward order.
  const std::vector<Parameter*>& parameters() const { return params_; }
  int64_t parameter_count() const;
  // Every buffer (BatchNorm running statistics), in forward order.
  const std::vector<Buffer*>& buffers() const { return buffers_; }
  // Output features per sample (the number of classes).
  int64_t output_size() const;

  // (Re)creates all parameters on `device` (PyTorch default distributions).
  void reset_parameters(uint64_t seed, Device device);

  // x: (N, C, H, W) on the backend's device; returns the output (N, classes).
  const Tensor& forward(Backend& backend, const Tensor& x, const ForwardContext& ctx);
  // Loss of the last forward against labels (device int32). When want_grad,
  // also prepares d(grad_scale * loss_sum)/d(output) for backward().
  LossStats loss(Backend& backend, const int32_t* labels, float grad_scale, bool want_grad);
  // The same loss with its gradient prepared for backward(), added to
  // *totals (a LossTotals in the backend's memory) instead of returned: the
  // host does not wait for it (Backend::nll_loss_accumulate).
  void accumulate_loss(Backend& backend, const int32_t* labels, float grad_scale,
                       LossTotals* totals);
  // The loss of each sample of the last forward, each computed alone (so it
  // does not depend on the batch): the terms of the reproducible mode's
  // exact loss sums.
  std::vector<double> sample_losses(Backend& backend, const int32_t* labels);
  // Label smoothing of the cross-entropy loss (PyTorch's label_smoothing),
  // in [0, 1); InputError for a model whose loss is nll.
  void set_label_smoothing(float e);
  // Backward from the gradient loss() prepared. on_grad_ready(i) is called
  // with the index (into parameters()) of each gradient once it is final,
  // last layer first.
  void backward(Backend& backend, const std::function<void(size_t)>& on_grad_ready = {});

  // One line per node of the tree (children indented) with its output shape
  // and parameter count.
  std::string summary() const;

 private:
  std::string name_;
  Shape input_shape_;
  std::vector<std::unique_ptr<Layer>> layers_;
  LossKind loss_;
  float label_smoothing_ = 0.0f;
  std::vector<Parameter*> params_;
  std::vector<Buffer*> buffers_;
  std::unordered_map<const Parameter*, size_t> param_index_;  // into params_
  const Tensor* input_ = nullptr;                             // the last forward's input
  std::vector<Tensor> activations_;                           // output of each layer
  Tensor grad_a_, grad_b_;                                    // ping-pong activation gradients
};

}  // namespace lockstep::nn
