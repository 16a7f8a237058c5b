// Layer: one node of a model tree, forward and backward side by side. A leaf
// is one operation; a composite (Sequential, ResidualBlock) runs its
// children. Parameters and buffers are named like PyTorch's state_dict
// ("layer1.0.conv1.weight", "layer1.0.bn1.running_var") so checkpoints and
// logs speak the same names.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/tensor.h"

namespace lockstep::nn {

class BinnedSum;

struct Parameter {
  std::string name;  // "conv1.weight"
  Tensor value;
  Tensor grad;  // same shape; overwritten by each backward
  // Reproducible mode (nn/exact_sum.h): when set, backward adds the
  // gradient of each sample to it and leaves grad as scratch.
  BinnedSum* exact = nullptr;
};

// Non-trainable state (BatchNorm's running statistics): saved in
// checkpoints and broadcast from rank 0 like the weights, never updated by
// an optimizer.
struct Buffer {
  std::string name;  // "bn1.running_mean"
  Tensor value;
};

class BatchStatsReducer;

// Called with each parameter whose gradient is final.
using GradReady = std::function<void(const Parameter&)>;

// One row of a model summary: a layer at some depth of the tree.
struct SummaryRow {
  int depth = 0;
  std::string name, what;
  Shape output;  // per batch (N, ...)
  int64_t parameters = 0;
};

// What a forward pass needs to know besides its input.
struct ForwardContext {
  // Training mode: BatchNorm normalises with the batch statistics and
  // updates its running statistics, dropout drops. Evaluation mode: running
  // statistics, no dropout.
  bool training = false;
  uint64_t seed = 0;                    // run seed: dropout masks derive from it
  uint64_t epoch = 0;                   // dropout masks change every epoch
  const int64_t* sample_ids = nullptr;  // host, one dataset index per batch row
  // The same ids in the backend's memory when the batch was gathered there
  // (Backend::gather_batch), else null: dropout then copies nothing.
  const int64_t* device_sample_ids = nullptr;
  // When not null (training only), BatchNorm layers reduce their batch
  // statistics across ranks through it (SyncBatchNorm); null: per-rank.
  BatchStatsReducer* batch_stats = nullptr;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // The name parameters are prefixed with ("conv1"); set by the model.
  const std::string& name() const { return name_; }
  // Composites also name their children ("layer1.0" -> "layer1.0.conv1").
  virtual void set_name(std::string name) { name_ = std::move(name); }
  // Position in the model; distinguishes the dropout streams of layers.
  int64_t index() const { return index_; }
  void set_index(int64_t index) { index_ = index; }

  // Short human description: "conv2d(1->10, k5, s1, p0)".
  virtual std::string describe() const = 0;
  // Output shape (N, ...) for an input shape (N, ...); throws InputError on
  // a shape this layer cannot take.
  virtual Shape output_shape(const Shape& input) const = 0;
  // y is prepared by the caller (prepare_output).
  virtual void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) = 0;
  // False when the forward of an input of this shape leaves its output
  // unwritten, to the next layer (BatchNorm2d::map_into).
  virtual bool writes_output(const Backend& /*backend*/, const Shape& /*input*/,
                             const ForwardContext& /*ctx*/) const {
    return true;
  }
  // y for forward(backend, x, y, ctx), on x's device: resized to
  // output_shape(x.shape()), or unallocated (Tensor::unallocated) where
  // writes_output says it stays unwritten.
  void prepare_output(const Backend& backend, const Tensor& x, const ForwardContext& ctx,
                      Tensor& y) const;
  // Writes the parameter gradients and, when dx is not null, the input
  // gradient (already sized like x). x and y are the tensors of the last
  // forward.
  virtual void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                        Tensor* dx) = 0;

  // Runs backward(), then calls ready() for each of this layer's
  // parameters, last first. Composites override it to announce each
  // child's gradients as soon as that child is done, so the order over the
  // whole model is the reverse of parameters().
  virtual void backward_announcing(Backend& backend, const Tensor& x, const Tensor& y,
                                   const Tensor& dy, Tensor* dx, const GradReady& ready);

  // In forward order (a composite: its children's, in order).
  virtual std::vector<Parameter*> parameters() { return {}; }
  virtual std::vector<Buffer*> buffers() { return {}; }
  // Appends this layer's summary rows for an input shape (a composite: its
  // own row, then its children's one level deeper).
  virtual void summarize(const Shape& input, int depth, std::vector<SummaryRow>& rows);
  // Creates parameters on `device` with PyTorch's default initialisation
  // distribution, drawn from a counter-based generator keyed by (seed, name).
  virtual void reset_parameters(uint64_t seed, Device device) {}

 private:
  std::string name_;
  int64_t index_ = 0;
};

// Fills t (any device) with U(-bound, bound) from a counter-based generator
// keyed by (seed, key).
void fill_uniform(Tensor& t, float bound, uint64_t seed, const std::string& key);

}  // namespace lockstep::nn
