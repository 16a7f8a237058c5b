#include "support/gradient_check.h"
#include "support/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace lockstep::testing {

void fill_random(nn::Tensor& t, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.span()) v = dist(rng);
}

namespace {

double objective(nn::Backend& backend, nn::Layer& layer, const nn::Tensor& x, nn::Tensor& y,
                 const nn::Tensor& r, const nn::ForwardContext& ctx) {
  layer.forward(backend, x, y, ctx);
  double f = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) f += static_cast<double>(y.data()[i]) * r.data()[i];
  return f;
}

// Compares the analytic gradient of `values` with central differences.
void check_tensor(nn::Backend& backend, nn::Layer& layer, const nn::Tensor& x, nn::Tensor& y,
                  const nn::Tensor& r, const nn::ForwardContext& ctx, nn::Tensor& values,
                  const nn::Tensor& analytic, const std::string& what, const GradCheckOptions& o) {
  int failures = 0;
  for (int64_t i = 0; i < values.numel(); ++i) {
    float& v = values.data()[i];
    if (o.kink_range >= 0 && std::fabs(v - o.kink) < o.kink_range) continue;
    const float saved = v;
    v = saved + o.step;
    const double plus = objective(backend, layer, x, y, r, ctx);
    v = saved - o.step;
    const double minus = objective(backend, layer, x, y, r, ctx);
    v = saved;
    const double numeric = (plus - minus) / (2.0 * o.step);
    const double a = analytic.data()[i];
    const double scale = std::max({std::fabs(a), std::fabs(numeric), 1.0});
    if (std::fabs(a - numeric) > o.tolerance * scale && failures++ < 10) {
      ADD_FAILURE() << layer.describe() << ": d/d " << what << "[" << i << "] analytic " << a
                    << " numeric " << numeric;
    }
  }
  EXPECT_EQ(failures, 0) << layer.describe() << ": " << failures << " mismatches in " << what;
}

}  // namespace

void check_layer_gradients(nn::Layer& layer, nn::Tensor& x, const nn::ForwardContext& ctx,
                           const GradCheckOptions& o) {
  auto backend = testing::test_cpu_backend(1);
  nn::Tensor y(layer.output_shape(x.shape()));
  nn::Tensor r(y.shape());
  fill_random(r, o.seed + 7);

  layer.forward(*backend, x, y, ctx);
  nn::Tensor dx(x.shape());
  layer.backward(*backend, x, y, r, o.check_input ? &dx : nullptr);
  // Copy analytic gradients: further forwards must not disturb them.
  std::vector<nn::Tensor> param_grads;
  for (nn::Parameter* p : layer.parameters()) param_grads.push_back(p->grad.clone());

  if (o.check_input) check_tensor(*backend, layer, x, y, r, ctx, x, dx, "input", o);
  GradCheckOptions no_kinks = o;
  no_kinks.kink_range = -1.0f;
  const auto params = layer.parameters();
  for (size_t p = 0; p < params.size(); ++p) {
    check_tensor(*backend, layer, x, y, r, ctx, params[p]->value, param_grads[p], params[p]->name,
                 no_kinks);
  }
}

}  // namespace lockstep::testing
