// Learning-rate schedules: the base schedule (constant, step decay, cosine)
// times the data-parallel scale factor, with Horovod's gradual warmup.
#pragma once

#include <cstdint>
#include <vector>

#include "common/enum_table.h"

namespace lockstep::nn {

// The base schedule: constant, step decay at milestones, cosine to min_lr.
enum class LrScheduleKind { kConstant, kStep, kCosine };
// The factor for N workers: N (Goyal et al.), sqrt(N), or 1.
enum class LrScaling { kLinear, kSqrt, kNone };

inline constexpr EnumEntry<LrScheduleKind, const char*> kLrScheduleNames[] = {
    {LrScheduleKind::kConstant, "constant"},
    {LrScheduleKind::kStep, "step"},
    {LrScheduleKind::kCosine, "cosine"}};
inline constexpr EnumEntry<LrScaling, const char*> kLrScalingNames[] = {
    {LrScaling::kLinear, "linear"}, {LrScaling::kSqrt, "sqrt"}, {LrScaling::kNone, "none"}};

inline const char* to_string(LrScheduleKind kind) {
  return value_of(kLrScheduleNames, kind).value_or("?");
}
inline const char* to_string(LrScaling scaling) {
  return value_of(kLrScalingNames, scaling).value_or("?");
}

struct LrScheduleConfig {
  double lr = 0.01;  // base (single-worker) learning rate
  LrScheduleKind schedule = LrScheduleKind::kConstant;
  std::vector<int64_t> milestones;         // step: epochs at which lr is multiplied by gamma
  double gamma = 0.1;                      // step
  int64_t epochs = 1;                      // cosine: length of the decay, in epochs
  double min_lr = 0.0;                     // cosine: final lr (unscaled)
  LrScaling scaling = LrScaling::kLinear;  // factor applied for `workers`
  double warmup_epochs = 0.0;              // 0: no warmup
};

class LrSchedule {
 public:
  // workers: number of data-parallel workers (world size) for the scaling.
  LrSchedule(LrScheduleConfig config, int64_t workers);

  // The factor the base lr is multiplied by for this many workers.
  double scale_factor() const { return factor_; }
  // Learning rate for the given step of the given epoch (both 0-based).
  // During warmup (Horovod's LearningRateWarmupCallback formula):
  //   e = epoch + (step + 1) / steps_per_epoch
  //   lr = scaled_lr / factor * (e * (factor - 1) / warmup_epochs + 1)
  // so it rises from about the unscaled lr to the scaled one.
  double at(int64_t epoch, int64_t step, int64_t steps_per_epoch) const;

 private:
  double base_at(double epoch) const;  // scaled, without warmup
  LrScheduleConfig config_;
  double factor_ = 1.0;
};

}  // namespace lockstep::nn
