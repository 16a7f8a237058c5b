// Naming stragglers: a rank whose compute is persistently slower than the
// median rank's, with its node and how much slower.
//
// Each rank records its own time per optimizer step (ComputeRecorder): the
// step's wall time less the time it waited for gradient reductions, that is
// forward, backward, the optimizer step and its waits for its own loader (a
// rank starved of CPU or with slow storage loses time there too). Waits for
// the other ranks are left out, so a fast rank that waits for a slow one is
// not counted slow. At the end of an epoch one small allgather
// (gather_compute, a few dozen bytes per rank) brings every rank's figures
// to every rank; find_straggler() decides, as a pure function.
//
// "Persistently slower": the figure compared is each rank's median step
// time (as above) over the epoch. A rank whose median step is more than
// (1 + threshold) times the median rank's was that slow in at least half of
// its steps; a few slow steps (a page fault, a checkpoint) move no median.
// The median rank: ranks sorted by that figure, the one at index (n - 1) / 2
// (the lower median: of 2 ranks the faster, so the slower is measured
// against it; of 4 ranks the second fastest).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace lockstep::distributed {

// One rank's own seconds per step (as above), over one epoch.
class ComputeRecorder {
 public:
  void add(double seconds) { steps_.push_back(seconds); }
  void clear() { steps_.clear(); }
  int64_t steps() const { return static_cast<int64_t>(steps_.size()); }
  double total() const;
  double median() const;  // the lower median of the steps; 0 without steps

 private:
  std::vector<double> steps_;
};

struct RankCompute {
  int rank = 0;
  std::string node;  // the rank's host name
  int64_t steps = 0;
  double total_seconds = 0.0;        // the rank's own time over the epoch
  double median_step_seconds = 0.0;  // ComputeRecorder::median()
};

// Collective (every rank, once per epoch): every rank's figures, in rank
// order, on every rank. Node names longer than 63 bytes are cut there.
std::vector<RankCompute> gather_compute(Communicator& comm, const ComputeRecorder& mine);

struct StragglerVerdict {
  int rank = -1;           // the straggler (index into the times); -1: none
  int slowest = -1;        // the slowest rank, straggler or not; -1: no usable times
  double slowdown = 1.0;   // the slowest rank's time / the median rank's
  int over_threshold = 0;  // how many ranks are over the threshold
};

// times[i]: rank i's median step seconds (ComputeRecorder::median()). The slowest rank (the
// lowest index among equals) is the straggler when its time is more than
// (1 + threshold) times the median rank's. No straggler with fewer than two
// ranks, a median time of 0 (no steps) or threshold <= 0 (naming off; the
// slowest rank and its slowdown are still given).
StragglerVerdict find_straggler(std::span<const double> times, double threshold);

// Of gathered figures: the verdict over their median step times.
StragglerVerdict find_straggler(const std::vector<RankCompute>& ranks, double threshold);

// "straggler: rank 3 (node1) computes 1.80x the median step time" (plus
// "; 2 ranks over 1.25x" when several are over the threshold); "" when
// the verdict names none.
std::string straggler_line(const StragglerVerdict& verdict, const std::string& node,
                           double threshold);

}  // namespace lockstep::distributed
