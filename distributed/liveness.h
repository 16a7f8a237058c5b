// Liveness: a lost node ends the job in seconds, whether or not a collective
// is waiting on it.
//
// A node can vanish without closing its sockets (power loss, a kernel panic,
// a partition, a frozen process): to MPI that looks like a slow collective
// until the stall limit. The monitor keeps its own TCP connections, one
// between rank 0 and every other rank, beside MPI, and a thread on each
// rank that sends a heartbeat byte every `heartbeat_seconds` and watches for
// the peer's:
//
//   rank 0  <-- heartbeats -->  rank 1, rank 2, ...   (a star, 2 sockets a rank)
//
// Rank 0's heartbeats are probes that the ranks answer at once, so rank 0
// also knows each link's round trip (slow_link_line names a slow one).
// - a connection that closes without a goodbye (the peer crashed or was
//   killed) is a loss at once;
// - a peer silent for `timeout_seconds` (frozen, partitioned, powered off)
//   is a loss then.
// Rank 0 reports every lost rank grouped by node ("node node1 (ranks 2-3)")
// and ends the job; a rank that loses rank 0 reports that it is cut off and
// ends itself, so no rank is left running on the far side of a partition.
// A slow but live rank keeps sending heartbeats from its own thread: only
// the stall watchdog (distributed/stall.h) ends a job for slowness.
// The thread is named kLivenessThreadName (`top -H`, gdb, /proc/PID/task):
// it runs once this rank's connections are made.
#pragma once

#include <algorithm>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace lockstep::distributed {

inline constexpr const char* kLivenessThreadName = "ls-liveness";

struct LivenessPolicy {
  // Seconds between heartbeats.
  double heartbeat_seconds = 1.0;
  // A peer silent this long is lost (0: no liveness monitor).
  double timeout_seconds = 15.0;
  // Start-up: how long rank 0 waits for every rank to connect.
  double connect_seconds = 60.0;

  bool enabled() const { return timeout_seconds > 0.0; }
  // Once one peer is lost, a peer silent this long is reported with it:
  // half the timeout, at least three heartbeats, at most the timeout (the
  // ranks of a frozen node fall silent up to a heartbeat apart).
  double companion_seconds() const {
    return std::min(timeout_seconds, std::max(3.0 * heartbeat_seconds, timeout_seconds / 2.0));
  }
  // Throws InputError naming the field when a value is negative, not finite,
  // or the heartbeat is not shorter than the timeout.
  void validate() const;
};

// What a monitor saw when it declared peers lost.
struct LivenessLoss {
  int reporter = 0;  // the rank that reports
  std::string reporter_node;
  std::vector<int> ranks;                // lost ranks (rank 0 alone when a rank lost rank 0)
  std::vector<std::string> nodes;        // their nodes, in the order of `ranks`
  std::vector<std::string> whole_nodes;  // nodes all of whose ranks are lost
  bool closed = false;                   // a connection closed (else: silence)
  double silent_seconds = 0.0;

  // One line without a trailing newline, e.g. "rank 0 (node0): lost node
  // node1 (ranks 2-3): silent for 15.0 s (frozen, cut off by the network
  // or powered off); ending the job", or "... lost rank 3 on node1: ...".
  std::string message() const;
};

// Ranks named by node, in order of first appearance: "node node1 (ranks 2,
// 3)" for a node all of whose ranks are listed (`hosts`: every rank's node),
// "rank 5 on node2" otherwise, comma-joined.
std::string ranks_by_node(const std::vector<int>& ranks, const std::vector<std::string>& hosts);

// The start-up error when ranks could not reach rank 0's liveness listener
// (`absent`, as rank 0 saw it; every rank says the same), e.g. "liveness:
// node node1 (ranks 2, 3) could not connect to rank 0 (node0) at 192.0.2.1
// port 4000 within 60 s: is TCP ...".
std::string unreached_line(const std::vector<int>& absent, const std::vector<std::string>& hosts,
                           const std::string& addresses, int port, double seconds);

// Heartbeat round trips as rank 0 measured them since the last look, in
// seconds, per rank: the longest and the median (0: rank 0 itself, or not
// measured yet), and each rank's node.
struct LinkTimes {
  std::vector<double> round_trip;  // longest
  std::vector<double> typical;     // median
  std::vector<std::string> nodes;
};

// Names a node whose link is slow: the longest round trips of all its ranks
// (the shortest of them stands for the node) are over `floor_seconds` and
// over `factor` times the fastest other node's median (a median, so that a
// moment of scheduling noise on a busy machine does not hide the slow link).
// "slow link: node node1 (ranks 2, 3): heartbeat round trip 412 ms, fastest
// node 0.3 ms"; empty when none is.
std::string slow_link_line(const LinkTimes& times, double floor_seconds = 0.05,
                           double factor = 10.0);

class LivenessMonitor {
 public:
  // Called once, on the monitor's thread, when peers are lost; the default
  // prints message() to stderr and ends the job (abort_job, exit code 1).
  using OnLoss = std::function<void(const LivenessLoss&)>;

  // Collective over `comm` (size > 1): rank 0 listens on an ephemeral TCP
  // port of every IPv4 interface, broadcasts its addresses, and every rank
  // connects. Throws LibraryError on every rank, naming the ranks and nodes
  // that could not connect, when some rank cannot reach rank 0.
  LivenessMonitor(Communicator& comm, LivenessPolicy policy, OnLoss on_loss = {});
  // Sends a goodbye to the peers (so that they do not take this rank's exit
  // for a crash) and stops the thread.
  ~LivenessMonitor();
  LivenessMonitor(const LivenessMonitor&) = delete;

  // Rank 0: each rank's longest heartbeat round trip since the last call
  // (rank 0 probes one rank at a time, each heartbeat period, and the rank
  // answers at once from its monitor thread: a long round trip is a slow or
  // congested link, not a busy rank). Other ranks: empty. Thread-safe.
  LinkTimes take_link_times();
  LivenessMonitor& operator=(const LivenessMonitor&) = delete;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Returns a monitor when the job has more than one rank and the policy is
// enabled, else null.
std::unique_ptr<LivenessMonitor> start_liveness(Communicator& comm, const LivenessPolicy& policy,
                                                LivenessMonitor::OnLoss on_loss = {});

}  // namespace lockstep::distributed
