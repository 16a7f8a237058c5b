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

void check_batch_labels(std::span<const int32_t> labels, int64_t classes, int64_t epoch,
                        int64_t step) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= 0 && labels[i] < classes) continue;
    fail_input("label ", labels[i], " of row ", i, " in epoch ", epoch, " step ", step,
               " is outside [0, ", classes,
               "); check that the data set's labels match the model's number of classes");
  }
}

void check_loss_totals(const nn::LossTotals& totals, int64_t epoch, int64_t first_step,
                       int64_t passes_per_step, const std::function<double(int64_t)>& lr_at) {
  const auto step_of = [&](double batch) {
    return (static_cast<int64_t>(batch) - 1) / passes_per_step;  // 0-based, in the epoch
  };
  if (totals.first_non_finite > 0) {
    const int64_t step = step_of(totals.first_non_finite);
    check_finite_loss(totals.non_finite_loss, epoch, first_step + step + 1, lr_at(step));
  }
  if (totals.bad_labels > 0) {
    fail_input(totals.bad_labels, " labels in epoch ", epoch, " from step ",
               first_step + step_of(totals.first_bad_label) + 1,
               " on were outside the model's classes; check that the data set's labels match "
               "the model's number of classes");
  }
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
