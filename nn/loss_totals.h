// LossTotals: the running sums of a pass's losses, kept in a backend's own
// memory so that a training step adds its batch's loss without the host
// waiting for it (Backend::nll_loss_accumulate, softmax_cross_entropy_
// accumulate). The caller reads the struct back (Backend::download) when it
// reports: once per epoch, or at a progress point.
//
// add_batch_loss() is the one rule both backends apply, the CPU's on the
// host, CUDA's in a one-thread kernel, so the sums are the same doubles.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nn/host_device.h"

namespace lockstep::nn {

// Eight doubles, all zero bits when empty: Backend::fill(kLossTotalsFloats,
// 0.0f, ...) clears one. Counts are doubles (exact to 2^53), as the
// trainer's Totals keeps them.
struct LossTotals {
  double loss_sum = 0.0;  // sum over batches of each batch's loss sum (itself summed in row order)
  double correct = 0.0;   // rows whose first arg-max is their label
  double count = 0.0;     // rows with a label in [0, cols)
  double batches = 0.0;   // batches added
  // The first batch (1-based, of `batches`) whose loss sum was NaN or
  // infinite, and that sum; 0 and 0 when none was.
  double first_non_finite = 0.0;
  double non_finite_loss = 0.0;
  // Rows whose label was outside [0, cols): they add nothing (no loss, no
  // gradient) and are counted here; the first batch that had one (1-based).
  double bad_labels = 0.0;
  double first_bad_label = 0.0;
};

// The floats of a backend tensor that holds one LossTotals.
constexpr int64_t kLossTotalsFloats = static_cast<int64_t>(sizeof(LossTotals) / sizeof(float));
static_assert(sizeof(LossTotals) % sizeof(float) == 0);

// Adds one batch: loss_sum, correct and count over its rows with a valid
// label, bad_labels the rows without one.
LOCKSTEP_HOST_DEVICE inline void add_batch_loss(double loss_sum, int64_t correct, int64_t count,
                                                int64_t bad_labels, LossTotals& t) {
  t.loss_sum += loss_sum;
  t.correct += static_cast<double>(correct);
  t.count += static_cast<double>(count);
  t.batches += 1.0;
  // x - x is 0 for every finite x, NaN for NaN and the infinities.
  if (!(loss_sum - loss_sum == 0.0) && t.first_non_finite == 0.0) {
    t.first_non_finite = t.batches;
    t.non_finite_loss = loss_sum;
  }
  if (bad_labels > 0 && t.bad_labels == 0.0) t.first_bad_label = t.batches;
  t.bad_labels += static_cast<double>(bad_labels);
}

}  // namespace lockstep::nn
