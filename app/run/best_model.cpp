#include "app/run/best_model.h"

namespace lockstep::app {

bool BestModelTracker::update(int64_t epoch, double accuracy) {
  if (best_epoch_ > 0 && !(accuracy > best_accuracy_)) return false;
  best_epoch_ = epoch;
  best_accuracy_ = accuracy;
  return true;
}

bool BestModelTracker::should_stop(int64_t epoch) const {
  return patience_ > 0 && best_epoch_ > 0 && epoch - best_epoch_ >= patience_;
}

nlohmann::json BestModelTracker::to_json() const {
  return {{"epoch", best_epoch_}, {"validation_accuracy", best_accuracy_}};
}

void BestModelTracker::restore(const nlohmann::json& j) {
  if (!j.is_object()) return;
  best_epoch_ = j.value("epoch", int64_t{0});
  best_accuracy_ = j.value("validation_accuracy", -1.0);
}

}  // namespace lockstep::app
