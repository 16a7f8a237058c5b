// `lockstep timeline summary TRACE.json`: how much of the gradient
// communication a run hid behind backward, read from a Chrome trace written
// by `--timeline` (distributed/timeline.h; merged or one rank's file).
//
// Steps: on each rank (pid), step s is the time after the end of "synchronize"
// s-1 up to the end of "synchronize" s; a span belongs to the step its start
// falls in (spans after the last synchronize are ignored). Per step:
//
//   backward  = sum of "backward" spans (main thread)
//   allreduce = sum of "allreduce" category spans (any thread)
//   hidden    = the part of the allreduce spans that overlaps a backward span
//   exposed   = the "synchronize" span: the caller waiting for communication
//   handoff   = for each bucket, its allreduce start minus the later of its
//               last "pack" end and the previous communication span's end
//               (thread wake-up; buckets without a pack span are left
//               out), plus synchronize's end minus the last
//               communication span's end (waking the caller)
//   late      = this rank's last backward end minus the earliest rank's in
//               the same step: how long the other ranks waited for it
//   hidden fraction = hidden / allreduce
//   compute   = the main thread's "compute" spans (forward, backward,
//               optimizer step) less the synchronize span inside them, plus
//               its "data wait" spans: the rank's own time (distributed/
//               stragglers.h)
//
// Stragglers: each rank's median compute per step (steps after --skip) go
// to find_straggler() (distributed/stragglers.h), with the node taken from
// the rank's process labels ("node HOST, ..."); the report names the rank
// whose median is more than --straggler-threshold over the median rank's.
//
//   | backward ........................ | synchronize |
//            | ar 0 |   | ar 1 |           | ar 2 |     comm thread
//            <-hidden->                     exposed
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace CLI {
class App;
}

namespace lockstep::app {

// One step of one rank: the figures above, in microseconds.
struct StepTimes {
  double backward = 0.0, allreduce = 0.0, hidden = 0.0, exposed = 0.0, handoff = 0.0, late = 0.0;
  double compute = 0.0;
  double backward_end = 0.0;  // timestamp of the step's last backward end (-1: none)
  int allreduces = 0;
};

struct RankSteps {
  int rank = 0;
  std::string node;  // from the process labels; "" when the trace has none
  std::vector<StepTimes> steps;
};

// The per-rank, per-step figures of a trace's events (JSON array of Chrome
// trace events), ranks in increasing order.
std::vector<RankSteps> summarize_timeline(const nlohmann::json& events);

struct TimelineSummaryArgs {
  std::string trace;
  int64_t skip = 1;                   // leading steps per rank left out of the totals (warm-up)
  bool per_step = false;              // also print one line per rank and step
  double straggler_threshold = 0.25;  // as the config key of that name
};

// The report: per rank (and all ranks) the mean per step of each figure
// and the hidden fraction, the straggler verdict ("straggler: ..."), plus a
// "timeline {...}" JSON line per rank.
std::string format_timeline_summary(const std::vector<RankSteps>& ranks,
                                    const TimelineSummaryArgs& args);

void add_timeline_summary_options(CLI::App& cmd, TimelineSummaryArgs& args);
// Reads args.trace and prints the report. Throws InputError naming the file.
int run_timeline_summary(const TimelineSummaryArgs& args);

}  // namespace lockstep::app
