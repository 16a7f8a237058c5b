// BatchNorm's sums over samples in the reproducible mode (nn/exact_sum.h,
// docs/reproducible.md): each sample's channel sums are computed alone
// (batch 1, so they do not depend on the batch the sample came in), added
// exactly, and summed exactly over the ranks by the reducer (null: this
// rank's samples only).
#pragma once

#include <string_view>
#include <vector>

#include "nn/backend.h"
#include "nn/batch_stats_reducer.h"
#include "nn/exact_sum.h"

namespace lockstep::nn {

// x: (N, C, spatial). Returns 2 C + 1 values: sum x and sum x^2 per
// channel, then the count of values per channel.
std::vector<double> exact_batch_stats(Backend& backend, const BatchNormGeometry& g, const float* x,
                                      BatchStatsReducer* reducer, std::string_view what);

// x, dy (and masked, when not null): (N, C, spatial); coef as
// batchnorm_backward_sums takes it. Returns (2, C): sum dy, sum dy * xhat
// per channel; adds each sample's sum dy * xhat to dweight and sum dy to
// dbias (the parameter gradients' exact sums).
std::vector<double> exact_backward_sums(Backend& backend, const BatchNormGeometry& g,
                                        const float* x, const float* masked, const float* dy,
                                        const float* coef, BinnedSum& dweight, BinnedSum& dbias,
                                        BatchStatsReducer* reducer, std::string_view what);

}  // namespace lockstep::nn
