// The stall watchdog in one process (distributed/stall.h): the report line
// and the policy's limits. Multi-rank stalls: tests/mpi/test_stall.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "distributed/stall.h"

namespace lockstep::distributed {
namespace {

TEST(Stall, RankListsAreCompact) {
  EXPECT_EQ(format_rank_list({}), "");
  EXPECT_EQ(format_rank_list({3}), "3");
  EXPECT_EQ(format_rank_list({0, 1}), "0, 1");
  EXPECT_EQ(format_rank_list({0, 1, 2, 3, 5, 7, 8}), "0-3, 5, 7, 8");
}

TEST(Stall, ReportIsOneLineWithWhatRankZeroKnows) {
  StallReport report;
  report.rank = 0;
  report.operation = "allreduce";
  report.sequence = 1234;
  report.label = "step 1234 bucket 3";
  report.waited_seconds = 60.04;
  report.ranks_known = true;
  report.missing_ranks = {3, 4, 5};
  report.elsewhere = {"rank 7 in barrier #1235 [end of epoch]"};
  EXPECT_EQ(report.message(),
            "rank 0: stall: allreduce #1234 [step 1234 bucket 3] has waited 60.0 s for the other "
            "ranks; missing ranks: 3-5; in other collectives: rank 7 in barrier #1235 [end of "
            "epoch] (a rank is slow, stuck, or issuing different collectives)");
  report.rank = 2;
  report.ranks_known = false;
  report.label.clear();
  report.aborting = true;
  EXPECT_EQ(report.message(),
            "rank 2: stall: allreduce #1234 has waited 60.0 s for the other ranks; ending the "
            "job (stall abort limit reached)");
}

TEST(Stall, PolicyRejectsNegativeAndNonFiniteLimits) {
  StallPolicy policy;
  EXPECT_TRUE(policy.enabled());
  EXPECT_NO_THROW(policy.validate());
  policy.warning_seconds = 0;
  EXPECT_FALSE(policy.enabled());
  policy.abort_seconds = NAN;
  EXPECT_THROW(policy.validate(), InputError);
  policy.abort_seconds = -2;
  try {
    policy.validate();
    ADD_FAILURE();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("abort_seconds"), std::string::npos);
  }
}

}  // namespace
}  // namespace lockstep::distributed
