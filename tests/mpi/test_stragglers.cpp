// Straggler figures across ranks (distributed/stragglers.h): every rank
// records known step times, the last rank three times as long; after the
// one allgather every rank holds every rank's figures and host name, and
// the verdict names the last rank with its node.
#include <gtest/gtest.h>

#include "distributed/stragglers.h"
#include "mpi/mpi_test_util.h"

namespace lockstep::distributed {
namespace {

TEST(MpiStragglers, GatherNamesTheSlowRankAndItsNode) {
  const auto comm = testing::make_test_comm();
  const int last = comm->size() - 1;
  ComputeRecorder mine;
  const double step = comm->rank() == last ? 0.03 : 0.01;
  for (int s = 0; s < 5; ++s) mine.add(step);
  mine.add(1.0);  // one slow step on every rank changes no median
  const std::vector<RankCompute> all = gather_compute(*comm, mine);
  ASSERT_EQ(static_cast<int>(all.size()), comm->size());
  for (int r = 0; r < comm->size(); ++r) {
    EXPECT_EQ(all[r].rank, r);
    EXPECT_EQ(all[r].steps, 6);
    EXPECT_EQ(all[r].node, comm->host_name());  // one host under plain mpiexec
    EXPECT_DOUBLE_EQ(all[r].median_step_seconds, r == last ? 0.03 : 0.01);
    EXPECT_DOUBLE_EQ(all[r].total_seconds, 1.0 + 5 * (r == last ? 0.03 : 0.01));
  }
  const StragglerVerdict v = find_straggler(all, 0.25);
  EXPECT_EQ(v.rank, last);
  EXPECT_DOUBLE_EQ(v.slowdown, 3.0);
  EXPECT_EQ(straggler_line(v, all[last].node, 0.25), "straggler: rank " + std::to_string(last) +
                                                         " (" + comm->host_name() +
                                                         ") computes 3.00x the median step time");
}

}  // namespace
}  // namespace lockstep::distributed
