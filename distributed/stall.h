// Stall watchdog settings and reports: what a communicator does when one of
// its collectives waits too long, so that a hang never goes silent.
//
// A collective waits when some rank has not reached it yet: that rank is
// still computing, writing a checkpoint, stuck, dead without the launcher
// noticing, or issuing different collectives (a different step count, an
// extra metric allreduce). After `warning_seconds` every waiting rank reports
// its wait (operation, sequence number, label, seconds), and rank 0 also
// names the ranks that have not reported waiting in the same collective (as
// Horovod's stall inspector does); so does rank 1 when rank 0 is one of them
// (rank 0 stuck writing its files says nothing itself), on its own, less
// frequent schedule. Each names the ranks it has not heard from: a rank that
// entered less than half the warning time ago counts as missing. After
// `abort_seconds` the job ends.
//
// The label is free text the trainer sets before its collectives
// ("step 1234 bucket 3", "epoch 2 eval metrics"); it appears in every report.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lockstep::distributed {

// One stall event, seen by one rank.
struct StallReport {
  int rank = 0;           // the rank that reports
  std::string operation;  // "allreduce", "broadcast", "allgather", "barrier"
  // Collectives issued on this communicator before this one; the same on
  // every rank that reached the same collective.
  uint64_t sequence = 0;
  std::string label;            // the stall label when the wait was reported
  double waited_seconds = 0.0;  // how long this rank has waited so far
  bool aborting = false;        // abort_seconds passed: the job ends after the callback
  // Rank 0, or rank 1 when rank 0 is missing (ranks_known true): ranks that
  // have not reported waiting in this collective yet, and one entry per rank
  // that reported waiting in a different collective ("rank 2 in broadcast
  // #56 [load]").
  bool ranks_known = false;
  std::vector<int> missing_ranks;
  std::vector<std::string> elsewhere;

  // One line without a trailing newline, e.g.
  // "rank 0: stall: allreduce #1234 [step 1234 bucket 3] has waited 60.0 s;
  //  missing ranks: 3 (...)".
  std::string message() const;
};

struct StallPolicy {
  // Report a waiting collective after this many seconds; rank 0 repeats its
  // report every this many seconds, the other ranks after 2, 4, 8... times
  // it. 0 disables warnings.
  double warning_seconds = 60.0;
  // End the whole job (Communicator::abort with exit code 1) once a
  // collective has waited this long. 0 = never.
  double abort_seconds = 0.0;
  // Called on the waiting thread for each report (also once with aborting
  // set, just before the job ends). Must not throw and should be quick.
  // Empty: print "lockstep: " + report.message() as one line to stderr.
  std::function<void(const StallReport&)> on_stall;
  // How long a waiting rank busy-polls before it starts sleeping between
  // polls (in seconds). Short collectives complete inside this window at
  // full speed; longer waits leave the core to compute threads.
  double spin_seconds = 0.002;

  // True when either limit is set (collectives are then polled).
  bool enabled() const { return warning_seconds > 0.0 || abort_seconds > 0.0; }
  // Throws InputError naming the field when a value is negative or not finite.
  void validate() const;
};

// Formats a list of ranks compactly: "0-3, 5, 7-8".
std::string format_rank_list(const std::vector<int>& ranks);

}  // namespace lockstep::distributed
