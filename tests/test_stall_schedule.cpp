// distributed/stall_schedule.h: the one rule by which MPI's collectives and
// NCCL's waits warn, abort and sleep, as a function of the seconds waited.
#include <gtest/gtest.h>

#include <vector>

#include "distributed/stall_schedule.h"

namespace lockstep::distributed {
namespace {

using Action = StallSchedule::Action;
using Repeat = StallSchedule::Repeat;

StallPolicy policy(double warning, double abort) {
  StallPolicy p;
  p.warning_seconds = warning;
  p.abort_seconds = abort;
  return p;
}

// The seconds (polled every 0.5 s up to `until`) at which the schedule warns.
std::vector<double> warnings(StallSchedule s, double until) {
  std::vector<double> at;
  for (double t = 0.0; t <= until; t += 0.5) {
    if (s.at(t) == Action::kWarn) at.push_back(t);
  }
  return at;
}

TEST(StallSchedule, WarnsEveryPeriodOrAtDoublingPeriods) {
  EXPECT_EQ(warnings(StallSchedule(policy(10, 0), Repeat::kEvery), 45),
            (std::vector<double>{10, 20, 30, 40}));
  EXPECT_EQ(warnings(StallSchedule(policy(10, 0), Repeat::kDoubling), 90),
            (std::vector<double>{10, 20, 40, 80}));
}

TEST(StallSchedule, APollLateByMorePeriodsWarnsOnce) {
  StallSchedule s(policy(10, 0), Repeat::kEvery);
  EXPECT_EQ(s.at(35), Action::kWarn);  // one line, not three
  EXPECT_EQ(s.at(35), Action::kNone);
}

TEST(StallSchedule, AbortsOnceTheLimitPassesWithoutWarningInTheSameTick) {
  StallSchedule s(policy(10, 25), Repeat::kEvery);
  EXPECT_EQ(s.at(9.9), Action::kNone);
  EXPECT_EQ(s.at(10), Action::kWarn);
  EXPECT_EQ(s.at(20), Action::kWarn);
  EXPECT_EQ(s.at(24.9), Action::kNone);
  EXPECT_EQ(s.at(25), Action::kAbort);
  EXPECT_EQ(s.at(30), Action::kAbort);
  // The abort limit before the first warning: the first action is the abort.
  StallSchedule early(policy(60, 5), Repeat::kEvery);
  EXPECT_EQ(early.at(4), Action::kNone);
  EXPECT_EQ(early.at(60), Action::kAbort);
}

TEST(StallSchedule, ZeroDisablesWarningsAndAborts) {
  StallSchedule off(policy(0, 0), Repeat::kEvery);
  for (double t : {0.0, 1.0, 1e6}) EXPECT_EQ(off.at(t), Action::kNone) << t;
  EXPECT_EQ(warnings(StallSchedule(policy(0, 0), Repeat::kDoubling), 100), std::vector<double>{});
  StallSchedule default_constructed;
  EXPECT_EQ(default_constructed.at(1e9), Action::kNone);
}

TEST(StallSchedule, PausesAfterTheSpinAsASmallClampedFractionOfTheWait) {
  EXPECT_EQ(StallSchedule::pause_seconds(0.001, 0.002), 0.0);
  EXPECT_EQ(StallSchedule::pause_seconds(0.002, 0.002), 50e-6);  // 31 us, raised to 50
  EXPECT_DOUBLE_EQ(StallSchedule::pause_seconds(0.032, 0.002), 0.032 / 64);
  EXPECT_EQ(StallSchedule::pause_seconds(10.0, 0.002), 1e-3);
  EXPECT_EQ(StallSchedule::pause_seconds(0.0, 0.0), 50e-6);  // no spin: pause at once
}

}  // namespace
}  // namespace lockstep::distributed
