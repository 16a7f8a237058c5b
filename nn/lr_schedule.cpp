#include "nn/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/error.h"

namespace lockstep::nn {

LrSchedule::LrSchedule(LrScheduleConfig config, int64_t workers) : config_(std::move(config)) {
  if (workers < 1) fail_input("lr schedule: workers must be >= 1, got ", workers);
  if (config_.lr <= 0) fail_input("lr must be > 0, got ", config_.lr);
  if (config_.warmup_epochs < 0) {
    fail_input("warmup_epochs must be >= 0, got ", config_.warmup_epochs);
  }
  switch (config_.scaling) {
    case LrScaling::kLinear:
      factor_ = static_cast<double>(workers);
      break;
    case LrScaling::kSqrt:
      factor_ = std::sqrt(static_cast<double>(workers));
      break;
    case LrScaling::kNone:
      factor_ = 1.0;
      break;
  }
  if (config_.schedule == LrScheduleKind::kStep &&
      !std::is_sorted(config_.milestones.begin(), config_.milestones.end())) {
    fail_input("lr_milestones must be increasing");
  }
  if (config_.schedule == LrScheduleKind::kCosine && config_.epochs < 1) {
    fail_input("cosine schedule needs epochs >= 1");
  }
}

double LrSchedule::base_at(double epoch) const {
  const double lr = config_.lr * factor_;
  if (config_.schedule == LrScheduleKind::kStep) {
    const auto passed = std::count_if(config_.milestones.begin(), config_.milestones.end(),
                                      [&](int64_t m) { return epoch >= static_cast<double>(m); });
    return lr * std::pow(config_.gamma, static_cast<double>(passed));
  }
  if (config_.schedule == LrScheduleKind::kCosine) {
    const double t = std::clamp(epoch / static_cast<double>(config_.epochs), 0.0, 1.0);
    const double low = config_.min_lr * factor_;
    return low + (lr - low) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
  }
  return lr;
}

double LrSchedule::at(int64_t epoch, int64_t step, int64_t steps_per_epoch) const {
  const int64_t steps = std::max<int64_t>(steps_per_epoch, 1);
  const double fractional = static_cast<double>(epoch) + static_cast<double>(step) / steps;
  const double lr =
      base_at(config_.schedule == LrScheduleKind::kStep ? static_cast<double>(epoch) : fractional);
  if (config_.warmup_epochs <= 0 || factor_ == 1.0) return lr;
  const double e = static_cast<double>(epoch) + static_cast<double>(step + 1) / steps;
  if (e >= config_.warmup_epochs) return lr;
  return lr / factor_ * (e * (factor_ - 1.0) / config_.warmup_epochs + 1.0);
}

}  // namespace lockstep::nn
