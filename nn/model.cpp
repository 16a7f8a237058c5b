#include "nn/model.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "common/error.h"
#include "nn/layers/batch_norm2d.h"
#include "nn/layers/sequential.h"

namespace lockstep::nn {

std::string to_string(LossKind loss) {
  return loss == LossKind::kNll ? "nll" : "cross_entropy";
}

Model::Model(std::string name, Shape input_shape, std::vector<std::unique_ptr<Layer>> layers,
             LossKind loss)
    : name_(std::move(name)),
      input_shape_(std::move(input_shape)),
      layers_(std::move(layers)),
      loss_(loss) {
  if (layers_.empty()) fail_input("model ", name_, " has no layers");
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->set_index(static_cast<int64_t>(i));
    if (i > 0) pair_batchnorm_conv(*layers_[i - 1], *layers_[i]);
  }
  std::vector<Layer*> top;
  for (const auto& layer : layers_) top.push_back(layer.get());
  share_spare_gradients(top);
  // Check the shapes chain now, for a batch of one, so a bad spec fails
  // before training starts.
  Shape shape = input_shape_;
  shape.insert(shape.begin(), 1);
  for (auto& layer : layers_) shape = layer->output_shape(shape);
  if (shape.size() != 2) {
    fail_input("model ", name_, ": the last layer must produce (N, classes), got ",
               shape_string(shape));
  }
  activations_.resize(layers_.size());
}

int64_t Model::parameter_count() const {
  int64_t n = 0;
  for (const Parameter* p : params_) n += p->value.numel();
  return n;
}

int64_t Model::output_size() const {
  Shape shape = input_shape_;
  shape.insert(shape.begin(), 1);
  for (const auto& layer : layers_) shape = layer->output_shape(shape);
  return shape[1];
}

void Model::reset_parameters(uint64_t seed, Device device) {
  params_.clear();
  buffers_.clear();
  param_index_.clear();
  for (auto& layer : layers_) {
    layer->reset_parameters(seed, device);
    for (Parameter* p : layer->parameters()) {
      param_index_[p] = params_.size();
      params_.push_back(p);
    }
    for (Buffer* b : layer->buffers()) buffers_.push_back(b);
  }
  for (auto& a : activations_) a = Tensor({0}, device);
  grad_a_ = Tensor({0}, device);
  grad_b_ = Tensor({0}, device);
}

const Tensor& Model::forward(Backend& backend, const Tensor& x, const ForwardContext& ctx) {
  Shape expected = input_shape_;
  expected.insert(expected.begin(), x.ndim() ? x.dim(0) : 0);
  if (x.shape() != expected) {
    fail_input("model ", name_, ": input ", shape_string(x.shape()), " does not match ",
               shape_string(expected), " (dataset and model disagree on image size)");
  }
  input_ = &x;
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->prepare_output(backend, *in, ctx, activations_[i]);
    layers_[i]->forward(backend, *in, activations_[i], ctx);
    in = &activations_[i];
  }
  return activations_.back();
}

std::vector<double> Model::sample_losses(Backend& backend, const int32_t* labels) {
  const Tensor& out = activations_.back();
  const int64_t rows = out.dim(0), cols = out.dim(1);
  std::vector<double> losses(static_cast<size_t>(rows));
  for (int64_t s = 0; s < rows; ++s) {
    const float* row = out.data() + s * cols;
    losses[s] =
        loss_ == LossKind::kNll
            ? backend.nll_loss(1, cols, row, labels + s, 0.0f, nullptr).loss_sum
            : backend
                  .softmax_cross_entropy(1, cols, row, labels + s, 0.0f, nullptr, label_smoothing_)
                  .loss_sum;
  }
  return losses;
}

void Model::set_label_smoothing(float e) {
  if (!(e >= 0.0f && e < 1.0f)) fail_input("label_smoothing must be in [0, 1), got ", e);
  if (e > 0.0f && loss_ == LossKind::kNll) {
    fail_input("label_smoothing needs the cross_entropy loss; model ", name_,
               " uses nll (it ends in log_softmax)");
  }
  label_smoothing_ = e;
}

LossStats Model::loss(Backend& backend, const int32_t* labels, float grad_scale, bool want_grad) {
  const Tensor& out = activations_.back();
  if (want_grad) grad_a_.resize(out.shape());
  float* grad = want_grad ? grad_a_.data() : nullptr;
  if (loss_ == LossKind::kNll) {
    return backend.nll_loss(out.dim(0), out.dim(1), out.data(), labels, grad_scale, grad);
  }
  return backend.softmax_cross_entropy(out.dim(0), out.dim(1), out.data(), labels, grad_scale, grad,
                                       label_smoothing_);
}

void Model::accumulate_loss(Backend& backend, const int32_t* labels, float grad_scale,
                            LossTotals* totals) {
  const Tensor& out = activations_.back();
  grad_a_.resize(out.shape());
  if (loss_ == LossKind::kNll) {
    backend.nll_loss_accumulate(out.dim(0), out.dim(1), out.data(), labels, grad_scale,
                                grad_a_.data(), totals);
    return;
  }
  backend.softmax_cross_entropy_accumulate(out.dim(0), out.dim(1), out.data(), labels, grad_scale,
                                           grad_a_.data(), label_smoothing_, totals);
}

void Model::backward(Backend& backend, const std::function<void(size_t)>& on_grad_ready) {
  LOCKSTEP_CHECK(input_ != nullptr, "backward before forward");
  Tensor* dy = &grad_a_;
  Tensor* dx = &grad_b_;
  GradReady ready;
  if (on_grad_ready) {
    ready = [&](const Parameter& p) { on_grad_ready(param_index_.at(&p)); };
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor& x = i == 0 ? *input_ : activations_[i - 1];
    const bool need_dx = i > 0;
    if (need_dx) dx->resize(x.shape());
    layers_[i]->backward_announcing(backend, x, activations_[i], *dy, need_dx ? dx : nullptr,
                                    ready);
    std::swap(dy, dx);
  }
}

std::string Model::summary() const {
  std::ostringstream out;
  Shape shape = input_shape_;
  shape.insert(shape.begin(), 1);
  out << "model " << name_ << " (loss: " << to_string(loss_) << ")\n";
  std::vector<SummaryRow> rows;
  for (const auto& layer : layers_) {
    layer->summarize(shape, 0, rows);
    shape = layer->output_shape(shape);
  }
  size_t name_width = 13, what_width = 28;
  for (const SummaryRow& r : rows) {
    name_width = std::max(name_width, 2 * r.depth + r.name.size());
    what_width = std::max(what_width, r.what.size() + 1);
  }
  for (const SummaryRow& r : rows) {
    Shape per_sample(r.output.begin() + 1, r.output.end());
    out << "  " << std::string(2 * r.depth, ' ') << std::left
        << std::setw(static_cast<int>(name_width - 2 * r.depth)) << r.name << " "
        << std::setw(static_cast<int>(what_width)) << r.what << std::setw(18)
        << shape_string(per_sample) << r.parameters << "\n";
  }
  out << "  parameters: " << parameter_count();
  return out.str();
}

}  // namespace lockstep::nn
