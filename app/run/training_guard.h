// Stops a run that diverged before it writes anything of it: a non-finite
// loss ends training, and no checkpoint holds non-finite values.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "app/checkpoint/checkpoint.h"
#include "nn/loss_totals.h"

namespace lockstep::app {

// Throws InputError naming the epoch and step (1-based) and the learning
// rate when loss is NaN or infinite.
void check_finite_loss(double loss, int64_t epoch, int64_t step, double lr);

// Throws InputError naming the epoch and step (1-based), the row and the
// label when a label of the batch is outside [0, classes). The labels are
// host values: checking them costs the device nothing.
void check_batch_labels(std::span<const int32_t> labels, int64_t classes, int64_t epoch,
                        int64_t step);

// The checks of an epoch's loss totals read back from the backend (they
// hold the first batch whose loss was not finite and the rows whose label
// was out of range). Batch b (1-based) of the epoch belongs to step
// first_step + (b - 1) / passes_per_step + 1 of the run; lr_at(i) is the
// learning rate of the epoch's step i (0-based). A non-finite loss throws
// as check_finite_loss does; a bad label throws InputError naming its step.
void check_loss_totals(const nn::LossTotals& totals, int64_t epoch, int64_t first_step,
                       int64_t passes_per_step, const std::function<double(int64_t)>& lr_at);

// Throws InputError naming the first entry with a NaN or infinite value and
// the epoch (1-based) when checkpoint holds one.
void check_finite_state(const Checkpoint& checkpoint, int64_t epoch);

}  // namespace lockstep::app
