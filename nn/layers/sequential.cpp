#include "nn/layers/sequential.h"

#include "common/error.h"
#include "nn/layers/batch_norm2d.h"

namespace lockstep::nn {

void Sequential::add(std::string local_name, std::unique_ptr<Layer> layer) {
  for (const Child& c : children_) {
    if (c.local_name == local_name) fail_input("duplicate layer name ", name(), ".", local_name);
  }
  if (!children_.empty()) pair_batchnorm_conv(*children_.back().layer, *layer);
  children_.push_back({std::move(local_name), std::move(layer)});
  set_name(name());
}

void Sequential::set_name(std::string name) {
  for (Child& c : children_)
    c.layer->set_name(name.empty() ? c.local_name : name + "." + c.local_name);
  Layer::set_name(std::move(name));
}

Shape Sequential::output_shape(const Shape& input) const {
  Shape shape = input;
  for (const Child& c : children_) shape = c.layer->output_shape(shape);
  return shape;
}

void Sequential::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  LOCKSTEP_CHECK(!children_.empty(), "forward of an empty sequential ", name());
  activations_.resize(children_.size() - 1);
  const Tensor* in = &x;
  for (size_t i = 0; i < children_.size(); ++i) {
    Tensor& out = i + 1 == children_.size() ? y : activations_[i];
    if (&out != &y) children_[i].layer->prepare_output(backend, *in, ctx, out);
    children_[i].layer->forward(backend, *in, out, ctx);
    in = &out;
  }
}

void Sequential::backward_announcing(Backend& backend, const Tensor& x, const Tensor& y,
                                     const Tensor& dy, Tensor* dx, const GradReady& ready) {
  for (Tensor* t : {&spare_->a, &spare_->b}) {
    if (t->device() != x.device()) *t = Tensor({0}, x.device());
  }
  const Tensor* g = &dy;
  Tensor* spare[2] = {&spare_->a, &spare_->b};
  int next = 0;
  for (size_t i = children_.size(); i-- > 0;) {
    const Tensor& in = i == 0 ? x : activations_[i - 1];
    const Tensor& out = i + 1 == children_.size() ? y : activations_[i];
    Tensor* d = nullptr;
    if (i > 0) {
      d = spare[next];
      next ^= 1;
      d->resize(in.shape());
    } else {
      d = dx;
    }
    children_[i].layer->backward_announcing(backend, in, out, *g, d, ready);
    g = d;
  }
}

std::vector<Layer*> Sequential::children() const {
  std::vector<Layer*> out;
  for (const Child& c : children_) out.push_back(c.layer.get());
  return out;
}

void Sequential::reset_scratch(Device device) {
  for (Tensor& a : activations_) a = Tensor({0}, device);
  spare_->a = Tensor({0}, device);
  spare_->b = Tensor({0}, device);
}

namespace {

void share_at(const std::vector<Layer*>& layers, size_t depth,
              std::vector<std::shared_ptr<SpareGradients>>& pairs) {
  if (pairs.size() <= depth) pairs.push_back(std::make_shared<SpareGradients>());
  for (Layer* layer : layers) {
    if (auto* s = dynamic_cast<Sequential*>(layer)) s->set_spare_gradients(pairs[depth]);
    if (const auto* c = dynamic_cast<const Composite*>(layer)) {
      share_at(c->children(), depth + 1, pairs);
    }
  }
}

}  // namespace

void share_spare_gradients(const std::vector<Layer*>& layers) {
  std::vector<std::shared_ptr<SpareGradients>> pairs;
  share_at(layers, 0, pairs);
}

void Sequential::summarize(const Shape& input, int depth, std::vector<SummaryRow>& rows) {
  Layer::summarize(input, depth, rows);
  summarize_children(input, depth + 1, rows);
}

void Sequential::summarize_children(const Shape& input, int depth, std::vector<SummaryRow>& rows) {
  Shape shape = input;
  for (Child& c : children_) {
    c.layer->summarize(shape, depth, rows);
    shape = c.layer->output_shape(shape);
  }
}

}  // namespace lockstep::nn
