// The best validation accuracy of a run so far, for keep_best (the best
// checkpoint kept apart from the newest ones) and early stopping. Restored
// on resume from the checkpoint's metadata, so a resumed run stops where an
// uninterrupted one would.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace lockstep::app {

class BestModelTracker {
 public:
  // patience: epochs without improvement before stopping (0: never stop).
  explicit BestModelTracker(int64_t patience) : patience_(patience) {}

  // Records epoch's validation accuracy; true when it beats every earlier
  // one (strictly).
  bool update(int64_t epoch, double accuracy);
  // True when patience > 0 and the best is patience or more epochs old.
  bool should_stop(int64_t epoch) const;

  int64_t best_epoch() const { return best_epoch_; }
  double best_accuracy() const { return best_accuracy_; }
  nlohmann::json to_json() const;
  // Accepts what to_json wrote, or null (a checkpoint without it).
  void restore(const nlohmann::json& j);

 private:
  int64_t patience_;
  int64_t best_epoch_ = 0;  // 0: none yet
  double best_accuracy_ = -1.0;
};

}  // namespace lockstep::app
