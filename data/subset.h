// A deterministic subset of a dataset that keeps its class proportions, for
// sets stored in class order (image folders), where the first n samples
// would hold only the first classes.
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace lockstep::data {

// n samples (all when n <= 0 or n >= size()): class c contributes
// round(n * count_c / size) of its samples (largest remainders get the
// rounding, ties to the lower label), spread evenly over the class's
// samples in their order; the chosen samples keep the dataset's order.
// Depends only on the labels, so every rank takes the same subset.
Dataset stratified_subset(const Dataset& dataset, int64_t n);

}  // namespace lockstep::data
