// Stops a run that diverged before it writes anything of it: a non-finite
// loss ends training, and no checkpoint holds non-finite values.
#pragma once

#include <cstdint>

#include "app/checkpoint/checkpoint.h"

namespace lockstep::app {

// Throws InputError naming the epoch and step (1-based) and the learning
// rate when loss is NaN or infinite.
void check_finite_loss(double loss, int64_t epoch, int64_t step, double lr);

// Throws InputError naming the first entry with a NaN or infinite value and
// the epoch (1-based) when checkpoint holds one.
void check_finite_state(const Checkpoint& checkpoint, int64_t epoch);

}  // namespace lockstep::app
