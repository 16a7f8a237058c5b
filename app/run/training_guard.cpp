#include "app/run/training_guard.h"

#include <cmath>

#include "common/error.h"

namespace lockstep::app {

void check_finite_loss(double loss, int64_t epoch, int64_t step, double lr) {
  if (std::isfinite(loss)) return;
  fail_input("training diverged: the loss is ", std::isnan(loss) ? "NaN" : "infinite", " in epoch ",
             epoch, " step ", step, " (learning rate ", lr,
             "); lower lr (or warmup_epochs, or check the data); no checkpoint of these weights "
             "was written");
}

void check_finite_state(const Checkpoint& checkpoint, int64_t epoch) {
  for (const CheckpointEntry& entry : checkpoint.entries) {
    for (float v : entry.values) {
      if (std::isfinite(v)) continue;
      fail_input("training diverged: ", entry.name, " holds ", v, " after epoch ", epoch,
                 "; lower lr (or warmup_epochs, or check the data); no checkpoint of these "
                 "weights was written");
    }
  }
}

}  // namespace lockstep::app
