// Naming stragglers (distributed/stragglers.h): the decision over per-rank
// median step times, the recorder's median, and the one-line verdict.
// The gather across ranks: tests/mpi/test_stragglers.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "distributed/stragglers.h"

namespace lockstep::distributed {
namespace {

StragglerVerdict decide(const std::vector<double>& times, double threshold = 0.25) {
  return find_straggler(std::span<const double>(times), threshold);
}

TEST(Stragglers, NoneWithFewerThanTwoRanks) {
  EXPECT_EQ(decide({}).rank, -1);
  EXPECT_EQ(decide({}).slowest, -1);
  const StragglerVerdict one = decide({5.0});
  EXPECT_EQ(one.rank, -1);
  EXPECT_EQ(one.slowest, -1);
  EXPECT_EQ(one.slowdown, 1.0);
}

TEST(Stragglers, TwoRanksCompareTheSlowerWithTheFaster) {
  const StragglerVerdict v = decide({1.0, 2.0});
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.slowdown, 2.0);
  EXPECT_EQ(v.over_threshold, 1);
  EXPECT_EQ(decide({2.0, 1.0}).rank, 0);
}

TEST(Stragglers, ThresholdIsStrict) {
  // Exactly 1.25x the median with threshold 0.25 is not over it.
  EXPECT_EQ(decide({1.0, 1.25, 1.0}).rank, -1);
  EXPECT_EQ(decide({1.0, 1.25, 1.0}).slowest, 1);
  EXPECT_EQ(decide({1.0, 1.25, 1.0}).slowdown, 1.25);
  EXPECT_EQ(decide({1.0, 1.2500001, 1.0}).rank, 1);
  EXPECT_EQ(decide({1.0, 1.5, 1.0}, 0.5).rank, -1);
  EXPECT_EQ(decide({1.0, 1.5, 1.0}, 0.49).rank, 1);
}

TEST(Stragglers, EqualTimesNameNobody) {
  const StragglerVerdict v = decide({3.0, 3.0, 3.0, 3.0});
  EXPECT_EQ(v.rank, -1);
  EXPECT_EQ(v.slowest, 0);
  EXPECT_EQ(v.slowdown, 1.0);
  EXPECT_EQ(v.over_threshold, 0);
}

TEST(Stragglers, TiedSlowestNamesTheLowestRank) {
  const StragglerVerdict v = decide({1.0, 3.0, 1.0, 3.0, 1.0});
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.over_threshold, 2);
  EXPECT_EQ(v.slowdown, 3.0);
}

TEST(Stragglers, EvenCountsUseTheLowerMedian) {
  // Sorted 1, 1, 1, 4: the median rank is the second fastest.
  EXPECT_EQ(decide({1.0, 4.0, 1.0, 1.0}).slowdown, 4.0);
  // A whole node of two slow ranks out of four is still named.
  const StragglerVerdict v = decide({1.0, 1.0, 2.0, 2.2});
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.over_threshold, 2);
  EXPECT_DOUBLE_EQ(v.slowdown, 2.2);
}

TEST(Stragglers, OddCountsUseTheMiddleRank) {
  // Sorted 1, 2, 3: the median is 2, so 3 is 1.5x.
  const StragglerVerdict v = decide({3.0, 1.0, 2.0});
  EXPECT_EQ(v.rank, 0);
  EXPECT_EQ(v.slowdown, 1.5);
  EXPECT_EQ(v.over_threshold, 1);
}

TEST(Stragglers, NoStepsNoVerdict) {
  EXPECT_EQ(decide({0.0, 0.0, 1.0}).rank, -1);
  EXPECT_EQ(decide({0.0, 0.0, 1.0}).slowest, -1);
}

TEST(Stragglers, ThresholdZeroNamesNobodyButMeasures) {
  const StragglerVerdict v = decide({1.0, 4.0}, 0.0);
  EXPECT_EQ(v.rank, -1);
  EXPECT_EQ(v.slowest, 1);
  EXPECT_EQ(v.slowdown, 4.0);
}

TEST(Stragglers, RecorderMedianIgnoresAFewSlowSteps) {
  ComputeRecorder r;
  EXPECT_EQ(r.median(), 0.0);
  for (double t : {1.0, 1.0, 1.0, 50.0, 60.0}) r.add(t);
  EXPECT_EQ(r.steps(), 5);
  EXPECT_EQ(r.median(), 1.0);
  EXPECT_EQ(r.total(), 113.0);
  r.add(70.0);  // six steps: the lower median, still 1
  EXPECT_EQ(r.median(), 1.0);
  r.clear();
  EXPECT_EQ(r.steps(), 0);
}

TEST(Stragglers, GatheredFiguresDecideOnTheMedianStep) {
  std::vector<RankCompute> ranks(3);
  for (int r = 0; r < 3; ++r) ranks[r].rank = r, ranks[r].median_step_seconds = 0.01;
  ranks[2].median_step_seconds = 0.018;
  ranks[0].total_seconds = 100.0;  // one long step on rank 0 does not make it the straggler
  const StragglerVerdict v = find_straggler(ranks, 0.25);
  EXPECT_EQ(v.rank, 2);
  EXPECT_DOUBLE_EQ(v.slowdown, 1.8);
}

TEST(Stragglers, OneLine) {
  StragglerVerdict v;
  EXPECT_EQ(straggler_line(v, "node1", 0.25), "");
  v.rank = v.slowest = 3;
  v.slowdown = 1.8;
  v.over_threshold = 1;
  EXPECT_EQ(straggler_line(v, "node1", 0.25),
            "straggler: rank 3 (node1) computes 1.80x the median step time");
  v.over_threshold = 2;
  EXPECT_EQ(straggler_line(v, "node1", 0.25),
            "straggler: rank 3 (node1) computes 1.80x the median step time; 2 ranks over 1.25x");
}

}  // namespace
}  // namespace lockstep::distributed
