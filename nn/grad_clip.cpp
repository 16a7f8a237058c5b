#include "nn/grad_clip.h"

#include <algorithm>
#include <cmath>

namespace lockstep::nn {

double global_grad_norm(const std::vector<Parameter*>& params, float grad_scale) {
  double sum = 0.0;
  Tensor host;
  for (const Parameter* p : params) {
    const Tensor* g = &p->grad;
    if (g->device() != Device::kCpu) {
      host = Tensor(g->shape());
      host.copy_from(*g);
      g = &host;
    }
    for (const float v : g->span()) {
      const double s = static_cast<double>(grad_scale * v);
      sum += s * s;
    }
  }
  return std::sqrt(sum);
}

float clip_coefficient(double total_norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (total_norm + 1e-6)));
}

}  // namespace lockstep::nn
