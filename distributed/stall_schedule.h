// When a polled wait of a communicator warns, aborts and sleeps
// (distributed/stall.h): one rule for MPI's collectives and NCCL's waits,
// a pure function of the seconds waited, tested without either.
//
//   warnings  at warning_seconds, then every warning_seconds (kEvery: MPI's
//             rank 0 and NCCL), or at 1, 2, 4, 8... periods (kDoubling: MPI's
//             other ranks, so that a large job's stall does not flood the log);
//             a poll late by several periods warns once;
//   abort     once abort_seconds have passed (the tick that aborts does not
//             warn as well); 0 disables either;
//   pause     none while the wait is younger than spin_seconds, then
//             waited / 64 clamped to [50 us, 1 ms], a small fraction of it.
#pragma once

#include <algorithm>

#include "distributed/stall.h"

namespace lockstep::distributed {

class StallSchedule {
 public:
  enum class Repeat { kEvery, kDoubling };
  enum class Action { kNone, kWarn, kAbort };

  StallSchedule() = default;
  StallSchedule(const StallPolicy& policy, Repeat repeat)
      : warning_(policy.warning_seconds),
        abort_(policy.abort_seconds),
        next_warning_(policy.warning_seconds),
        repeat_(repeat) {}

  // What to do now, `waited` seconds into the wait (non-decreasing calls).
  Action at(double waited) {
    if (abort_ > 0.0 && waited >= abort_) return Action::kAbort;
    if (warning_ > 0.0 && waited >= next_warning_) {
      // A poll late by several periods warns once, not once per period missed.
      while (next_warning_ <= waited) {
        next_warning_ = repeat_ == Repeat::kEvery ? next_warning_ + warning_ : 2 * next_warning_;
      }
      return Action::kWarn;
    }
    return Action::kNone;
  }

  // Seconds to sleep before the next poll of a request waited on so long.
  static double pause_seconds(double waited, double spin_seconds) {
    if (waited < spin_seconds) return 0.0;
    return std::clamp(waited / 64.0, 50e-6, 1e-3);
  }

 private:
  double warning_ = 0.0, abort_ = 0.0, next_warning_ = 0.0;
  Repeat repeat_ = Repeat::kEvery;
};

}  // namespace lockstep::distributed
