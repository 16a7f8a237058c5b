// The liveness monitor's policy checks and its one-line reports. The monitor
// itself runs across the nodes of a fake cluster in
// tests/cluster/cluster_test.sh (crash, freeze, partition, slow link).
#include "distributed/liveness.h"

#include <gtest/gtest.h>

#include "common/error.h"

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

}  // namespace
}  // namespace lockstep::distributed
