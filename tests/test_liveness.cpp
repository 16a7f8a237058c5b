// The liveness monitor's policy checks and its one-line reports. The monitor
// itself runs across the nodes of a fake cluster in
// tests/cluster/cluster_test.sh (crash, freeze, partition, slow link).
#include "distributed/liveness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"
#include "distributed/liveness_socket.h"

namespace lockstep::distributed {
namespace {

TEST(Liveness, PolicyRefusesNonsense) {
  LivenessPolicy policy;
  EXPECT_NO_THROW(policy.validate());
  policy.timeout_seconds = -1;
  EXPECT_THROW(policy.validate(), InputError);
  policy.timeout_seconds = 10;
  policy.heartbeat_seconds = 10;  // not below the timeout: every peer would look silent
  try {
    policy.validate();
    FAIL() << "a heartbeat as long as the timeout was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("heartbeat_interval_s (10)"), std::string::npos)
        << e.what();
  }
  policy.timeout_seconds = 0;  // off: the heartbeat does not matter
  EXPECT_NO_THROW(policy.validate());
  EXPECT_FALSE(policy.enabled());
}

TEST(Liveness, SingleRankNeedsNoMonitor) {
  auto comm = make_single_communicator();
  EXPECT_EQ(start_liveness(*comm, LivenessPolicy{}), nullptr);
}

// Once a rank is lost, rank 0 counts with it the ranks silent for half the
// timeout: a frozen node's ranks stop up to a heartbeat apart, and the
// report must still name the node (cluster_freeze saw "lost rank 2 on
// node1" when rank 3 had beaten 0.6 s later).
TEST(Liveness, CompanionSilenceIsHalfTheTimeoutWithinBounds) {
  LivenessPolicy policy;  // heartbeat 1 s, timeout 15 s
  EXPECT_DOUBLE_EQ(policy.companion_seconds(), 7.5);
  policy.timeout_seconds = 4;  // three heartbeats are more than half
  EXPECT_DOUBLE_EQ(policy.companion_seconds(), 3.0);
  policy.heartbeat_seconds = 2;  // never past the timeout itself
  EXPECT_DOUBLE_EQ(policy.companion_seconds(), 4.0);
}

TEST(Liveness, ReportNamesAWholeNodeAndItsRanks) {
  LivenessLoss loss;
  loss.reporter = 0;
  loss.reporter_node = "node0";
  loss.ranks = {2, 3};
  loss.nodes = {"node1", "node1"};
  loss.whole_nodes = {"node1"};
  loss.silent_seconds = 15.04;
  EXPECT_EQ(loss.message(),
            "rank 0 (node0): lost node node1 (ranks 2, 3): silent for 15.0 s (frozen, cut off by "
            "the network or powered off); ending the job");
}

TEST(Liveness, ReportNamesSomeRanksOfANodeAsRanks) {
  LivenessLoss loss;
  loss.reporter = 0;
  loss.reporter_node = "a";
  loss.ranks = {3, 4, 5, 7};
  loss.nodes = {"b", "c", "c", "d"};
  loss.whole_nodes = {"c"};
  loss.closed = true;
  EXPECT_EQ(loss.message(),
            "rank 0 (a): lost rank 3 on b, node c (ranks 4, 5), rank 7 on d: the connection "
            "closed without a goodbye (crashed or killed); ending the job");
}

// Every rank names the ranks rank 0 did not hear from at start-up, by node.
TEST(Liveness, UnreachedRanksAreNamedByNode) {
  const std::vector<std::string> hosts = {"node0", "node0", "node1", "node1", "node2", "node2"};
  EXPECT_EQ(ranks_by_node({2, 3, 5}, hosts), "node node1 (ranks 2, 3), rank 5 on node2");
  EXPECT_EQ(ranks_by_node({1}, hosts), "rank 1 on node0");
  EXPECT_EQ(unreached_line({2, 3}, hosts, "192.0.2.1, 10.0.0.1", 4000, 60.0),
            "liveness: node node1 (ranks 2, 3) could not connect to rank 0 (node0) at 192.0.2.1, "
            "10.0.0.1 port 4000 within 60 s: is TCP between the nodes blocked? "
            "liveness_timeout_s = 0 turns the monitor off");
  EXPECT_EQ(unreached_line({}, hosts, "192.0.2.1", 4000, 60.0).substr(0, 44),
            "liveness: a rank could not connect to rank 0");
}

TEST(Liveness, ACutOffRankEndsItself) {
  LivenessLoss loss;
  loss.reporter = 3;
  loss.reporter_node = "node1";
  loss.ranks = {0};
  loss.nodes = {"node0"};
  loss.silent_seconds = 16;
  EXPECT_EQ(loss.message(),
            "rank 3 (node1): lost rank 0 on node0: silent for 16.0 s (frozen, cut off by the "
            "network or powered off); ending this rank");
}

// Medians a tenth of the longest round trips.
LinkTimes links(std::vector<double> round_trip, std::vector<std::string> nodes) {
  std::vector<double> typical;
  for (double t : round_trip) typical.push_back(t / 10);
  return {std::move(round_trip), std::move(typical), std::move(nodes)};
}

TEST(Liveness, SlowLinkNamesTheNodeWhoseRoundTripsAreAllLong) {
  // Rank 1 shares rank 0's node (loopback); ranks 2 and 3 sit behind a slow link.
  EXPECT_EQ(slow_link_line(links({0, 0.0004, 0.41, 0.35}, {"node0", "node0", "node1", "node1"})),
            "slow link: node node1 (ranks 2, 3): heartbeat round trip 350 ms, fastest node 0.0 ms");
  // One slow rank on a node whose other rank answers fast: a busy rank, not the link.
  EXPECT_EQ(slow_link_line(links({0, 0.0004, 0.41, 0.002}, {"a", "a", "b", "b"})), "");
  // Rank 0 alone on its node: only the floor decides.
  EXPECT_EQ(slow_link_line(links({0, 0.25}, {"node0", "node1"})),
            "slow link: node node1 (rank 1): heartbeat round trip 250 ms");
  EXPECT_EQ(slow_link_line(links({0, 0.045}, {"node0", "node1"})), "");
  // Over the floor, but not 10x the fastest node's median: the network is just slow.
  LinkTimes uniform = links({0, 0.15, 0.2}, {"n0", "n1", "n2"});
  uniform.typical = {0, 0.12, 0.15};
  EXPECT_EQ(slow_link_line(uniform), "");
  // A spike on the fast node (its longest) does not hide the slow one: its median counts.
  LinkTimes spiky = links({0, 0.09, 0.3}, {"n0", "n1", "n2"});
  spiky.typical = {0, 0.001, 0.2};
  EXPECT_EQ(slow_link_line(spiky),
            "slow link: node n2 (rank 2): heartbeat round trip 300 ms, fastest node 1.0 ms");
  EXPECT_EQ(slow_link_line(links({0, 0.001, 0.04}, {"n0", "n1", "n2"})), "");  // under the floor
  // Nothing measured yet.
  EXPECT_EQ(slow_link_line(links({0, 0, 0}, {"n0", "n1", "n2"})), "");
}

// Rank 0 out of file descriptors (the default limit of 1024 against about
// a thousand ranks): one line naming the limit, at once, not a wait for the
// deadline ending in "is TCP between the nodes blocked?".
TEST(LivenessSockets, RankZeroOutOfDescriptorsNamesTheLimit) {
  uint16_t port = 0;
  const liveness_detail::Socket listener = liveness_detail::listen_any(port);
  const liveness_detail::Socket client(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(client.valid());
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(client.fd(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)), 0);
  // The lowest free descriptor becomes the limit: the next accept fails.
  const int lowest = dup(0);
  ASSERT_GE(lowest, 0);
  close(lowest);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(lowest);
  // The old limit is back before the handler runs: UBSan checks the caught
  // object's type through a pipe of its own, which needs a free descriptor.
  struct RestoreLimit {
    rlimit limit;
    ~RestoreLimit() { setrlimit(RLIMIT_NOFILE, &limit); }
  };
  std::string message;
  try {
    const RestoreLimit restore{old};
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    liveness_detail::accept_ranks(listener, 2, 30.0);
  } catch (const LibraryError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("rank 0 cannot accept the other ranks' connections"), std::string::npos)
      << message;
  EXPECT_NE(message.find("RLIMIT_NOFILE"), std::string::npos) << message;
}

}  // namespace
}  // namespace lockstep::distributed
