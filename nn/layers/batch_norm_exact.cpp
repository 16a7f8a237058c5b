#include "nn/layers/batch_norm_exact.h"

namespace lockstep::nn {
namespace {

std::vector<double> total(BinnedSum& sums, BatchStatsReducer* reducer, std::string_view what) {
  if (reducer != nullptr) reducer->sum_exact(sums, what);
  std::vector<double> out(static_cast<size_t>(sums.size()));
  sums.result(1.0, out.data());
  return out;
}

}  // namespace

std::vector<double> exact_batch_stats(Backend& backend, const BatchNormGeometry& g, const float* x,
                                      BatchStatsReducer* reducer, std::string_view what) {
  const int64_t C = g.channels, stride = g.channels * g.spatial;
  const BatchNormGeometry one{1, g.channels, g.spatial};
  std::vector<double> sample(static_cast<size_t>(2 * C + 1));
  sample[2 * C] = static_cast<double>(g.spatial);  // the count, exact too
  BinnedSum sums(2 * C + 1);
  for (int64_t s = 0; s < g.batch; ++s) {
    backend.batchnorm_stats(one, x + s * stride, sample.data(), sample.data() + C);
    sums.add(sample.data());
  }
  return total(sums, reducer, what);
}

std::vector<double> exact_backward_sums(Backend& backend, const BatchNormGeometry& g,
                                        const float* x, const float* masked, const float* dy,
                                        const float* coef, BinnedSum& dweight, BinnedSum& dbias,
                                        BatchStatsReducer* reducer, std::string_view what) {
  const int64_t C = g.channels, stride = g.channels * g.spatial;
  const BatchNormGeometry one{1, g.channels, g.spatial};
  std::vector<double> sample(static_cast<size_t>(2 * C));
  BinnedSum sums(2 * C);
  for (int64_t s = 0; s < g.batch; ++s) {
    const int64_t at = s * stride;
    backend.batchnorm_backward_sums(one, x + at, masked != nullptr ? masked + at : nullptr, dy + at,
                                    coef, sample.data(), sample.data() + C);
    sums.add(sample.data());
    dbias.add(sample.data());
    dweight.add(sample.data() + C);
  }
  return total(sums, reducer, what);
}

}  // namespace lockstep::nn
