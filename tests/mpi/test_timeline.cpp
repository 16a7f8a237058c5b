// Timelines across ranks: a training step's trace merges into one file with
// one track per rank (the communication thread's spans included, no per-rank
// file left behind), and the summary of a `lockstep bench` run's trace has
// one step per timed step and rank. One process: tests/test_timeline.cpp
// (the writer) and tests/test_timeline_report.cpp (the summary).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "app/commands/bench.h"
#include "app/commands/timeline_report.h"
#include "distributed/distributed_optimizer.h"
#include "distributed/timeline.h"
#include "mpi/mpi_test_util.h"
#include "support/dopt_test_util.h"
#include "support/run_files.h"

namespace lockstep::distributed {
namespace {

using testing::make_test_comm;
using testing::shared_scratch_dir;

TEST(TimelineMpi, MergedTraceHasOneTrackPerRankWithCommThreadSpans) {
  auto comm = make_test_comm();
  auto backend = nn::make_cpu_backend(1);
  const std::string dir = shared_scratch_dir(*comm, "lockstep_mpi_timeline");
  const std::string file = dir + "/trace.json";
  auto timeline = make_timeline(file, *comm);
  auto model = testing::small_model(7);
  auto opt =
      nn::make_optimizer({.kind = nn::OptimizerKind::kSgd}, model->parameters(), nn::Device::kCpu);
  DistributedOptimizer dopt(*comm, *backend, model->parameters(), *opt,
                            {.bucket_cap_mb = 0, .timeline = timeline.get()});
  for (int step = 0; step < 2; ++step) {
    {
      TimelineSpan span(timeline.get(), "backward", "backward");
      testing::backward(*model, *backend, testing::make_batch({step * 2, step * 2 + 1}), 0.5f,
                        dopt.grad_ready_callback());
    }
    dopt.step(0.1f);
  }
  const auto lost = finish_timeline(*timeline, *comm);
  if (comm->rank() == 0) {
    EXPECT_TRUE(lost.empty());
    // strict JSON
    const nlohmann::json events = nlohmann::json::parse(lockstep::testing::read_file(file));
    std::set<int> pids, comm_pids;
    for (const auto& e : events) {
      pids.insert(e["pid"].get<int>());
      if (e["name"] == "allreduce bucket 0" && e["tid"] == Timeline::kCommThread) {
        comm_pids.insert(e["pid"].get<int>());
      }
    }
    std::set<int> all;
    for (int r = 0; r < comm->size(); ++r) all.insert(r);
    EXPECT_EQ(pids, all);
    EXPECT_EQ(comm_pids, all);
    for (int r = 1; r < comm->size(); ++r) {
      EXPECT_FALSE(std::filesystem::exists(timeline_rank_path(file, r))) << "rank file " << r;
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(TimelineMpi, SummaryOfABenchRunHasEveryTimedStep) {
  auto comm = make_test_comm();
  const std::string dir = shared_scratch_dir(*comm, "lockstep_bench_timeline");
  const std::string trace = dir + "/trace.json";
  auto timeline = make_timeline(trace, *comm);
  const auto r = app::run_bench({"mnist_net", 8, 1}, *comm, 0.2, timeline.get());
  EXPECT_TRUE(finish_timeline(*timeline, *comm).empty());
  if (comm->rank() == 0) {
    const auto ranks = app::summarize_timeline(read_trace_events(trace));
    ASSERT_EQ(ranks.size(), static_cast<size_t>(comm->size()));
    for (const app::RankSteps& rank : ranks) {
      ASSERT_EQ(static_cast<int64_t>(rank.steps.size()), r.steps) << "rank " << rank.rank;
      for (const app::StepTimes& s : rank.steps) {
        EXPECT_EQ(s.allreduces, 1);  // one bucket per step
        EXPECT_GT(s.backward, 0.0);
        EXPECT_GT(s.allreduce, 0.0);
        EXPECT_LE(s.hidden, s.allreduce);
        EXPECT_GE(s.exposed, 0.0);
        EXPECT_GE(s.late, 0.0);
      }
    }
    std::filesystem::remove_all(dir);
  }
  comm->barrier();
}

}  // namespace
}  // namespace lockstep::distributed
