#include "nn/layer.h"

#include <utility>

#include "nn/counter_rng.h"

namespace lockstep::nn {

namespace {
// FNV-1a: a stable 64-bit hash of a parameter name.
uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}
}  // namespace

void Layer::prepare_output(const Backend& backend, const Tensor& x, const ForwardContext& ctx,
                           Tensor& y) const {
  Shape shape = output_shape(x.shape());
  if (!writes_output(backend, x.shape(), ctx)) {
    y = Tensor::unallocated(std::move(shape), x.device());
    return;
  }
  if (y.device() != x.device() || !y.allocated()) y = Tensor({0}, x.device());
  y.resize(shape);
}

void Layer::backward_announcing(Backend& backend, const Tensor& x, const Tensor& y,
                                const Tensor& dy, Tensor* dx, const GradReady& ready) {
  backward(backend, x, y, dy, dx);
  if (!ready) return;
  const auto params = parameters();
  for (auto it = params.rbegin(); it != params.rend(); ++it) ready(**it);
}

void Layer::summarize(const Shape& input, int depth, std::vector<SummaryRow>& rows) {
  int64_t count = 0;
  for (Parameter* p : parameters()) count += p->value.numel();
  rows.push_back({depth, name(), describe(), output_shape(input), count});
}

void fill_uniform(Tensor& t, float bound, uint64_t seed, const std::string& key) {
  Tensor host(t.shape());
  const uint64_t k = hash_combine(seed, hash_name(key));
  float* p = host.data();
  for (int64_t i = 0; i < host.numel(); ++i) {
    p[i] = (2.0f * counter_uniform(k, static_cast<uint64_t>(i)) - 1.0f) * bound;
  }
  t.copy_from(host);
}

}  // namespace lockstep::nn
