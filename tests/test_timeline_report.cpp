// `lockstep timeline summary`: a two-rank trace with known spans (one rank
// overlapping on the communication thread, one reducing in synchronize)
// gives exact backward, allreduce, hidden, exposed, hand-off and lateness
// figures; the command prints them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/commands/timeline_report.h"
#include "support/run_command.h"

namespace lockstep::app {
namespace {

// Times below are in units of kUnit microseconds (so that means print exactly).
constexpr double kUnit = 10.0;

nlohmann::json span(const std::string& name, const std::string& cat, int pid, int tid, double ts,
                    double end) {
  return {
      {"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", kUnit * ts}, {"dur", kUnit * (end - ts)},
      {"pid", pid},   {"tid", tid}};
}

// Rank 0 overlaps (allreduce on tid 1), rank 1 reduces inside synchronize.
nlohmann::json two_rank_trace() {
  nlohmann::json e = nlohmann::json::array();
  e.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}});
  // Rank 0, step 0.
  e.push_back(span("forward", "compute", 0, 0, -50, 0));
  e.push_back(span("backward", "compute", 0, 0, 0, 100));
  e.push_back(span("pack bucket 0", "pack", 0, 0, 10, 12));
  e.push_back(span("allreduce bucket 0", "allreduce", 0, 1, 20, 50));  // wake-up 8
  e.push_back(span("unpack bucket 0", "unpack", 0, 1, 50, 52));
  e.push_back(span("pack bucket 1", "pack", 0, 0, 90, 95));
  e.push_back(span("allreduce bucket 1", "allreduce", 0, 1, 96, 130));  // wake-up 1, hidden 4
  e.push_back(span("unpack bucket 1", "unpack", 0, 1, 130, 132));
  e.push_back(span("synchronize", "communication wait", 0, 0, 100, 135));  // wake-up 3
  // Rank 0, step 1.
  e.push_back(span("backward", "compute", 0, 0, 200, 300));
  e.push_back(span("pack bucket 0", "pack", 0, 0, 250, 251));
  e.push_back(span("allreduce bucket 0", "allreduce", 0, 1, 260, 280));  // wake-up 9
  e.push_back(span("unpack bucket 0", "unpack", 0, 1, 280, 281));
  e.push_back(span("pack bucket 1", "pack", 0, 0, 295, 296));
  e.push_back(span("allreduce bucket 1", "allreduce", 0, 1, 300, 308));  // wake-up 4
  e.push_back(span("unpack bucket 1", "unpack", 0, 1, 308, 309));
  e.push_back(span("synchronize", "communication wait", 0, 0, 300, 310));  // wake-up 1
  // After the last synchronize: not a step.
  e.push_back(span("evaluation", "evaluation", 0, 0, 400, 500));
  // Rank 1: backward ends 10 us later than rank 0's in step 0, 10 us earlier in step 1.
  e.push_back(span("backward", "compute", 1, 0, 0, 110));
  e.push_back(span("synchronize", "communication wait", 1, 0, 110, 135));
  e.push_back(span("allreduce bucket 0", "allreduce", 1, 0, 112, 130));
  e.push_back(span("backward", "compute", 1, 0, 200, 290));
  e.push_back(span("synchronize", "communication wait", 1, 0, 290, 310));
  e.push_back(span("allreduce bucket 0", "allreduce", 1, 0, 291, 309));
  return e;
}

// A step's figures in units of kUnit.
struct Figures {
  double backward, allreduce, hidden, exposed, handoff, late;
};

void expect_figures(const StepTimes& s, const Figures& want) {
  EXPECT_DOUBLE_EQ(s.backward, want.backward * kUnit);
  EXPECT_DOUBLE_EQ(s.allreduce, want.allreduce * kUnit);
  EXPECT_DOUBLE_EQ(s.hidden, want.hidden * kUnit);
  EXPECT_DOUBLE_EQ(s.exposed, want.exposed * kUnit);
  EXPECT_DOUBLE_EQ(s.handoff, want.handoff * kUnit);
  EXPECT_DOUBLE_EQ(s.late, want.late * kUnit);
}

TEST(TimelineReport, KnownSpansGiveExactFigures) {
  const auto ranks = summarize_timeline(two_rank_trace());
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(ranks[0].steps.size(), 2u);
  ASSERT_EQ(ranks[1].steps.size(), 2u);
  expect_figures(
      ranks[0].steps[0],
      {.backward = 100, .allreduce = 64, .hidden = 34, .exposed = 35, .handoff = 12, .late = 0});
  EXPECT_EQ(ranks[0].steps[0].allreduces, 2);
  expect_figures(
      ranks[0].steps[1],
      {.backward = 100, .allreduce = 28, .hidden = 20, .exposed = 10, .handoff = 14, .late = 10});
  // Rank 1 reduces on its main thread: nothing hidden, no hand-off.
  expect_figures(
      ranks[1].steps[0],
      {.backward = 110, .allreduce = 18, .hidden = 0, .exposed = 25, .handoff = 0, .late = 10});
  EXPECT_DOUBLE_EQ(ranks[1].steps[1].late, 0.0 * kUnit);
}

TEST(TimelineReport, BucketWithoutPackSpanHasNoHandoff) {
  // A bucket reduced in place (no pack span): its wait for the gradient is
  // not a thread hand-off; only waking the caller (1 unit) counts, and not
  // even that when the caller reduced the last bucket itself.
  nlohmann::json e = nlohmann::json::array();
  e.push_back(span("backward", "compute", 0, 0, 0, 100));
  e.push_back(span("allreduce bucket 0", "allreduce", 0, 1, 10, 20));
  e.push_back(span("unpack bucket 0", "unpack", 0, 1, 20, 21));
  e.push_back(span("allreduce bucket 1", "allreduce", 0, 1, 90, 110));
  e.push_back(span("synchronize", "communication wait", 0, 0, 100, 111));
  auto ranks = summarize_timeline(e);
  ASSERT_EQ(ranks.size(), 1u);
  ASSERT_EQ(ranks[0].steps.size(), 1u);
  EXPECT_DOUBLE_EQ(ranks[0].steps[0].handoff, 1.0 * kUnit);
  EXPECT_DOUBLE_EQ(ranks[0].steps[0].hidden, 20.0 * kUnit);
  // The caller reduces a last bucket itself: nobody had to wake it.
  e.back() = span("synchronize", "communication wait", 0, 0, 100, 131);
  e.push_back(span("allreduce bucket 2", "allreduce", 0, 0, 111, 130));
  ranks = summarize_timeline(e);
  EXPECT_DOUBLE_EQ(ranks[0].steps[0].handoff, 0.0);
  EXPECT_EQ(ranks[0].steps[0].allreduces, 3);
}

// The summary of two_rank_trace() without its first `skip` steps.
std::string summary(int skip) {
  TimelineSummaryArgs args;
  args.trace = "t.json";
  args.skip = skip;
  return format_timeline_summary(summarize_timeline(two_rank_trace()), args);
}

TEST(TimelineReport, SummaryShowsMeansAndHiddenFraction) {
  // Rank 0, in units: backward 100, allreduce (64 + 28) / 2 = 46, hidden 27,
  // exposed 22.5, hand-off 13, late 5; 54 / 92 hidden.
  const std::string text = summary(0);
  EXPECT_TRUE(testing::contains(
      text, "0           2     1.000     0.460     0.270     0.225     0.130     0.050     58.7%"))
      << text;
  EXPECT_TRUE(testing::contains(text, "\"hidden_fraction\":0.5869")) << text;
  const std::string skipped = summary(1);
  EXPECT_TRUE(testing::contains(
      skipped,
      "0           1     1.000     0.280     0.200     0.100     0.140     0.100     71.4%"))
      << skipped;
}

// Three ranks, four steps each: forward 10 + backward 20 + optimizer step 10
// per step, rank 2 three times as long and 8 more waiting for its loader
// (3.2x); the synchronize inside the optimizer
// step (long on the fast ranks, which wait for rank 2) is not compute. Rank
// 0's step 0 is slow (a warm-up) and moves no median.
nlohmann::json straggler_trace() {
  nlohmann::json e = nlohmann::json::array();
  for (int pid = 0; pid < 3; ++pid) {
    const std::string node = pid == 2 ? "node1" : "node0";
    e.push_back({{"name", "process_labels"},
                 {"ph", "M"},
                 {"pid", pid},
                 {"tid", 0},
                 {"args", {{"labels", "node " + node + ", precision fp32, kernels avx2"}}}});
    const double slow = pid == 2 ? 3.0 : 1.0;
    for (int step = 0; step < 4; ++step) {
      const double t0 = 200.0 * step;
      const double f = (pid == 0 && step == 0 ? 50.0 : 10.0) * slow;
      const double backward_end = t0 + f + 20 * slow, step_end = t0 + 190;
      // Rank 2 also waits for its loader: its own time too.
      if (pid == 2) e.push_back(span("data wait", "data", pid, 0, t0 - 8, t0));
      e.push_back(span("forward", "compute", pid, 0, t0, t0 + f));
      e.push_back(span("backward", "compute", pid, 0, t0 + f, backward_end));
      e.push_back(span("optimizer step", "compute", pid, 0, backward_end, step_end));
      // The optimizer's own work: the last 10 * slow of its span.
      e.push_back(
          span("synchronize", "communication wait", pid, 0, backward_end, step_end - 10 * slow));
    }
  }
  return e;
}

TEST(TimelineReport, NamesTheStragglerAndItsNode) {
  const auto ranks = summarize_timeline(straggler_trace());
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[2].node, "node1");
  EXPECT_EQ(ranks[0].node, "node0");
  TimelineSummaryArgs args;
  args.trace = "t.json";
  args.skip = 0;
  const std::string text = format_timeline_summary(ranks, args);
  EXPECT_TRUE(
      testing::contains(text, "straggler: rank 2 (node1) computes 3.20x the median step time\n"))
      << text;
  args.straggler_threshold = 2.5;
  const std::string lenient = format_timeline_summary(ranks, args);
  EXPECT_TRUE(testing::contains(
      lenient, "straggler: none (slowest rank 2 (node1) computes 3.20x the median step time)"))
      << lenient;
}

TEST(TimelineReport, CommandReadsTraceFile) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("lockstep_timeline_report_" + std::to_string(getpid()) + ".json");
  std::ofstream(file) << two_rank_trace().dump();
  const auto r = testing::run_lockstep("timeline summary --skip 0 --per-step " + file.string());
  std::filesystem::remove(file);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 rank(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1:1"), std::string::npos) << r.output;  // per-step row
  EXPECT_NE(r.output.find("timeline {\"allreduce_ms\""), std::string::npos) << r.output;
  const auto missing = testing::run_lockstep("timeline summary /nonexistent/trace.json");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("/nonexistent/trace.json"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace lockstep::app
