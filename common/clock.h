// The one wall clock for durations reported in seconds (metrics, stats,
// benchmarks): monotonic, never adjusted.
#pragma once

#include <chrono>

namespace lockstep {

using Clock = std::chrono::steady_clock;

// Seconds elapsed since `start`.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace lockstep
